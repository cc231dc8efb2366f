//===- ReductionOps.cpp - the Reduce* operators, arg extrema, scans, TopK -===//
//
// ReduceSum, ReduceMean, ReduceMax, ReduceProd and TopK are cleave ops;
// ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp,
// ReduceMin, ArgMax, ArgMin and CumSum are their formulas over reduce_sum,
// reduce_max and matmul (so they need no kernels or gradients of their own).
//
//===----------------------------------------------------------------------===//

#include "compiler/onnx/NodeContext.h"

using namespace mlir;

namespace cleave {
namespace {

/// The dims a Reduce* node reduces, normalized (none for a scalar input), or
/// nullopt when it is a no-op (empty axes with noop_with_empty_axes). Axes
/// are an input from opset `axesInputSince` (ReduceSum 13, the others 18), an
/// attribute before.
FailureOr<std::optional<SmallVector<int64_t>>> reducedAxes(NodeContext &n,
                                                           int64_t axesInputSince) {
  int64_t rank = n.rank(n.input(0));
  auto axes = n.axesOperand(axesInputSince, 1);
  if (failed(axes))
    return failure();
  if (*axes && !(*axes)->empty()) {
    auto normalized = n.normalizeAxes(**axes, rank);
    if (failed(normalized))
      return failure();
    return std::optional<SmallVector<int64_t>>(*normalized);
  }
  if (n.getInt("noop_with_empty_axes", 0) != 0)
    return std::optional<SmallVector<int64_t>>();
  return std::optional<SmallVector<int64_t>>(llvm::to_vector(llvm::seq<int64_t>(0, rank)));
}

bool keepdims(NodeContext &n) { return n.getInt("keepdims", 1) != 0; }

template <typename OpTy> Results importReduce(NodeContext &n, int64_t axesInputSince) {
  auto axes = reducedAxes(n, axesInputSince);
  if (failed(axes))
    return failure();
  if (!*axes || (*axes)->empty()) // a no-op, or a scalar input, which reduces to itself
    return n.build<IdentityOp>(n.input(0));
  return n.build<OpTy>(n.input(0), {n.ints("axes", **axes), n.boolean("keepdims", keepdims(n))});
}

/// How a decomposed reduction computes: `before` of each element, summed,
/// then `after` of each sum. A no-op node gives its input, as ONNX's spec
/// and onnxruntime do (ReduceSumSquare's function body would square it).
struct SumFormula {
  llvm::function_ref<Value(CleaveBuilder &, Value)> before, after;
};

Value same(CleaveBuilder &, Value x) { return x; }
Value square(CleaveBuilder &b, Value x) { return b.mul(x, x); }

Results importSumFormula(NodeContext &n, bool floatOnly, SumFormula formula) {
  // Abs, Mul and reduce_sum admit the summable types; sqrt and log floats.
  auto summable = [](Type t) {
    return t.isF32() || t.isF64() || t.isInteger(32) || t.isInteger(64);
  };
  if (failed(floatOnly ? n.requireFloat(0)
                       : n.requireElementType(0, summable, "f32, f64 and 32- and 64-bit integers")))
    return failure();
  auto axes = reducedAxes(n, 18);
  if (failed(axes))
    return failure();
  CleaveBuilder b = n.decomposer();
  Value x = n.input(0);
  if (!*axes)
    return n.build<IdentityOp>(x);
  Value terms = formula.before(b, x);
  Value sums = (*axes)->empty() ? terms : b.sum(terms, **axes, keepdims(n));
  return SmallVector<Value>{formula.after(b, sums)};
}

/// log(sum(exp(x))) as log(sum(exp(x - m))) + m with m the maximum over the
/// axes (CleaveBuilder::logSumExpShift): a +inf element makes the result
/// +inf, all -inf or no elements -inf.
Results importReduceLogSumExp(NodeContext &n) {
  if (failed(n.requireFloat(0)))
    return failure();
  auto axes = reducedAxes(n, 18);
  if (failed(axes))
    return failure();
  Value x = n.input(0);
  if (!*axes || (*axes)->empty()) // a no-op, or a scalar: log(exp(x)) is x
    return n.build<IdentityOp>(x);
  CleaveBuilder b = n.decomposer();
  auto maximum = n.buildOne<ReduceMaxOp>(x, {n.ints("axes", **axes), n.boolean("keepdims", true)});
  if (failed(maximum))
    return failure();
  Value shift = b.logSumExpShift(*maximum);
  Value sums = b.sum(b.exp(b.sub(x, shift)), **axes, keepdims(n));
  return SmallVector<Value>{b.add(
      b.log(sums), b.reshape(shift, cast<RankedTensorType>(sums.getType()).getShape()))};
}

/// ~x for integers (all ones minus x: no overflow, signed or not), not x
/// for bools, -x for floats: an order-reversing map that is its own inverse
/// and exact on every value, so min(x) = flip(max(flip(x))).
Value flipOrder(NodeContext &n, CleaveBuilder &b, Value x) {
  Type element = n.elementType(x);
  if (element.isInteger(1))
    return b.logicalNot(x);
  if (auto integer = dyn_cast<IntegerType>(element)) {
    auto ones = DenseElementsAttr::get(RankedTensorType::get({}, integer),
                                       APInt::getAllOnes(integer.getWidth()));
    return b.sub(ConstantOp::create(n.builder, n.loc, ones), x);
  }
  return b.neg(x);
}

/// The minimum over `axes` as the maximum of the order flipped (NaN wins,
/// as in reduce_max; an empty reduction gives the largest value).
FailureOr<Value> minimumOver(NodeContext &n, Value x, ArrayRef<int64_t> axes, bool keep) {
  CleaveBuilder b = n.decomposer();
  auto maximum = n.buildOne<ReduceMaxOp>(flipOrder(n, b, x),
                                         {n.ints("axes", axes), n.boolean("keepdims", keep)});
  if (failed(maximum))
    return failure();
  return flipOrder(n, b, *maximum);
}

Results importReduceMin(NodeContext &n) {
  auto axes = reducedAxes(n, 18);
  if (failed(axes))
    return failure();
  if (!*axes || (*axes)->empty())
    return n.build<IdentityOp>(n.input(0));
  // reduce_max checks the element type; the flips admit what it admits.
  auto comparable = [](Type t) { return t.isF32() || t.isF64() || t.isInteger(); };
  if (failed(n.requireElementType(0, comparable, "numbers and bools")))
    return failure();
  auto minimum = minimumOver(n, n.input(0), **axes, keepdims(n));
  if (failed(minimum))
    return failure();
  return SmallVector<Value>{*minimum};
}

/// ArgMax, ArgMin: the first (or with select_last_index the last) index
/// along `axis` where x equals its maximum (minimum), as numpy's argmax; a
/// NaN is the extremum, so the first NaN wins. Indices of the extrema are
/// selected from an iota and reduced with reduce_max: the last is the
/// largest index, the first the negated largest negated index.
Results importArgExtremum(NodeContext &n, bool isMax) {
  auto numeric = [](Type t) { return t.isF32() || t.isF64() || (t.isInteger() && !t.isInteger(1)); };
  if (failed(n.requireElementType(0, numeric, "numbers")))
    return failure();
  Value x = n.input(0);
  ArrayRef<int64_t> shape = n.shape(x);
  auto axis = n.normalizeAxis(n.getInt("axis", 0), shape.size());
  if (failed(axis))
    return failure();
  CleaveBuilder b = n.decomposer();
  FailureOr<Value> extremum =
      isMax ? n.buildOne<ReduceMaxOp>(x, {n.ints("axes", {*axis}), n.boolean("keepdims", true)})
            : minimumOver(n, x, {*axis}, true);
  if (failed(extremum))
    return failure();
  Value hit = b.equal(x, *extremum);
  if (isa<FloatType>(n.elementType(x)))
    hit = b.where(b.logicalNot(b.equal(x, x)), b.scalar(n.builder.getI1Type(), 1.0), hit);
  int64_t extent = shape[*axis];
  SmallVector<int64_t> iotaShape(shape.size(), 1), iota;
  iotaShape[*axis] = extent;
  bool last = n.getInt("select_last_index", 0) != 0;
  for (int64_t i = 0; i < extent; ++i)
    iota.push_back(last ? i : -i);
  Value positions = n.indexConstant(iotaShape, iota);
  Value candidates = b.where(hit, positions, b.scalar(n.builder.getI64Type(), -1.0 - extent));
  auto best = n.buildOne<ReduceMaxOp>(
      candidates, {n.ints("axes", {*axis}), n.boolean("keepdims", n.getInt("keepdims", 1) != 0)});
  if (failed(best))
    return failure();
  return SmallVector<Value>{last ? *best : b.neg(*best)};
}

/// CumSum as a product with a triangle of ones over `axis` (moved last):
/// exact for integers, and for floats the same sums in another order. The
/// matrix is the axis' length squared, so a long axis costs quadratic time.
Results importCumSum(NodeContext &n) {
  auto isMatrix = [](Type t) {
    return t.isF32() || t.isF64() || t.isSignlessInteger(32) || t.isSignlessInteger(64);
  };
  if (failed(n.requireElementType(0, isMatrix, "f32, f64, i32 and i64")))
    return failure();
  auto axisValue = n.constantInt(1, "axis");
  if (failed(axisValue))
    return failure();
  Value x = n.input(0);
  int64_t rank = n.rank(x);
  auto axis = n.normalizeAxis(*axisValue, rank);
  if (failed(axis))
    return failure();
  bool exclusive = n.getInt("exclusive", 0) != 0, reverse = n.getInt("reverse", 0) != 0;
  int64_t extent = n.shape(x)[*axis];
  // triangle[j][i] = 1 where element j counts in the sum at i.
  auto matrixType = RankedTensorType::get({extent, extent}, n.elementType(x));
  SmallVector<Attribute> ones;
  Attribute one = isa<FloatType>(n.elementType(x))
                      ? Attribute(FloatAttr::get(n.elementType(x), 1.0))
                      : Attribute(IntegerAttr::get(n.elementType(x), 1));
  Attribute zero = isa<FloatType>(n.elementType(x))
                       ? Attribute(FloatAttr::get(n.elementType(x), 0.0))
                       : Attribute(IntegerAttr::get(n.elementType(x), 0));
  for (int64_t j = 0; j < extent; ++j)
    for (int64_t i = 0; i < extent; ++i) {
      bool counts = reverse ? (exclusive ? j > i : j >= i) : (exclusive ? j < i : j <= i);
      ones.push_back(counts ? one : zero);
    }
  Value triangle = ConstantOp::create(n.builder, n.loc, DenseElementsAttr::get(matrixType, ones));
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(perm[*axis], perm[rank - 1]);
  CleaveBuilder b = n.decomposer();
  Value moved = *axis == rank - 1 ? x : b.transpose(x, perm);
  auto sums = n.buildOne<MatMulOp>({moved, triangle});
  if (failed(sums))
    return failure();
  return SmallVector<Value>{*axis == rank - 1 ? *sums : b.transpose(*sums, perm)};
}

/// TopK (11+): K is a constant input; the results are always sorted, which
/// `sorted` = 0 leaves to the implementation.
Results importTopK(NodeContext &n) {
  auto k = n.constantInt(1, "K");
  if (failed(k))
    return failure();
  auto axis = n.normalizeAxis(n.getInt("axis", -1), n.rank(n.input(0)));
  if (failed(axis))
    return failure();
  return n.build<TopKOp>(n.input(0), {n.i64("k", *k), n.i64("axis", *axis),
                                      n.boolean("largest", n.getInt("largest", 1) != 0)});
}

} // namespace

void populateReductionImporters(OpImporterTable &table) {
  table.add("ReduceSum", [](NodeContext &n) { return importReduce<ReduceSumOp>(n, 13); }, 1, 2,
            {1});
  table.add("ReduceMean", [](NodeContext &n) { return importReduce<ReduceMeanOp>(n, 18); }, 1,
            2, {1});
  table.add("ReduceMax", [](NodeContext &n) { return importReduce<ReduceMaxOp>(n, 18); }, 1, 2,
            {1});
  table.add("ReduceL1", [](NodeContext &n) {
    return importSumFormula(n, false, {[](CleaveBuilder &b, Value x) { return b.abs(x); }, same});
  }, 1, 2, {1});
  table.add("ReduceL2", [](NodeContext &n) {
    return importSumFormula(n, true, {square, [](CleaveBuilder &b, Value s) { return b.sqrt(s); }});
  }, 1, 2, {1});
  table.add("ReduceSumSquare", [](NodeContext &n) {
    return importSumFormula(n, false, {square, same});
  }, 1, 2, {1});
  table.add("ReduceLogSum", [](NodeContext &n) {
    return importSumFormula(n, true, {same, [](CleaveBuilder &b, Value s) { return b.log(s); }});
  }, 1, 2, {1});
  table.add("ReduceLogSumExp", importReduceLogSumExp, 1, 2, {1});
  table.add("ReduceMin", importReduceMin, 1, 2, {1});
  table.add("ReduceProd", [](NodeContext &n) { return importReduce<ReduceProdOp>(n, 18); }, 1, 2,
            {1});
  table.add("TopK", importTopK, 2, 2, {1});
  table.add("ArgMax", [](NodeContext &n) { return importArgExtremum(n, true); }, 1, 1);
  table.add("ArgMin", [](NodeContext &n) { return importArgExtremum(n, false); }, 1, 1);
  table.add("CumSum", importCumSum, 2, 2, {1});
}

} // namespace cleave
