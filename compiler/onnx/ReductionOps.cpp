//===- ReductionOps.cpp - the Reduce* operators from ONNX ----------------===//
//
// ReduceSum, ReduceMean and ReduceMax are cleave ops; ReduceL1, ReduceL2,
// ReduceSumSquare, ReduceLogSum and ReduceLogSumExp are their formulas over
// reduce_sum and reduce_max (so they need no kernels or gradients of their
// own).
//
//===----------------------------------------------------------------------===//

#include "compiler/onnx/NodeContext.h"

#include "dialects/Cleave/CleaveBuilder.h"

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
  CleaveBuilder b(n.builder, n.loc, /*foldConstants=*/true);
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
  CleaveBuilder b(n.builder, n.loc, /*foldConstants=*/true);
  auto maximum = n.buildOne<ReduceMaxOp>(x, {n.ints("axes", **axes), n.boolean("keepdims", true)});
  if (failed(maximum))
    return failure();
  Value shift = b.logSumExpShift(*maximum);
  Value sums = b.sum(b.exp(b.sub(x, shift)), **axes, keepdims(n));
  return SmallVector<Value>{b.add(
      b.log(sums), b.reshape(shift, cast<RankedTensorType>(sums.getType()).getShape()))};
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
}

} // namespace cleave
