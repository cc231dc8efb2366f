//===- FuseActivations.cpp - activations applied as their producers write ===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/IR/Builders.h"

#include <cmath>
#include <optional>

namespace cleave {
#define GEN_PASS_DEF_FUSEACTIVATIONS
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// Whether `value` is the constant `expected` (to float's precision).
bool isConstant(Value value, double expected) {
  std::optional<double> actual = splatValue(value);
  return actual && std::abs(*actual - expected) <= 1e-6 * std::abs(expected);
}

/// The operand of the two-operand `op` other than `known`, which is one of
/// them.
Value otherOperand(Operation *op, Value known) {
  return op->getOperand(0) == known ? op->getOperand(1) : op->getOperand(0);
}

/// The operand of the commutative two-operand `op` that is not the
/// constant `constant` (the other being that constant), or null.
Value besideConstant(Operation *op, double constant) {
  for (unsigned i : {0u, 1u})
    if (isConstant(op->getOperand(i), constant))
      return op->getOperand(1 - i);
  return Value();
}

/// The ops of GELU's erf form ending in `y`, (x (erf(x / sqrt 2) + 1)) 0.5
/// (as torch exports F.gelu), the last first, each read by the next alone;
/// empty when `y` is not one. x is the first operand of the last op (the
/// division).
SmallVector<Operation *> erfGelu(Value y) {
  auto outer = y.getDefiningOp<MulOp>();
  auto inner = outer ? besideConstant(outer, 0.5).getDefiningOp<MulOp>() : MulOp();
  if (!inner)
    return {};
  for (Value x : inner->getOperands()) {
    auto add = otherOperand(inner, x).getDefiningOp<AddOp>();
    auto erf = add ? besideConstant(add, 1.0).getDefiningOp<ErfOp>() : ErfOp();
    auto div = erf ? erf.getInput().getDefiningOp<DivOp>() : DivOp();
    if (!div || div.getLhs() != x || !isConstant(div.getRhs(), std::sqrt(2.0)))
      continue;
    SmallVector<Operation *> chain{outer, inner, add, erf, div};
    if (llvm::all_of(ArrayRef(chain).drop_front(), [](Operation *op) { return op->hasOneUse(); }))
      return chain;
  }
  return {};
}

struct FuseActivationsPass : public cleave::impl::FuseActivationsBase<FuseActivationsPass> {
  using FuseActivationsBase::FuseActivationsBase;

  /// `producer` (a conv or gemm without an activation) with `activation`,
  /// in place of `last`, the activation's result; `chain` (its ops, last
  /// first) goes.
  static void fuse(Operation *producer, StringRef activation, ArrayRef<Operation *> chain) {
    producer->setAttr("activation", StringAttr::get(producer->getContext(), activation));
    chain.front()->getResult(0).replaceAllUsesWith(producer->getResult(0));
    for (Operation *op : chain)
      op->erase();
  }

  static bool takesActivation(Operation *op) {
    return op && isa<ConvOp, GemmOp>(op) && !op->getAttr("activation");
  }

  void runOnOperation() override {
    SmallVector<std::pair<Operation *, SmallVector<Operation *>>> relus, gelus;
    getOperation().walk([&](Operation *op) {
      if (auto relu = dyn_cast<ReluOp>(op)) {
        Operation *producer = relu.getInput().getDefiningOp();
        if (takesActivation(producer) && producer->hasOneUse())
          relus.push_back({producer, {relu}});
        return;
      }
      SmallVector<Operation *> chain =
          op->getNumResults() == 1 ? erfGelu(op->getResult(0)) : SmallVector<Operation *>();
      if (chain.empty())
        return;
      Value x = chain.back()->getOperand(0);
      auto gemm = x.getDefiningOp<GemmOp>();
      // The gemm is read by the division and the inner product alone.
      if (takesActivation(gemm) && llvm::all_of(x.getUsers(), [&](Operation *user) {
            return user == chain.back() || user == chain[1];
          }))
        gelus.push_back({gemm, chain});
    });
    for (auto &[producer, chain] : relus)
      fuse(producer, "relu", chain);
    for (auto &[producer, chain] : gelus)
      fuse(producer, "gelu", chain);
  }
};

} // namespace
