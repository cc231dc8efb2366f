//===- ShapeOps.cpp - reshapes and data movement from ONNX ----------------===//
//
// Shape-deciding inputs (a Reshape's shape, a Slice's starts...) are
// constants by the time these run, folded from the exporters' shape
// arithmetic, and become attributes.
//
//===----------------------------------------------------------------------===//

#include "compiler/onnx/NodeContext.h"

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
}

} // namespace cleave
