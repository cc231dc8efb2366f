//===- OverlapReduceScatters.cpp - ZeRO's gradients scattered while the backward runs ===//

#include "passes/Passes.h"

#include "passes/Collectives.h"
#include "passes/CostModel.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

namespace cleave {
#define GEN_PASS_DEF_OVERLAPREDUCESCATTERS
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

struct OverlapReduceScattersPass
    : public cleave::impl::OverlapReduceScattersBase<OverlapReduceScattersPass> {
  void runOnOperation() override {
    if (failed(
            forEachFunctionOver(getOperation(), SplitAxis::DataParallel,
                                [&](func::FuncOp func, int64_t dpAxis) { overlap(func, dpAxis); })))
      signalPassFailure();
  }

  /// The ops that read `scatter`'s result, directly or not, in block order,
  /// if they only accumulate it (they end in assignments, and nothing else
  /// reads what they assign before `end`); else none.
  static SmallVector<Operation *> accumulation(shard::ReduceScatterOp scatter, Operation *end) {
    SetVector<Operation *> readers;
    getForwardSlice(scatter.getResult(), &readers);
    SmallVector<Operation *> ordered(readers.begin(), readers.end());
    llvm::sort(ordered, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    llvm::DenseSet<Value> targets;
    for (Operation *op : ordered) {
      if (op->hasTrait<OpTrait::IsTerminator>() || op->getBlock() != scatter->getBlock() ||
          !op->isBeforeInBlock(end))
        return {};
      if (auto assign = dyn_cast<AssignOp>(op))
        targets.insert(assign.getTarget());
      else if (op->getNumResults() == 0 || !isMemoryEffectFree(op))
        return {};
    }
    for (Operation *op = scatter->getNextNode(); op != end; op = op->getNextNode())
      if (!readers.contains(op) &&
          llvm::any_of(op->getOperands(), [&](Value v) { return targets.contains(v); }))
        return {};
    return ordered;
  }

  /// Where the wait for `scatter` goes: before the first reduce-scatter of
  /// `scatters` after the next matrix product (the next gradient's), or the
  /// function's end; null when no product follows (nothing to hide behind).
  static Operation *waitPoint(shard::ReduceScatterOp scatter,
                              ArrayRef<shard::ReduceScatterOp> scatters) {
    Operation *product = scatter->getNextNode();
    while (product && !isProduct(product))
      product = product->getNextNode();
    if (!product)
      return nullptr;
    for (shard::ReduceScatterOp next : scatters)
      if (product->isBeforeInBlock(next))
        return next;
    return product->getBlock()->getTerminator();
  }

  /// Marks each gradient's reduce-scatter over dp `cleave.started` (the
  /// runtime queues it on the background thread where it is) and moves the
  /// ops that accumulate its result, after a cleave.collective_wait, down to
  /// its waitPoint, so that it moves while the backward makes the next
  /// layer's gradient.
  void overlap(func::FuncOp func, int64_t dpAxis) {
    SmallVector<shard::ReduceScatterOp> scatters;
    for (auto scatter : func.getBody().front().getOps<shard::ReduceScatterOp>())
      if (!scatter->hasAttr(kStartedAttr) && scatter.getGridAxes().size() == 1 &&
          scatter.getGridAxes()[0] == dpAxis)
        scatters.push_back(scatter);
    OpBuilder b(func.getContext());
    for (shard::ReduceScatterOp scatter : scatters) {
      Operation *end = waitPoint(scatter, scatters);
      if (!end)
        continue;
      SmallVector<Operation *> readers = accumulation(scatter, end);
      if (readers.empty())
        continue;
      scatter->setAttr(kStartedAttr, b.getUnitAttr());
      b.setInsertionPoint(end);
      auto wait =
          CollectiveWaitOp::create(b, scatter.getLoc(), scatter.getResult(), scatter.getInput());
      scatter.getResult().replaceAllUsesExcept(wait.getOutput(), wait);
      for (Operation *op : readers)
        op->moveBefore(end);
    }
  }
};

} // namespace
