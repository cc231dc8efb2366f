//===- AccumulateIntoProducts.cpp - accumulators added by their products --===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/IR/Builders.h"

namespace cleave {
#define GEN_PASS_DEF_ACCUMULATEINTOPRODUCTS
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// The product `value` is, when it is a gemm without c or a matrix matmul
/// that nothing but `reader` reads: what can add an accumulator as it
/// writes.
Operation *soleProduct(Value value, Operation *reader) {
  Operation *product = value.getDefiningOp();
  if (!product || !value.hasOneUse() || *value.getUsers().begin() != reader)
    return nullptr;
  if (auto gemm = dyn_cast<GemmOp>(product))
    return gemm.getC() ? nullptr : product;
  if (auto matmul = dyn_cast<MatMulOp>(product))
    return cast<RankedTensorType>(matmul.getLhs().getType()).getRank() == 2 &&
                   cast<RankedTensorType>(matmul.getRhs().getType()).getRank() == 2
               ? product
               : nullptr;
  return nullptr;
}

struct AccumulateIntoProductsPass
    : public cleave::impl::AccumulateIntoProductsBase<AccumulateIntoProductsPass> {
  void runOnOperation() override {
    getOperation().walk([](AssignOp assign) {
      auto add = assign.getValue().getDefiningOp<AddOp>();
      if (!add || add.getType() != assign.getTarget().getType())
        return;
      // slot + product, either way round.
      Value product = add.getLhs() == assign.getTarget()   ? add.getRhs()
                      : add.getRhs() == assign.getTarget() ? add.getLhs()
                                                           : Value();
      Operation *op = product ? soleProduct(product, add) : nullptr;
      auto gemm = dyn_cast_or_null<GemmOp>(op);
      // A fused activation applies after the sum it would then include.
      if (!op || product.getType() != add.getType() || (gemm && gemm.getActivation()))
        return;
      OpBuilder b(add);
      Value sum =
          GemmOp::create(b, op->getLoc(), op->getOperand(0), op->getOperand(1), assign.getTarget(),
                         b.getF32FloatAttr(gemm ? gemm.getAlpha().convertToFloat() : 1.0f),
                         b.getF32FloatAttr(1.0f), b.getBoolAttr(gemm && gemm.getTransA()),
                         b.getBoolAttr(gemm && gemm.getTransB()), StringAttr());
      add.replaceAllUsesWith(sum);
      add.erase();
      op->erase();
    });
  }
};

} // namespace
