//===- OnnxImporter.cpp - ONNX ModelProto to the cleave dialect ----------===//
//
// One pass over the graph in node order. Each node becomes cleave ops built
// through their type inference (so shape errors are diagnostics at the node),
// and ops whose operands are all constant fold at once: that is how shape
// subgraphs disappear and shape-deciding inputs become attributes.
//
//===----------------------------------------------------------------------===//

#include "compiler/OnnxImporter.h"

#include "dialects/Cleave/CleaveBuilder.h"
#include "dialects/Cleave/CleaveOps.h"
#include "onnx/onnx.pb.h"
#include "passes/Autodiff.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <functional>

using namespace mlir;

namespace cleave {
namespace {

StringRef displayDomain(StringRef domain) { return domain.empty() ? "ai.onnx" : domain; }

bool isDefaultDomain(StringRef domain) { return domain.empty() || domain == "ai.onnx"; }

/// What an op handler sees of one ONNX node: its inputs, attributes, opset,
/// and a builder that creates cleave ops through their type inference.
class NodeContext {
public:
  NodeContext(const onnx::NodeProto &node, int64_t opset, OpBuilder &builder, Location loc,
              SmallVector<Value> inputs)
      : node(node), opset(opset), builder(builder), loc(loc), inputs(std::move(inputs)) {}

  const onnx::NodeProto &node;
  const int64_t opset;
  OpBuilder &builder;
  const Location loc;

  /// Input `i`, or null when absent (an empty name or past the end).
  Value input(unsigned i) const { return i < inputs.size() ? inputs[i] : Value(); }
  SmallVector<Value> presentInputs() const {
    SmallVector<Value> present;
    for (Value v : inputs)
      if (v)
        present.push_back(v);
    return present;
  }
  int64_t rank(Value v) const { return cast<RankedTensorType>(v.getType()).getRank(); }
  ArrayRef<int64_t> shape(Value v) const {
    return cast<RankedTensorType>(v.getType()).getShape();
  }
  unsigned numOutputs() const { return node.output_size(); }
  bool wantsOutput(unsigned i) const {
    return static_cast<int>(i) < node.output_size() && !node.output(i).empty();
  }

  InFlightDiagnostic error() const { return emitError(loc); }

  const onnx::AttributeProto *attr(StringRef name) const {
    for (const auto &a : node.attribute())
      if (a.name() == name)
        return &a;
    return nullptr;
  }
  int64_t getInt(StringRef name, int64_t fallback) const {
    const auto *a = attr(name);
    return a ? a->i() : fallback;
  }
  float getFloat(StringRef name, float fallback) const {
    const auto *a = attr(name);
    return a ? a->f() : fallback;
  }
  std::string getString(StringRef name, StringRef fallback) const {
    const auto *a = attr(name);
    return a ? a->s() : fallback.str();
  }
  std::optional<SmallVector<int64_t>> getInts(StringRef name) const {
    const auto *a = attr(name);
    if (!a)
      return std::nullopt;
    return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
  }

  /// The literal value of input `i`, which must be a constant (after folding).
  FailureOr<DenseElementsAttr> constant(unsigned i, StringRef role) const {
    DenseElementsAttr value;
    if (!input(i) || !matchPattern(input(i), m_Constant(&value))) {
      error() << "input '" << node.input(i) << "' (" << role
              << ") must be a constant: cleave resolves it at import";
      return failure();
    }
    return value;
  }
  FailureOr<SmallVector<int64_t>> constantInts(unsigned i, StringRef role) const {
    auto value = constant(i, role);
    if (failed(value))
      return failure();
    if (!isa<IntegerType>(value->getElementType())) {
      error() << "input '" << node.input(i) << "' (" << role << ") must be integer";
      return failure();
    }
    SmallVector<int64_t> ints;
    for (const APInt &v : value->getValues<APInt>())
      ints.push_back(v.getSExtValue());
    return ints;
  }

  /// `axis` made non-negative for a tensor of `rank` dims; an error if out of range.
  FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank) const {
    if (axis < -rank || axis >= rank) {
      error() << "axis " << axis << " is out of range for rank " << rank;
      return failure();
    }
    return axis < 0 ? axis + rank : axis;
  }
  FailureOr<SmallVector<int64_t>> normalizeAxes(ArrayRef<int64_t> axes, int64_t rank) const {
    SmallVector<int64_t> result;
    for (int64_t axis : axes) {
      auto normalized = normalizeAxis(axis, rank);
      if (failed(normalized))
        return failure();
      result.push_back(*normalized);
    }
    return result;
  }

  NamedAttribute named(StringRef name, Attribute value) const {
    return builder.getNamedAttr(name, value);
  }
  NamedAttribute i64(StringRef name, int64_t value) const {
    return named(name, builder.getI64IntegerAttr(value));
  }
  NamedAttribute f32(StringRef name, float value) const {
    return named(name, builder.getF32FloatAttr(value));
  }
  NamedAttribute boolean(StringRef name, bool value) const {
    return named(name, builder.getBoolAttr(value));
  }
  NamedAttribute ints(StringRef name, ArrayRef<int64_t> values) const {
    return named(name, builder.getDenseI64ArrayAttr(values));
  }
  NamedAttribute string(StringRef name, StringRef value) const {
    return named(name, builder.getStringAttr(value));
  }

  /// Creates an `OpTy` after inferring and checking its result types, then
  /// folds it if its operands are constant. Fails with a diagnostic at the
  /// node on bad shapes or attributes.
  template <typename OpTy>
  FailureOr<SmallVector<Value>> build(ValueRange operands,
                                      ArrayRef<NamedAttribute> attributes = {}) const {
    MLIRContext *context = builder.getContext();
    DictionaryAttr dictionary = DictionaryAttr::get(context, attributes);
    SmallVector<Type> types;
    typename OpTy::Properties properties;
    if constexpr (!std::is_same_v<typename OpTy::Properties, EmptyProperties>) {
      if (failed(OpTy::setPropertiesFromAttr(properties, dictionary,
                                             [&] { return emitError(loc); })))
        return failure();
    }
    if (failed(OpTy::inferReturnTypes(context, loc, operands, dictionary,
                                      OpaqueProperties(&properties), {}, types)))
      return failure();
    Operation *op = OpTy::create(builder, loc, types, operands, attributes).getOperation();
    if (failed(mlir::verify(op))) {
      op->erase();
      return failure();
    }
    return foldOrKeep(op);
  }

private:
  SmallVector<Value> foldOrKeep(Operation *op) const {
    SmallVector<OpFoldResult> folded;
    if (isa<ConstantOp>(op) || failed(op->fold(folded)) || folded.empty())
      return op->getResults();
    SmallVector<Value> results;
    for (auto [result, fold] : llvm::zip(op->getResults(), folded)) {
      if (auto value = dyn_cast<Value>(fold)) {
        results.push_back(value);
        continue;
      }
      results.push_back(ConstantOp::create(builder, loc, result.getType(),
                                           cast<ElementsAttr>(cast<Attribute>(fold))));
    }
    op->erase();
    return results;
  }

  SmallVector<Value> inputs;
};

using Results = FailureOr<SmallVector<Value>>;
using Handler = std::function<Results(NodeContext &)>;

//===----------------------------------------------------------------------===//
// Handlers, one per ONNX operator
//===----------------------------------------------------------------------===//

template <typename OpTy> Results elementwise(NodeContext &n) {
  return n.build<OpTy>(n.presentInputs());
}

Results importCast(NodeContext &n) {
  int64_t to = n.getInt("to", 0);
  Type element = elementTypeFromOnnx(n.builder.getContext(), to);
  if (!element) {
    n.error() << "cast to " << onnxTypeName(to) << " is not supported";
    return failure();
  }
  return n.build<CastOp>(n.input(0), {n.named("to", TypeAttr::get(element))});
}

template <typename OpTy> Results importAxisOp(NodeContext &n) {
  auto axis = n.normalizeAxis(n.getInt("axis", -1), n.rank(n.input(0)));
  if (failed(axis))
    return failure();
  return n.build<OpTy>(n.input(0), {n.i64("axis", *axis)});
}

Results importLayerNormalization(NodeContext &n) {
  if (n.getInt("stash_type", 1) != onnx::TensorProto::FLOAT) {
    n.error() << "stash_type other than FLOAT is not supported";
    return failure();
  }
  auto axis = n.normalizeAxis(n.getInt("axis", -1), n.rank(n.input(0)));
  if (failed(axis))
    return failure();
  return n.build<LayerNormalizationOp>(
      n.presentInputs(), {n.i64("axis", *axis), n.f32("epsilon", n.getFloat("epsilon", 1e-5f))});
}

Results importBatchNormalization(NodeContext &n) {
  bool training = n.opset >= 14 ? n.getInt("training_mode", 0) != 0 : n.numOutputs() > 1;
  return n.build<BatchNormalizationOp>(
      n.presentInputs(),
      {n.f32("epsilon", n.getFloat("epsilon", 1e-5f)),
       n.f32("momentum", n.getFloat("momentum", 0.9f)), n.boolean("training_mode", training)});
}

Results importDropout(NodeContext &n) {
  float ratio = 0.5f;
  bool training = false;
  if (n.input(1)) {
    auto value = n.constant(1, "ratio");
    if (failed(value))
      return failure();
    if (value->getNumElements() != 1 || !isa<FloatType>(value->getElementType())) {
      n.error() << "ratio must be a float scalar";
      return failure();
    }
    ratio = static_cast<float>((*value->getValues<APFloat>().begin()).convertToDouble());
  }
  if (n.input(2)) {
    auto value = n.constant(2, "training_mode");
    if (failed(value))
      return failure();
    if (value->getNumElements() != 1 || !value->getElementType().isInteger(1)) {
      n.error() << "training_mode must be a bool scalar";
      return failure();
    }
    training = (*value->getValues<APInt>().begin()).getBoolValue();
  }
  SmallVector<NamedAttribute> attributes{n.f32("ratio", ratio),
                                         n.boolean("training_mode", training)};
  if (n.attr("seed"))
    attributes.push_back(n.i64("seed", n.getInt("seed", 0)));
  return n.build<DropoutOp>(n.input(0), attributes);
}

Results importGemm(NodeContext &n) {
  return n.build<GemmOp>(n.presentInputs(),
                         {n.f32("alpha", n.getFloat("alpha", 1.0f)),
                          n.f32("beta", n.getFloat("beta", 1.0f)),
                          n.boolean("trans_a", n.getInt("transA", 0) != 0),
                          n.boolean("trans_b", n.getInt("transB", 0) != 0)});
}

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
    shape.push_back(d);
    known *= d;
  }
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

/// Axes from input `index` at opsets that take them as an input, from the
/// `axes` attribute before; nullopt when absent.
FailureOr<std::optional<SmallVector<int64_t>>> axesOperand(NodeContext &n, int64_t inputSince,
                                                          unsigned index) {
  if (n.opset >= inputSince) {
    if (!n.input(index))
      return std::optional<SmallVector<int64_t>>();
    auto axes = n.constantInts(index, "axes");
    if (failed(axes))
      return failure();
    return std::optional<SmallVector<int64_t>>(*axes);
  }
  return n.getInts("axes");
}

Results importSqueeze(NodeContext &n) {
  ArrayRef<int64_t> shape = n.shape(n.input(0));
  auto axes = axesOperand(n, 13, 1);
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
  auto axes = axesOperand(n, 13, 1);
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
    if (pieces < 1) {
      n.error() << "num_outputs must be positive";
      return failure();
    }
    int64_t extent = shape[*axis];
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

/// ReduceSum takes axes as an input from opset 13, the others from 18.
template <typename OpTy> Results importReduce(NodeContext &n, int64_t axesInputSince) {
  int64_t rank = n.rank(n.input(0));
  auto axes = axesOperand(n, axesInputSince, 1);
  if (failed(axes))
    return failure();
  SmallVector<int64_t> normalized;
  if (*axes && !(*axes)->empty()) {
    auto result = n.normalizeAxes(**axes, rank);
    if (failed(result))
      return failure();
    normalized = *result;
  } else if (n.getInt("noop_with_empty_axes", 0) != 0) {
    return n.build<IdentityOp>(n.input(0));
  } else {
    for (int64_t i = 0; i < rank; ++i)
      normalized.push_back(i);
  }
  if (normalized.empty()) // a scalar input reduces to itself
    return n.build<IdentityOp>(n.input(0));
  return n.build<OpTy>(n.input(0), {n.ints("axes", normalized),
                                    n.boolean("keepdims", n.getInt("keepdims", 1) != 0)});
}

/// Spatial attributes shared by Conv and the pools, with auto_pad resolved to
/// explicit pads.
struct Window {
  SmallVector<int64_t> kernel, strides, pads, dilations;
};

FailureOr<Window> resolveWindow(NodeContext &n, ArrayRef<int64_t> kernel) {
  ArrayRef<int64_t> input = n.shape(n.input(0));
  size_t spatial = kernel.size();
  if (input.size() != spatial + 2) {
    n.error() << "input " << shapeString(input) << " does not have " << spatial
              << " spatial dims after N and C";
    return failure();
  }
  Window w;
  w.kernel.assign(kernel.begin(), kernel.end());
  w.strides = n.getInts("strides").value_or(SmallVector<int64_t>(spatial, 1));
  w.dilations = n.getInts("dilations").value_or(SmallVector<int64_t>(spatial, 1));
  w.pads = n.getInts("pads").value_or(SmallVector<int64_t>(2 * spatial, 0));
  if (w.strides.size() != spatial || w.dilations.size() != spatial ||
      w.pads.size() != 2 * spatial) {
    n.error() << "strides, dilations and pads must have " << spatial << ", " << spatial
              << " and " << 2 * spatial << " values";
    return failure();
  }
  std::string autoPad = n.getString("auto_pad", "NOTSET");
  if (autoPad == "VALID") {
    std::fill(w.pads.begin(), w.pads.end(), 0);
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (size_t i = 0; i < spatial; ++i) {
      int64_t in = input[2 + i];
      int64_t out = (in + w.strides[i] - 1) / w.strides[i];
      int64_t window = (w.kernel[i] - 1) * w.dilations[i] + 1;
      int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + window - in);
      int64_t small = total / 2;
      w.pads[i] = autoPad == "SAME_UPPER" ? small : total - small;
      w.pads[spatial + i] = total - w.pads[i];
    }
  } else if (autoPad != "NOTSET") {
    n.error() << "auto_pad '" << autoPad << "' is not one of NOTSET, SAME_UPPER, "
              << "SAME_LOWER, VALID";
    return failure();
  }
  return w;
}

Results importConv(NodeContext &n) {
  ArrayRef<int64_t> weight = n.shape(n.input(1));
  if (weight.size() < 3) {
    n.error() << "weight " << shapeString(weight) << " must be M x C/group x kernel...";
    return failure();
  }
  auto w = resolveWindow(n, weight.drop_front(2));
  if (failed(w))
    return failure();
  return n.build<ConvOp>(n.presentInputs(),
                         {n.ints("strides", w->strides), n.ints("pads", w->pads),
                          n.ints("dilations", w->dilations),
                          n.i64("group", n.getInt("group", 1))});
}

FailureOr<Window> poolWindow(NodeContext &n) {
  auto kernel = n.getInts("kernel_shape");
  if (!kernel) {
    n.error() << "needs kernel_shape";
    return failure();
  }
  return resolveWindow(n, *kernel);
}

Results importMaxPool(NodeContext &n) {
  if (n.wantsOutput(1)) {
    n.error() << "the Indices output is not supported";
    return failure();
  }
  auto w = poolWindow(n);
  if (failed(w))
    return failure();
  return n.build<MaxPoolOp>(
      n.input(0), {n.ints("kernel_shape", w->kernel), n.ints("strides", w->strides),
                   n.ints("pads", w->pads), n.ints("dilations", w->dilations),
                   n.boolean("ceil_mode", n.getInt("ceil_mode", 0) != 0)});
}

Results importAveragePool(NodeContext &n) {
  auto w = poolWindow(n);
  if (failed(w))
    return failure();
  return n.build<AveragePoolOp>(
      n.input(0),
      {n.ints("kernel_shape", w->kernel), n.ints("strides", w->strides),
       n.ints("pads", w->pads), n.ints("dilations", w->dilations),
       n.boolean("ceil_mode", n.getInt("ceil_mode", 0) != 0),
       n.boolean("count_include_pad", n.getInt("count_include_pad", 0) != 0)});
}

template <typename OpTy> Results importLoss(NodeContext &n) {
  SmallVector<NamedAttribute> attributes{n.string("reduction", n.getString("reduction", "mean"))};
  if (n.attr("ignore_index"))
    attributes.push_back(n.i64("ignore_index", n.getInt("ignore_index", 0)));
  return n.build<OpTy>(n.presentInputs(), attributes);
}

Results importTrilu(NodeContext &n) {
  int64_t k = 0;
  if (n.input(1)) {
    auto value = n.constantInts(1, "k");
    if (failed(value))
      return failure();
    if (value->size() != 1) {
      n.error() << "k must be a scalar";
      return failure();
    }
    k = (*value)[0];
  }
  return n.build<TriluOp>(n.input(0), {n.boolean("upper", n.getInt("upper", 1) != 0),
                                       n.i64("k", k)});
}

Results importConstant(NodeContext &n, StringRef modelDir) {
  MLIRContext *context = n.builder.getContext();
  Builder &b = n.builder;
  DenseElementsAttr value;
  if (const auto *a = n.attr("value")) {
    TensorData data;
    std::string message;
    if (!readTensor(context, a->t(), modelDir, data, message)) {
      n.error() << "value " << message;
      return failure();
    }
    value = toElementsAttr(data);
  } else if (const auto *a = n.attr("value_float")) {
    value = DenseElementsAttr::get(RankedTensorType::get({}, b.getF32Type()), a->f());
  } else if (const auto *a = n.attr("value_floats")) {
    SmallVector<float> floats(a->floats().begin(), a->floats().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(floats.size())}, b.getF32Type()),
        ArrayRef<float>(floats));
  } else if (const auto *a = n.attr("value_int")) {
    value = DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()), a->i());
  } else if (const auto *a = n.attr("value_ints")) {
    SmallVector<int64_t> ints(a->ints().begin(), a->ints().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(ints.size())}, b.getI64Type()),
        ArrayRef<int64_t>(ints));
  } else {
    n.error() << "only value, value_float(s) and value_int(s) constants are supported";
    return failure();
  }
  return n.build<ConstantOp>({}, {n.named("value", value)});
}

Results importConstantOfShape(NodeContext &n, StringRef modelDir) {
  auto shape = n.constantInts(0, "shape");
  if (failed(shape))
    return failure();
  Attribute scalar = n.builder.getF32FloatAttr(0.0f);
  if (const auto *a = n.attr("value")) {
    TensorData data;
    std::string message;
    if (!readTensor(n.builder.getContext(), a->t(), modelDir, data, message)) {
      n.error() << "value " << message;
      return failure();
    }
    if (data.type.getNumElements() != 1) {
      n.error() << "value must hold exactly one element";
      return failure();
    }
    scalar = toElementsAttr(data).getSplatValue<Attribute>();
  }
  return n.build<ConstantOfShapeOp>({}, {n.ints("shape", *shape), n.named("value", scalar)});
}

Results importShape(NodeContext &n) {
  int64_t rank = n.rank(n.input(0));
  auto clampIndex = [rank](int64_t i) {
    return std::clamp<int64_t>(i < 0 ? i + rank : i, 0, rank);
  };
  int64_t start = clampIndex(n.getInt("start", 0));
  int64_t end = clampIndex(n.getInt("end", rank));
  return n.build<ShapeOp>(n.input(0), {n.i64("start", start), n.i64("end", std::max(start, end))});
}

Results importRange(NodeContext &n) {
  SmallVector<Attribute> bounds;
  const StringRef roles[] = {"start", "limit", "delta"};
  for (auto [i, role] : llvm::enumerate(roles)) {
    auto value = n.constant(i, role);
    if (failed(value))
      return failure();
    if (value->getNumElements() != 1) {
      n.error() << role << " must be a scalar";
      return failure();
    }
    bounds.push_back(value->getSplatValue<Attribute>());
  }
  return n.build<RangeOp>({}, {n.named("start", bounds[0]), n.named("limit", bounds[1]),
                              n.named("delta", bounds[2])});
}

//===----------------------------------------------------------------------===//
// Domain ai.onnx.preview.training: the optimizers, decomposed
//===----------------------------------------------------------------------===//

Type elementOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }

/// "tensor<4x3xf32>", for messages.
std::string typeString(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

/// R and T of an optimizer node. Scalar arithmetic on them is done in f64,
/// as in ONNX's reference (numpy on Python floats).
struct OptimizerStep {
  Value rate;     // R, as given (float or double)
  Value step;     // T in f64
  Value positive; // T > 0
};

/// How one optimizer updates one tensor: from {X, G, state...} its
/// {X_new, state_new...}.
using OptimizerRule =
    std::function<SmallVector<Value>(CleaveBuilder &, const OptimizerStep &, ArrayRef<Value>)>;

/// The optimizers' common form: inputs R (float scalar), T (int64 scalar),
/// then `groups` groups of equally many tensors (X..., G..., and one group
/// per state tensor: V..., H...); outputs X_new... and each state's new
/// values, group by group. Tensors of one X must all have X's type, float
/// or double. `rule` builds the update of each X.
Results importOptimizer(NodeContext &n, unsigned groups, const OptimizerRule &rule) {
  unsigned numInputs = n.node.input_size();
  if (numInputs <= 2 || (numInputs - 2) % groups != 0) {
    n.error() << "takes R, T and " << groups << " groups of equally many tensors, got "
              << numInputs << " inputs";
    return failure();
  }
  for (unsigned i = 0; i < numInputs; ++i)
    if (!n.input(i)) {
      n.error() << "input " << i << " is required but has no name";
      return failure();
    }
  auto rType = cast<RankedTensorType>(n.input(0).getType());
  auto tType = cast<RankedTensorType>(n.input(1).getType());
  if (rType.getRank() != 0 || !(rType.getElementType().isF32() || rType.getElementType().isF64())) {
    n.error() << "R '" << n.node.input(0) << "' is " << rType << ", not a float or double scalar";
    return failure();
  }
  if (tType.getRank() != 0 || !tType.getElementType().isInteger(64)) {
    n.error() << "T '" << n.node.input(1) << "' is " << tType << ", not an int64 scalar";
    return failure();
  }
  unsigned count = (numInputs - 2) / groups;
  for (unsigned i = 0; i < count; ++i) {
    Value x = n.input(2 + i);
    Type element = elementOf(x);
    if (!element.isF32() && !element.isF64()) {
      n.error() << "X '" << n.node.input(2 + i) << "' is " << x.getType()
                << ": the optimizers take float or double tensors";
      return failure();
    }
    for (unsigned g = 1; g < groups; ++g) {
      unsigned index = 2 + g * count + i;
      if (n.input(index).getType() != x.getType()) {
        n.error() << "input '" << n.node.input(index) << "' is " << n.input(index).getType()
                  << ", but X '" << n.node.input(2 + i) << "' is " << x.getType()
                  << ": each X's gradient and state must have its type";
        return failure();
      }
    }
  }

  // The checks above give every op below valid operand types.
  CleaveBuilder d(n.builder, n.loc, /*foldConstants=*/true);
  Type f64 = n.builder.getF64Type();
  OptimizerStep step;
  step.rate = n.input(0);
  step.step = d.castTo(n.input(1), f64);
  step.positive = d.greater(step.step, d.scalar(f64, 0.0));
  SmallVector<Value> results(count * (groups - 1));
  for (unsigned i = 0; i < count; ++i) {
    SmallVector<Value> tensors;
    for (unsigned g = 0; g < groups; ++g)
      tensors.push_back(n.input(2 + g * count + i));
    SmallVector<Value> updated = rule(d, step, tensors);
    for (auto [k, value] : llvm::enumerate(updated))
      results[k * count + i] = value;
  }
  return results;
}

/// A float attribute, `fallback` when absent (nullopt: the attribute is
/// required), as onnx.reference reads it: the float32 value (the schema's
/// defaults are float32 too) widened to double.
FailureOr<double> floatAttribute(NodeContext &n, StringRef name,
                                 std::optional<float> fallback) {
  const auto *a = n.attr(name);
  if (!a) {
    if (fallback)
      return static_cast<double>(*fallback);
    n.error() << "needs the float attribute '" << name << "'";
    return failure();
  }
  if (a->type() != onnx::AttributeProto::FLOAT) {
    n.error() << "attribute '" << name << "' must be a float";
    return failure();
  }
  return static_cast<double>(a->f());
}

// Each rule below follows the pseudo code of ONNX's operator documentation
// and the operation order of onnx.reference: tensor arithmetic in X's type
// with every scalar coefficient rounded to it, and the scalar factors that
// depend on R and T computed in f64 and rounded once. One op per statement,
// so the IR comes out in the same order whatever the C++ compiler.

Results importAdagrad(NodeContext &n) {
  auto epsilon = floatAttribute(n, "epsilon", 1e-6f);
  auto decay = floatAttribute(n, "decay_factor", 0.0f);
  auto norm = floatAttribute(n, "norm_coefficient", 0.0f);
  if (failed(epsilon) || failed(decay) || failed(norm))
    return failure();
  Value r; // shared by every X
  return importOptimizer(n, 3, [&](CleaveBuilder &d, const OptimizerStep &s, ArrayRef<Value> t) {
    Value x = t[0], g = t[1], h = t[2];
    Type element = elementOf(x);
    if (!r) { // r = R / (1 + T * decay_factor)
      Type wide = elementOf(s.step);
      Value rate = d.castTo(s.rate, wide);
      Value decayed = d.mul(s.step, d.scalar(wide, *decay));
      r = d.div(rate, d.add(d.scalar(wide, 1.0), decayed));
    }
    // G_regularized = norm_coefficient * X + G
    Value gRegularized = d.add(d.scale(*norm, x), g);
    // H_new = H + G_regularized * G_regularized
    Value hNew = d.add(h, d.mul(gRegularized, gRegularized));
    // H_adaptive = Sqrt(H_new) + epsilon
    Value hAdaptive = d.sqrt(hNew);
    hAdaptive = d.add(hAdaptive, d.scalar(element, *epsilon));
    // X_new = X - r * G_regularized / H_adaptive
    Value step = d.mul(d.castTo(r, element), gRegularized);
    step = d.div(step, hAdaptive);
    Value xNew = d.sub(x, step);
    return SmallVector<Value>{xNew, hNew};
  });
}

Results importMomentum(NodeContext &n) {
  auto alpha = floatAttribute(n, "alpha", std::nullopt);
  auto beta = floatAttribute(n, "beta", std::nullopt);
  auto norm = floatAttribute(n, "norm_coefficient", std::nullopt);
  if (failed(alpha) || failed(beta) || failed(norm))
    return failure();
  const auto *modeAttr = n.attr("mode");
  if (!modeAttr) {
    n.error() << "needs the string attribute 'mode' (standard or nesterov)";
    return failure();
  }
  std::string mode = modeAttr->s();
  if (modeAttr->type() != onnx::AttributeProto::STRING ||
      (mode != "standard" && mode != "nesterov")) {
    n.error() << "mode '" << mode << "' is not one of standard, nesterov";
    return failure();
  }
  bool nesterov = mode == "nesterov";
  return importOptimizer(n, 3, [&](CleaveBuilder &d, const OptimizerStep &s, ArrayRef<Value> t) {
    Value x = t[0], g = t[1], v = t[2];
    Type element = elementOf(x);
    // G_regularized = norm_coefficient * X + G
    Value gRegularized = d.add(d.scale(*norm, x), g);
    // beta_adjusted = T > 0 ? beta : 1
    Value betaValue = d.scalar(element, *beta);
    Value betaAdjusted = d.where(s.positive, betaValue, d.scalar(element, 1.0));
    // V_new = alpha * V + beta_adjusted * G_regularized
    Value vNew = d.scale(*alpha, v);
    vNew = d.add(vNew, d.mul(betaAdjusted, gRegularized));
    // X_new = X - R * V_new, or X - R * (G_regularized + alpha * V_new)
    Value direction = vNew;
    if (nesterov)
      direction = d.add(gRegularized, d.scale(*alpha, vNew));
    Value xNew = d.sub(x, d.mul(d.castTo(s.rate, element), direction));
    return SmallVector<Value>{xNew, vNew};
  });
}

Results importAdam(NodeContext &n) {
  auto alpha = floatAttribute(n, "alpha", 0.9f);
  auto beta = floatAttribute(n, "beta", 0.999f);
  auto epsilon = floatAttribute(n, "epsilon", 1e-6f);
  auto norm = floatAttribute(n, "norm_coefficient", 0.0f);
  auto normPost = floatAttribute(n, "norm_coefficient_post", 0.0f);
  if (failed(alpha) || failed(beta) || failed(epsilon) || failed(norm) || failed(normPost))
    return failure();
  Value rAdjusted; // shared by every X
  return importOptimizer(n, 4, [&](CleaveBuilder &d, const OptimizerStep &s, ArrayRef<Value> t) {
    Value x = t[0], g = t[1], v = t[2], h = t[3];
    Type element = elementOf(x);
    // G_regularized = norm_coefficient * X + G
    Value gRegularized = d.add(d.scale(*norm, x), g);
    // V_new = alpha * V + (1 - alpha) * G_regularized
    Value vNew = d.scale(*alpha, v);
    vNew = d.add(vNew, d.scale(1.0 - *alpha, gRegularized));
    // H_new = beta * H + (1 - beta) * G_regularized * G_regularized
    Value hNew = d.scale(*beta, h);
    Value squared = d.mul(gRegularized, gRegularized);
    hNew = d.add(hNew, d.scale(1.0 - *beta, squared));
    // H_sqrt = Sqrt(H_new) + epsilon
    Value hSqrt = d.sqrt(hNew);
    hSqrt = d.add(hSqrt, d.scalar(element, *epsilon));
    if (!rAdjusted) { // R_adjusted = T > 0 ? R * sqrt(1 - beta^T) / (1 - alpha^T) : R
      Type wide = elementOf(s.step);
      Value rate = d.castTo(s.rate, wide);
      Value one = d.scalar(wide, 1.0);
      Value betaPower = d.pow(d.scalar(wide, *beta), s.step);
      Value corrected = d.mul(rate, d.sqrt(d.sub(one, betaPower)));
      Value alphaPower = d.pow(d.scalar(wide, *alpha), s.step);
      corrected = d.div(corrected, d.sub(one, alphaPower));
      rAdjusted = d.where(s.positive, corrected, rate);
    }
    // X_new = X - R_adjusted * (V_new / H_sqrt)
    Value direction = d.div(vNew, hSqrt);
    Value xNew = d.sub(x, d.mul(d.castTo(rAdjusted, element), direction));
    // X_final = (1 - norm_coefficient_post) * X_new
    Value xFinal = d.scale(1.0 - *normPost, xNew);
    return SmallVector<Value>{xFinal, vNew, hNew};
  });
}

/// How to import one op type of a domain, how many inputs it takes (the
/// first `minInputs` must be present), and which inputs it reads as constants
/// at import (shape, axes, ratio...).
struct OpImporter {
  Handler handler;
  unsigned minInputs;
  unsigned maxInputs;
  SmallVector<unsigned, 4> constantInputs;
};

constexpr unsigned kVariadic = ~0u;

llvm::StringMap<OpImporter> makeOpImporters(StringRef modelDir) {
  llvm::StringMap<OpImporter> table;
  auto add = [&](StringRef op, Handler handler, unsigned minInputs, unsigned maxInputs,
                 SmallVector<unsigned, 4> constantInputs = {}) {
    table[op] = OpImporter{std::move(handler), minInputs, maxInputs, std::move(constantInputs)};
  };
  add("Neg", elementwise<NegOp>, 1, 1);
  add("Sqrt", elementwise<SqrtOp>, 1, 1);
  add("Reciprocal", elementwise<ReciprocalOp>, 1, 1);
  add("Exp", elementwise<ExpOp>, 1, 1);
  add("Log", elementwise<LogOp>, 1, 1);
  add("Abs", elementwise<AbsOp>, 1, 1);
  add("Tanh", elementwise<TanhOp>, 1, 1);
  add("Sigmoid", elementwise<SigmoidOp>, 1, 1);
  add("Relu", elementwise<ReluOp>, 1, 1);
  add("Erf", elementwise<ErfOp>, 1, 1);
  add("Not", elementwise<NotOp>, 1, 1);
  add("Identity", elementwise<IdentityOp>, 1, 1);
  add("Add", elementwise<AddOp>, 2, 2);
  add("Sub", elementwise<SubOp>, 2, 2);
  add("Mul", elementwise<MulOp>, 2, 2);
  add("Div", elementwise<DivOp>, 2, 2);
  add("Pow", elementwise<PowOp>, 2, 2);
  add("Equal", elementwise<EqualOp>, 2, 2);
  add("Less", elementwise<LessOp>, 2, 2);
  add("Greater", elementwise<GreaterOp>, 2, 2);
  add("Where", elementwise<WhereOp>, 3, 3);
  add("MatMul", elementwise<MatMulOp>, 2, 2);
  add("GlobalAveragePool", elementwise<GlobalAveragePoolOp>, 1, 1);
  add("LeakyRelu", [](NodeContext &n) {
    return n.build<LeakyReluOp>(n.input(0), {n.f32("alpha", n.getFloat("alpha", 0.01f))});
  }, 1, 1);
  add("Gelu", [](NodeContext &n) {
    return n.build<GeluOp>(n.input(0),
                           {n.string("approximate", n.getString("approximate", "none"))});
  }, 1, 1);
  add("Cast", importCast, 1, 1);
  add("Softmax", importAxisOp<SoftmaxOp>, 1, 1);
  add("LogSoftmax", importAxisOp<LogSoftmaxOp>, 1, 1);
  add("LayerNormalization", importLayerNormalization, 2, 3);
  add("BatchNormalization", importBatchNormalization, 5, 5);
  add("Dropout", importDropout, 1, 3, {1, 2});
  add("Gemm", importGemm, 2, 3);
  add("Reshape", importReshape, 2, 2, {1});
  add("Flatten", importFlatten, 1, 1);
  add("Transpose", importTranspose, 1, 1);
  add("Squeeze", importSqueeze, 1, 2, {1});
  add("Unsqueeze", importUnsqueeze, 2, 2, {1});
  add("Concat", importConcat, 1, kVariadic);
  add("Split", importSplit, 1, 2, {1});
  add("Slice", importSlice, 3, 5, {1, 2, 3, 4});
  add("Gather", importGather, 2, 2);
  add("Expand", importExpand, 2, 2, {1});
  add("ReduceSum", [](NodeContext &n) { return importReduce<ReduceSumOp>(n, 13); }, 1, 2, {1});
  add("ReduceMean", [](NodeContext &n) { return importReduce<ReduceMeanOp>(n, 18); }, 1, 2, {1});
  add("ReduceMax", [](NodeContext &n) { return importReduce<ReduceMaxOp>(n, 18); }, 1, 2, {1});
  add("Conv", importConv, 2, 3);
  add("MaxPool", importMaxPool, 1, 1);
  add("AveragePool", importAveragePool, 1, 1);
  add("SoftmaxCrossEntropyLoss", importLoss<SoftmaxCrossEntropyLossOp>, 2, 3);
  add("NegativeLogLikelihoodLoss", importLoss<NegativeLogLikelihoodLossOp>, 2, 3);
  add("Trilu", importTrilu, 1, 2, {1});
  std::string dir = modelDir.str();
  add("Constant", [dir](NodeContext &n) { return importConstant(n, dir); }, 0, 0);
  add("ConstantOfShape", [dir](NodeContext &n) { return importConstantOfShape(n, dir); }, 1, 1, {0});
  add("Shape", importShape, 1, 1);
  add("Range", importRange, 3, 3, {0, 1, 2});
  return table;
}

constexpr StringLiteral kTrainingDomain = "ai.onnx.preview.training";

/// The ops of ai.onnx.preview.training (version 1); `gradient` imports
/// Gradient, which needs the importer's values by name.
llvm::StringMap<OpImporter> makeTrainingOpImporters(Handler gradient) {
  llvm::StringMap<OpImporter> table;
  table["Adagrad"] = OpImporter{importAdagrad, 5, kVariadic, {}};
  table["Momentum"] = OpImporter{importMomentum, 5, kVariadic, {}};
  table["Adam"] = OpImporter{importAdam, 6, kVariadic, {}};
  table["Gradient"] = OpImporter{std::move(gradient), 1, kVariadic, {}};
  return table;
}

//===----------------------------------------------------------------------===//
// The model
//===----------------------------------------------------------------------===//

/// The directory external data paths are relative to.
std::string directoryOf(StringRef path) {
  StringRef dir = llvm::sys::path::parent_path(path);
  return dir.empty() ? "." : dir.str();
}

class Importer {
public:
  Importer(MLIRContext &context, StringRef path, const ImportOptions &options,
           UserError &error)
      : context(context), path(path.str()), options(options), error(error),
        builder(&context), modelDir(directoryOf(path)), opImporters(makeOpImporters(modelDir)),
        trainingOpImporters(makeTrainingOpImporters(
            [this](NodeContext &n) { return importGradient(n); })) {}

  FailureOr<ImportedModel> run();

private:
  LogicalResult fail(const Twine &what, const Twine &note = "", ExitCode code = kExitBadInput) {
    error = UserError{path, what.str(), note.str(), code};
    return failure();
  }

  LogicalResult readModel();
  LogicalResult readOpsets();
  FailureOr<RankedTensorType> inputType(const onnx::ValueInfoProto &input);
  LogicalResult importNode(const onnx::NodeProto &node, int index, StringRef scope = {});
  Results importGradient(NodeContext &n);
  LogicalResult checkTrainingInfo(const llvm::StringSet<> &initializerNames);
  LogicalResult importTrainingAlgorithms(ImportedModel &imported, SmallVectorImpl<Value> &results,
                                         SmallVectorImpl<std::string> &resultNames);
  LogicalResult checkOutput(const onnx::ValueInfoProto &output, Value value);
  Attribute convertAttribute(const onnx::AttributeProto &attribute);
  DictionaryAttr convertNode(const onnx::NodeProto &node);
  ArrayAttr trainingInfo();
  ArrayAttr configurations();
  ArrayAttr nodeDeviceConfig(const onnx::NodeProto &node);

  MLIRContext &context;
  std::string path;
  const ImportOptions &options;
  UserError &error;
  OpBuilder builder;
  std::string modelDir;
  llvm::StringMap<OpImporter> opImporters;
  llvm::StringMap<OpImporter> trainingOpImporters;

  onnx::ModelProto model;
  llvm::StringMap<int64_t> opsets;
  llvm::StringMap<Value> values;

  // With a training_info step (ImportOptions::trainingInfo):
  /// Each update_binding key, with the index of its TrainingInfoProto.
  llvm::StringMap<unsigned> bound;
  /// The unbound initializers of each algorithm graph, which are constants.
  std::vector<std::vector<std::pair<std::string, TensorData>>> algorithmConstants;
  /// The names of the graph's inputs, arguments, parameters and state, and
  /// its constants: what every algorithm starts from.
  llvm::StringMap<Value> graphBase;
  /// The values earlier algorithms assigned, which a later algorithm reads
  /// as initializers: Gradient takes them as constants.
  llvm::DenseSet<Value> assignedEarlier;
};

LogicalResult Importer::readModel() {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return fail("cannot open: " + buffer.getError().message());
  if ((*buffer)->getBufferSize() == 0)
    return fail("not an ONNX model (empty file)");
  if ((*buffer)->getBufferSize() > static_cast<size_t>(INT32_MAX))
    return fail("not an ONNX model (over 2 GiB: keep large weights in external data)");
  if (!model.ParseFromArray((*buffer)->getBufferStart(),
                            static_cast<int>((*buffer)->getBufferSize())))
    return fail("not an ONNX model (protobuf parse failed)");
  if (!model.has_graph() || model.ir_version() <= 0)
    return fail("not an ONNX model (no graph or IR version)");
  if (model.ir_version() < kMinIrVersion)
    return fail("IR version " + Twine(model.ir_version()) + " is older than " +
                    Twine(kMinIrVersion) + ", the oldest cleave supports",
                "convert the model with onnx.version_converter to opset 13 or newer");
  return success();
}

LogicalResult Importer::readOpsets() {
  for (const auto &entry : model.opset_import())
    opsets[isDefaultDomain(entry.domain()) ? "" : entry.domain()] = entry.version();
  auto found = opsets.find("");
  if (found == opsets.end()) {
    // A graph of training-domain nodes alone (ONNX's optimizer node tests)
    // needs no ai.onnx opset.
    const auto &nodes = model.graph().node();
    if (nodes.empty() || !llvm::all_of(nodes, [](const onnx::NodeProto &node) {
          return node.domain() == kTrainingDomain;
        }))
      return fail("the model imports no opset of domain 'ai.onnx'");
    return success();
  }
  if (found->second < kMinOpset)
    return fail("opset " + Twine(found->second) + " of domain 'ai.onnx' is older than " +
                    Twine(kMinOpset) + ", the oldest cleave supports",
                "convert the model with onnx.version_converter.convert_version(model, 17)");
  return success();
}

FailureOr<RankedTensorType> Importer::inputType(const onnx::ValueInfoProto &input) {
  const std::string &name = input.name();
  if (!input.type().has_tensor_type())
    return fail("input '" + name + "' is not a tensor");
  const auto &tensorType = input.type().tensor_type();
  Type element = elementTypeFromOnnx(&context, tensorType.elem_type());
  if (!element)
    return fail("input '" + name + "' has unsupported element type " +
                onnxTypeName(tensorType.elem_type()));
  auto bound = options.inputShapes.find(name);
  if (bound != options.inputShapes.end()) {
    const std::vector<int64_t> &dims = bound->second;
    if (tensorType.has_shape() && tensorType.shape().dim_size() != static_cast<int>(dims.size()))
      return fail("--input-shape " + name + "=" + shapeString(dims) + " has rank " +
                      Twine(dims.size()) + ", but the input has rank " +
                      Twine(tensorType.shape().dim_size()),
                  "", kExitBadUsage);
    for (int i = 0; tensorType.has_shape() && i < tensorType.shape().dim_size(); ++i) {
      const auto &dim = tensorType.shape().dim(i);
      if (dim.has_dim_value() && dim.dim_value() != dims[i])
        return fail("--input-shape " + name + "=" + shapeString(dims) + " contradicts dim " +
                        Twine(i) + " = " + Twine(dim.dim_value()) + " in the model",
                    "", kExitBadUsage);
    }
    return RankedTensorType::get(dims, element);
  }
  if (!tensorType.has_shape())
    return fail("input '" + name + "' has no shape",
                "bind it with --input-shape " + name + "=<d0>x<d1>...");
  // --batch-size: dim 0 of every input is the micro-batch.
  if (options.batchSize > 0 && tensorType.shape().dim_size() > 0) {
    const auto &first = tensorType.shape().dim(0);
    if (first.has_dim_value() && first.dim_value() != options.batchSize)
      return fail("--batch-size gives input '" + name + "' a micro-batch of " +
                      Twine(options.batchSize) + ", but the model fixes its dim 0 at " +
                      Twine(first.dim_value()),
                  "export the model with a dynamic batch dim, or choose a batch size (per "
                  "accumulation step) of " + Twine(first.dim_value()),
                  kExitBadUsage);
  }
  // The note spells out the flag to write: known dims as they are, dynamic
  // ones by their symbol.
  SmallVector<int64_t> dims;
  SmallVector<std::string> hint;
  std::optional<std::string> dynamic;
  for (int i = 0; i < tensorType.shape().dim_size(); ++i) {
    const auto &dim = tensorType.shape().dim(i);
    bool batch = i == 0 && options.batchSize > 0;
    bool known = batch || (dim.has_dim_value() && dim.dim_value() >= 0);
    int64_t value = batch ? options.batchSize : dim.dim_value();
    std::string symbol = dim.has_dim_param() && !dim.dim_param().empty() ? dim.dim_param()
                                                                         : "d" + std::to_string(i);
    hint.push_back(known ? std::to_string(value) : "<" + symbol + ">");
    if (!known && !dynamic)
      dynamic = "input '" + name + "' dim " + std::to_string(i) + " is dynamic" +
                (dim.has_dim_param() ? " ('" + dim.dim_param() + "')" : "");
    dims.push_back(known ? value : 0);
  }
  if (dynamic)
    return fail(*dynamic, "bind it with --input-shape " + name + "=" + llvm::join(hint, "x"));
  return RankedTensorType::get(dims, element);
}

LogicalResult Importer::importNode(const onnx::NodeProto &node, int index, StringRef scope) {
  StringRef domain = node.domain();
  std::string nodeName = node.name().empty() ? "#" + std::to_string(index)
                                             : "'" + node.name() + "'";
  auto opsetIt = opsets.find(isDefaultDomain(domain) ? "" : domain);
  int64_t opset = opsetIt == opsets.end() ? 0 : opsetIt->second;
  std::string where = (scope.empty() ? "" : scope.str() + ": ") + "node " + nodeName + " (" +
                      node.op_type() + ", domain '" + displayDomain(domain).str() +
                      "', opset " + std::to_string(opset) + ")";
  const llvm::StringMap<OpImporter> *table = nullptr;
  if (isDefaultDomain(domain))
    table = &opImporters;
  else if (domain == kTrainingDomain)
    table = &trainingOpImporters;
  else
    return fail(where + ": unsupported operator domain '" + domain + "'");
  if (table == &trainingOpImporters && opset != 1)
    return fail(where + ": cleave imports version 1 of domain '" + kTrainingDomain + "'");
  auto found = table->find(node.op_type());
  if (found == table->end())
    return fail(where + ": unsupported operator",
                "docs/ops.md lists the operators cleave imports");
  const OpImporter &opImporter = found->second;
  unsigned numInputs = node.input_size();
  if (numInputs < opImporter.minInputs || numInputs > opImporter.maxInputs)
    return fail(where + ": takes " +
                (opImporter.minInputs == opImporter.maxInputs
                     ? Twine(opImporter.minInputs)
                     : opImporter.maxInputs == kVariadic
                           ? Twine(opImporter.minInputs) + " or more"
                           : Twine(opImporter.minInputs) + " to " + Twine(opImporter.maxInputs)) +
                " inputs, got " + Twine(numInputs));
  for (unsigned i = 0; i < opImporter.minInputs; ++i)
    if (node.input(i).empty())
      return fail(where + ": input " + Twine(i) + " is required but has no name");

  SmallVector<Value> inputs;
  for (const std::string &name : node.input()) {
    if (name.empty()) {
      inputs.push_back(Value());
      continue;
    }
    auto value = values.find(name);
    if (value == values.end())
      return fail(where + ": input '" + name +
                  "' is not produced by any node, graph input or initializer");
    inputs.push_back(value->second);
  }

  std::string message;
  ScopedDiagnosticHandler capture(&context, [&](Diagnostic &diagnostic) {
    if (message.empty() && diagnostic.getSeverity() == DiagnosticSeverity::Error)
      message = diagnostic.str();
    return success();
  });
  Location loc = NameLoc::get(builder.getStringAttr(node.name().empty() ? nodeName : node.name()),
                              FileLineColLoc::get(&context, path, 0, 0));
  NodeContext nodeContext(node, opset, builder, loc, std::move(inputs));
  Results results = opImporter.handler(nodeContext);
  if (failed(results))
    return fail(where + ": " + (message.empty() ? "could not be imported" : message));

  if (static_cast<size_t>(node.output_size()) > results->size())
    return fail(where + ": has " + Twine(node.output_size()) + " outputs, cleave produces " +
                Twine(results->size()));
  ArrayAttr deviceConfig = nodeDeviceConfig(node);
  for (auto [name, value] : llvm::zip_first(node.output(), *results)) {
    if (name.empty())
      continue;
    values[name] = value;
    if (Operation *producer = value.getDefiningOp(); producer && deviceConfig)
      producer->setAttr("cleave.device_config", deviceConfig);
  }
  return success();
}

/// Gradient (ai.onnx.preview.training): the gradient of the tensor named `y`
/// with respect to each tensor named in `xs`, by cleave's reverse-mode rules
/// (buildGradients). The node's inputs, one per name in xs then zs, give the
/// point at which it is taken: when they are the named tensors themselves
/// (the usual case) the graph's own values are differentiated; otherwise the
/// part of the graph between the named tensors and y is first rebuilt on the
/// inputs.
Results Importer::importGradient(NodeContext &n) {
  const auto *xsAttr = n.attr("xs"), *zsAttr = n.attr("zs"), *yAttr = n.attr("y");
  if (!xsAttr || xsAttr->type() != onnx::AttributeProto::STRINGS || xsAttr->strings().empty()) {
    n.error() << "needs the attribute 'xs', the names of the tensors to differentiate with "
                 "respect to";
    return failure();
  }
  if (!yAttr || yAttr->type() != onnx::AttributeProto::STRING) {
    n.error() << "needs the string attribute 'y', the name of the tensor to differentiate";
    return failure();
  }
  if (zsAttr && zsAttr->type() != onnx::AttributeProto::STRINGS) {
    n.error() << "attribute 'zs' must be a list of names";
    return failure();
  }
  SmallVector<std::string> names(xsAttr->strings().begin(), xsAttr->strings().end());
  size_t numXs = names.size();
  if (zsAttr)
    names.append(zsAttr->strings().begin(), zsAttr->strings().end());
  if (static_cast<size_t>(n.node.input_size()) != names.size()) {
    n.error() << "takes one input per name in xs and zs (" << names.size() << "), got "
              << n.node.input_size();
    return failure();
  }
  auto lookup = [&](const std::string &name, StringRef role) -> Value {
    auto found = values.find(name);
    if (found != values.end())
      return found->second;
    n.error() << role << " '" << name
              << "' is not a graph input, an initializer or an output of an earlier node";
    return {};
  };
  Value y = lookup(yAttr->s(), "y");
  if (!y)
    return failure();
  if (!isa<FloatType>(elementOf(y))) {
    n.error() << "y '" << yAttr->s() << "' is " << y.getType() << ", not a float tensor";
    return failure();
  }
  SmallVector<Value> named, inputs;
  for (auto [i, name] : llvm::enumerate(names)) {
    StringRef role = i < numXs ? "xs" : "zs";
    Value value = lookup(name, role);
    if (!value)
      return failure();
    if (i < numXs && !isa<FloatType>(elementOf(value))) {
      n.error() << "xs '" << name << "' is " << value.getType()
                << ": only float tensors have gradients";
      return failure();
    }
    if (!n.input(i)) {
      n.error() << "input " << i << " has no name";
      return failure();
    }
    if (n.input(i).getType() != value.getType()) {
      n.error() << "input '" << n.node.input(i) << "' is " << n.input(i).getType() << ", but "
                << role << " '" << name << "', the tensor it gives a value for, is "
                << value.getType();
      return failure();
    }
    // Ops that read only constants were folded at import, so y no longer
    // shows how it depends on a constant.
    if ((i < numXs || n.input(i) != value) && matchPattern(value, m_Constant())) {
      n.error() << role << " '" << name
                << "' is a constant, folded into the ops that read it: cleave cannot "
                   "differentiate with respect to it or evaluate at another value";
      return failure();
    }
    named.push_back(value);
    inputs.push_back(n.input(i));
  }

  // The ops that read a named tensor, directly or not. ONNX requires the
  // tensors of xs and zs to be independent: none computed from another.
  llvm::DenseSet<Value> downstream(named.begin(), named.end());
  SmallVector<Operation *> between;
  for (Operation &op : *builder.getInsertionBlock()) {
    if (llvm::none_of(op.getOperands(), [&](Value v) { return downstream.contains(v); }))
      continue;
    for (auto [value, name] : llvm::zip(named, names))
      if (value.getDefiningOp() == &op) {
        n.error() << "'" << name << "' of xs and zs is computed from another of them: "
                  << "they must be independent";
        return failure();
      }
    for (Value result : op.getResults())
      if (!assignedEarlier.contains(result))
        downstream.insert(result);
    between.push_back(&op);
  }

  SmallVector<Value> leaves(named);
  if (inputs != named) {
    // Rebuild the ops between the named tensors and y on a fresh copy of
    // each input (fresh, so that two named tensors given the same input
    // still get their own gradients).
    IRMapping mapping;
    for (auto [i, input] : llvm::enumerate(inputs)) {
      leaves[i] = IdentityOp::create(builder, n.loc, input);
      mapping.map(named[i], leaves[i]);
    }
    if (Operation *last = y.getDefiningOp())
      for (Operation *op : between)
        if (op == last || op->isBeforeInBlock(last))
          builder.clone(*op, mapping);
    y = mapping.lookupOrDefault(y);
  }

  ArrayRef<Value> xs = ArrayRef<Value>(leaves).take_front(numXs);
  auto grads = buildGradients(builder, y, xs, assignedEarlier);
  if (failed(grads))
    return failure();
  SmallVector<Value> results;
  for (auto [x, grad] : llvm::zip(xs, *grads)) {
    if (grad) {
      results.push_back(grad);
      continue;
    }
    auto type = cast<RankedTensorType>(x.getType());
    results.push_back(ConstantOp::create(
        builder, n.loc, type,
        DenseElementsAttr::get(type, builder.getFloatAttr(type.getElementType(), 0.0))));
  }
  return results;
}

LogicalResult Importer::checkOutput(const onnx::ValueInfoProto &output, Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  if (!output.type().has_tensor_type())
    return success();
  const auto &declared = output.type().tensor_type();
  Type element = elementTypeFromOnnx(&context, declared.elem_type());
  if (declared.elem_type() != 0 && element != type.getElementType())
    return fail("output '" + output.name() + "' is declared " +
                onnxTypeName(declared.elem_type()) + " but computes to another element type");
  if (!declared.has_shape())
    return success();
  bool mismatch = declared.shape().dim_size() != type.getRank();
  for (int i = 0; !mismatch && i < declared.shape().dim_size(); ++i) {
    const auto &dim = declared.shape().dim(i);
    mismatch = dim.has_dim_value() && dim.dim_value() != type.getDimSize(i);
  }
  if (!mismatch)
    return success();
  SmallVector<std::string> dims;
  for (const auto &dim : declared.shape().dim())
    dims.push_back(dim.has_dim_value() ? std::to_string(dim.dim_value()) : "?");
  return fail("output '" + output.name() + "' is declared " + llvm::join(dims, "x") +
              " but computes to " + shapeString(type.getShape()));
}

Attribute Importer::convertAttribute(const onnx::AttributeProto &a) {
  switch (a.type()) {
  case onnx::AttributeProto::INT: return builder.getI64IntegerAttr(a.i());
  case onnx::AttributeProto::FLOAT: return builder.getF32FloatAttr(a.f());
  case onnx::AttributeProto::STRING: return builder.getStringAttr(a.s());
  case onnx::AttributeProto::INTS:
    return builder.getI64ArrayAttr(SmallVector<int64_t>(a.ints().begin(), a.ints().end()));
  case onnx::AttributeProto::FLOATS:
    return builder.getF32ArrayAttr(SmallVector<float>(a.floats().begin(), a.floats().end()));
  case onnx::AttributeProto::STRINGS:
    return builder.getStrArrayAttr(SmallVector<StringRef>(a.strings().begin(), a.strings().end()));
  default: return builder.getStringAttr("<" + onnx::AttributeProto::AttributeType_Name(a.type()) + ">");
  }
}

DictionaryAttr Importer::convertNode(const onnx::NodeProto &node) {
  SmallVector<NamedAttribute> attributes;
  for (const auto &a : node.attribute())
    attributes.push_back(builder.getNamedAttr(a.name(), convertAttribute(a)));
  auto names = [&](const auto &list) {
    return builder.getStrArrayAttr(SmallVector<StringRef>(list.begin(), list.end()));
  };
  return builder.getDictionaryAttr(
      {builder.getNamedAttr("op", builder.getStringAttr(node.op_type())),
       builder.getNamedAttr("domain", builder.getStringAttr(displayDomain(node.domain()))),
       builder.getNamedAttr("name", builder.getStringAttr(node.name())),
       builder.getNamedAttr("inputs", names(node.input())),
       builder.getNamedAttr("outputs", names(node.output())),
       builder.getNamedAttr("attributes", builder.getDictionaryAttr(attributes))});
}

/// training_info, kept for the training-step builder: each algorithm node and
/// the bindings that say which initializers are state carried between steps.
ArrayAttr Importer::trainingInfo() {
  SmallVector<Attribute> infos;
  auto bindings = [&](const auto &list) {
    SmallVector<NamedAttribute> entries;
    for (const auto &entry : list)
      entries.push_back(builder.getNamedAttr(entry.key(), builder.getStringAttr(entry.value())));
    return builder.getDictionaryAttr(entries);
  };
  for (const auto &info : model.training_info()) {
    SmallVector<Attribute> nodes, initializers;
    for (const auto &node : info.algorithm().node())
      nodes.push_back(convertNode(node));
    for (const auto &init : info.algorithm().initializer())
      initializers.push_back(builder.getStringAttr(init.name()));
    infos.push_back(builder.getDictionaryAttr(
        {builder.getNamedAttr("algorithm", builder.getArrayAttr(nodes)),
         builder.getNamedAttr("algorithm_initializers", builder.getArrayAttr(initializers)),
         builder.getNamedAttr("initialization_binding", bindings(info.initialization_binding())),
         builder.getNamedAttr("update_binding", bindings(info.update_binding()))}));
  }
  return infos.empty() ? ArrayAttr() : builder.getArrayAttr(infos);
}

ArrayAttr Importer::configurations() {
  SmallVector<Attribute> configs;
  for (const auto &config : model.configuration()) {
    configs.push_back(builder.getDictionaryAttr(
        {builder.getNamedAttr("name", builder.getStringAttr(config.name())),
         builder.getNamedAttr("num_devices", builder.getI64IntegerAttr(config.num_devices())),
         builder.getNamedAttr("devices",
                              builder.getStrArrayAttr(SmallVector<StringRef>(
                                  config.device().begin(), config.device().end())))}));
  }
  return configs.empty() ? ArrayAttr() : builder.getArrayAttr(configs);
}

/// The ONNX 1.18 multi-device annotations of `node`, or null when it has none.
ArrayAttr Importer::nodeDeviceConfig(const onnx::NodeProto &node) {
  SmallVector<Attribute> configs;
  for (const auto &config : node.device_configurations()) {
    SmallVector<Attribute> specs;
    for (const auto &spec : config.sharding_spec()) {
      SmallVector<Attribute> dims;
      for (const auto &dim : spec.sharded_dim()) {
        SmallVector<int64_t> shards;
        for (const auto &simple : dim.simple_sharding())
          shards.push_back(simple.num_shards());
        dims.push_back(builder.getDictionaryAttr(
            {builder.getNamedAttr("axis", builder.getI64IntegerAttr(dim.axis())),
             builder.getNamedAttr("num_shards", builder.getI64ArrayAttr(shards))}));
      }
      SmallVector<NamedAttribute> groups;
      for (const auto &entry : spec.index_to_device_group_map())
        groups.push_back(builder.getNamedAttr(
            std::to_string(entry.key()),
            builder.getI64ArrayAttr(SmallVector<int64_t>(entry.value().begin(),
                                                         entry.value().end()))));
      specs.push_back(builder.getDictionaryAttr(
          {builder.getNamedAttr("tensor", builder.getStringAttr(spec.tensor_name())),
           builder.getNamedAttr("devices",
                                builder.getI64ArrayAttr(SmallVector<int64_t>(
                                    spec.device().begin(), spec.device().end()))),
           builder.getNamedAttr("device_groups", builder.getDictionaryAttr(groups)),
           builder.getNamedAttr("sharded_dims", builder.getArrayAttr(dims))}));
    }
    SmallVector<NamedAttribute> entries{
        builder.getNamedAttr("configuration", builder.getStringAttr(config.configuration_id())),
        builder.getNamedAttr("sharding", builder.getArrayAttr(specs))};
    if (config.has_pipeline_stage())
      entries.push_back(builder.getNamedAttr(
          "pipeline_stage", builder.getI64IntegerAttr(config.pipeline_stage())));
    configs.push_back(builder.getDictionaryAttr(entries));
  }
  return configs.empty() ? ArrayAttr() : builder.getArrayAttr(configs);
}

/// The checks on a training_info that defines the step, before anything is
/// imported: no flags of cleave's own step builder, no bound initialization,
/// and update_bindings that name initializers and outputs, each key once.
LogicalResult Importer::checkTrainingInfo(const llvm::StringSet<> &initializerNames) {
  if (!options.stepFlags.empty())
    return fail(options.stepFlags.front() + ": the model's training_info defines the step",
                "drop the flag, or pass --ignore-training-info to train with cleave's own "
                "optimizers",
                kExitBadUsage);
  for (auto [i, info] : llvm::enumerate(model.training_info())) {
    std::string scope = "training_info[" + std::to_string(i) + "]";
    if (info.initialization_binding_size() > 0)
      return fail(scope + ": an initialization with initialization_binding is not supported: "
                          "training starts from the initializers' values",
                  "run the initialization once and store its outputs as the initializers");
    llvm::StringSet<> own, outputs;
    for (const auto &initializer : info.algorithm().initializer())
      own.insert(initializer.name());
    for (const auto &output : info.algorithm().output())
      outputs.insert(output.name());
    for (const auto &output : model.graph().output())
      outputs.insert(output.name());
    for (const auto &binding : info.update_binding()) {
      std::string where = scope + ".update_binding '" + binding.key() + "' <- '" +
                          binding.value() + "'";
      if (!initializerNames.contains(binding.key()) && !own.contains(binding.key()))
        return fail(where + ": '" + binding.key() +
                    "' is not an initializer of the graph or of this algorithm");
      if (!outputs.contains(binding.value()))
        return fail(where + ": '" + binding.value() +
                    "' is not an output of this algorithm or of the graph");
      auto [entry, added] = bound.try_emplace(binding.key(), i);
      if (!added)
        return fail(where + ": '" + binding.key() +
                    "' is already bound: an initializer is updated at most once a step");
    }
  }
  if (bound.empty())
    return fail("training_info binds no initializer (its update_binding is empty), so a step "
                "would change nothing",
                "pass --ignore-training-info to train with cleave's own optimizers");
  return success();
}

/// Imports each algorithm of training_info after the main graph: the i-th
/// algorithm runs on the main graph evaluated with the values the algorithms
/// before it assigned (ONNX: executing the algorithms in order and applying
/// each one's update_binding is one step). So from the second on, the main
/// graph is imported again on the updated values; in SSA the assignments
/// become values, and @forward ends with one cleave.assign per bound
/// initializer, after every read. Adds the loss to `results` when it is an
/// algorithm's output.
LogicalResult Importer::importTrainingAlgorithms(ImportedModel &imported,
                                                 SmallVectorImpl<Value> &results,
                                                 SmallVectorImpl<std::string> &resultNames) {
  const onnx::GraphProto &graph = model.graph();
  Location fileLoc = FileLineColLoc::get(&context, path, 0, 0);
  TrainingAlgorithm algorithm;
  llvm::StringMap<Value> current; // bound initializer -> its value after the updates so far
  llvm::StringMap<Value> outputs; // algorithm outputs, first of each name
  for (auto [i, info] : llvm::enumerate(model.training_info())) {
    std::string scope = "training_info[" + std::to_string(i) + "].algorithm";
    if (i > 0) {
      values = graphBase;
      for (const auto &entry : current) {
        values[entry.getKey()] = entry.getValue();
        assignedEarlier.insert(entry.getValue());
      }
      for (auto [index, node] : llvm::enumerate(graph.node()))
        if (failed(importNode(node, index)))
          return failure();
    }
    for (auto &[name, data] : algorithmConstants[i]) {
      Location loc = NameLoc::get(builder.getStringAttr(name), fileLoc);
      values[name] = ConstantOp::create(builder, loc, data.type, toElementsAttr(data));
    }
    for (auto [index, node] : llvm::enumerate(info.algorithm().node()))
      if (failed(importNode(node, index, scope)))
        return failure();
    for (const auto &output : info.algorithm().output()) {
      auto found = values.find(output.name());
      if (found == values.end())
        return fail(scope + ": output '" + output.name() +
                    "' is not produced by any node, input or initializer");
      if (failed(checkOutput(output, found->second)))
        return failure();
      outputs.try_emplace(output.name(), found->second);
    }
    for (const auto &binding : info.update_binding()) {
      Value target = graphBase.lookup(binding.key());
      Value value = values.lookup(binding.value());
      if (target.getType() != value.getType())
        return fail("training_info[" + Twine(i) + "].update_binding '" + binding.key() +
                    "' <- '" + binding.value() + "': '" + binding.key() + "' is " +
                    typeString(target.getType()) + " but '" + binding.value() + "' is " +
                    typeString(value.getType()));
      current[binding.key()] = value;
      algorithm.updates.emplace_back(binding.key(), binding.value());
    }
  }

  // The loss: --loss NAME, else the main graph's only scalar float output,
  // else the algorithms' only one.
  auto isScalarFloat = [](Value v) {
    auto type = cast<RankedTensorType>(v.getType());
    return isa<FloatType>(type.getElementType()) && type.getNumElements() == 1;
  };
  std::string loss = options.trainingLoss;
  if (loss.empty()) {
    SmallVector<std::string> candidates;
    for (auto [name, value] : llvm::zip(resultNames, results))
      if (isScalarFloat(value))
        candidates.push_back(name);
    if (candidates.empty())
      for (const auto &output : model.training_info(0).algorithm().output())
        if (Value value = outputs.lookup(output.name()); value && isScalarFloat(value))
          candidates.push_back(output.name());
    if (candidates.size() != 1)
      return fail("cannot tell which output is the loss the training step logs: " +
                      (candidates.empty()
                           ? std::string("no output is a float scalar")
                           : "the float scalars are " + llvm::join(candidates, ", ")),
                  "name it with --loss NAME", kExitBadUsage);
    loss = candidates.front();
  }
  auto inResults = llvm::find(resultNames, loss);
  Value lossValue = inResults != resultNames.end() ? results[inResults - resultNames.begin()]
                                                   : outputs.lookup(loss);
  if (!lossValue)
    return fail("--loss '" + loss +
                    "': is not an output of the graph or of its training_info algorithms",
                "", kExitBadUsage);
  if (!isScalarFloat(lossValue))
    return fail("--loss '" + loss + "': is " + typeString(lossValue.getType()) +
                    ", not a float scalar",
                "", kExitBadUsage);
  if (inResults == resultNames.end()) {
    results.push_back(lossValue);
    resultNames.push_back(loss);
  }
  algorithm.loss = loss;

  // The assignments, after every read. A new value that is (a view of)
  // another bound initializer is copied first: that one may be overwritten
  // before it is read. A value that is the initializer itself needs no
  // assignment.
  SmallVector<std::pair<Value, Value>> assignments;
  llvm::DenseSet<Value> targets;
  for (const auto &[key, value] : algorithm.updates)
    targets.insert(graphBase.lookup(key));
  for (const auto &[key, name] : algorithm.updates) {
    Value target = graphBase.lookup(key), value = current.lookup(key);
    Value root = value;
    while (Operation *op = root.getDefiningOp()) {
      if (!isa<ReshapeOp, FlattenOp, SqueezeOp, UnsqueezeOp, IdentityOp>(op))
        break;
      root = op->getOperand(0);
    }
    if (root == target)
      continue;
    if (targets.contains(root))
      value = CastOp::create(builder, value.getLoc(), value,
                             cast<RankedTensorType>(value.getType()).getElementType());
    assignments.push_back({target, value});
  }
  for (auto [target, value] : assignments)
    AssignOp::create(builder, fileLoc, target, value);
  imported.trainingAlgorithm = std::move(algorithm);
  return success();
}

FailureOr<ImportedModel> Importer::run() {
  if (failed(readModel()) || failed(readOpsets()))
    return failure();
  const onnx::GraphProto &graph = model.graph();
  // The step is the model's training_info (cleave compile --train).
  const bool algorithms = options.trainingInfo && model.training_info_size() > 0;

  for (const auto &[name, dims] : options.inputShapes) {
    bool known = llvm::any_of(graph.input(), [&](const auto &in) { return in.name() == name; });
    for (int i = 0; algorithms && !known && i < model.training_info_size(); ++i)
      known = llvm::any_of(model.training_info(i).algorithm().input(),
                           [&](const auto &in) { return in.name() == name; });
    if (!known)
      return fail("--input-shape names '" + name + "', which is not an input of the graph", "",
                  kExitBadUsage);
  }

  llvm::StringSet<> initializerNames;
  for (const auto &initializer : graph.initializer())
    initializerNames.insert(initializer.name());
  if (algorithms && failed(checkTrainingInfo(initializerNames)))
    return failure();

  // Parameters are the float initializers; the rest become constants, and so
  // do float initializers read only where an op needs a constant (a ratio).
  // With a training_info step, a bound initializer is a parameter when it is
  // a float that the main graph reads (a weight), else state (moments,
  // iteration counters).
  llvm::StringSet<> readAsConstant, readAsTensor;
  auto scan = [&](const auto &nodes) {
    for (const auto &node : nodes) {
      auto found = opImporters.find(node.op_type());
      for (auto [i, name] : llvm::enumerate(node.input())) {
        bool constant = isDefaultDomain(node.domain()) && found != opImporters.end() &&
                        llvm::is_contained(found->second.constantInputs, i);
        (constant ? readAsConstant : readAsTensor).insert(name);
      }
    }
  };
  scan(graph.node());
  llvm::StringSet<> readByGraph = readAsTensor;
  for (const auto &output : graph.output())
    readAsTensor.insert(output.name());
  for (int i = 0; algorithms && i < model.training_info_size(); ++i) {
    scan(model.training_info(i).algorithm().node());
    for (const auto &output : model.training_info(i).algorithm().output())
      readAsTensor.insert(output.name());
  }
  auto onlyReadAsConstant = [&](StringRef name) {
    return readAsConstant.contains(name) && !readAsTensor.contains(name);
  };
  ImportedModel imported;
  std::vector<TensorData> constants;
  std::vector<std::string> constantNames;
  for (const auto &initializer : graph.initializer()) {
    TensorData data;
    std::string message;
    if (!readTensor(&context, initializer, modelDir, data, message))
      return fail("initializer '" + initializer.name() + "': " + message);
    bool isFloat = isa<FloatType>(data.type.getElementType());
    if (bound.contains(initializer.name())) {
      bool weight = isFloat && readByGraph.contains(initializer.name());
      (weight ? imported.parameters : imported.state)
          .push_back(Parameter{initializer.name(), std::move(data)});
    } else if (isFloat && !onlyReadAsConstant(initializer.name())) {
      imported.parameters.push_back(Parameter{initializer.name(), std::move(data)});
    } else {
      constants.push_back(std::move(data));
      constantNames.push_back(initializer.name());
    }
  }
  if (algorithms)
    algorithmConstants.resize(model.training_info_size());
  for (int i = 0; algorithms && i < model.training_info_size(); ++i) {
    for (const auto &initializer : model.training_info(i).algorithm().initializer()) {
      TensorData data;
      std::string message;
      if (!readTensor(&context, initializer, modelDir, data, message))
        return fail("training_info[" + Twine(i) + "].algorithm: initializer '" +
                    initializer.name() + "': " + message);
      auto key = bound.find(initializer.name());
      if (key != bound.end() && key->second == static_cast<unsigned>(i))
        imported.state.push_back(Parameter{initializer.name(), std::move(data)});
      else
        algorithmConstants[i].emplace_back(initializer.name(), std::move(data));
    }
  }
  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames, argKinds;
  std::vector<std::pair<std::string, const TensorData *>> boundInputs;
  auto addInput = [&](const onnx::ValueInfoProto &input) -> LogicalResult {
    auto type = inputType(input);
    if (failed(type))
      return failure();
    argTypes.push_back(*type);
    argNames.push_back(input.name());
    argKinds.push_back("input");
    return success();
  };
  for (const auto &input : graph.input()) {
    if (initializerNames.contains(input.name()))
      continue;
    auto value = options.inputValues.find(input.name());
    if (value != options.inputValues.end() && onlyReadAsConstant(input.name())) {
      boundInputs.emplace_back(input.name(), &value->second);
      continue;
    }
    if (failed(addInput(input)))
      return failure();
  }
  // An algorithm's own inputs (labels a loss in the algorithm reads) are
  // inputs of the step too.
  for (int i = 0; algorithms && i < model.training_info_size(); ++i) {
    const onnx::GraphProto &algorithm = model.training_info(i).algorithm();
    for (const auto &input : algorithm.input()) {
      bool initializer = initializerNames.contains(input.name()) ||
                         llvm::any_of(algorithm.initializer(), [&](const auto &init) {
                           return init.name() == input.name();
                         });
      if (initializer || llvm::is_contained(argNames, input.name()))
        continue;
      if (failed(addInput(input)))
        return failure();
    }
  }
  for (const Parameter &parameter : imported.parameters) {
    argTypes.push_back(parameter.value.type);
    argNames.push_back(parameter.name);
    argKinds.push_back("param");
  }
  for (const Parameter &state : imported.state) {
    argTypes.push_back(state.value.type);
    argNames.push_back(state.name);
    argKinds.push_back("state");
  }

  Location fileLoc = FileLineColLoc::get(&context, path, 0, 0);
  imported.module = ModuleOp::create(fileLoc);
  ModuleOp module = *imported.module;
  builder.setInsertionPointToEnd(module.getBody());
  auto func = func::FuncOp::create(builder, fileLoc, "forward",
                                   builder.getFunctionType(argTypes, {}));
  Block *body = func.addEntryBlock();
  for (auto [i, arg] : llvm::enumerate(body->getArguments())) {
    func.setArgAttr(i, "cleave.name", builder.getStringAttr(argNames[i]));
    func.setArgAttr(i, "cleave.kind", builder.getStringAttr(argKinds[i]));
    values[argNames[i]] = arg;
  }
  builder.setInsertionPointToEnd(body);
  for (auto [data, name] : llvm::zip(constants, constantNames)) {
    Location loc = NameLoc::get(builder.getStringAttr(name), fileLoc);
    values[name] = ConstantOp::create(builder, loc, data.type, toElementsAttr(data));
  }
  for (auto [name, data] : boundInputs) {
    Location loc = NameLoc::get(builder.getStringAttr(name), fileLoc);
    values[name] = ConstantOp::create(builder, loc, data->type, toElementsAttr(*data));
  }
  graphBase = values;

  for (auto [index, node] : llvm::enumerate(graph.node()))
    if (failed(importNode(node, index)))
      return failure();

  SmallVector<Value> results;
  SmallVector<std::string> resultNames;
  for (const auto &output : graph.output()) {
    auto found = values.find(output.name());
    if (found == values.end())
      return fail("output '" + output.name() +
                  "' is not produced by any node, graph input or initializer");
    if (failed(checkOutput(output, found->second)))
      return failure();
    results.push_back(found->second);
    resultNames.push_back(output.name());
  }
  if (algorithms && failed(importTrainingAlgorithms(imported, results, resultNames)))
    return failure();
  func::ReturnOp::create(builder, fileLoc, results);
  // Shape subgraphs fold into constants that nothing reads any more.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(*body)))
    if (isOpTriviallyDead(&op))
      op.erase();
  func.setType(builder.getFunctionType(argTypes, ValueRange(results).getTypes()));
  for (auto [i, name] : llvm::enumerate(resultNames))
    func.setResultAttr(i, "cleave.name", builder.getStringAttr(name));

  module->setAttr("cleave.source", builder.getStringAttr(path));
  module->setAttr("cleave.ir_version", builder.getI64IntegerAttr(model.ir_version()));
  if (opsets.count(""))
    module->setAttr("cleave.opset", builder.getI64IntegerAttr(opsets.lookup("")));
  std::string producer = model.producer_name();
  if (!model.producer_version().empty())
    producer += (producer.empty() ? "" : " ") + model.producer_version();
  if (!producer.empty())
    module->setAttr("cleave.producer", builder.getStringAttr(producer));
  // A training_info the step was built from is not kept a second time.
  if (ArrayAttr info = algorithms ? ArrayAttr() : trainingInfo())
    module->setAttr("cleave.training_info", info);
  if (ArrayAttr configs = configurations())
    module->setAttr("cleave.configurations", configs);

  if (failed(mlir::verify(module)))
    return fail("the imported module does not verify (a cleave bug)",
                "rerun with --mlir-print-op-on-diagnostic to see the IR", kExitInternal);
  return imported;
}

} // namespace

FailureOr<ImportedModel> importOnnxModel(MLIRContext &context, StringRef path,
                                         const ImportOptions &options, UserError &error) {
  context.loadDialect<CleaveDialect, func::FuncDialect>();
  Importer importer(context, path, options, error);
  return importer.run();
}

LogicalResult parseInputShape(StringRef flag, ImportOptions &options, UserError &error) {
  auto [name, dimsText] = flag.split('=');
  auto bad = [&](const Twine &why) {
    error = UserError{"--input-shape '" + flag.str() + "'", why.str(),
                      "write it as NAME=8x32 (NAME= for a scalar)", kExitBadUsage};
    return failure();
  };
  if (name.empty() || !flag.contains('='))
    return bad("expected NAME=DIMS");
  std::vector<int64_t> dims;
  if (!dimsText.empty()) {
    SmallVector<StringRef> parts;
    dimsText.split(parts, 'x');
    for (StringRef part : parts) {
      int64_t d;
      if (part.getAsInteger(10, d) || d < 0)
        return bad("'" + part + "' is not a dim size");
      dims.push_back(d);
    }
  }
  options.inputShapes[name.str()] = dims;
  return success();
}

} // namespace cleave
