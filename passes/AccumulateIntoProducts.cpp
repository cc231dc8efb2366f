//===- AccumulateIntoProducts.cpp - accumulators added by their products --===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"

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

/// Whether `value` reads accumulator `slot` for an add: the slot itself,
/// or for a bf16 slot its widened copy that nothing else reads.
bool readsSlot(Value value, Value slot, bool narrow) {
  if (!narrow)
    return value == slot;
  auto widen = value.getDefiningOp<CastOp>();
  return widen && widen.getInput() == slot && value.hasOneUse();
}

struct AccumulateIntoProductsPass
    : public cleave::impl::AccumulateIntoProductsBase<AccumulateIntoProductsPass> {
  void runOnOperation() override {
    getOperation().walk([](AssignOp assign) {
      Value slot = assign.getTarget();
      // A bf16 slot (cleave-narrow-gradient-accumulators) is widened, added
      // to in f32 and the sum rounded back as it is stored.
      auto round = assign.getValue().getDefiningOp<CastOp>();
      const bool narrow = round && getElementTypeOrSelf(slot).isBF16();
      auto add = (narrow ? round.getInput() : assign.getValue()).getDefiningOp<AddOp>();
      if (!add || (narrow ? !add->hasOneUse() : add.getType() != slot.getType()))
        return;
      // slot + product, either way round.
      Value read = readsSlot(add.getLhs(), slot, narrow)   ? add.getLhs()
                   : readsSlot(add.getRhs(), slot, narrow) ? add.getRhs()
                                                           : Value();
      Value product = !read ? Value() : read == add.getLhs() ? add.getRhs() : add.getLhs();
      Operation *op = product ? soleProduct(product, add) : nullptr;
      auto gemm = dyn_cast_or_null<GemmOp>(op);
      // A fused activation applies after the sum it would then include; a
      // bf16 slot takes the f32 sum of bf16 factors (GemmOp).
      if (!op || product.getType() != add.getType() || (gemm && gemm.getActivation()) ||
          (narrow && !getElementTypeOrSelf(op->getOperand(0)).isBF16()))
        return;
      Operation *sumOp = narrow ? round.getOperation() : add.getOperation();
      OpBuilder b(sumOp);
      Value sum = GemmOp::create(b, op->getLoc(), op->getOperand(0), op->getOperand(1), slot,
                                 b.getF32FloatAttr(gemm ? gemm.getAlpha().convertToFloat() : 1.0f),
                                 b.getF32FloatAttr(1.0f), b.getBoolAttr(gemm && gemm.getTransA()),
                                 b.getBoolAttr(gemm && gemm.getTransB()), StringAttr());
      sumOp->getResult(0).replaceAllUsesWith(sum);
      sumOp->erase();
      if (narrow)
        add.erase();
      if (read != slot)
        read.getDefiningOp()->erase();
      op->erase();
    });
  }
};

} // namespace
