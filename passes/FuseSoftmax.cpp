//===- FuseSoftmax.cpp - the attention's scale, bias, mask and softmax as one op ===//

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

/// How a chain's value is scaled: x, the constant, and whether x is divided
/// by it.
struct Scaling {
  Value x;
  double scale;
  bool divide;
};

/// How a chain's value is masked: the value, the constant put in its place,
/// and whether the mask marks the positions kept (where(mask, value,
/// constant)) rather than those hidden (where(mask, constant, value)).
struct Masking {
  Value value;
  double fill;
  bool maskKeeps;
};

/// What is added to a chain's scores: the scores and the bias.
struct Biasing {
  Value scores, bias;
};

/// A chain the pass replaces: its ops (the last first), what the fused op
/// reads (no mask, no bias: none), and its constants.
struct Chain {
  SmallVector<Operation *, 4> ops;
  Value input, mask, bias;
  double scale = 1, fill = 0;
  bool divide = false, maskKeeps = false;

  void takeScaling(const Scaling &scaling) {
    scale = scaling.scale;
    divide = scaling.divide;
  }
  void takeMasking(WhereOp where, const Masking &masking) {
    mask = where.getCondition();
    fill = masking.fill;
    maskKeeps = masking.maskKeeps;
  }
};

/// Whether `axis` is the last of `value`'s dims and its elements are f32
/// (the fused ops hold their constants as f32).
bool alongLastF32Dim(Value value, int64_t axis) {
  auto type = cast<RankedTensorType>(value.getType());
  return type.getElementType().isF32() && axis == type.getRank() - 1;
}

/// The only op that reads `op`'s result, or null.
Operation *soleUser(Operation *op) { return op->hasOneUse() ? *op->user_begin() : nullptr; }

/// `where(mask, constant, value)` or `where(mask, value, constant)` of
/// value's type (the mask broadcasts to it).
std::optional<Masking> masks(WhereOp where) {
  if (!where)
    return std::nullopt;
  for (bool maskKeeps : {false, true}) {
    Value value = maskKeeps ? where.getX() : where.getY();
    std::optional<double> fill = splatValue(maskKeeps ? where.getY() : where.getX());
    if (fill && value.getType() == where.getType())
      return Masking{value, *fill, maskKeeps};
  }
  return std::nullopt;
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

/// `add(scores, bias)` or `add(bias, scores)`, the bias broadcast to the
/// scores: the scores are an operand of the add's type that only the add
/// reads, a scaled one first if both are.
std::optional<Biasing> biases(Operation *op) {
  if (!isa_and_nonnull<AddOp>(op))
    return std::nullopt;
  std::optional<Biasing> found;
  for (unsigned i : {0, 1}) {
    Value scores = op->getOperand(i);
    if (scores.getType() != op->getResult(0).getType() || !scores.hasOneUse())
      continue;
    Biasing biasing{scores, op->getOperand(1 - i)};
    if (scales(scores.getDefiningOp()))
      return biasing;
    if (!found)
      found = biasing;
  }
  return found;
}

/// softmax(where(mask, fill, add(mul(x, scale), bias))) ending in
/// `softmax`: the product (or a division), the bias and the mask each
/// optional, one of them there.
std::optional<Chain> forwardChain(SoftmaxOp softmax) {
  if (!alongLastF32Dim(softmax.getInput(), softmax.getAxis()))
    return std::nullopt;
  Chain chain{{softmax}, softmax.getInput()};
  auto where = chain.input.getDefiningOp<WhereOp>();
  if (std::optional<Masking> masked = masks(where); masked && where->hasOneUse()) {
    chain.ops.push_back(where);
    chain.input = masked->value;
    chain.takeMasking(where, *masked);
  }
  Operation *add = chain.input.getDefiningOp();
  if (std::optional<Biasing> biased = biases(add); biased && add->hasOneUse()) {
    chain.ops.push_back(add);
    chain.input = biased->scores;
    chain.bias = biased->bias;
  }
  Operation *product = chain.input.getDefiningOp();
  if (std::optional<Scaling> scaled = scales(product); scaled && product->hasOneUse()) {
    chain.ops.push_back(product);
    chain.input = scaled->x;
    chain.takeScaling(*scaled);
  }
  if (chain.ops.size() == 1)
    return std::nullopt;
  return chain;
}

/// mul(where(mask, 0, softmax_grad(y, g)), scale) starting at `grad`: the
/// mask and the product (or a division) each optional, one of them there;
/// input is left null (the op reads y and g).
std::optional<Chain> backwardChain(SoftmaxGradOp grad) {
  if (!alongLastF32Dim(grad.getY(), grad.getAxis()))
    return std::nullopt;
  Chain chain{{grad}};
  Operation *last = grad;
  auto where = dyn_cast_or_null<WhereOp>(soleUser(grad));
  if (std::optional<Masking> masked = masks(where);
      masked && masked->value == grad.getResult() && masked->fill == 0) {
    chain.ops.insert(chain.ops.begin(), where);
    chain.takeMasking(where, *masked);
    last = where;
  }
  Operation *product = soleUser(last);
  if (std::optional<Scaling> scaled = scales(product); scaled && scaled->x == last->getResult(0)) {
    chain.ops.insert(chain.ops.begin(), product);
    chain.takeScaling(*scaled);
  }
  if (chain.ops.size() == 1)
    return std::nullopt;
  return chain;
}

struct FuseSoftmaxPass : public cleave::impl::FuseSoftmaxBase<FuseSoftmaxPass> {
  using FuseSoftmaxBase::FuseSoftmaxBase;

  /// A unit attribute that is there when `set`.
  static UnitAttr flag(OpBuilder &b, bool set) { return set ? b.getUnitAttr() : UnitAttr(); }

  /// `fused` in place of the chain's last op; the chain's ops go.
  static void replace(const Chain &chain, Value fused) {
    chain.ops.front()->getResult(0).replaceAllUsesWith(fused);
    for (Operation *op : chain.ops)
      op->erase();
  }

  void runOnOperation() override {
    SmallVector<Chain> forward;
    SmallVector<Chain> backward;
    getOperation().walk([&](Operation *op) {
      if (auto softmax = dyn_cast<SoftmaxOp>(op)) {
        if (std::optional<Chain> chain = forwardChain(softmax))
          forward.push_back(*chain);
      } else if (auto grad = dyn_cast<SoftmaxGradOp>(op)) {
        if (std::optional<Chain> chain = backwardChain(grad))
          backward.push_back(*chain);
      }
    });
    OpBuilder b(&getContext());
    for (const Chain &chain : forward) {
      Operation *last = chain.ops.front();
      b.setInsertionPoint(last);
      replace(chain, ScaledMaskedSoftmaxOp::create(
                         b, last->getLoc(), chain.input, chain.mask, chain.bias,
                         b.getF32FloatAttr(chain.scale), flag(b, chain.divide),
                         b.getF32FloatAttr(chain.fill), flag(b, chain.maskKeeps)));
    }
    for (const Chain &chain : backward) {
      auto grad = cast<SoftmaxGradOp>(chain.ops.back());
      Operation *last = chain.ops.front();
      b.setInsertionPoint(last);
      replace(chain,
              ScaledMaskedSoftmaxGradOp::create(b, grad.getLoc(), grad.getY(), grad.getGrad(),
                                                chain.mask, b.getF32FloatAttr(chain.scale),
                                                flag(b, chain.divide), flag(b, chain.maskKeeps)));
    }
  }
};

} // namespace
