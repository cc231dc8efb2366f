//===- CleaveFold.cpp - constant folding of cleave ops ------------------===//
//
// Static shapes let the importer evaluate the shape arithmetic exporters emit
// (Shape, Gather, Concat, Unsqueeze, Cast, integer math...). These folders do
// it on constant operands, for results of at most kMaxFoldedElements elements
// (splats of any size), so big tensors never get copied into the IR.
//
//===----------------------------------------------------------------------===//

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"

#include <cmath>

using namespace mlir;
using namespace cleave;

namespace {

RankedTensorType resultType(Operation *op) {
  return cast<RankedTensorType>(op->getResult(0).getType());
}

/// The constant operand, if it is a dense literal.
DenseElementsAttr dense(Attribute attr) { return dyn_cast_or_null<DenseElementsAttr>(attr); }

bool foldable(RankedTensorType type) { return type.getNumElements() <= kMaxFoldedElements; }

bool isUnsignedOrBool(Type type) {
  auto integer = dyn_cast<IntegerType>(type);
  return integer && (integer.isUnsigned() || integer.getWidth() == 1);
}

SmallVector<int64_t> toInts(DenseElementsAttr attr) {
  bool zext = isUnsignedOrBool(attr.getElementType());
  SmallVector<int64_t> values;
  for (const APInt &v : attr.getValues<APInt>())
    values.push_back(zext ? static_cast<int64_t>(v.getZExtValue()) : v.getSExtValue());
  return values;
}

SmallVector<double> toDoubles(DenseElementsAttr attr) {
  if (isa<IntegerType>(attr.getElementType())) {
    SmallVector<int64_t> ints = toInts(attr);
    return SmallVector<double>(ints.begin(), ints.end());
  }
  SmallVector<double> values;
  for (APFloat v : attr.getValues<APFloat>()) {
    bool lost;
    v.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
    values.push_back(v.convertToDouble());
  }
  return values;
}

DenseElementsAttr fromInts(RankedTensorType type, ArrayRef<int64_t> values) {
  unsigned width = type.getElementType().getIntOrFloatBitWidth();
  SmallVector<APInt> bits;
  for (int64_t v : values)
    bits.push_back(APInt(width, static_cast<uint64_t>(v), /*isSigned=*/width > 1,
                         /*implicitTrunc=*/true));
  return DenseElementsAttr::get(type, bits);
}

DenseElementsAttr fromDoubles(RankedTensorType type, ArrayRef<double> values) {
  auto element = cast<FloatType>(type.getElementType());
  SmallVector<APFloat> floats;
  for (double v : values) {
    APFloat f(v);
    bool lost;
    f.convert(element.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
    floats.push_back(f);
  }
  return DenseElementsAttr::get(type, floats);
}

/// Calls `body(index, linear)` for every multi-index of `shape` in row-major order.
void forEachIndex(ArrayRef<int64_t> shape, function_ref<void(ArrayRef<int64_t>)> body) {
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  SmallVector<int64_t> index(shape.size(), 0);
  for (int64_t n = 0; n < count; ++n) {
    body(index);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
}

int64_t linearIndex(ArrayRef<int64_t> index, ArrayRef<int64_t> shape) {
  int64_t linear = 0;
  for (auto [i, d] : llvm::zip(index, shape))
    linear = linear * d + i;
  return linear;
}

/// For each element of `outShape`, the linear index of the element of
/// `inShape` that broadcasting reads.
SmallVector<int64_t> broadcastSources(ArrayRef<int64_t> outShape, ArrayRef<int64_t> inShape) {
  SmallVector<int64_t> sources;
  size_t offset = outShape.size() - inShape.size();
  SmallVector<int64_t> inIndex(inShape.size());
  forEachIndex(outShape, [&](ArrayRef<int64_t> index) {
    for (size_t d = 0; d < inShape.size(); ++d)
      inIndex[d] = inShape[d] == 1 ? 0 : index[d + offset];
    sources.push_back(linearIndex(inIndex, inShape));
  });
  return sources;
}

/// Gathers `attr`'s elements at `sources` into a literal of `type`.
DenseElementsAttr pick(DenseElementsAttr attr, RankedTensorType type,
                       ArrayRef<int64_t> sources) {
  if (attr.isSplat())
    return DenseElementsAttr::get(type, attr.getSplatValue<Attribute>());
  auto values = attr.getValues<Attribute>();
  SmallVector<Attribute> picked;
  for (int64_t s : sources)
    picked.push_back(values[s]);
  return DenseElementsAttr::get(type, picked);
}

/// A constant `attr` whose elements a data-movement op may fold into a
/// literal of `type`: a splat of any size, else one of at most
/// kMaxFoldedElements results; null otherwise.
DenseElementsAttr movable(Attribute attr, RankedTensorType type) {
  DenseElementsAttr input = dense(attr);
  return input && (input.isSplat() || foldable(type)) ? input : DenseElementsAttr();
}

/// `input`'s elements moved into a literal of `type` (a slice, a transpose,
/// a split's piece): the element at each output index is the input's at
/// the index `toInput` writes. A splat is the splat at once.
DenseElementsAttr pickAt(DenseElementsAttr input, RankedTensorType type,
                         function_ref<void(ArrayRef<int64_t>, MutableArrayRef<int64_t>)> toInput) {
  if (input.isSplat())
    return DenseElementsAttr::get(type, input.getSplatValue<Attribute>());
  ArrayRef<int64_t> inShape = input.getType().getShape();
  SmallVector<int64_t> sources, inIndex(inShape.size());
  forEachIndex(type.getShape(), [&](ArrayRef<int64_t> index) {
    toInput(index, inIndex);
    sources.push_back(linearIndex(inIndex, inShape));
  });
  return pick(input, type, sources);
}

// Integer arithmetic wraps in two's complement, as the kernels' does: done on
// uint64_t, where overflow is defined, and truncated to the element type later.
int64_t wrappingAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t wrappingSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
int64_t wrappingMul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
int64_t wrappingNeg(int64_t a) { return wrappingSub(0, a); }

/// Division truncating toward zero; INT64_MIN / -1 wraps to INT64_MIN
/// instead of trapping. Undefined for a zero divisor: nothing folds.
std::optional<int64_t> wrappingDiv(int64_t a, int64_t b) {
  if (b == 0)
    return std::nullopt;
  if (b == -1)
    return wrappingNeg(a);
  return a / b;
}

/// Exponentiation by squaring, wrapping; a negative exponent does not fold.
std::optional<int64_t> intPow(int64_t base, int64_t exponent) {
  if (exponent < 0)
    return std::nullopt;
  int64_t result = 1;
  for (; exponent > 0; exponent >>= 1) {
    if (exponent & 1)
      result = wrappingMul(result, base);
    base = wrappingMul(base, base);
  }
  return result;
}

/// A double as an integer element, where it has one (not NaN, not out of
/// int64_t's range): other casts are undefined in ONNX and do not fold.
std::optional<int64_t> toInt(double v) {
  if (!(v >= -0x1p63 && v < 0x1p63))
    return std::nullopt;
  return static_cast<int64_t>(v);
}

/// Elementwise fold with broadcasting. `ints` and `floats` return nullopt
/// where the result is not defined (division by zero): then nothing folds.
OpFoldResult
foldElementwise(Operation *op, ArrayRef<Attribute> operands,
                function_ref<std::optional<int64_t>(ArrayRef<int64_t>)> ints,
                function_ref<std::optional<double>(ArrayRef<double>)> floats) {
  RankedTensorType type = resultType(op);
  if (!foldable(type))
    return {};
  SmallVector<DenseElementsAttr> literals;
  for (Attribute operand : operands) {
    if (!dense(operand))
      return {};
    literals.push_back(dense(operand));
  }
  bool floatMath = llvm::any_of(literals, [](DenseElementsAttr a) {
    return isa<FloatType>(a.getElementType());
  });
  if (floatMath ? !floats : !ints)
    return {};
  // Integer folds compute in int64_t: a ui64 value from 2^63 up would turn
  // negative there (comparisons, max and min would be wrong), so those stay
  // for the kernels, which compute in the element type.
  auto hasHugeUnsigned = [](DenseElementsAttr a) {
    auto integer = dyn_cast<IntegerType>(a.getElementType());
    return integer && integer.isUnsigned() && integer.getWidth() == 64 &&
           llvm::any_of(a.getValues<APInt>(), [](const APInt &v) { return v.isNegative(); });
  };
  if (llvm::any_of(literals, hasHugeUnsigned))
    return {};
  SmallVector<SmallVector<int64_t>> sources;
  for (DenseElementsAttr literal : literals)
    sources.push_back(broadcastSources(type.getShape(), literal.getType().getShape()));
  bool floatResult = isa<FloatType>(type.getElementType());
  SmallVector<int64_t> intResults;
  SmallVector<double> floatResults;
  if (floatMath) {
    SmallVector<SmallVector<double>> values;
    for (DenseElementsAttr literal : literals)
      values.push_back(toDoubles(literal));
    SmallVector<double> args(literals.size());
    for (int64_t n = 0; n < type.getNumElements(); ++n) {
      for (size_t k = 0; k < literals.size(); ++k)
        args[k] = values[k][sources[k][n]];
      std::optional<double> v = floats(args);
      if (!v)
        return {};
      if (floatResult) {
        floatResults.push_back(*v);
        continue;
      }
      std::optional<int64_t> asInt = toInt(*v);
      if (!asInt)
        return {};
      intResults.push_back(*asInt);
    }
  } else {
    SmallVector<SmallVector<int64_t>> values;
    for (DenseElementsAttr literal : literals)
      values.push_back(toInts(literal));
    SmallVector<int64_t> args(literals.size());
    for (int64_t n = 0; n < type.getNumElements(); ++n) {
      for (size_t k = 0; k < literals.size(); ++k)
        args[k] = values[k][sources[k][n]];
      std::optional<int64_t> v = ints(args);
      if (!v)
        return {};
      intResults.push_back(*v);
      floatResults.push_back(static_cast<double>(*v));
    }
  }
  return floatResult ? fromDoubles(type, floatResults) : fromInts(type, intResults);
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      *this, adaptor.getOperands(), [](ArrayRef<int64_t> a) { return wrappingNeg(a[0]); },
      [](ArrayRef<double> a) { return -a[0]; });
}

OpFoldResult SqrtOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(*this, adaptor.getOperands(), nullptr,
                         [](ArrayRef<double> a) { return std::sqrt(a[0]); });
}

OpFoldResult ReciprocalOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(*this, adaptor.getOperands(), nullptr,
                         [](ArrayRef<double> a) { return 1.0 / a[0]; });
}

OpFoldResult AbsOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      *this, adaptor.getOperands(), [](ArrayRef<int64_t> a) { return a[0] < 0 ? wrappingNeg(a[0]) : a[0]; },
      [](ArrayRef<double> a) { return std::fabs(a[0]); });
}

OpFoldResult NotOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      *this, adaptor.getOperands(), [](ArrayRef<int64_t> a) -> int64_t { return !a[0]; },
      nullptr);
}

OpFoldResult IdentityOp::fold(FoldAdaptor) { return getInput(); }

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      *this, adaptor.getOperands(), [](ArrayRef<int64_t> a) { return wrappingAdd(a[0], a[1]); },
      [](ArrayRef<double> a) { return a[0] + a[1]; });
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      *this, adaptor.getOperands(), [](ArrayRef<int64_t> a) { return wrappingSub(a[0], a[1]); },
      [](ArrayRef<double> a) { return a[0] - a[1]; });
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      *this, adaptor.getOperands(), [](ArrayRef<int64_t> a) { return wrappingMul(a[0], a[1]); },
      [](ArrayRef<double> a) { return a[0] * a[1]; });
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      *this, adaptor.getOperands(),
      [](ArrayRef<int64_t> a) { return wrappingDiv(a[0], a[1]); },
      [](ArrayRef<double> a) { return a[0] / a[1]; });
}

OpFoldResult PowOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      *this, adaptor.getOperands(),
      [](ArrayRef<int64_t> a) { return intPow(a[0], a[1]); },
      [](ArrayRef<double> a) { return std::pow(a[0], a[1]); });
}

OpFoldResult MaxOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      *this, adaptor.getOperands(), [](ArrayRef<int64_t> a) { return std::max(a[0], a[1]); },
      [](ArrayRef<double> a) { return std::isnan(a[1]) || a[1] > a[0] ? a[1] : a[0]; });
}

OpFoldResult MinOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      *this, adaptor.getOperands(), [](ArrayRef<int64_t> a) { return std::min(a[0], a[1]); },
      [](ArrayRef<double> a) { return std::isnan(a[1]) || a[1] < a[0] ? a[1] : a[0]; });
}

OpFoldResult FmodOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      *this, adaptor.getOperands(),
      [](ArrayRef<int64_t> a) -> int64_t {
        return a[1] == 0 || a[1] == -1 ? 0 : a[0] % a[1]; // x % -1 is 0 (INT64_MIN too)
      },
      [](ArrayRef<double> a) { return std::fmod(a[0], a[1]); });
}

OpFoldResult EqualOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      *this, adaptor.getOperands(),
      [](ArrayRef<int64_t> a) -> int64_t { return a[0] == a[1]; },
      [](ArrayRef<double> a) -> double { return a[0] == a[1]; });
}

OpFoldResult LessOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      *this, adaptor.getOperands(),
      [](ArrayRef<int64_t> a) -> int64_t { return a[0] < a[1]; },
      [](ArrayRef<double> a) -> double { return a[0] < a[1]; });
}

OpFoldResult GreaterOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      *this, adaptor.getOperands(),
      [](ArrayRef<int64_t> a) -> int64_t { return a[0] > a[1]; },
      [](ArrayRef<double> a) -> double { return a[0] > a[1]; });
}

OpFoldResult WhereOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      *this, adaptor.getOperands(),
      [](ArrayRef<int64_t> a) { return a[0] ? a[1] : a[2]; },
      [](ArrayRef<double> a) { return a[0] != 0.0 ? a[1] : a[2]; });
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  bool toBool = getTo().isInteger(1);
  return foldElementwise(
      *this, adaptor.getOperands(),
      [toBool](ArrayRef<int64_t> a) -> int64_t { return toBool ? a[0] != 0 : a[0]; },
      [toBool](ArrayRef<double> a) -> double {
        return toBool ? a[0] != 0.0 : a[0];
      });
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

/// Same elements, new shape.
static OpFoldResult foldReinterpret(Operation *op, Attribute input) {
  if (!dense(input))
    return {};
  return dense(input).reshape(resultType(op));
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  return foldReinterpret(*this, adaptor.getInput());
}

OpFoldResult FlattenOp::fold(FoldAdaptor adaptor) {
  return foldReinterpret(*this, adaptor.getInput());
}

OpFoldResult SqueezeOp::fold(FoldAdaptor adaptor) {
  return foldReinterpret(*this, adaptor.getInput());
}

OpFoldResult UnsqueezeOp::fold(FoldAdaptor adaptor) {
  return foldReinterpret(*this, adaptor.getInput());
}

OpFoldResult ExpandOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr input = movable(adaptor.getInput(), getType());
  if (!input)
    return {};
  return pick(input, getType(), broadcastSources(getType().getShape(), input.getType().getShape()));
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr input = movable(adaptor.getInput(), getType());
  if (!input)
    return {};
  return pickAt(input, getType(), [&](ArrayRef<int64_t> index, MutableArrayRef<int64_t> in) {
    for (size_t d = 0; d < in.size(); ++d)
      in[d] = getStarts()[d] + index[d] * getSteps()[d];
  });
}

/// Integer products of constants only (CumSum of a constant, as OPT counts
/// its positions, is a product with a triangle of ones): exact, wrapping as
/// the kernel does. Float products are left to the kernels, whose order of
/// summation the fold would not repeat. A batch of rows times one matrix,
/// untransposed.
OpFoldResult MatMulOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr lhs = dense(adaptor.getLhs()), rhs = dense(adaptor.getRhs());
  RankedTensorType type = getType();
  if (!lhs || !rhs || getTransA() || getTransB() || !foldable(type) ||
      !isa<IntegerType>(type.getElementType()) || isUnsignedOrBool(type.getElementType()) ||
      lhs.getType().getRank() < 2 || rhs.getType().getRank() != 2)
    return {};
  ArrayRef<int64_t> rhsShape = rhs.getType().getShape();
  const int64_t k = rhsShape[0], n = rhsShape[1], rows = lhs.getNumElements() / k;
  SmallVector<int64_t> a = toInts(lhs), b = toInts(rhs), product(rows * n, 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < k; ++i)
      for (int64_t c = 0; c < n; ++c)
        product[r * n + c] =
            wrappingAdd(product[r * n + c], wrappingMul(a[r * k + i], b[i * n + c]));
  return fromInts(type, product);
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr input = movable(adaptor.getInput(), getType());
  if (!input)
    return {};
  return pickAt(input, getType(), [&](ArrayRef<int64_t> index, MutableArrayRef<int64_t> in) {
    for (auto [d, from] : llvm::enumerate(getPerm()))
      in[from] = index[d];
  });
}

LogicalResult SplitOp::fold(FoldAdaptor adaptor, SmallVectorImpl<OpFoldResult> &results) {
  DenseElementsAttr input =
      movable(adaptor.getInput(), cast<RankedTensorType>(getInput().getType()));
  if (!input)
    return failure();
  const int64_t axis = getAxis();
  int64_t offset = 0;
  for (Value output : getOutputs()) {
    auto type = cast<RankedTensorType>(output.getType());
    results.push_back(
        pickAt(input, type, [&](ArrayRef<int64_t> index, MutableArrayRef<int64_t> in) {
          llvm::copy(index, in.begin());
          in[axis] += offset;
        }));
    offset += type.getDimSize(axis);
  }
  return success();
}

OpFoldResult GatherOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr data = dense(adaptor.getData());
  DenseElementsAttr indices = dense(adaptor.getIndices());
  RankedTensorType type = getType();
  if (!data || !indices || !foldable(type))
    return {};
  ArrayRef<int64_t> dataShape = data.getType().getShape();
  int64_t axis = getAxis(), extent = dataShape[axis];
  SmallVector<int64_t> indexValues = toInts(indices);
  for (int64_t &i : indexValues) {
    if (i < -extent || i >= extent)
      return {};
    i = i < 0 ? i + extent : i;
  }
  ArrayRef<int64_t> indexShape = indices.getType().getShape();
  size_t indexRank = indexShape.size();
  SmallVector<int64_t> sources, dataIndex(dataShape.size());
  forEachIndex(type.getShape(), [&](ArrayRef<int64_t> index) {
    for (int64_t d = 0; d < axis; ++d)
      dataIndex[d] = index[d];
    dataIndex[axis] = indexValues[linearIndex(index.slice(axis, indexRank), indexShape)];
    for (size_t d = axis + 1; d < dataShape.size(); ++d)
      dataIndex[d] = index[d - 1 + indexRank];
    sources.push_back(linearIndex(dataIndex, dataShape));
  });
  return pick(data, type, sources);
}

OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  RankedTensorType type = getType();
  if (!foldable(type))
    return {};
  SmallVector<Attribute> values;
  // Row-major over the output: the dims before `axis` select a slab, and each
  // input contributes its whole extent along `axis` onwards to each slab.
  ArrayRef<int64_t> shape = type.getShape();
  int64_t axis = getAxis();
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= shape[d];
  SmallVector<SmallVector<Attribute>> inputs;
  for (Attribute operand : adaptor.getInputs()) {
    if (!dense(operand))
      return {};
    auto range = dense(operand).getValues<Attribute>();
    inputs.emplace_back(range.begin(), range.end());
  }
  for (int64_t o = 0; o < outer; ++o) {
    for (const SmallVector<Attribute> &input : inputs) {
      int64_t slab = input.size() / outer;
      values.append(input.begin() + o * slab, input.begin() + (o + 1) * slab);
    }
  }
  return DenseElementsAttr::get(type, values);
}

//===----------------------------------------------------------------------===//
// Constants and generators
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

OpFoldResult ConstantOfShapeOp::fold(FoldAdaptor) {
  return DenseElementsAttr::get(getType(), ArrayRef<Attribute>{getValue()});
}

OpFoldResult ShapeOp::fold(FoldAdaptor) {
  ArrayRef<int64_t> shape = cast<RankedTensorType>(getInput().getType()).getShape();
  return fromInts(getType(), shape.slice(getStart(), getEnd() - getStart()));
}

OpFoldResult RangeOp::fold(FoldAdaptor) {
  RankedTensorType type = getType();
  if (!foldable(type))
    return {};
  int64_t count = type.getNumElements();
  if (auto start = dyn_cast<IntegerAttr>(getStart())) {
    int64_t s = start.getInt(), d = cast<IntegerAttr>(getDelta()).getInt();
    SmallVector<int64_t> values;
    for (int64_t n = 0; n < count; ++n)
      values.push_back(wrappingAdd(s, wrappingMul(n, d)));
    return fromInts(type, values);
  }
  double s = cast<FloatAttr>(getStart()).getValueAsDouble();
  double d = cast<FloatAttr>(getDelta()).getValueAsDouble();
  SmallVector<double> values;
  for (int64_t n = 0; n < count; ++n)
    values.push_back(s + n * d);
  return fromDoubles(type, values);
}
