//===- FoldBiasAdds.cpp - a Linear layer's bias added as its gemm writes ---===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/IR/Builders.h"

namespace cleave {
#define GEN_PASS_DEF_FOLDBIASADDS
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// The gemm whose result `value` is, directly or through one reshape that
/// keeps the rows' length (a batch of rows folded back into its dims),
/// where nothing else reads it and the gemm adds nothing yet: no c, alpha
/// 1, no activation, an f32 result. Null otherwise.
GemmOp biaslessGemm(Value value) {
  Value product = value;
  if (auto reshape = value.getDefiningOp<ReshapeOp>()) {
    product = reshape.getInput();
    ArrayRef<int64_t> shape = reshape.getShape();
    auto rows = cast<RankedTensorType>(product.getType()).getShape();
    if (shape.empty() || shape.back() != rows.back() || !product.hasOneUse())
      return GemmOp();
  }
  auto gemm = product.getDefiningOp<GemmOp>();
  if (!gemm || !value.hasOneUse() || gemm.getC() || gemm.getAlpha().convertToFloat() != 1.0f ||
      gemm.getActivation() || !gemm.getType().getElementType().isF32())
    return GemmOp();
  return gemm;
}

/// Whether `bias` is one row of `columns` f32 values (any leading dims 1).
bool isRow(Value bias, int64_t columns) {
  auto type = cast<RankedTensorType>(bias.getType());
  return type.getElementType().isF32() && type.getRank() >= 1 && type.getNumElements() == columns &&
         type.getShape().back() == columns;
}

/// An add of a row to a product, and what it becomes: the gemm with the row
/// as its c. `sum` is the add's operand that is the product (its reshape or
/// the gemm's own result).
struct BiasAdd {
  AddOp add;
  GemmOp gemm;
  Value sum, bias;
};

struct FoldBiasAddsPass : public cleave::impl::FoldBiasAddsBase<FoldBiasAddsPass> {
  using FoldBiasAddsBase::FoldBiasAddsBase;

  static void fold(const BiasAdd &found) {
    auto [add, gemm, sum, bias] = found;
    // A row made after the product: the product moves down to the add.
    Operation *row = bias.getDefiningOp();
    if (row && !row->isBeforeInBlock(gemm)) {
      gemm->moveBefore(add);
      if (Operation *reshape = sum.getDefiningOp(); reshape != gemm)
        reshape->moveBefore(add);
    }
    OpBuilder b(gemm);
    const int64_t columns = gemm.getType().getShape().back();
    if (cast<RankedTensorType>(bias.getType()).getRank() != 1)
      bias = ReshapeOp::create(b, add.getLoc(), RankedTensorType::get({columns}, b.getF32Type()),
                               bias, b.getDenseI64ArrayAttr({columns}));
    gemm.getCMutable().assign(bias);
    gemm.setBetaAttr(b.getF32FloatAttr(1.0f));
    add.replaceAllUsesWith(sum);
    add.erase();
  }

  void runOnOperation() override {
    SmallVector<BiasAdd> found;
    getOperation().walk([&](AddOp add) {
      for (unsigned i : {0u, 1u}) {
        Value sum = add->getOperand(i), bias = add->getOperand(1 - i);
        GemmOp gemm = biaslessGemm(sum);
        // The add broadcasts the row alone: its result is the product's.
        if (gemm && sum.getType() == add.getType() &&
            isRow(bias, gemm.getType().getShape().back())) {
          found.push_back({add, gemm, sum, bias});
          return;
        }
      }
    });
    for (const BiasAdd &each : found)
      fold(each);
  }
};

} // namespace
