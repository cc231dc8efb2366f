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

/// Whether an op that returns nothing belongs to the backward: a gradient
/// sent back, or a gradient accumulator assigned (every accumulator but the
/// loss's sum and count). Fails for any other op without results.
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

/// Whether the backward makes `v` again rather than reading it stashed.
bool remade(Value v) {
  Operation *def = v.getDefiningOp();
  return def && isa<ConstantOp>(def);
}

struct SplitBackwardPass : public cleave::impl::SplitBackwardBase<SplitBackwardPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward || forward.isExternal() || !forward.getBody().hasOneBlock()) {
      module.emitError("has no @forward of one block to split into forward and backward");
      return signalPassFailure();
    }
    Block &body = forward.getBody().front();

    // What each side needs, from its effects back.
    llvm::SetVector<Operation *> forwardOps, backwardOps;
    SmallVector<Operation *> worklist;
    for (Operation &op : body.without_terminator()) {
      if (op.getNumResults() != 0)
        continue;
      FailureOr<bool> backward = isBackwardEffect(forward, &op);
      if (failed(backward))
        return signalPassFailure();
      if (!*backward && forwardOps.insert(&op))
        worklist.push_back(&op);
    }
    while (!worklist.empty())
      for (Value v : worklist.pop_back_val()->getOperands())
        if (Operation *def = v.getDefiningOp(); def && forwardOps.insert(def))
          worklist.push_back(def);
    for (Operation *op : forwardOps)
      if (auto recv = dyn_cast<PipelineRecvOp>(op); recv && recv.getGradient()) {
        recv.emitError("is a received gradient that the stage's forward needs");
        return signalPassFailure();
      }
    for (Operation &op : body.without_terminator())
      if (op.getNumResults() == 0 && !forwardOps.contains(&op) && backwardOps.insert(&op))
        worklist.push_back(&op);
    while (!worklist.empty())
      for (Value v : worklist.pop_back_val()->getOperands())
        if (Operation *def = v.getDefiningOp();
            def && (!forwardOps.contains(def) || remade(v)) && backwardOps.insert(def))
          worklist.push_back(def);

    // The stash: forward values and data inputs the backward reads, in
    // order of definition.
    llvm::SetVector<Value> stash;
    auto isStashed = [&](Value v) {
      if (auto arg = dyn_cast<BlockArgument>(v)) {
        auto kind = forward.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kKindAttr);
        return kind && kind.getValue() == "input";
      }
      return forwardOps.contains(v.getDefiningOp()) && !remade(v);
    };
    SmallVector<Value> candidates(body.getArguments());
    for (Operation &op : body.without_terminator())
      llvm::append_range(candidates, op.getResults());
    for (Value v : candidates)
      if (isStashed(v) && llvm::any_of(v.getUsers(), [&](Operation *user) {
            return backwardOps.contains(user);
          }))
        stash.insert(v);

    // @backward: the weights it reads, then the stash.
    MLIRContext *ctx = module.getContext();
    llvm::SetVector<unsigned> weightArgs;
    for (Operation *op : backwardOps)
      for (Value v : op->getOperands())
        if (auto arg = dyn_cast<BlockArgument>(v); arg && !isStashed(arg))
          weightArgs.insert(arg.getArgNumber());
    SmallVector<unsigned> sortedArgs(weightArgs.begin(), weightArgs.end());
    llvm::sort(sortedArgs);
    SmallVector<Type> argTypes;
    for (unsigned n : sortedArgs)
      argTypes.push_back(forward.getArgument(n).getType());
    for (Value v : stash)
      argTypes.push_back(v.getType());
    OpBuilder b(ctx);
    b.setInsertionPointAfter(forward);
    auto backward = func::FuncOp::create(b, forward.getLoc(), "backward",
                                         FunctionType::get(ctx, argTypes, {}));
    if (auto stage = forward->getAttr(kStageAttr))
      backward->setAttr(kStageAttr, stage);
    IRMapping mapping;
    Block *entry = backward.addEntryBlock();
    for (auto [i, n] : llvm::enumerate(sortedArgs)) {
      backward.setArgAttrs(i, forward.getArgAttrDict(n));
      mapping.map(forward.getArgument(n), entry->getArgument(i));
    }
    auto stashName = [&](size_t i) { return StringAttr::get(ctx, "stash:" + Twine(i)); };
    auto stashKind = StringAttr::get(ctx, "stash");
    for (auto [i, v] : llvm::enumerate(stash)) {
      unsigned n = sortedArgs.size() + i;
      backward.setArgAttr(n, kNameAttr, stashName(i));
      backward.setArgAttr(n, kKindAttr, stashKind);
      mapping.map(v, entry->getArgument(n));
    }
    OpBuilder inner = OpBuilder::atBlockEnd(entry);
    for (Operation &op : body.without_terminator())
      if (backwardOps.contains(&op))
        inner.clone(op, mapping);
    func::ReturnOp::create(inner, forward.getLoc());

    // @forward keeps its side and returns the stash.
    SmallVector<Operation *> erased;
    for (Operation &op : body.without_terminator())
      if (!forwardOps.contains(&op))
        erased.push_back(&op);
    for (Operation *op : llvm::reverse(erased))
      op->erase();
    Operation *ret = body.getTerminator();
    SmallVector<Value> results(ret->getOperands());
    llvm::append_range(results, stash);
    ret->setOperands(results);
    forward.setType(FunctionType::get(ctx, forward.getArgumentTypes(), ValueRange(results).getTypes()));
    unsigned first = results.size() - stash.size();
    for (size_t i = 0; i < stash.size(); ++i) {
      forward.setResultAttr(first + i, kNameAttr, stashName(i));
      forward.setResultAttr(first + i, kKindAttr, stashKind);
    }
  }
};

} // namespace
