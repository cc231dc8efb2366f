//===- SplitBackward.cpp - a stage's microbatch step as forward and backward ===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace cleave {
#define GEN_PASS_DEF_SPLITBACKWARD
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// Whether an op that returns nothing belongs to the second part: for the
/// forward and backward split, a gradient sent back or a gradient
/// accumulator assigned (every accumulator but the loss's sum and count); for
/// the backward's split, a gradient accumulator assigned (the weights'
/// gradients) rather than a gradient sent back (the inputs'). Fails for any
/// other op without results.
using SecondPart = function_ref<FailureOr<bool>(func::FuncOp, Operation *)>;

FailureOr<bool> isBackwardEffect(func::FuncOp func, Operation *op) {
  if (auto send = dyn_cast<PipelineSendOp>(op))
    return send.getGradient();
  if (auto assign = dyn_cast<AssignOp>(op)) {
    // Its verifier makes the target an argument.
    unsigned n = cast<BlockArgument>(assign.getTarget()).getArgNumber();
    auto name = func.getArgAttrOfType<StringAttr>(n, kNameAttr);
    return func.getArgAttr(n, kAccumulatorAttr) && name &&
           !name.getValue().starts_with("cleave.loss_");
  }
  return op->emitError("is neither a send nor an assign: cannot tell whether it belongs to the "
                       "forward or the backward of a pipeline stage");
}

FailureOr<bool> isWeightGradientEffect(func::FuncOp func, Operation *op) {
  if (isa<PipelineSendOp>(op))
    return false;
  return isBackwardEffect(func, op);
}

/// Whether the second part makes `v` again rather than reading it stashed:
/// a constant, or a transpose or reshape of what the weights hold for the
/// whole step (a parameter, or mixed precision's copy of one) or of what is
/// itself made again. A tied output head's transposed embedding would
/// otherwise be a stash the size of the embedding per microbatch in
/// flight; made again, it folds into the products that read it.
bool remade(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return false;
  if (isa<ConstantOp>(def))
    return true;
  if (!isa<TransposeOp, ReshapeOp>(def))
    return false;
  Value source = def->getOperand(0);
  auto arg = dyn_cast<BlockArgument>(source);
  if (!arg)
    return remade(source);
  auto func = cast<func::FuncOp>(arg.getOwner()->getParentOp());
  return isParameter(arg) || func.getArgAttr(arg.getArgNumber(), kWeightCopyAttr);
}

/// The ops of `func` that the effects `second` says are not the second
/// part's need: the first part.
FailureOr<llvm::SetVector<Operation *>> firstPart(func::FuncOp func, SecondPart second) {
  llvm::SetVector<Operation *> firstOps;
  SmallVector<Operation *> worklist;
  for (Operation &op : func.getBody().front().without_terminator()) {
    if (op.getNumResults() != 0)
      continue;
    FailureOr<bool> isSecond = second(func, &op);
    if (failed(isSecond))
      return failure();
    if (!*isSecond && firstOps.insert(&op))
      worklist.push_back(&op);
  }
  while (!worklist.empty())
    for (Value v : worklist.pop_back_val()->getOperands())
      if (Operation *def = v.getDefiningOp(); def && firstOps.insert(def))
        worklist.push_back(def);
  return firstOps;
}

/// Splits `func` in two: it keeps the effects `second` says are not the
/// second part's, with what they need; a new function `name` after it takes
/// the rest. Every value `func` computes, or reads from a data input, that
/// the second part reads becomes a stash: a result of `func` and an
/// argument of the new function, both named `<prefix><i>`. Arguments of
/// other kinds (weights, state, an earlier split's stash) are arguments of
/// both.
FailureOr<func::FuncOp> splitFunction(func::FuncOp func, SecondPart second, StringRef name,
                                      StringRef prefix) {
  Block &body = func.getBody().front();
  // What each side needs, from its effects back.
  FailureOr<llvm::SetVector<Operation *>> firstPartOps = firstPart(func, second);
  if (failed(firstPartOps))
    return failure();
  llvm::SetVector<Operation *> &firstOps = *firstPartOps, secondOps;
  SmallVector<Operation *> worklist;
  for (Operation &op : body.without_terminator())
    if (op.getNumResults() == 0 && !firstOps.contains(&op) && secondOps.insert(&op))
      worklist.push_back(&op);
  while (!worklist.empty())
    for (Value v : worklist.pop_back_val()->getOperands())
      if (Operation *def = v.getDefiningOp();
          def && (!firstOps.contains(def) || remade(v)) && secondOps.insert(def))
        worklist.push_back(def);

  // The stash: the first part's values and data inputs the second reads,
  // in order of definition.
  llvm::SetVector<Value> stash;
  auto isStashed = [&](Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      auto kind = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kKindAttr);
      return kind && kind.getValue() == "input";
    }
    return firstOps.contains(v.getDefiningOp()) && !remade(v);
  };
  SmallVector<Value> candidates(body.getArguments());
  for (Operation &op : body.without_terminator())
    llvm::append_range(candidates, op.getResults());
  for (Value v : candidates)
    if (isStashed(v) &&
        llvm::any_of(v.getUsers(), [&](Operation *user) { return secondOps.contains(user); }))
      stash.insert(v);

  // The new function: the arguments it shares, then the stash.
  MLIRContext *ctx = func.getContext();
  llvm::SetVector<unsigned> sharedArgs;
  for (Operation *op : secondOps)
    for (Value v : op->getOperands())
      if (auto arg = dyn_cast<BlockArgument>(v); arg && !isStashed(arg))
        sharedArgs.insert(arg.getArgNumber());
  SmallVector<unsigned> sortedArgs(sharedArgs.begin(), sharedArgs.end());
  llvm::sort(sortedArgs);
  SmallVector<Type> argTypes;
  for (unsigned n : sortedArgs)
    argTypes.push_back(func.getArgument(n).getType());
  for (Value v : stash)
    argTypes.push_back(v.getType());
  OpBuilder b(ctx);
  b.setInsertionPointAfter(func);
  auto part = func::FuncOp::create(b, func.getLoc(), name, FunctionType::get(ctx, argTypes, {}));
  if (auto stage = func->getAttr(kStageAttr))
    part->setAttr(kStageAttr, stage);
  IRMapping mapping;
  Block *entry = part.addEntryBlock();
  for (auto [i, n] : llvm::enumerate(sortedArgs)) {
    part.setArgAttrs(i, func.getArgAttrDict(n));
    mapping.map(func.getArgument(n), entry->getArgument(i));
  }
  auto stashName = [&](size_t i) { return StringAttr::get(ctx, prefix + Twine(i)); };
  auto stashKind = StringAttr::get(ctx, "stash");
  for (auto [i, v] : llvm::enumerate(stash)) {
    unsigned n = sortedArgs.size() + i;
    part.setArgAttr(n, kNameAttr, stashName(i));
    part.setArgAttr(n, kKindAttr, stashKind);
    mapping.map(v, entry->getArgument(n));
  }
  OpBuilder inner = OpBuilder::atBlockEnd(entry);
  for (Operation &op : body.without_terminator())
    if (secondOps.contains(&op))
      inner.clone(op, mapping);
  func::ReturnOp::create(inner, func.getLoc());

  // `func` keeps its side and returns the stash.
  SmallVector<Operation *> erased;
  for (Operation &op : body.without_terminator())
    if (!firstOps.contains(&op))
      erased.push_back(&op);
  for (Operation *op : llvm::reverse(erased))
    op->erase();
  Operation *ret = body.getTerminator();
  SmallVector<Value> results(ret->getOperands());
  llvm::append_range(results, stash);
  ret->setOperands(results);
  func.setType(FunctionType::get(ctx, func.getArgumentTypes(), ValueRange(results).getTypes()));
  unsigned first = results.size() - stash.size();
  for (size_t i = 0; i < stash.size(); ++i) {
    func.setResultAttr(first + i, kNameAttr, stashName(i));
    func.setResultAttr(first + i, kKindAttr, stashKind);
  }
  return part;
}

struct SplitBackwardPass : public cleave::impl::SplitBackwardBase<SplitBackwardPass> {
  using SplitBackwardBase::SplitBackwardBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward || forward.isExternal() || !forward.getBody().hasOneBlock()) {
      module.emitError("has no @forward of one block to split into forward and backward");
      return signalPassFailure();
    }
    FailureOr<func::FuncOp> backward =
        splitFunction(forward, isBackwardEffect, "backward", "stash:");
    if (failed(backward))
      return signalPassFailure();
    for (Operation &op : forward.getBody().front())
      if (auto recv = dyn_cast<PipelineRecvOp>(op); recv && recv.getGradient()) {
        recv.emitError("is a received gradient that the stage's forward needs");
        return signalPassFailure();
      }
    if (splitWeightGradients &&
        failed(splitFunction(*backward, isWeightGradientEffect, "backward_weight", "wstash:")))
      return signalPassFailure();
  }
};

} // namespace

FailureOr<llvm::SetVector<Operation *>> cleave::stageForwardOps(func::FuncOp stage) {
  return firstPart(stage, isBackwardEffect);
}
