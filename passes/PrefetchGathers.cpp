//===- PrefetchGathers.cpp - ZeRO 3's gathers started a segment early ------===//

#include "passes/Passes.h"

#include "passes/Collectives.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

namespace cleave {
#define GEN_PASS_DEF_PREFETCHGATHERS
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// Ops that only move or convert a gathered parameter (a gather's padding
/// sliced off, its shape restored) or make a constant: they are not the
/// compute a gather can hide behind.
bool isGatherSide(Operation *op, const llvm::DenseSet<Value> &gathered) {
  if (isa<shard::AllGatherOp, ConstantOp>(op))
    return true;
  if (!isa<ReshapeOp, SliceOp, CastOp, FlattenOp, SqueezeOp, UnsqueezeOp, IdentityOp>(op))
    return false;
  return llvm::all_of(op->getOperands(), [&](Value v) { return gathered.contains(v); });
}

/// The gathers worth starting early: over the dp axis, of a stored slice
/// (an argument the function never writes).
SmallVector<shard::AllGatherOp> prefetchable(func::FuncOp func, int64_t dpAxis) {
  Block &body = func.getBody().front();
  llvm::DenseSet<Value> written;
  for (auto assign : body.getOps<AssignOp>())
    written.insert(assign.getTarget());
  SmallVector<shard::AllGatherOp> gathers;
  for (auto gather : body.getOps<shard::AllGatherOp>()) {
    auto source = dyn_cast<BlockArgument>(gather.getInput());
    if (!gather->hasAttr(kStartedAttr) && source && !written.contains(source) &&
        gather.getGridAxes().size() == 1 && gather.getGridAxes()[0] == dpAxis)
      gathers.push_back(gather);
  }
  return gathers;
}

struct PrefetchGathersPass : public cleave::impl::PrefetchGathersBase<PrefetchGathersPass> {
  void runOnOperation() override {
    if (failed(forEachFunctionOver(
            getOperation(), SplitAxis::DataParallel,
            [&](func::FuncOp func, int64_t dpAxis) { prefetch(func, dpAxis); })))
      signalPassFailure();
  }

  /// Moves each gather up to just after the previous compute segment's
  /// gathers (those before the last compute op ahead of it: an op that is
  /// not gather-side), where it starts on the background thread, and reads
  /// it through a cleave.collective_wait where it was. A function's first
  /// segment's gathers have nothing to hide behind and stay.
  void prefetch(func::FuncOp func, int64_t dpAxis) {
    SmallVector<shard::AllGatherOp> gathers = prefetchable(func, dpAxis);
    if (gathers.size() < 2)
      return;
    Block &body = func.getBody().front();
    llvm::DenseSet<Value> gatherSideValues;
    llvm::DenseSet<Operation *> gatherSide, chosen;
    for (Operation &op : body)
      if (isGatherSide(&op, gatherSideValues)) {
        gatherSide.insert(&op);
        gatherSideValues.insert(op.getResults().begin(), op.getResults().end());
      }
    for (shard::AllGatherOp gather : gathers)
      chosen.insert(gather);

    // Each gather with the last gather of the segment before its own.
    SmallVector<std::pair<shard::AllGatherOp, Operation *>> moves;
    Operation *lastGather = nullptr, *previousSegmentEnd = nullptr;
    bool computeSinceGather = false;
    for (Operation &op : body) {
      if (chosen.contains(&op)) {
        if (computeSinceGather)
          previousSegmentEnd = lastGather;
        computeSinceGather = false;
        if (previousSegmentEnd)
          moves.push_back({cast<shard::AllGatherOp>(op), previousSegmentEnd});
        lastGather = &op;
      } else if (lastGather && !gatherSide.contains(&op)) {
        computeSinceGather = true;
      }
    }

    // A moved gather's place is its wait's; the gathers moved behind the
    // same one go in their order.
    llvm::DenseMap<Operation *, Operation *> placeOf, lastMovedBehind;
    OpBuilder b(func.getContext());
    for (auto [gather, segmentEnd] : moves) {
      Operation *anchor = placeOf.lookup(segmentEnd);
      if (!anchor)
        anchor = segmentEnd;
      b.setInsertionPoint(gather);
      auto wait =
          CollectiveWaitOp::create(b, gather.getLoc(), gather.getResult(), gather.getInput());
      gather.getResult().replaceAllUsesExcept(wait.getOutput(), wait);
      gather->setAttr(kStartedAttr, b.getUnitAttr());
      Operation *&behind = lastMovedBehind[anchor];
      gather->moveAfter(behind ? behind : anchor);
      behind = gather;
      placeOf[gather] = wait;
    }
  }
};

} // namespace
