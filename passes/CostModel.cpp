//===- CostModel.cpp - what an op costs, as the planners estimate it ------===//

#include "passes/CostModel.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace cleave {

static int64_t elements(Value v) { return cast<RankedTensorType>(v.getType()).getNumElements(); }

/// 2 per multiply-add of a convolution whose output (or output gradient) is
/// `out` and whose weights have the shape of `w`.
static int64_t convFlops(Value out, Type w) {
  auto weights = cast<RankedTensorType>(w);
  return 2 * elements(out) * (weights.getNumElements() / weights.getDimSize(0));
}

int64_t estimateFlops(Operation *op) {
  if (auto matmul = dyn_cast<MatMulOp>(op)) {
    ArrayRef<int64_t> lhs = cast<RankedTensorType>(matmul.getLhs().getType()).getShape();
    return 2 * elements(matmul.getOutput()) *
           (matmul.getTransA() ? lhs[lhs.size() - 2] : lhs.back());
  }
  if (auto gemm = dyn_cast<GemmOp>(op)) {
    auto a = cast<RankedTensorType>(gemm.getA().getType());
    int64_t k = gemm.getTransA() ? a.getDimSize(0) : a.getDimSize(1);
    return 2 * elements(gemm.getOutput()) * k;
  }
  if (auto conv = dyn_cast<ConvOp>(op))
    return convFlops(conv.getY(), conv.getW().getType());
  if (auto grad = dyn_cast<ConvGradInputOp>(op))
    return convFlops(grad.getGrad(), grad.getW().getType());
  if (auto grad = dyn_cast<ConvGradWeightOp>(op))
    return convFlops(grad.getGrad(), grad.getOutput().getType());
  if (isView(op))
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

int64_t estimateGradientFlops(Operation *op, llvm::function_ref<bool(Value)> needsGradient) {
  return estimateFlops(op) * llvm::count_if(op->getOperands(), needsGradient);
}

namespace {
template <typename... Ops> struct OpList {
  static bool contains(Operation *op) { return isa<Ops...>(op); }
  static bool namesKernel(StringRef kernel) {
    return ((Ops::getOperationName().split('.').second == kernel) || ...);
  }
};
using Products = OpList<MatMulOp, GemmOp, ConvOp, ConvGradInputOp, ConvGradWeightOp>;
} // namespace

bool isProduct(Operation *op) { return Products::contains(op); }

bool isProductKernel(StringRef kernel) { return Products::namesKernel(kernel); }

bool isView(Operation *op) {
  return isa<ConstantOp, ReshapeOp, FlattenOp, SqueezeOp, UnsqueezeOp, IdentityOp, ElementsOp>(op);
}

int64_t estimateBytesMoved(Operation *op) {
  int64_t bytes = 0;
  auto add = [&](Value v) {
    if (auto type = dyn_cast<RankedTensorType>(v.getType()))
      bytes += type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8);
  };
  llvm::for_each(op->getOperands(), add);
  llvm::for_each(op->getResults(), add);
  return bytes;
}

} // namespace cleave
