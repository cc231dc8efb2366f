//===- ReductionOps.cpp - ReduceSum, ReduceMean, ReduceMax from ONNX -----===//

#include "compiler/onnx/NodeContext.h"

using namespace mlir;

namespace cleave {
namespace {

/// ReduceSum takes axes as an input from opset 13, the others from 18.
template <typename OpTy> Results importReduce(NodeContext &n, int64_t axesInputSince) {
  int64_t rank = n.rank(n.input(0));
  auto axes = n.axesOperand(axesInputSince, 1);
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

} // namespace

void populateReductionImporters(OpImporterTable &table) {
  table.add("ReduceSum", [](NodeContext &n) { return importReduce<ReduceSumOp>(n, 13); }, 1, 2,
            {1});
  table.add("ReduceMean", [](NodeContext &n) { return importReduce<ReduceMeanOp>(n, 18); }, 1,
            2, {1});
  table.add("ReduceMax", [](NodeContext &n) { return importReduce<ReduceMaxOp>(n, 18); }, 1, 2,
            {1});
}

} // namespace cleave
