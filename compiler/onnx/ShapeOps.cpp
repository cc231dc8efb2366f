//===- ShapeOps.cpp - reshapes and data movement from ONNX ----------------===//
//
// Shape-deciding inputs (a Reshape's shape, a Slice's starts...) are
// constants by the time these run, folded from the exporters' shape
// arithmetic, and become attributes.
//
//===----------------------------------------------------------------------===//

#include "compiler/onnx/NodeContext.h"

#include <numeric>

using namespace mlir;

namespace cleave {
namespace {

Results importReshape(NodeContext &n) {
  auto requested = n.constantInts(1, "shape");
  if (failed(requested))
    return failure();
  ArrayRef<int64_t> in = n.shape(n.input(0));
  bool allowZero = n.getInt("allowzero", 0) != 0;
  SmallVector<int64_t> shape;
  std::optional<size_t> inferred;
  int64_t known = 1;
  for (auto [i, d] : llvm::enumerate(*requested)) {
    if (d == 0 && !allowZero) {
      if (i >= in.size()) {
        n.error() << "shape dim " << i << " is 0 (copy), but the input has rank " << in.size();
        return failure();
      }
      d = in[i];
    }
    if (d == -1) {
      if (inferred) {
        n.error() << "shape " << shapeString(*requested) << " has more than one -1";
        return failure();
      }
      inferred = i;
      shape.push_back(1);
      continue;
    }
    if (d < 0) {
      n.error() << "shape dim " << i << " is " << d;
      return failure();
    }
    shape.push_back(d);
  }
  if (std::optional<std::string> why = tensorShapeError(shape)) {
    n.error() << "shape " << shapeString(*requested) << ": " << *why;
    return failure();
  }
  for (int64_t d : shape)
    known *= d;
  if (inferred) {
    int64_t count = 1;
    for (int64_t d : in)
      count *= d;
    if (known == 0 || count % known != 0) {
      n.error() << "cannot reshape " << shapeString(in) << " to " << shapeString(*requested);
      return failure();
    }
    shape[*inferred] = count / known;
  }
  return n.build<ReshapeOp>(n.input(0), {n.ints("shape", shape)});
}

Results importFlatten(NodeContext &n) {
  int64_t rank = n.rank(n.input(0));
  int64_t axis = n.getInt("axis", 1);
  if (axis < -rank || axis > rank) {
    n.error() << "axis " << axis << " is out of range for rank " << rank;
    return failure();
  }
  return n.build<FlattenOp>(n.input(0), {n.i64("axis", axis < 0 ? axis + rank : axis)});
}

Results importTranspose(NodeContext &n) {
  int64_t rank = n.rank(n.input(0));
  SmallVector<int64_t> perm;
  if (auto given = n.getInts("perm")) {
    auto normalized = n.normalizeAxes(*given, rank);
    if (failed(normalized))
      return failure();
    perm = *normalized;
  } else {
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  }
  return n.build<TransposeOp>(n.input(0), {n.ints("perm", perm)});
}

Results importSqueeze(NodeContext &n) {
  ArrayRef<int64_t> shape = n.shape(n.input(0));
  auto axes = n.axesOperand(13, 1);
  if (failed(axes))
    return failure();
  SmallVector<int64_t> normalized;
  if (*axes) {
    auto result = n.normalizeAxes(**axes, shape.size());
    if (failed(result))
      return failure();
    normalized = *result;
  } else {
    for (auto [i, d] : llvm::enumerate(shape))
      if (d == 1)
        normalized.push_back(i);
  }
  return n.build<SqueezeOp>(n.input(0), {n.ints("axes", normalized)});
}

Results importUnsqueeze(NodeContext &n) {
  auto axes = n.axesOperand(13, 1);
  if (failed(axes))
    return failure();
  if (!*axes) {
    n.error() << "needs axes";
    return failure();
  }
  auto normalized = n.normalizeAxes(**axes, n.rank(n.input(0)) + (*axes)->size());
  if (failed(normalized))
    return failure();
  return n.build<UnsqueezeOp>(n.input(0), {n.ints("axes", *normalized)});
}

Results importConcat(NodeContext &n) {
  SmallVector<Value> inputs = n.presentInputs();
  if (inputs.empty()) {
    n.error() << "needs at least one input";
    return failure();
  }
  auto axis = n.normalizeAxis(n.getInt("axis", 0), n.rank(inputs[0]));
  if (failed(axis))
    return failure();
  return n.build<ConcatOp>(inputs, {n.i64("axis", *axis)});
}

Results importSplit(NodeContext &n) {
  ArrayRef<int64_t> shape = n.shape(n.input(0));
  auto axis = n.normalizeAxis(n.getInt("axis", 0), shape.size());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> sizes;
  if (n.input(1)) {
    auto given = n.constantInts(1, "split");
    if (failed(given))
      return failure();
    sizes = *given;
  } else {
    int64_t pieces = n.opset >= 18 && n.attr("num_outputs") ? n.getInt("num_outputs", 1)
                                                             : n.numOutputs();
    int64_t extent = shape[*axis];
    if (pieces < 1 || pieces > extent) {
      n.error() << "cannot split the " << extent << " elements of axis " << *axis << " into "
                << pieces << " parts";
      return failure();
    }
    int64_t chunk = (extent + pieces - 1) / pieces;
    for (int64_t p = 0; p < pieces; ++p)
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, extent - p * chunk)));
  }
  return n.build<SplitOp>(n.input(0), {n.i64("axis", *axis), n.ints("split", sizes)});
}

Results importSlice(NodeContext &n) {
  ArrayRef<int64_t> shape = n.shape(n.input(0));
  int64_t rank = shape.size();
  auto starts = n.constantInts(1, "starts");
  auto ends = n.constantInts(2, "ends");
  if (failed(starts) || failed(ends))
    return failure();
  SmallVector<int64_t> axes, steps(starts->size(), 1);
  if (n.input(3)) {
    auto given = n.constantInts(3, "axes");
    if (failed(given))
      return failure();
    auto normalized = n.normalizeAxes(*given, rank);
    if (failed(normalized))
      return failure();
    axes = *normalized;
  } else {
    for (size_t i = 0; i < starts->size(); ++i)
      axes.push_back(i);
  }
  if (n.input(4)) {
    auto given = n.constantInts(4, "steps");
    if (failed(given))
      return failure();
    steps = *given;
  }
  if (ends->size() != starts->size() || axes.size() != starts->size() ||
      steps.size() != starts->size()) {
    n.error() << "starts, ends, axes and steps must have the same length";
    return failure();
  }
  SmallVector<int64_t> begin(rank, 0), end(shape), stride(rank, 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis = axes[i], dim = shape[axis], step = steps[i];
    if (step == 0) {
      n.error() << "slice step must not be 0";
      return failure();
    }
    int64_t s = (*starts)[i], e = (*ends)[i];
    s = s < 0 ? s + dim : s;
    e = e < 0 ? e + dim : e;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
    }
    begin[axis] = s;
    end[axis] = e;
    stride[axis] = step;
  }
  return n.build<SliceOp>(n.input(0), {n.ints("starts", begin), n.ints("ends", end),
                                       n.ints("steps", stride)});
}

Results importGather(NodeContext &n) {
  auto axis = n.normalizeAxis(n.getInt("axis", 0), n.rank(n.input(0)));
  if (failed(axis))
    return failure();
  return n.build<GatherOp>({n.input(0), n.input(1)}, {n.i64("axis", *axis)});
}

Results importExpand(NodeContext &n) {
  auto requested = n.constantInts(1, "shape");
  if (failed(requested))
    return failure();
  // ONNX broadcasts both ways: the result, not the request, is the target.
  auto shape = broadcastShapes(n.shape(n.input(0)), *requested);
  if (!shape) {
    n.error() << "cannot expand " << shapeString(n.shape(n.input(0))) << " to "
              << shapeString(*requested);
    return failure();
  }
  return n.build<ExpandOp>(n.input(0), {n.ints("shape", *shape)});
}

//===----------------------------------------------------------------------===//
// Decompositions: ONNX movement operators that are compositions of cleave's
// (reshape, transpose, slice, concat, expand, gather and gather_grad), so
// they need no kernels, gradients or sharding rules of their own.
//===----------------------------------------------------------------------===//

/// Tile: each axis with `repeats` r becomes r copies of x concatenated.
Results importTile(NodeContext &n) {
  auto repeats = n.constantInts(1, "repeats");
  if (failed(repeats))
    return failure();
  Value x = n.input(0);
  if (static_cast<int64_t>(repeats->size()) != n.rank(x)) {
    n.error() << "input '" << n.node.input(1) << "' (repeats) has " << repeats->size()
              << " values for an input of rank " << n.rank(x);
    return failure();
  }
  for (auto [axis, r] : llvm::enumerate(*repeats)) {
    FailureOr<Value> tiled = x;
    if (r < 0) {
      n.error() << "repeats " << r << " for axis " << axis << " is negative";
      return failure();
    }
    if (r == 0)
      tiled = n.sliceAxis(x, axis, 0, 0);
    else if (r > 1)
      tiled = n.buildOne<ConcatOp>(SmallVector<Value>(r, x), {n.i64("axis", axis)});
    if (failed(tiled))
      return failure();
    x = *tiled;
  }
  return n.build<IdentityOp>(x);
}

/// x reshaped to `split`, permuted by `perm`, reshaped to `result`.
Results rearrange(NodeContext &n, ArrayRef<int64_t> split, ArrayRef<int64_t> perm,
                  ArrayRef<int64_t> result) {
  auto reshaped = n.buildOne<ReshapeOp>(n.input(0), {n.ints("shape", split)});
  if (failed(reshaped))
    return failure();
  auto permuted = n.buildOne<TransposeOp>(*reshaped, {n.ints("perm", perm)});
  if (failed(permuted))
    return failure();
  return n.build<ReshapeOp>(*permuted, {n.ints("shape", result)});
}

/// The N x C x H x W input of DepthToSpace or SpaceToDepth, and its block size.
FailureOr<std::pair<SmallVector<int64_t>, int64_t>> blockInput(NodeContext &n) {
  ArrayRef<int64_t> shape = n.shape(n.input(0));
  int64_t block = n.getInt("blocksize", 0);
  if (shape.size() != 4 || block < 1) {
    n.error() << "needs a 4-D input and a positive blocksize, got " << shapeString(shape)
              << " and " << block;
    return failure();
  }
  return std::make_pair(SmallVector<int64_t>(shape), block);
}

/// DepthToSpace: channels into blocks of space, in DCR (depth, column, row)
/// or CRD order, as the spec's reshape and transpose.
Results importDepthToSpace(NodeContext &n) {
  auto in = blockInput(n);
  if (failed(in))
    return failure();
  auto [shape, b] = *in;
  int64_t N = shape[0], C = shape[1], H = shape[2], W = shape[3];
  if (C % (b * b) != 0) {
    n.error() << "channels " << C << " are not a multiple of blocksize squared " << b * b;
    return failure();
  }
  std::string mode = n.getString("mode", "DCR");
  SmallVector<int64_t> result{N, C / (b * b), H * b, W * b};
  if (mode == "DCR")
    return rearrange(n, {N, b, b, C / (b * b), H, W}, {0, 3, 4, 1, 5, 2}, result);
  if (mode == "CRD")
    return rearrange(n, {N, C / (b * b), b, b, H, W}, {0, 1, 4, 2, 5, 3}, result);
  n.error() << "attribute 'mode' '" << mode << "' is not DCR or CRD";
  return failure();
}

Results importSpaceToDepth(NodeContext &n) {
  auto in = blockInput(n);
  if (failed(in))
    return failure();
  auto [shape, b] = *in;
  int64_t N = shape[0], C = shape[1], H = shape[2], W = shape[3];
  if (H % b != 0 || W % b != 0) {
    n.error() << "spatial dims " << H << "x" << W << " are not multiples of blocksize " << b;
    return failure();
  }
  return rearrange(n, {N, C, H / b, b, W / b, b}, {0, 3, 5, 1, 2, 4},
                   {N, C * b * b, H / b, W / b});
}

/// Pad (13+; axes from 18, wrap from 19), one axis after another as numpy's
/// pad: a negative pad crops (a slice); a positive one concatenates a block
/// at each end: the constant value expanded, the edge slice expanded, the
/// mirrored slice without the edge (reflect) or the slice from the other end
/// (wrap). Reflect and wrap pads are limited to what one mirror or one wrap
/// of the axis gives (numpy repeats them further).
Results importPad(NodeContext &n) {
  Value x = n.input(0);
  int64_t rank = n.rank(x);
  auto pads = n.constantInts(1, "pads");
  if (failed(pads))
    return failure();
  SmallVector<int64_t> axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  if (n.input(3)) {
    auto given = n.constantInts(3, "axes");
    if (failed(given))
      return failure();
    auto normalized = n.normalizeAxes(*given, rank);
    if (failed(normalized))
      return failure();
    axes = *normalized;
  }
  if (pads->size() != 2 * axes.size()) {
    n.error() << "input '" << n.node.input(1) << "' (pads) has " << pads->size()
              << " values for " << axes.size() << " axes";
    return failure();
  }
  std::string mode = n.getString("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap") {
    n.error() << "attribute 'mode' '" << mode << "' is not constant, reflect, edge or wrap";
    return failure();
  }
  CleaveBuilder b = n.decomposer();
  Value fill;
  if (mode == "constant") {
    if (Value given = n.input(2)) {
      if (n.elementType(given) != n.elementType(x) ||
          cast<RankedTensorType>(given.getType()).getNumElements() != 1) {
        n.error() << "input '" << n.node.input(2) << "' (constant_value) is " << given.getType()
                  << ", not one element of the input's type";
        return failure();
      }
      fill = b.reshape(given, {});
    } else {
      fill = b.scalarLike(x, 0.0);
    }
  }
  for (auto [i, axis] : llvm::enumerate(axes)) {
    int64_t before = (*pads)[i], after = (*pads)[axes.size() + i];
    int64_t extent = n.shape(x)[axis];
    // Crops first: what is left of the axis is what the blocks come from.
    FailureOr<Value> cropped = n.sliceAxis(x, axis, std::max<int64_t>(0, -before),
                                         extent - std::max<int64_t>(0, -after));
    if (failed(cropped))
      return failure();
    x = *cropped;
    extent = n.shape(x)[axis];
    before = std::max<int64_t>(0, before);
    after = std::max<int64_t>(0, after);
    if (before == 0 && after == 0)
      continue;
    if (mode != "constant" && extent == 0) {
      n.error() << "attribute 'mode' '" << mode << "' pads axis " << axis
                << ", which is empty: there is nothing to repeat";
      return failure();
    }
    int64_t limit = mode == "reflect" ? extent - 1 : mode == "wrap" ? extent : INT64_MAX;
    if (before > limit || after > limit) {
      n.error() << "attribute 'mode' '" << mode << "' with pads " << before << " and " << after
                << " on axis " << axis << " of " << extent
                << " elements (more than one reflection or wrap) is not supported";
      return failure();
    }
    auto block = [&, axis = axis](int64_t count, bool atEnd) -> FailureOr<Value> {
      SmallVector<int64_t> shape(n.shape(x));
      shape[axis] = count;
      if (mode == "constant")
        return b.expand(fill, shape);
      if (mode == "edge") {
        auto edge = atEnd ? n.sliceAxis(x, axis, extent - 1, extent) : n.sliceAxis(x, axis, 0, 1);
        return failed(edge) ? edge : FailureOr<Value>(b.expand(*edge, shape));
      }
      if (mode == "reflect") // indices count, ..., 1 before; extent-2, ... after
        return atEnd ? n.sliceAxis(x, axis, extent - 2, extent - 2 - count, -1)
                     : n.sliceAxis(x, axis, count, 0, -1);
      return atEnd ? n.sliceAxis(x, axis, 0, count) // wrap
                   : n.sliceAxis(x, axis, extent - count, extent);
    };
    SmallVector<Value> parts;
    for (auto [count, atEnd] : {std::pair{before, false}, std::pair{int64_t(-1), false},
                                std::pair{after, true}}) {
      if (count == -1) {
        parts.push_back(x);
        continue;
      }
      if (count == 0)
        continue;
      auto part = block(count, atEnd);
      if (failed(part))
        return failure();
      parts.push_back(*part);
    }
    auto joined = n.buildOne<ConcatOp>(parts, {n.i64("axis", axis)});
    if (failed(joined))
      return failure();
    x = *joined;
  }
  return n.build<IdentityOp>(x);
}

/// Row-major strides of `shape`.
SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

/// `indices` as i64 with negative ones counted from the end of `extent`
/// (a scalar or one extent per index along the last dim).
Value nonNegative(CleaveBuilder &b, Value indices, Value extent) {
  indices = b.castTo(indices, b.getBuilder().getI64Type());
  Value zero = b.scalarLike(indices, 0.0);
  return b.where(b.less(indices, zero), b.add(indices, extent), indices);
}

/// The positions in `data` flattened that GatherElements and ScatterElements
/// address: at each position of `indices` the index along `axis` and the
/// position's own coordinates elsewhere.
FailureOr<Value> elementPositions(NodeContext &n, Value data, Value indices, int64_t axis) {
  ArrayRef<int64_t> dataShape = n.shape(data), indexShape = n.shape(indices);
  if (dataShape.size() != indexShape.size()) {
    n.error() << "indices " << shapeString(indexShape) << " do not have the rank of data "
              << shapeString(dataShape);
    return failure();
  }
  SmallVector<int64_t> strides = stridesOf(dataShape), indexStrides = stridesOf(indexShape);
  int64_t count = cast<RankedTensorType>(indices.getType()).getNumElements();
  SmallVector<int64_t> offsets(count);
  for (int64_t i = 0; i < count; ++i)
    for (size_t d = 0; d < indexShape.size(); ++d)
      if (static_cast<int64_t>(d) != axis)
        offsets[i] += (i / indexStrides[d]) % indexShape[d] * strides[d];
  CleaveBuilder b = n.decomposer();
  Value along = nonNegative(b, indices, n.indexConstant({}, {dataShape[axis]}));
  return b.add(b.mul(along, n.indexConstant({}, {strides[axis]})),
               n.indexConstant(indexShape, offsets));
}

/// The positions in `data` reshaped to rows of its dims from batchDims + m
/// on that GatherND and ScatterND address: the last dim of `indices` (m
/// long) indexes the dims from batchDims on, within each batch.
FailureOr<Value> rowPositions(NodeContext &n, Value data, Value indices, int64_t batchDims) {
  ArrayRef<int64_t> dataShape = n.shape(data), indexShape = n.shape(indices);
  int64_t m = indexShape.empty() ? -1 : indexShape.back();
  if (indexShape.empty() || batchDims < 0 || batchDims + m > static_cast<int64_t>(dataShape.size()) ||
      static_cast<int64_t>(indexShape.size()) <= batchDims ||
      dataShape.take_front(batchDims) != indexShape.take_front(batchDims)) {
    n.error() << "indices " << shapeString(indexShape) << " do not index data "
              << shapeString(dataShape) << " with batch_dims " << batchDims;
    return failure();
  }
  ArrayRef<int64_t> indexed = dataShape.slice(batchDims, m);
  SmallVector<int64_t> strides = stridesOf(indexed);
  int64_t rows = 1;
  for (int64_t d : indexed)
    rows *= d;
  CleaveBuilder b = n.decomposer();
  Value along = nonNegative(b, indices, n.indexConstant({m}, indexed));
  Value local = b.sum(b.mul(along, n.indexConstant({m}, strides)), {int64_t(indexShape.size()) - 1},
                      false);
  if (batchDims == 0)
    return local;
  ArrayRef<int64_t> positions = indexShape.drop_back();
  SmallVector<int64_t> positionStrides = stridesOf(positions);
  int64_t perBatch = positionStrides[batchDims - 1]; // positions in one batch
  int64_t count = positionStrides[0] * positions[0];
  SmallVector<int64_t> offsets(count);
  for (int64_t i = 0; i < count; ++i)
    offsets[i] = i / perBatch * rows;
  return b.add(local, n.indexConstant(positions, offsets));
}

/// `data` reshaped to `leading` rows of its dims from `from` on.
FailureOr<Value> asRows(NodeContext &n, Value data, int64_t from) {
  ArrayRef<int64_t> shape = n.shape(data);
  SmallVector<int64_t> rows{1};
  for (int64_t d : shape.take_front(from))
    rows[0] *= d;
  llvm::append_range(rows, shape.drop_front(from));
  return n.buildOne<ReshapeOp>(data, {n.ints("shape", rows)});
}

/// GatherElements: a gather from data flattened at elementPositions. An
/// index out of range reads another element of data unless the position is
/// out of data too, which the gather kernel's range check refuses.
/// What GatherElements and ScatterElements both read: the flat position of
/// every index along `axis`, and data flattened to rows of one element.
FailureOr<std::pair<Value, Value>> elementOperands(NodeContext &n) {
  Value data = n.input(0);
  auto axis = n.normalizeAxis(n.getInt("axis", 0), n.rank(data));
  if (failed(axis))
    return failure();
  auto positions = elementPositions(n, data, n.input(1), *axis);
  auto flat = asRows(n, data, n.rank(data));
  if (failed(positions) || failed(flat))
    return failure();
  return std::pair{*positions, *flat};
}

Results importGatherElements(NodeContext &n) {
  auto operands = elementOperands(n);
  if (failed(operands))
    return failure();
  return n.build<GatherOp>({operands->second, operands->first}, {n.i64("axis", 0)});
}

/// OneHot (9, 11): values[1] where an index equals its position along
/// `axis` of the output, values[0] elsewhere. An index is cast to i64 (a
/// float truncated) and a negative one counts from the end of depth, as in
/// opset 11; one outside [-depth, depth) is off everywhere. Depth must be a
/// constant.
Results importOneHot(NodeContext &n) {
  auto depthValue = n.constantOneValue(1, "depth");
  if (failed(depthValue))
    return failure();
  const int64_t depth =
      isa<IntegerType>(depthValue->getElementType())
          ? (*depthValue->getValues<APInt>().begin()).getSExtValue()
          : static_cast<int64_t>((*depthValue->getValues<APFloat>().begin()).convertToDouble());
  if (depth < 1) {
    n.error() << "depth " << depth << " is not positive";
    return failure();
  }
  Value indices = n.input(0), values = n.input(2);
  if (n.shape(values) != ArrayRef<int64_t>{2}) {
    n.error() << "input '" << n.node.input(2) << "' (values) must hold two values, off and on";
    return failure();
  }
  if (failed(n.requireElementType(0, isNumeric, "numbers")))
    return failure();
  SmallVector<int64_t> shape(n.shape(indices));
  auto axis = n.normalizeAxis(n.getInt("axis", -1), static_cast<int64_t>(shape.size()) + 1);
  if (failed(axis))
    return failure();
  CleaveBuilder b = n.decomposer();
  Value index = b.castTo(indices, n.builder.getI64Type());
  Value zero = b.scalarLike(index, 0.0);
  index = b.where(b.less(index, zero), b.add(index, static_cast<double>(depth)), index);
  shape.insert(shape.begin() + *axis, 1);
  index = b.reshape(index, shape);
  SmallVector<int64_t> along(shape.size(), 1), positions(depth);
  along[*axis] = depth;
  std::iota(positions.begin(), positions.end(), 0);
  Value hot = b.equal(index, n.indexConstant(along, positions));
  auto pick = [&](int64_t i) {
    return GatherOp::create(n.builder, n.loc, values, n.indexConstant({}, {i}),
                            n.builder.getI64IntegerAttr(0))
        .getResult();
  };
  return SmallVector<Value>{b.where(hot, pick(1), pick(0))};
}

/// GatherND: a gather of data's rows (the dims after batch_dims + m) at
/// rowPositions.
Results importGatherND(NodeContext &n) {
  Value data = n.input(0), indices = n.input(1);
  int64_t batchDims = n.getInt("batch_dims", 0);
  auto positions = rowPositions(n, data, indices, batchDims);
  if (failed(positions))
    return failure();
  auto rows = asRows(n, data, batchDims + n.shape(indices).back());
  if (failed(rows))
    return failure();
  return n.build<GatherOp>({*rows, *positions}, {n.i64("axis", 0)});
}

/// ScatterElements and ScatterND: the updates scatter-added (gather_grad)
/// into zeros of data's rows at `positions`; with reduction "add" added to
/// data, with "none" written where a position was hit (ONNX leaves repeated
/// positions undefined without a reduction). "mul", "max" and "min" are
/// refused. Data of f32, f64, i32 or i64 (what gather_grad adds).
Results scatter(NodeContext &n, Value positions, Value rows) {
  Value data = n.input(0), updates = n.input(2);
  std::string reduction = n.getString("reduction", "none");
  if (reduction != "none" && reduction != "add") {
    n.error() << "attribute 'reduction' '" << reduction << "' is not supported";
    return failure();
  }
  auto scatterable = [](Type t) {
    return t.isF32() || t.isF64() || t.isSignlessInteger(32) || t.isSignlessInteger(64);
  };
  if (failed(n.requireElementType(0, scatterable, "f32, f64, i32 and i64")))
    return failure();
  if (n.elementType(updates) != n.elementType(data)) {
    n.error() << "updates " << updates.getType() << " do not have data's element type";
    return failure();
  }
  ArrayRef<int64_t> rowShape = n.shape(rows);
  auto added = n.buildOne<GatherGradOp>({updates, positions},
                                        {n.i64("axis", 0), n.ints("shape", rowShape)});
  if (failed(added))
    return failure();
  CleaveBuilder b = n.decomposer();
  ArrayRef<int64_t> shape = n.shape(data);
  Value scattered = b.reshape(*added, shape);
  if (reduction == "add")
    return SmallVector<Value>{b.add(data, scattered)};
  Value ones = b.splat(cast<RankedTensorType>(updates.getType()), 1.0);
  auto hits = n.buildOne<GatherGradOp>({ones, positions},
                                       {n.i64("axis", 0), n.ints("shape", rowShape)});
  if (failed(hits))
    return failure();
  Value hit = b.greater(b.reshape(*hits, shape), b.scalarLike(data, 0.0));
  return SmallVector<Value>{b.where(hit, scattered, data)};
}

Results importScatterElements(NodeContext &n) {
  auto operands = elementOperands(n);
  if (failed(operands))
    return failure();
  return scatter(n, operands->first, operands->second);
}

Results importScatterND(NodeContext &n) {
  Value data = n.input(0), indices = n.input(1);
  auto positions = rowPositions(n, data, indices, 0);
  if (failed(positions))
    return failure();
  auto rows = asRows(n, data, n.shape(indices).back());
  if (failed(rows))
    return failure();
  return scatter(n, *positions, *rows);
}

} // namespace

void populateShapeImporters(OpImporterTable &table) {
  table.add("Reshape", importReshape, 2, 2, {1});
  table.add("Flatten", importFlatten, 1, 1);
  table.add("Transpose", importTranspose, 1, 1);
  table.add("Squeeze", importSqueeze, 1, 2, {1});
  table.add("Unsqueeze", importUnsqueeze, 2, 2, {1});
  table.add("Concat", importConcat, 1, kVariadic);
  table.add("Split", importSplit, 1, 2, {1});
  table.add("Slice", importSlice, 3, 5, {1, 2, 3, 4});
  table.add("Gather", importGather, 2, 2);
  table.add("Expand", importExpand, 2, 2, {1});
  table.add("Tile", importTile, 2, 2, {1});
  table.add("DepthToSpace", importDepthToSpace, 1, 1);
  table.add("SpaceToDepth", importSpaceToDepth, 1, 1);
  table.add("Pad", importPad, 2, 4, {1, 3});
  table.add("GatherElements", importGatherElements, 2, 2);
  table.add("OneHot", importOneHot, 3, 3, {1});
  table.add("GatherND", importGatherND, 2, 2);
  table.add("ScatterElements", importScatterElements, 3, 3);
  table.add("ScatterND", importScatterND, 3, 3);
}

} // namespace cleave
