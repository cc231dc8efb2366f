//===- FuseSoftmax.cpp - the attention's scale, mask and softmax as one op ===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/IR/Builders.h"

#include <optional>

namespace cleave {
#define GEN_PASS_DEF_FUSESOFTMAX
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// A chain the pass replaces: its ops (the last first), what the fused op
/// reads, and its constants.
struct Chain {
  SmallVector<Operation *, 3> ops;
  Value input, mask;
  double scale = 1, fill = 0;
  bool divide = false;
};

/// How a chain's value is scaled: x, the constant, and whether x is divided
/// by it.
struct Scaling {
  Value x;
  double scale;
  bool divide;
};

/// Whether `axis` is the last of `value`'s dims and its elements are f32
/// (the fused ops hold their constants as f32).
bool alongLastF32Dim(Value value, int64_t axis) {
  auto type = cast<RankedTensorType>(value.getType());
  return type.getElementType().isF32() && axis == type.getRank() - 1;
}

/// `where(mask, constant, value)` of value's type (the mask broadcasts to
/// it) that one op alone reads: the constant.
std::optional<double> masks(WhereOp where, Value value) {
  if (!where || where.getY() != value || where.getType() != value.getType() || !where->hasOneUse())
    return std::nullopt;
  return splatValue(where.getX());
}

/// `mul(x, constant)`, `mul(constant, x)` or `div(x, constant)` of x's
/// type.
std::optional<Scaling> scales(Operation *op) {
  if (!isa_and_nonnull<MulOp, DivOp>(op))
    return std::nullopt;
  // A product's constant may be either operand; a division's is the divisor.
  bool divide = isa<DivOp>(op);
  for (unsigned i = divide ? 1 : 0; i < 2; ++i) {
    Value x = op->getOperand(1 - i);
    std::optional<double> factor = splatValue(op->getOperand(i));
    if (factor && x.getType() == op->getResult(0).getType())
      return Scaling{x, *factor, divide};
  }
  return std::nullopt;
}

/// softmax(where(mask, fill, mul(x, scale))) (div, or neither) ending in
/// `softmax`.
std::optional<Chain> forwardChain(SoftmaxOp softmax) {
  if (!alongLastF32Dim(softmax.getInput(), softmax.getAxis()))
    return std::nullopt;
  auto where = softmax.getInput().getDefiningOp<WhereOp>();
  std::optional<double> fill = where ? masks(where, where.getY()) : std::nullopt;
  if (!fill)
    return std::nullopt;
  Chain chain{{softmax, where}, where.getY(), where.getCondition(), 1, *fill};
  Operation *product = where.getY().getDefiningOp();
  if (std::optional<Scaling> scaled = scales(product); scaled && product->hasOneUse()) {
    chain.ops.push_back(product);
    chain.input = scaled->x;
    chain.scale = scaled->scale;
    chain.divide = scaled->divide;
  }
  return chain;
}

/// mul(where(mask, 0, softmax_grad(y, g)), scale) (div, or neither)
/// starting at `grad`; input is left null (the op reads y and g).
std::optional<Chain> backwardChain(SoftmaxGradOp grad) {
  if (!alongLastF32Dim(grad.getY(), grad.getAxis()) || !grad->hasOneUse())
    return std::nullopt;
  auto where = dyn_cast<WhereOp>(*grad->user_begin());
  std::optional<double> zero = where ? masks(where, grad) : std::nullopt;
  if (!zero || *zero != 0)
    return std::nullopt;
  Chain chain{{where, grad}, Value(), where.getCondition(), 1, 0};
  Operation *product = *where->user_begin();
  if (std::optional<Scaling> scaled = scales(product); scaled && scaled->x == where.getResult()) {
    chain.ops.insert(chain.ops.begin(), product);
    chain.scale = scaled->scale;
    chain.divide = scaled->divide;
  }
  return chain;
}

struct FuseSoftmaxPass : public cleave::impl::FuseSoftmaxBase<FuseSoftmaxPass> {
  using FuseSoftmaxBase::FuseSoftmaxBase;

  /// `fused` in place of the chain's last op; the chain's ops go.
  static void replace(const Chain &chain, Value fused) {
    chain.ops.front()->getResult(0).replaceAllUsesWith(fused);
    for (Operation *op : chain.ops)
      op->erase();
  }

  void runOnOperation() override {
    SmallVector<Chain> forward;
    SmallVector<std::pair<SoftmaxGradOp, Chain>> backward;
    getOperation().walk([&](Operation *op) {
      if (auto softmax = dyn_cast<SoftmaxOp>(op)) {
        if (std::optional<Chain> chain = forwardChain(softmax))
          forward.push_back(*chain);
      } else if (auto grad = dyn_cast<SoftmaxGradOp>(op)) {
        if (std::optional<Chain> chain = backwardChain(grad))
          backward.push_back({grad, *chain});
      }
    });
    OpBuilder b(&getContext());
    for (const Chain &chain : forward) {
      Operation *last = chain.ops.front();
      b.setInsertionPoint(last);
      replace(chain, ScaledMaskedSoftmaxOp::create(b, last->getLoc(), chain.input, chain.mask,
                                                   b.getF32FloatAttr(chain.scale),
                                                   chain.divide ? b.getUnitAttr() : UnitAttr(),
                                                   b.getF32FloatAttr(chain.fill)));
    }
    for (auto &[grad, chain] : backward) {
      Operation *last = chain.ops.front();
      b.setInsertionPoint(last);
      replace(chain,
              ScaledMaskedSoftmaxGradOp::create(b, grad.getLoc(), grad.getY(), grad.getGrad(),
                                                chain.mask, b.getF32FloatAttr(chain.scale),
                                                chain.divide ? b.getUnitAttr() : UnitAttr()));
    }
  }
};

} // namespace
