//===- CostModel.cpp - what an op costs, as the planners estimate it ------===//

#include "passes/CostModel.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace cleave {

static int64_t elements(Value v) { return cast<RankedTensorType>(v.getType()).getNumElements(); }

int64_t estimateFlops(Operation *op) {
  if (auto matmul = dyn_cast<MatMulOp>(op)) {
    auto lhs = cast<RankedTensorType>(matmul.getLhs().getType());
    return 2 * elements(matmul.getOutput()) * lhs.getShape().back();
  }
  if (auto gemm = dyn_cast<GemmOp>(op)) {
    auto a = cast<RankedTensorType>(gemm.getA().getType());
    int64_t k = gemm.getTransA() ? a.getDimSize(0) : a.getDimSize(1);
    return 2 * elements(gemm.getOutput()) * k;
  }
  if (auto conv = dyn_cast<ConvOp>(op)) {
    auto w = cast<RankedTensorType>(conv.getW().getType());
    return 2 * elements(conv.getY()) * (w.getNumElements() / w.getDimSize(0));
  }
  if (isa<ConstantOp, ReshapeOp, FlattenOp, SqueezeOp, UnsqueezeOp, IdentityOp>(op))
    return 0;
  // One operation per element and instruction ("op a b;op c>...").
  if (auto fused = dyn_cast<FusedElementwiseOp>(op))
    return elements(fused.getResult(0)) * (1 + fused.getProgram().count(';'));
  int64_t flops = 0;
  for (Value result : op->getResults())
    if (isa<RankedTensorType>(result.getType()))
      flops += elements(result);
  return flops;
}

} // namespace cleave
