//===- CleaveOps.cpp - result type inference and verifiers ---------------===//
//
// Each op's inferReturnTypes is also its shape check: the InferTypeOpInterface
// verifier compares the declared result types with the inferred ones, and the
// importer calls it before creating an op, so a bad shape is a diagnostic at
// the ONNX node's location rather than a crash.
//
//===----------------------------------------------------------------------===//

#include "dialects/Cleave/CleaveOps.h"

#include "runtime/ElementwiseProgram.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace cleave;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

namespace {

RankedTensorType tensorType(Type type) { return cast<RankedTensorType>(type); }

ArrayRef<int64_t> shapeOf(Value value) { return tensorType(value.getType()).getShape(); }

Type elementOf(Value value) { return tensorType(value.getType()).getElementType(); }

LogicalResult fail(std::optional<Location> location, const Twine &message) {
  return emitOptionalError(location, message);
}

LogicalResult checkAxis(std::optional<Location> location, int64_t axis, int64_t rank,
                        StringRef what = "axis") {
  if (axis < 0 || axis >= rank)
    return fail(location, what + " " + Twine(axis) + " is out of range for rank " +
                              Twine(rank));
  return success();
}

/// Axes must be in [0, rank) and distinct.
LogicalResult checkAxes(std::optional<Location> location, ArrayRef<int64_t> axes,
                        int64_t rank) {
  llvm::SmallSet<int64_t, 8> seen;
  for (int64_t axis : axes) {
    if (failed(checkAxis(location, axis, rank)))
      return failure();
    if (!seen.insert(axis).second)
      return fail(location, "axis " + Twine(axis) + " appears twice");
  }
  return success();
}

/// Whether `shape` broadcasts to `target` without changing it (ONNX's
/// unidirectional broadcasting, used by Gemm's C and LayerNormalization's scale).
bool broadcastsTo(ArrayRef<int64_t> shape, ArrayRef<int64_t> target) {
  auto result = broadcastShapes(shape, target);
  return result && ArrayRef<int64_t>(*result) == target;
}

int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

LogicalResult checkSpatial(std::optional<Location> location, int64_t spatial,
                           ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                           ArrayRef<int64_t> dilations) {
  if (static_cast<int64_t>(strides.size()) != spatial ||
      static_cast<int64_t>(dilations.size()) != spatial ||
      static_cast<int64_t>(pads.size()) != 2 * spatial)
    return fail(location, "strides and dilations need " + Twine(spatial) +
                              " values and pads " + Twine(2 * spatial));
  if (llvm::any_of(strides, [](int64_t s) { return s < 1; }) ||
      llvm::any_of(dilations, [](int64_t d) { return d < 1; }) ||
      llvm::any_of(pads, [](int64_t p) { return p < 0; }))
    return fail(location, "strides and dilations must be positive and pads non-negative");
  return success();
}

/// Output extents of a sliding window over the spatial dims of `input`
/// (N x C x spatial...), with ONNX's rule that a ceil-mode window starting in
/// the end padding is dropped.
FailureOr<SmallVector<int64_t>>
windowOutput(std::optional<Location> location, ArrayRef<int64_t> input,
             ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
             ArrayRef<int64_t> dilations, bool ceilMode) {
  size_t spatial = kernel.size();
  SmallVector<int64_t> result;
  for (size_t i = 0; i < spatial; ++i) {
    int64_t in = input[2 + i];
    int64_t padded = in + pads[i] + pads[spatial + i];
    int64_t window = (kernel[i] - 1) * dilations[i] + 1;
    if (kernel[i] < 1 || window > padded)
      return fail(location, "window of " + Twine(window) + " does not fit spatial dim " +
                                Twine(i) + " of size " + Twine(padded) + " (padded)");
    int64_t span = padded - window;
    int64_t out = (ceilMode ? (span + strides[i] - 1) / strides[i] : span / strides[i]) + 1;
    if (ceilMode && (out - 1) * strides[i] >= in + pads[i])
      --out;
    result.push_back(out);
  }
  return result;
}

} // namespace

int64_t cleave::tensorBytes(RankedTensorType type) {
  unsigned width = type.getElementType().getIntOrFloatBitWidth();
  return type.getNumElements() * (width == 1 ? 1 : width / 8);
}

StringAttr cleave::argumentKind(Value value) {
  auto arg = dyn_cast_or_null<BlockArgument>(value);
  auto func = arg ? dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp()) : nullptr;
  return func ? func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kKindAttr) : StringAttr();
}

bool cleave::isParameter(Value value) {
  StringAttr kind = argumentKind(value);
  return kind && kind.getValue() == "param";
}

std::string cleave::onnxNodeName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location part : fused.getLocations())
      if (std::string name = onnxNodeName(part); !name.empty())
        return name;
  return "";
}

std::optional<std::string> cleave::tensorShapeError(ArrayRef<int64_t> shape) {
  int64_t count = 1;
  bool overflow = false;
  for (int64_t d : shape) {
    if (d < 0)
      return "its shape " + shapeString(shape) + " has a negative dim";
    overflow = overflow || llvm::MulOverflow(count, d, count);
  }
  if (llvm::is_contained(shape, 0))
    return std::nullopt;
  if (overflow || count > kMaxTensorElements)
    return "its shape " + shapeString(shape) + " holds " +
           (overflow ? std::string("more than 2^63") : std::to_string(count)) +
           " elements, more than the " + std::to_string(kMaxTensorElements) +
           " (2^31 - 1) a tensor may hold";
  return std::nullopt;
}

std::string cleave::shapeString(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleave(shape, os, "x");
  return text;
}

std::optional<SmallVector<int64_t>> cleave::broadcastShapes(ArrayRef<int64_t> a,
                                                            ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return std::nullopt;
    result[i] = da == 1 ? db : da;
  }
  return result;
}

LogicalResult cleave::inferBroadcastType(std::optional<Location> location,
                                         TypeRange operands, Type element,
                                         SmallVectorImpl<Type> &types) {
  SmallVector<int64_t> shape;
  for (Type type : operands) {
    auto operandShape = tensorType(type).getShape();
    auto result = broadcastShapes(shape, operandShape);
    if (!result)
      return fail(location, "operands are not broadcast-compatible: " +
                                shapeString(shape) + " and " + shapeString(operandShape));
    shape = *result;
  }
  types.push_back(RankedTensorType::get(shape, element));
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult GeluOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError("approximate must be \"none\" or \"tanh\", not \"")
           << getApproximate() << "\"";
  return success();
}

LogicalResult WhereOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                        Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (elementOf(adaptor.getX()) != elementOf(adaptor.getY()))
    return fail(location, "x and y have different element types");
  return inferBroadcastType(location, adaptor.getOperands().getTypes(),
                            elementOf(adaptor.getX()), types);
}

LogicalResult CastOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                       Adaptor adaptor, SmallVectorImpl<Type> &types) {
  types.push_back(RankedTensorType::get(shapeOf(adaptor.getInput()), adaptor.getTo()));
  return success();
}

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

LogicalResult cleave::inferAxisType(std::optional<Location> location, Value input,
                                    int64_t axis, SmallVectorImpl<Type> &types) {
  if (failed(checkAxis(location, axis, shapeOf(input).size())))
    return failure();
  types.push_back(input.getType());
  return success();
}

LogicalResult SoftmaxGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                              Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (adaptor.getY().getType() != adaptor.getGrad().getType())
    return emitOptionalError(location, "y ", adaptor.getY().getType(), " and grad ",
                             adaptor.getGrad().getType(), " differ");
  return inferAxisType(location, adaptor.getY(), adaptor.getAxis(), types);
}

/// The result type of the scaled masked softmax ops: `input`'s, which must
/// have a dim, the shape of `mask` (if any) broadcasting to it.
static LogicalResult inferMaskedRowsType(std::optional<Location> location, Value input, Value mask,
                                         SmallVectorImpl<Type> &types) {
  ArrayRef<int64_t> shape = shapeOf(input);
  if (shape.empty())
    return fail(location, "the input has no dim to normalise");
  if (mask && !broadcastsTo(shapeOf(mask), shape))
    return fail(location, "mask of shape " + shapeString(shapeOf(mask)) +
                              " does not broadcast to " + shapeString(shape));
  types.push_back(input.getType());
  return success();
}

LogicalResult ScaledMaskedSoftmaxOp::inferReturnTypes(MLIRContext *,
                                                      std::optional<Location> location,
                                                      Adaptor adaptor,
                                                      SmallVectorImpl<Type> &types) {
  Value bias = adaptor.getBias();
  if (bias) {
    auto biasType = cast<RankedTensorType>(bias.getType());
    auto inputType = cast<RankedTensorType>(adaptor.getInput().getType());
    if (biasType.getElementType() != inputType.getElementType())
      return emitOptionalError(location, "bias ", biasType, " is not of the input's element type ",
                               inputType.getElementType());
    if (!broadcastsTo(biasType.getShape(), inputType.getShape()))
      return fail(location, "bias of shape " + shapeString(biasType.getShape()) +
                                " does not broadcast to " + shapeString(inputType.getShape()));
  }
  return inferMaskedRowsType(location, adaptor.getInput(), adaptor.getMask(), types);
}

LogicalResult ScaledMaskedSoftmaxGradOp::inferReturnTypes(MLIRContext *,
                                                          std::optional<Location> location,
                                                          Adaptor adaptor,
                                                          SmallVectorImpl<Type> &types) {
  if (adaptor.getY().getType() != adaptor.getGrad().getType())
    return emitOptionalError(location, "y ", adaptor.getY().getType(), " and grad ",
                             adaptor.getGrad().getType(), " differ");
  return inferMaskedRowsType(location, adaptor.getY(), adaptor.getMask(), types);
}

LogicalResult LayerNormalizationOp::inferReturnTypes(MLIRContext *context,
                                                     std::optional<Location> location,
                                                     Adaptor adaptor,
                                                     SmallVectorImpl<Type> &types) {
  ArrayRef<int64_t> shape = shapeOf(adaptor.getX());
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(location, axis, shape.size())))
    return failure();
  ArrayRef<int64_t> normalized = shape.drop_front(axis);
  if (!broadcastsTo(shapeOf(adaptor.getScale()), normalized))
    return fail(location, "scale of shape " + shapeString(shapeOf(adaptor.getScale())) +
                              " does not broadcast to the normalised shape " +
                              shapeString(normalized));
  if (adaptor.getBias() && !broadcastsTo(shapeOf(adaptor.getBias()), normalized))
    return fail(location, "bias of shape " + shapeString(shapeOf(adaptor.getBias())) +
                              " does not broadcast to the normalised shape " +
                              shapeString(normalized));
  SmallVector<int64_t> statsShape(shape);
  std::fill(statsShape.begin() + axis, statsShape.end(), 1);
  auto stats = RankedTensorType::get(statsShape, Float32Type::get(context));
  types.append({adaptor.getX().getType(), stats, stats});
  return success();
}

LogicalResult LayerNormalizationGradOp::inferReturnTypes(MLIRContext *,
                                                         std::optional<Location> location,
                                                         Adaptor adaptor,
                                                         SmallVectorImpl<Type> &types) {
  Type x = adaptor.getX().getType();
  ArrayRef<int64_t> shape = shapeOf(adaptor.getX());
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(location, axis, shape.size())))
    return failure();
  if (adaptor.getGrad().getType() != x)
    return emitOptionalError(location, "x ", x, " and grad ", adaptor.getGrad().getType(),
                             " differ");
  if (!broadcastsTo(shapeOf(adaptor.getScale()), shape.drop_front(axis)))
    return fail(location, "scale of shape " + shapeString(shapeOf(adaptor.getScale())) +
                              " does not broadcast to the normalised shape " +
                              shapeString(shape.drop_front(axis)));
  SmallVector<int64_t> statsShape(shape);
  std::fill(statsShape.begin() + axis, statsShape.end(), 1);
  auto stats = RankedTensorType::get(statsShape, getElementTypeOrSelf(x));
  for (auto [name, value] :
       {std::pair{"mean", adaptor.getMean()}, std::pair{"inv_std_dev", adaptor.getInvStdDev()}})
    if (value.getType() != stats)
      return emitOptionalError(location, name, " ", value.getType(), " is not ", stats);
  types.push_back(x);
  return success();
}

LogicalResult BatchNormalizationOp::inferReturnTypes(MLIRContext *,
                                                     std::optional<Location> location,
                                                     Adaptor adaptor,
                                                     SmallVectorImpl<Type> &types) {
  ArrayRef<int64_t> shape = shapeOf(adaptor.getX());
  if (shape.size() < 2)
    return fail(location, "input must have at least rank 2 (N x C x ...), got " +
                              shapeString(shape));
  const StringRef names[] = {"scale", "bias", "mean", "var"};
  const Value operands[] = {adaptor.getScale(), adaptor.getBias(), adaptor.getMean(),
                            adaptor.getVar()};
  for (auto [name, value] : llvm::zip(names, operands)) {
    if (shapeOf(value) != ArrayRef<int64_t>{shape[1]})
      return fail(location, name + " must have shape " + Twine(shape[1]) +
                                " (the channels), got " + shapeString(shapeOf(value)));
  }
  types.append({adaptor.getX().getType(), adaptor.getMean().getType(),
                adaptor.getVar().getType()});
  return success();
}

LogicalResult DropoutOp::inferReturnTypes(MLIRContext *context, std::optional<Location>,
                                          Adaptor adaptor, SmallVectorImpl<Type> &types) {
  types.append({adaptor.getData().getType(),
                RankedTensorType::get(shapeOf(adaptor.getData()),
                                      IntegerType::get(context, 1))});
  return success();
}

LogicalResult DropoutOp::verify() {
  float ratio = getRatio().convertToFloat();
  if (ratio < 0.0f || ratio >= 1.0f)
    return emitOpError("ratio must be in [0, 1), got ") << ratio;
  std::optional<ArrayRef<int64_t>> split = getSplit();
  if (split.has_value() != static_cast<bool>(getCoordinate()))
    return emitOpError("split and coordinate go together");
  if (split && (split->size() != 2 || (*split)[0] < 0 ||
                (*split)[0] >= static_cast<int64_t>(shapeOf(getData()).size()) ||
                (*split)[1] < 1))
    return emitOpError("split must be [dim, parts] with a dim of the data and parts >= 1");
  if (getCoordinate() && !shapeOf(getCoordinate()).empty())
    return emitOpError("coordinate must be a scalar");
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

/// The element type of a product of `operands`: f32 for bf16 and f16, whose
/// products are summed in f32; otherwise theirs.
static Type productElementType(Type operands) {
  return operands.isBF16() || operands.isF16() ? Float32Type::get(operands.getContext()) : operands;
}

LogicalResult MatMulOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  SmallVector<int64_t> lhs(shapeOf(adaptor.getLhs()));
  SmallVector<int64_t> rhs(shapeOf(adaptor.getRhs()));
  if (lhs.empty() || rhs.empty())
    return fail(location, "operands must have rank 1 or more");
  if (elementOf(adaptor.getLhs()) != elementOf(adaptor.getRhs()))
    return fail(location, "operands have different element types");
  bool lhsVector = lhs.size() == 1, rhsVector = rhs.size() == 1;
  // The flags' attributes are absent where an op is built without them.
  const bool transA = adaptor.getTransAAttr() && adaptor.getTransAAttr().getValue();
  const bool transB = adaptor.getTransBAttr() && adaptor.getTransBAttr().getValue();
  if ((lhsVector && transA) || (rhsVector && transB))
    return fail(location, "a transposed operand must have rank 2 or more");
  if (lhsVector)
    lhs.insert(lhs.begin(), 1);
  if (rhsVector)
    rhs.push_back(1);
  if (transA)
    std::swap(lhs[lhs.size() - 2], lhs.back());
  if (transB)
    std::swap(rhs[rhs.size() - 2], rhs.back());
  int64_t m = lhs[lhs.size() - 2], k = lhs.back();
  int64_t k2 = rhs[rhs.size() - 2], n = rhs.back();
  if (k != k2)
    return fail(location, "contraction dims differ: " +
                              shapeString(shapeOf(adaptor.getLhs())) + " times " +
                              shapeString(shapeOf(adaptor.getRhs())));
  auto batch = broadcastShapes(ArrayRef<int64_t>(lhs).drop_back(2),
                               ArrayRef<int64_t>(rhs).drop_back(2));
  if (!batch)
    return fail(location, "batch dims do not broadcast: " +
                              shapeString(shapeOf(adaptor.getLhs())) + " times " +
                              shapeString(shapeOf(adaptor.getRhs())));
  SmallVector<int64_t> result(*batch);
  if (!lhsVector)
    result.push_back(m);
  if (!rhsVector)
    result.push_back(n);
  types.push_back(RankedTensorType::get(result, productElementType(elementOf(adaptor.getLhs()))));
  return success();
}

LogicalResult GemmOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                       Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ArrayRef<int64_t> a = shapeOf(adaptor.getA()), b = shapeOf(adaptor.getB());
  if (a.size() != 2 || b.size() != 2)
    return fail(location, "a and b must be matrices, got " + shapeString(a) + " and " +
                              shapeString(b));
  bool transA = adaptor.getTransA(), transB = adaptor.getTransB();
  int64_t m = transA ? a[1] : a[0], k = transA ? a[0] : a[1];
  int64_t k2 = transB ? b[1] : b[0], n = transB ? b[0] : b[1];
  if (k != k2)
    return fail(location, "contraction dims differ: op(a) is " + Twine(m) + "x" +
                              Twine(k) + ", op(b) is " + Twine(k2) + "x" + Twine(n));
  if (elementOf(adaptor.getA()) != elementOf(adaptor.getB()))
    return fail(location, "a and b have different element types");
  SmallVector<int64_t> result{m, n};
  // bf16 factors added to a bf16 c write bf16: the f32 sum rounded.
  Type factors = elementOf(adaptor.getA());
  Type element = factors.isBF16() && adaptor.getC() && elementOf(adaptor.getC()).isBF16()
                     ? factors
                     : productElementType(factors);
  if (adaptor.getC() && !broadcastsTo(shapeOf(adaptor.getC()), result))
    return fail(location, "c of shape " + shapeString(shapeOf(adaptor.getC())) +
                              " does not broadcast to " + shapeString(result));
  if (adaptor.getC() && elementOf(adaptor.getC()) != element)
    return fail(location, "c's element type is not the result's");
  types.push_back(RankedTensorType::get(result, element));
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                          Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ArrayRef<int64_t> shape = adaptor.getShape();
  if (llvm::any_of(shape, [](int64_t d) { return d < 0; }))
    return fail(location, "shape " + shapeString(shape) + " has a negative dim");
  int64_t count = product(shapeOf(adaptor.getInput()));
  if (product(shape) != count)
    return fail(location, "cannot reshape " + Twine(count) + " elements (" +
                              shapeString(shapeOf(adaptor.getInput())) + ") to " +
                              shapeString(shape));
  types.push_back(RankedTensorType::get(shape, elementOf(adaptor.getInput())));
  return success();
}

LogicalResult FlattenOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                          Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ArrayRef<int64_t> shape = shapeOf(adaptor.getInput());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis > static_cast<int64_t>(shape.size()))
    return fail(location, "axis " + Twine(axis) + " is out of range for rank " +
                              Twine(shape.size()));
  types.push_back(RankedTensorType::get(
      {product(shape.take_front(axis)), product(shape.drop_front(axis))},
      elementOf(adaptor.getInput())));
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ArrayRef<int64_t> shape = shapeOf(adaptor.getInput());
  ArrayRef<int64_t> perm = adaptor.getPerm();
  if (perm.size() != shape.size())
    return fail(location, "perm has " + Twine(perm.size()) + " entries for rank " +
                              Twine(shape.size()));
  if (failed(checkAxes(location, perm, shape.size())))
    return failure();
  SmallVector<int64_t> result;
  for (int64_t p : perm)
    result.push_back(shape[p]);
  types.push_back(RankedTensorType::get(result, elementOf(adaptor.getInput())));
  return success();
}

LogicalResult SqueezeOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                          Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ArrayRef<int64_t> shape = shapeOf(adaptor.getInput());
  ArrayRef<int64_t> axes = adaptor.getAxes();
  if (failed(checkAxes(location, axes, shape.size())))
    return failure();
  SmallVector<int64_t> result;
  for (auto [i, d] : llvm::enumerate(shape)) {
    bool squeezed = llvm::is_contained(axes, static_cast<int64_t>(i));
    if (squeezed && d != 1)
      return fail(location, "cannot squeeze dim " + Twine(i) + " of size " + Twine(d));
    if (!squeezed)
      result.push_back(d);
  }
  types.push_back(RankedTensorType::get(result, elementOf(adaptor.getInput())));
  return success();
}

LogicalResult UnsqueezeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ArrayRef<int64_t> shape = shapeOf(adaptor.getInput());
  ArrayRef<int64_t> axes = adaptor.getAxes();
  int64_t rank = shape.size() + axes.size();
  if (failed(checkAxes(location, axes, rank)))
    return failure();
  SmallVector<int64_t> result;
  const int64_t *next = shape.begin();
  for (int64_t i = 0; i < rank; ++i)
    result.push_back(llvm::is_contained(axes, i) ? 1 : *next++);
  types.push_back(RankedTensorType::get(result, elementOf(adaptor.getInput())));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ValueRange inputs = adaptor.getInputs();
  if (inputs.empty())
    return fail(location, "needs at least one input");
  SmallVector<int64_t> result(shapeOf(inputs[0]));
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(location, axis, result.size())))
    return failure();
  for (Value input : inputs.drop_front()) {
    ArrayRef<int64_t> shape = shapeOf(input);
    bool fits = shape.size() == result.size() && elementOf(input) == elementOf(inputs[0]);
    for (size_t i = 0; fits && i < shape.size(); ++i)
      fits = static_cast<int64_t>(i) == axis || shape[i] == result[i];
    if (!fits)
      return fail(location, "cannot concatenate " + shapeString(shapeOf(inputs[0])) +
                                " and " + shapeString(shape) + " along axis " +
                                Twine(axis));
    result[axis] += shape[axis];
  }
  types.push_back(RankedTensorType::get(result, elementOf(inputs[0])));
  return success();
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                        Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ArrayRef<int64_t> shape = shapeOf(adaptor.getInput());
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(location, axis, shape.size())))
    return failure();
  ArrayRef<int64_t> sizes = adaptor.getSplit();
  int64_t total = 0;
  for (int64_t size : sizes) {
    if (size < 0)
      return fail(location, "split sizes must be non-negative");
    if (size > shape[axis] - total)
      return fail(location, "split sizes add up to more than the " + Twine(shape[axis]) +
                                " of dim " + Twine(axis));
    total += size;
  }
  if (total != shape[axis])
    return fail(location, "split sizes add up to " + Twine(total) + ", but dim " +
                              Twine(axis) + " has " + Twine(shape[axis]));
  for (int64_t size : sizes) {
    SmallVector<int64_t> piece(shape);
    piece[axis] = size;
    types.push_back(RankedTensorType::get(piece, elementOf(adaptor.getInput())));
  }
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                        Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ArrayRef<int64_t> shape = shapeOf(adaptor.getInput());
  ArrayRef<int64_t> starts = adaptor.getStarts(), ends = adaptor.getEnds(),
                    steps = adaptor.getSteps();
  if (starts.size() != shape.size() || ends.size() != shape.size() ||
      steps.size() != shape.size())
    return fail(location, "starts, ends and steps need one entry per dim (" +
                              Twine(shape.size()) + ")");
  SmallVector<int64_t> result;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t start = starts[i], end = ends[i], step = steps[i], dim = shape[i];
    bool clamped = step > 0 ? (start >= 0 && start <= dim && end >= 0 && end <= dim)
                 : step < 0 ? (start >= 0 && start <= dim - 1 && end >= -1 && end <= dim - 1)
                            : false;
    if (!clamped)
      return fail(location, "dim " + Twine(i) + ": start " + Twine(start) + ", end " +
                                Twine(end) + ", step " + Twine(step) +
                                " are not a clamped slice of size " + Twine(dim));
    int64_t span = step > 0 ? end - start : start - end;
    int64_t magnitude = step > 0 ? step : -step;
    result.push_back(span <= 0 ? 0 : (span + magnitude - 1) / magnitude);
  }
  types.push_back(RankedTensorType::get(result, elementOf(adaptor.getInput())));
  return success();
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ArrayRef<int64_t> data = shapeOf(adaptor.getData());
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(location, axis, data.size())))
    return failure();
  SmallVector<int64_t> result(data.take_front(axis));
  llvm::append_range(result, shapeOf(adaptor.getIndices()));
  llvm::append_range(result, data.drop_front(axis + 1));
  types.push_back(RankedTensorType::get(result, elementOf(adaptor.getData())));
  return success();
}

LogicalResult ExpandOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ArrayRef<int64_t> shape = shapeOf(adaptor.getInput());
  if (!broadcastsTo(shape, adaptor.getShape()))
    return fail(location, "cannot expand " + shapeString(shape) + " to " +
                              shapeString(adaptor.getShape()));
  types.push_back(RankedTensorType::get(adaptor.getShape(), elementOf(adaptor.getInput())));
  return success();
}

LogicalResult GatherGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                             Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ArrayRef<int64_t> shape = adaptor.getShape();
  if (llvm::any_of(shape, [](int64_t d) { return d < 0; }))
    return fail(location, "shape " + shapeString(shape) + " has a negative dim");
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxis(location, axis, shape.size())))
    return failure();
  SmallVector<int64_t> gathered(shape.take_front(axis));
  llvm::append_range(gathered, shapeOf(adaptor.getIndices()));
  llvm::append_range(gathered, shape.drop_front(axis + 1));
  if (shapeOf(adaptor.getGrad()) != ArrayRef<int64_t>(gathered))
    return fail(location, "grad of shape " + shapeString(shapeOf(adaptor.getGrad())) +
                              " is not what gather gives for data " + shapeString(shape) +
                              " and indices " + shapeString(shapeOf(adaptor.getIndices())) +
                              " (" + shapeString(gathered) + ")");
  types.push_back(RankedTensorType::get(shape, elementOf(adaptor.getGrad())));
  return success();
}

LogicalResult SliceGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ArrayRef<int64_t> shape = adaptor.getShape(), grad = shapeOf(adaptor.getGrad());
  ArrayRef<int64_t> starts = adaptor.getStarts(), steps = adaptor.getSteps();
  if (starts.size() != shape.size() || steps.size() != shape.size() ||
      grad.size() != shape.size())
    return fail(location, "grad, starts and steps need one entry per dim of shape " +
                              shapeString(shape));
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0)
      return fail(location, "shape " + shapeString(shape) + " has a negative dim");
    if (steps[i] == 0)
      return fail(location, "dim " + Twine(i) + ": step must not be 0");
    int64_t last = starts[i] + (grad[i] - 1) * steps[i];
    if (grad[i] > 0 && (starts[i] < 0 || starts[i] >= shape[i] || last < 0 || last >= shape[i]))
      return fail(location, "dim " + Twine(i) + ": " + Twine(grad[i]) + " positions from " +
                                Twine(starts[i]) + " by step " + Twine(steps[i]) +
                                " do not fit size " + Twine(shape[i]));
  }
  types.push_back(RankedTensorType::get(shape, elementOf(adaptor.getGrad())));
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

LogicalResult cleave::inferReduceType(std::optional<Location> location, Value input,
                                      ArrayRef<int64_t> axes, bool keepdims,
                                      SmallVectorImpl<Type> &types) {
  ArrayRef<int64_t> shape = shapeOf(input);
  if (axes.empty())
    return fail(location, "needs at least one axis to reduce");
  if (failed(checkAxes(location, axes, shape.size())))
    return failure();
  SmallVector<int64_t> result;
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (!llvm::is_contained(axes, static_cast<int64_t>(i)))
      result.push_back(d);
    else if (keepdims)
      result.push_back(1);
  }
  types.push_back(RankedTensorType::get(result, elementOf(input)));
  return success();
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

/// The output shape of a convolution of an input of shape `x` with weights
/// of shape `w`, once channels, group and window attributes are checked.
static FailureOr<SmallVector<int64_t>>
convOutput(std::optional<Location> location, ArrayRef<int64_t> x, ArrayRef<int64_t> w,
           int64_t group, ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
           ArrayRef<int64_t> dilations) {
  if (x.size() < 3 || w.size() != x.size())
    return fail(location, "input (" + shapeString(x) + ") and weight (" + shapeString(w) +
                              ") must be N x C x spatial... of the same rank");
  if (llvm::any_of(x, [](int64_t d) { return d < 0; }) ||
      llvm::any_of(w, [](int64_t d) { return d < 0; }))
    return fail(location, "input (" + shapeString(x) + ") and weight (" + shapeString(w) +
                              ") must not have negative dims");
  if (group < 1 || x[1] != w[1] * group || w[0] % group != 0)
    return fail(location, "input channels " + Twine(x[1]) + " do not match weight " +
                              shapeString(w) + " with group " + Twine(group));
  if (failed(checkSpatial(location, x.size() - 2, strides, pads, dilations)))
    return failure();
  auto spatial = windowOutput(location, x, w.drop_front(2), strides, pads, dilations, false);
  if (failed(spatial))
    return failure();
  SmallVector<int64_t> result{x[0], w[0]};
  llvm::append_range(result, *spatial);
  return result;
}

LogicalResult TopKOp::inferReturnTypes(MLIRContext *context, std::optional<Location> location,
                                       Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ArrayRef<int64_t> shape = shapeOf(adaptor.getInput());
  int64_t axis = adaptor.getAxis(), k = adaptor.getK();
  if (failed(checkAxis(location, axis, shape.size())))
    return failure();
  if (k < 0 || k > shape[axis])
    return fail(location, "k " + Twine(k) + " is not between 0 and the " + Twine(shape[axis]) +
                              " entries of axis " + Twine(axis));
  SmallVector<int64_t> result(shape);
  result[axis] = k;
  types.push_back(RankedTensorType::get(result, elementOf(adaptor.getInput())));
  types.push_back(RankedTensorType::get(result, IntegerType::get(context, 64)));
  return success();
}

/// An activation fused into a conv or gemm (cleave-fuse-activations) is
/// one the kernels apply: "relu", and for a gemm also "gelu".
static LogicalResult verifyActivation(Operation *op, std::optional<StringRef> activation,
                                      bool geluToo) {
  if (!activation || *activation == "relu" || (geluToo && *activation == "gelu"))
    return success();
  return op->emitOpError("activation '")
         << *activation << "' is not " << (geluToo ? "relu or gelu" : "relu");
}

LogicalResult ConvOp::verify() { return verifyActivation(*this, getActivation(), false); }

LogicalResult GemmOp::verify() {
  if (getActivation() && getType().getElementType().isBF16())
    return emitOpError("with a bf16 result takes no activation");
  return verifyActivation(*this, getActivation(), true);
}

LogicalResult ConvOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                       Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ArrayRef<int64_t> w = shapeOf(adaptor.getW());
  Type element = productElementType(elementOf(adaptor.getX()));
  if (elementOf(adaptor.getW()) != elementOf(adaptor.getX()))
    return fail(location, "x and w have different element types");
  if (adaptor.getB() && elementOf(adaptor.getB()) != element)
    return fail(location, "bias must have the result's element type");
  if (adaptor.getB() && w.size() >= 1 && shapeOf(adaptor.getB()) != ArrayRef<int64_t>{w[0]})
    return fail(location, "bias must have shape " + Twine(w[0]));
  auto result = convOutput(location, shapeOf(adaptor.getX()), w, adaptor.getGroup(),
                           adaptor.getStrides(), adaptor.getPads(), adaptor.getDilations());
  if (failed(result))
    return failure();
  types.push_back(RankedTensorType::get(*result, element));
  return success();
}

/// Checks that `grad` has the shape the forward op gives (`expected`) and
/// the element type of `other`, the forward operand it pairs with.
static LogicalResult checkGrad(std::optional<Location> location, Value grad,
                               ArrayRef<int64_t> expected, Value other, StringRef forward) {
  if (other && elementOf(grad) != elementOf(other))
    return fail(location, "grad and the " + forward + " operand have different element types");
  if (shapeOf(grad) != expected)
    return fail(location, "grad of shape " + shapeString(shapeOf(grad)) + " is not what " +
                              forward + " gives (" + shapeString(expected) + ")");
  return success();
}

LogicalResult ConvGradInputOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location> location,
                                                Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto expected = convOutput(location, adaptor.getShape(), shapeOf(adaptor.getW()),
                             adaptor.getGroup(), adaptor.getStrides(), adaptor.getPads(),
                             adaptor.getDilations());
  if (failed(expected) ||
      failed(checkGrad(location, adaptor.getGrad(), *expected, adaptor.getW(), "conv")))
    return failure();
  types.push_back(
      RankedTensorType::get(adaptor.getShape(), productElementType(elementOf(adaptor.getGrad()))));
  return success();
}

LogicalResult ConvGradWeightOp::inferReturnTypes(MLIRContext *,
                                                 std::optional<Location> location,
                                                 Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto expected = convOutput(location, shapeOf(adaptor.getX()), adaptor.getShape(),
                             adaptor.getGroup(), adaptor.getStrides(), adaptor.getPads(),
                             adaptor.getDilations());
  if (failed(expected) ||
      failed(checkGrad(location, adaptor.getGrad(), *expected, adaptor.getX(), "conv")))
    return failure();
  types.push_back(
      RankedTensorType::get(adaptor.getShape(), productElementType(elementOf(adaptor.getGrad()))));
  return success();
}

/// The output shape of pooling an input of `shape` (with or without ceil
/// mode), once the kernel and window attributes are checked.
static FailureOr<SmallVector<int64_t>>
poolOutput(std::optional<Location> location, ArrayRef<int64_t> shape, ArrayRef<int64_t> kernel,
           ArrayRef<int64_t> strides, ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations,
           bool ceilMode) {
  if (shape.size() < 3 || kernel.size() != shape.size() - 2)
    return fail(location, "input " + shapeString(shape) + " and kernel " +
                              shapeString(kernel) + " must be N x C x spatial... and " +
                              "one size per spatial dim");
  if (llvm::any_of(shape, [](int64_t d) { return d < 0; }))
    return fail(location, "input " + shapeString(shape) + " has a negative dim");
  if (failed(checkSpatial(location, kernel.size(), strides, pads, dilations)))
    return failure();
  auto spatial = windowOutput(location, shape, kernel, strides, pads, dilations, ceilMode);
  if (failed(spatial))
    return failure();
  SmallVector<int64_t> result{shape[0], shape[1]};
  llvm::append_range(result, *spatial);
  return result;
}

static LogicalResult inferPool(std::optional<Location> location, Value x,
                               ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                               ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations,
                               bool ceilMode, SmallVectorImpl<Type> &types) {
  auto result = poolOutput(location, shapeOf(x), kernel, strides, pads, dilations, ceilMode);
  if (failed(result))
    return failure();
  types.push_back(RankedTensorType::get(*result, elementOf(x)));
  return success();
}

/// Checks that `grad` has the shape pooling an input of `shape` gives, with
/// or without ceil mode (the gradient ops take it from grad's dims).
static LogicalResult checkPoolGrad(std::optional<Location> location, Value grad, Value x,
                                   ArrayRef<int64_t> shape, ArrayRef<int64_t> kernel,
                                   ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                                   ArrayRef<int64_t> dilations, StringRef forward) {
  auto floor = poolOutput(location, shape, kernel, strides, pads, dilations, false);
  if (failed(floor))
    return failure();
  auto ceil = poolOutput(location, shape, kernel, strides, pads, dilations, true);
  if (failed(ceil))
    return failure();
  if (shapeOf(grad) == ArrayRef<int64_t>(*ceil))
    return checkGrad(location, grad, *ceil, x, forward);
  return checkGrad(location, grad, *floor, x, forward);
}

LogicalResult MaxPoolOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                          Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferPool(location, adaptor.getX(), adaptor.getKernelShape(), adaptor.getStrides(),
                   adaptor.getPads(), adaptor.getDilations(), adaptor.getCeilMode(), types);
}

LogicalResult AveragePoolOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> location,
                                              Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferPool(location, adaptor.getX(), adaptor.getKernelShape(), adaptor.getStrides(),
                   adaptor.getPads(), adaptor.getDilations(), adaptor.getCeilMode(), types);
}

LogicalResult MaxPoolGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                              Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (failed(checkPoolGrad(location, adaptor.getGrad(), adaptor.getX(), shapeOf(adaptor.getX()),
                           adaptor.getKernelShape(), adaptor.getStrides(), adaptor.getPads(),
                           adaptor.getDilations(), "max_pool")))
    return failure();
  types.push_back(adaptor.getX().getType());
  return success();
}

LogicalResult AveragePoolGradOp::inferReturnTypes(MLIRContext *,
                                                  std::optional<Location> location,
                                                  Adaptor adaptor,
                                                  SmallVectorImpl<Type> &types) {
  if (failed(checkPoolGrad(location, adaptor.getGrad(), Value(), adaptor.getShape(),
                           adaptor.getKernelShape(), adaptor.getStrides(), adaptor.getPads(),
                           adaptor.getDilations(), "average_pool")))
    return failure();
  types.push_back(RankedTensorType::get(adaptor.getShape(), elementOf(adaptor.getGrad())));
  return success();
}

LogicalResult GlobalAveragePoolOp::inferReturnTypes(MLIRContext *,
                                                    std::optional<Location> location,
                                                    Adaptor adaptor,
                                                    SmallVectorImpl<Type> &types) {
  ArrayRef<int64_t> shape = shapeOf(adaptor.getX());
  if (shape.size() < 3)
    return fail(location, "input must be N x C x spatial..., got " + shapeString(shape));
  SmallVector<int64_t> result(shape.size(), 1);
  result[0] = shape[0];
  result[1] = shape[1];
  types.push_back(RankedTensorType::get(result, elementOf(adaptor.getX())));
  return success();
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

/// Shared by both losses: scores N x C x d..., targets N x d..., weights C.
static LogicalResult inferLoss(std::optional<Location> location, Value scores,
                               Value targets, Value weights, StringRef reduction,
                               SmallVectorImpl<Type> &types) {
  ArrayRef<int64_t> s = shapeOf(scores), t = shapeOf(targets);
  if (s.size() < 2)
    return fail(location, "scores must be N x C x ..., got " + shapeString(s));
  SmallVector<int64_t> expected{s[0]};
  llvm::append_range(expected, s.drop_front(2));
  if (t != ArrayRef<int64_t>(expected))
    return fail(location, "targets of shape " + shapeString(t) + " do not fit scores " +
                              shapeString(s) + " (expected " + shapeString(expected) + ")");
  if (weights && shapeOf(weights) != ArrayRef<int64_t>{s[1]})
    return fail(location, "weights must have shape " + Twine(s[1]) + " (the classes)");
  if (reduction != "none" && reduction != "mean" && reduction != "sum")
    return fail(location, "reduction must be none, mean or sum, not '" + reduction + "'");
  SmallVector<int64_t> lossShape;
  if (reduction == "none")
    lossShape = expected;
  types.push_back(RankedTensorType::get(lossShape, elementOf(scores)));
  return success();
}

LogicalResult SoftmaxCrossEntropyLossOp::inferReturnTypes(MLIRContext *,
                                                          std::optional<Location> location,
                                                          Adaptor adaptor,
                                                          SmallVectorImpl<Type> &types) {
  if (failed(inferLoss(location, adaptor.getScores(), adaptor.getLabels(),
                       adaptor.getWeights(), adaptor.getReduction(), types)))
    return failure();
  types.push_back(adaptor.getScores().getType());
  return success();
}

LogicalResult SoftmaxCrossEntropyGradOp::inferReturnTypes(MLIRContext *,
                                                          std::optional<Location> location,
                                                          Adaptor adaptor,
                                                          SmallVectorImpl<Type> &types) {
  // grad has the type of the loss these log-probabilities and labels give.
  SmallVector<Type> loss;
  if (failed(inferLoss(location, adaptor.getLogProb(), adaptor.getLabels(), Value(),
                       adaptor.getReduction(), loss)))
    return failure();
  if (adaptor.getGrad().getType() != loss.front())
    return emitOptionalError(location, "grad ", adaptor.getGrad().getType(), " is not of the ",
                             adaptor.getReduction(), " loss's type ", loss.front());
  types.push_back(adaptor.getLogProb().getType());
  return success();
}

LogicalResult NegativeLogLikelihoodLossOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  return inferLoss(location, adaptor.getInput(), adaptor.getTarget(), adaptor.getWeight(),
                   adaptor.getReduction(), types);
}

//===----------------------------------------------------------------------===//
// State updates
//===----------------------------------------------------------------------===//

LogicalResult AssignOp::verify() {
  Value target = getTarget();
  while (auto view = target.getDefiningOp<ElementsOp>())
    target = view.getInput();
  StringAttr kind = argumentKind(target);
  if (!kind || (kind.getValue() != "param" && kind.getValue() != "state"))
    return emitOpError("target must be a function argument of kind param or state, or a "
                       "cleave.elements view of one");
  return success();
}

LogicalResult ElementsOp::verify() {
  auto input = cast<RankedTensorType>(getInput().getType());
  auto output = cast<RankedTensorType>(getOutput().getType());
  if (output.getRank() != 1 || output.getElementType() != input.getElementType())
    return emitOpError("result must be 1-D of the input's element type, not ") << output;
  const int64_t offset = static_cast<int64_t>(getOffset());
  if (offset < 0 || offset + output.getNumElements() > input.getNumElements())
    return emitOpError("elements ") << offset << " to " << offset + output.getNumElements()
                                    << " are not in the input's " << input.getNumElements();
  return success();
}

/// A started sum's mesh axis.
static LogicalResult verifyAxis(Operation *op, int64_t axis) {
  if (axis < 0)
    return op->emitOpError("axis ") << axis << " is negative";
  return success();
}

/// A started sum's operands: gradient accumulators (function arguments
/// marked cleave.accumulator; with `flat`, members of a flat buffer), over
/// a mesh axis.
static LogicalResult verifyStartedSum(Operation *op, ValueRange accumulators, int64_t axis,
                                      bool flat) {
  if (accumulators.empty())
    return op->emitOpError("needs an accumulator");
  for (Value accumulator : accumulators) {
    auto arg = dyn_cast<BlockArgument>(accumulator);
    auto func = arg ? dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp()) : nullptr;
    if (!func || !func.getArgAttr(arg.getArgNumber(), kAccumulatorAttr))
      return op->emitOpError("operands must be gradient accumulators (function arguments marked ")
             << kAccumulatorAttr << ")";
    if (flat && !func.getArgAttr(arg.getArgNumber(), kFlatOffsetAttr))
      return op->emitOpError("operands must be members of a flat buffer (marked ")
             << kFlatOffsetAttr << ")";
  }
  return verifyAxis(op, axis);
}

LogicalResult AllReduceStartOp::verify() {
  return verifyStartedSum(*this, getAccumulators(), getAxis(), /*flat=*/false);
}

/// Whether `gradients` are consecutive operands of one cleave.concat along
/// dim 0 whose parts are made in place (ZeRO 2's packed gradients).
static bool arePackedParts(ValueRange gradients) {
  ConcatOp concat;
  for (Operation *user : gradients.front().getUsers())
    if (auto candidate = dyn_cast<ConcatOp>(user))
      concat = candidate;
  if (!concat || concat.getAxis() != 0 || !concat->hasAttr(kPartsInPlaceAttr))
    return false;
  auto inputs = concat.getInputs();
  auto first = llvm::find(inputs, gradients.front());
  return static_cast<size_t>(inputs.end() - first) >= gradients.size() &&
         llvm::equal(gradients, llvm::make_range(first, first + gradients.size()));
}

LogicalResult ReduceScatterOwnedStartOp::verify() {
  if (getSliceElements() <= 0)
    return emitOpError("slices of ") << getSliceElements() << " elements";
  if (getGradients().empty() || isa<BlockArgument>(getGradients().front()))
    return verifyStartedSum(*this, getGradients(), getAxis(), /*flat=*/true);
  if (!arePackedParts(getGradients()))
    return emitOpError("operands must be flat buffer members or consecutive parts of one ")
           << "cleave.concat along dim 0 made in place (" << kPartsInPlaceAttr << ")";
  return verifyAxis(*this, getAxis());
}

LogicalResult CollectiveWaitOp::verify() {
  Operation *collective = getStarted().getDefiningOp();
  if (!isa_and_present<shard::AllGatherOp, shard::ReduceScatterOp, shard::AllReduceOp>(
          collective) ||
      !collective->hasAttr(kStartedAttr))
    return emitOpError("waits for a value that no started shard.all_gather, "
                       "shard.reduce_scatter or shard.all_reduce (")
           << kStartedAttr << ") makes";
  if (collective->getOperand(0) != getSource())
    return emitOpError("source is not the collective's operand");
  return success();
}

LogicalResult FusedElementwiseOp::verify() {
  rt::ElementwiseProgram program;
  std::string error =
      rt::parseElementwiseProgram(getProgram().str().c_str(), getInputs().size(), program);
  if (!error.empty())
    return emitOpError("program ") << error;
  if (program.outputs != static_cast<int>(getNumResults()))
    return emitOpError("program has ") << program.outputs << " outputs, the op "
                                       << getNumResults() << " results";
  if (getNumResults() == 0)
    return emitOpError("needs a result");
  ArrayRef<int64_t> shape = cast<RankedTensorType>(getResult(0).getType()).getShape();
  for (Value result : getResults())
    if (cast<RankedTensorType>(result.getType()).getShape() != shape)
      return emitOpError("results differ in shape");
  for (Value input : getInputs()) {
    auto type = cast<RankedTensorType>(input.getType());
    if (type.getShape() != shape && type.getNumElements() != 1)
      return emitOpError("input ") << type << " is neither the results' shape nor one element";
  }
  // A condition is read as 1 or 0: what a select chooses by, not a number.
  auto isCondition = [&](int reg) {
    return reg < program.inputs &&
           cast<RankedTensorType>(getInputs()[reg].getType()).getElementType().isInteger(1);
  };
  for (int k = 0; k < program.instructions; ++k) {
    const rt::ElementwiseInstruction &instruction = program.code[k];
    for (int j = 0; j < rt::operandCount(instruction.op); ++j)
      if (isCondition(instruction.operands[j]) &&
          (instruction.op != rt::ElementwiseOpcode::Select || j != 0))
        return emitOpError("i1 input ")
               << static_cast<int>(instruction.operands[j]) << " is read by instruction " << k
               << " other than as a select's condition";
  }
  for (int o = 0; o < program.outputs; ++o)
    if (isCondition(program.results[o]))
      return emitOpError("output ")
             << o << " is the i1 input " << static_cast<int>(program.results[o]);
  return success();
}

template <typename PipelineOp> static LogicalResult verifyPipelineEnds(PipelineOp op) {
  // I64Attr reads back as uint64_t: a negative one is its top bit.
  if (static_cast<int64_t>(op.getPeer()) < 0 || static_cast<int64_t>(op.getTag()) < 0)
    return op.emitOpError("peer stage and tag must be non-negative");
  return success();
}

LogicalResult PipelineSendOp::verify() { return verifyPipelineEnds(*this); }
LogicalResult PipelineRecvOp::verify() { return verifyPipelineEnds(*this); }

//===----------------------------------------------------------------------===//
// Constants and generators
//===----------------------------------------------------------------------===//

LogicalResult TriluOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                        Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (shapeOf(adaptor.getInput()).size() < 2)
    return fail(location, "input must have rank 2 or more");
  types.push_back(adaptor.getInput().getType());
  return success();
}

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                           Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto type = dyn_cast<RankedTensorType>(adaptor.getValue().getType());
  if (!type || !type.hasStaticShape())
    return fail(location, "value must be a statically shaped tensor");
  types.push_back(type);
  return success();
}

LogicalResult ConstantOfShapeOp::inferReturnTypes(MLIRContext *,
                                                  std::optional<Location> location,
                                                  Adaptor adaptor,
                                                  SmallVectorImpl<Type> &types) {
  if (llvm::any_of(adaptor.getShape(), [](int64_t d) { return d < 0; }))
    return fail(location, "shape " + shapeString(adaptor.getShape()) + " has a negative dim");
  types.push_back(RankedTensorType::get(adaptor.getShape(), adaptor.getValue().getType()));
  return success();
}

LogicalResult ShapeOp::inferReturnTypes(MLIRContext *context,
                                        std::optional<Location> location, Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  int64_t rank = shapeOf(adaptor.getInput()).size();
  int64_t start = adaptor.getStart(), end = adaptor.getEnd();
  if (start < 0 || start > end || end > rank)
    return fail(location, "start " + Twine(start) + " and end " + Twine(end) +
                              " must satisfy 0 <= start <= end <= rank " + Twine(rank));
  types.push_back(RankedTensorType::get({end - start}, IntegerType::get(context, 64)));
  return success();
}

LogicalResult RangeOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                        Adaptor adaptor, SmallVectorImpl<Type> &types) {
  Type type = adaptor.getStart().getType();
  if (adaptor.getLimit().getType() != type || adaptor.getDelta().getType() != type)
    return fail(location, "start, limit and delta must have one type");
  int64_t count;
  if (auto start = dyn_cast<IntegerAttr>(adaptor.getStart())) {
    int64_t s = start.getInt(), l = cast<IntegerAttr>(adaptor.getLimit()).getInt(),
            d = cast<IntegerAttr>(adaptor.getDelta()).getInt();
    if (d == 0)
      return fail(location, "delta must not be 0");
    count = d > 0 ? (l - s + d - 1) / d : (s - l - d - 1) / -d;
  } else if (auto startF = dyn_cast<FloatAttr>(adaptor.getStart())) {
    double s = startF.getValueAsDouble(),
           l = cast<FloatAttr>(adaptor.getLimit()).getValueAsDouble(),
           d = cast<FloatAttr>(adaptor.getDelta()).getValueAsDouble();
    if (d == 0)
      return fail(location, "delta must not be 0");
    count = static_cast<int64_t>(std::ceil((l - s) / d));
  } else {
    return fail(location, "start, limit and delta must be integer or float scalars");
  }
  types.push_back(RankedTensorType::get({std::max<int64_t>(count, 0)}, type));
  return success();
}

#define GET_OP_CLASSES
#include "dialects/Cleave/CleaveOps.cpp.inc"

Value cleave::splatConstant(OpBuilder &b, Location loc, RankedTensorType type, double value) {
  Type element = type.getElementType();
  Attribute scalar = isa<FloatType>(element)
                         ? Attribute(FloatAttr::get(element, value))
                         : Attribute(IntegerAttr::get(element, static_cast<int64_t>(value)));
  return ConstantOp::create(b, loc, DenseElementsAttr::get(type, scalar));
}

Value cleave::scalarConstant(OpBuilder &b, Location loc, Type element, double value) {
  return splatConstant(b, loc, RankedTensorType::get({}, element), value);
}

bool cleave::isElementwise(Operation *op) {
  return op->hasTrait<OpTrait::SameOperandsAndResultType>() ||
         isa<AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp, FmodOp, EqualOp, LessOp, GreaterOp,
             WhereOp, CastOp>(op);
}

std::optional<double> cleave::splatValue(Value value) {
  DenseElementsAttr dense;
  if (!matchPattern(value, m_Constant(&dense)) || !dense.isSplat() ||
      !isa<FloatType>(dense.getElementType()))
    return std::nullopt;
  return dense.getSplatValue<APFloat>().convertToDouble();
}
