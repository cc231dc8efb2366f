//===- OrderUpdates.cpp - @apply's updates in the backward's order --------===//

#include "passes/Passes.h"

#include "passes/Collectives.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

namespace cleave {
#define GEN_PASS_DEF_ORDERUPDATES
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// One parameter's update: the op that alone reads its gradient's sum, and
/// the gradient's last write in a microbatch.
struct Update {
  Operation *op;
  Operation *finished;
};

struct OrderUpdatesPass : public cleave::impl::OrderUpdatesBase<OrderUpdatesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto apply = module.lookupSymbol<func::FuncOp>("apply");
    if (!apply)
      return;
    std::optional<SmallVector<Update>> updates = findUpdates(apply, lastMicrobatchWrites(module));
    if (!updates || updates->size() < 2)
      return;
    // Every result of an update is read after the last of them, so each
    // may move there: its operands come before it already.
    Operation *last = updates->front().op;
    for (const Update &u : *updates)
      if (last->isBeforeInBlock(u.op))
        last = u.op;
    Operation *end = last->getNextNode();
    for (const Update &u : *updates)
      for (Operation *user : u.op->getUsers())
        if (user->isBeforeInBlock(end))
          return;
    llvm::stable_sort(*updates, [](const Update &a, const Update &b) {
      return writtenBefore(a.finished, b.finished);
    });
    for (const Update &u : *updates)
      u.op->moveBefore(end);
  }

  /// The op reading each gradient's sum over dp (@apply's in-place
  /// all-reduce of a `grad:` accumulator), when each is read by one op that
  /// reads no other gradient's sum; none otherwise (the clip's norm or a
  /// ZeRO buffer reads them all).
  static std::optional<SmallVector<Update>>
  findUpdates(func::FuncOp apply, const llvm::StringMap<Operation *> &finished) {
    SmallVector<Update> updates;
    llvm::DenseSet<Operation *> readers;
    for (auto reduce : apply.getBody().front().getOps<shard::AllReduceOp>()) {
      auto arg = dyn_cast<BlockArgument>(reduce.getInput());
      auto name =
          arg ? apply.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr) : StringAttr();
      if (!name || !name.getValue().starts_with("grad:") || !isInPlace(reduce))
        continue;
      if (!reduce->hasOneUse())
        return std::nullopt;
      Operation *reader = *reduce->getUsers().begin();
      auto at = finished.find(name.getValue());
      if (!readers.insert(reader).second || at == finished.end())
        return std::nullopt;
      updates.push_back({reader, at->second});
    }
    return updates;
  }
};

} // namespace
