//===- SplitLoss.cpp - a mean loss as a sum and a count -------------------===//

#include "passes/Passes.h"
#include "passes/Autodiff.h"

#include "dialects/Cleave/CleaveBuilder.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace cleave {
#define GEN_PASS_DEF_SPLITLOSS
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// The weight each target contributes to a mean class loss's denominator:
/// weight[target] (1 without weights), 0 where the target is ignore_index.
Value targetWeights(OpBuilder &b, Location loc, Value targets, Value weights,
                    std::optional<int64_t> ignoreIndex, FloatType type) {
  auto targetType = cast<RankedTensorType>(targets.getType());
  Value valid;
  Value safeTargets = targets;
  if (ignoreIndex) {
    Type index = targetType.getElementType();
    Value ignored = scalarConstant(b, loc, index, static_cast<double>(*ignoreIndex));
    valid = NotOp::create(b, loc, EqualOp::create(b, loc, targets, ignored));
    // An ignored target may be out of range, so it gathers class 0 instead.
    Value zero = scalarConstant(b, loc, index, 0.0);
    safeTargets = WhereOp::create(b, loc, valid, targets, zero);
  }
  Value perTarget;
  if (weights)
    perTarget = GatherOp::create(b, loc, weights, safeTargets, b.getI64IntegerAttr(0));
  if (valid) {
    Value mask = CastOp::create(b, loc, valid, type);
    perTarget = perTarget ? MulOp::create(b, loc, perTarget, mask).getResult() : mask;
  }
  if (!perTarget) // every target counts once
    return scalarConstant(b, loc, type, static_cast<double>(targetType.getNumElements()));
  return CleaveBuilder(b, loc).sumAll(perTarget);
}

struct SplitLossPass : public cleave::impl::SplitLossBase<SplitLossPass> {
  using SplitLossBase::SplitLossBase;

  /// The sum and the count whose quotient is `loss`, built before `ret`.
  std::pair<Value, Value> split(OpBuilder &b, Value loss) {
    auto type = cast<FloatType>(cast<RankedTensorType>(loss.getType()).getElementType());
    Location loc = loss.getLoc();
    Operation *def = loss.getDefiningOp();
    if (auto sce = dyn_cast_or_null<SoftmaxCrossEntropyLossOp>(def);
        sce && sce.getReduction() == "mean") {
      Value sum = SoftmaxCrossEntropyLossOp::create(b, loc, sce.getScores(), sce.getLabels(),
                                                    sce.getWeights(), b.getStringAttr("sum"),
                                                    sce.getIgnoreIndexAttr())
                      .getLoss();
      return {sum, targetWeights(b, loc, sce.getLabels(), sce.getWeights(),
                                 sce.getIgnoreIndex(), type)};
    }
    if (auto nll = dyn_cast_or_null<NegativeLogLikelihoodLossOp>(def);
        nll && nll.getReduction() == "mean") {
      Value sum = NegativeLogLikelihoodLossOp::create(b, loc, nll.getInput(), nll.getTarget(),
                                                      nll.getWeight(), b.getStringAttr("sum"),
                                                      nll.getIgnoreIndexAttr());
      return {sum, targetWeights(b, loc, nll.getTarget(), nll.getWeight(),
                                 nll.getIgnoreIndex(), type)};
    }
    if (auto mean = dyn_cast_or_null<ReduceMeanOp>(def)) {
      Value input = mean.getInput();
      auto inputType = cast<RankedTensorType>(input.getType());
      Value sum = ReduceSumOp::create(b, loc, input, mean.getAxesAttr(), mean.getKeepdimsAttr());
      int64_t reduced = inputType.getNumElements() /
                        cast<RankedTensorType>(loss.getType()).getNumElements();
      return {sum, scalarConstant(b, loc, type, static_cast<double>(reduced))};
    }
    // Not a mean cleave can see into: each microbatch's loss counts once.
    return {loss, scalarConstant(b, loc, type, 1.0)};
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || !func.getBody().hasOneBlock())
      return;
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    auto index = findLossResult(func, loss, "to take as the loss");
    if (failed(index))
      return signalPassFailure();

    OpBuilder b(ret);
    StringAttr lossName = func.getResultAttrOfType<StringAttr>(*index, kNameAttr);
    auto [sum, count] = split(b, ret.getOperand(*index));
    ret->setOperands({sum, count});
    MLIRContext *ctx = func.getContext();
    func.setType(FunctionType::get(ctx, func.getArgumentTypes(), ret.getOperandTypes()));
    // The sum remembers the loss's name: the step reports sum / count under it.
    NamedAttrList sumAttrs, countAttrs;
    sumAttrs.set(kNameAttr, b.getStringAttr("loss.sum"));
    sumAttrs.set(kLossAttr, lossName ? lossName : b.getStringAttr("loss"));
    countAttrs.set(kNameAttr, b.getStringAttr("loss.count"));
    DictionaryAttr resultAttrs[] = {sumAttrs.getDictionary(ctx), countAttrs.getDictionary(ctx)};
    func.setAllResultAttrs(resultAttrs);
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(func.getBody().front())))
      if (isOpTriviallyDead(&op))
        op.erase();
  }
};

} // namespace
