//===- SinkWidenedSums.cpp - each widened gradient summed where it is read -===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

namespace cleave {
#define GEN_PASS_DEF_SINKWIDENEDSUMS
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// The widened copy of an argument that `reduce` alone reads, or null.
CastOp widenedArgument(shard::AllReduceOp reduce) {
  auto widen = reduce.getInput().getDefiningOp<CastOp>();
  if (!widen || !widen->hasOneUse() || !isa<BlockArgument>(widen.getInput()))
    return {};
  auto from = cast<RankedTensorType>(widen.getInput().getType()).getElementType();
  auto to = cast<RankedTensorType>(widen.getType()).getElementType();
  return from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth() ? widen : CastOp();
}

struct SinkWidenedSumsPass : public cleave::impl::SinkWidenedSumsBase<SinkWidenedSumsPass> {
  void runOnOperation() override {
    getOperation().walk([](func::FuncOp func) {
      if (func.isExternal())
        return;
      for (auto reduce : llvm::make_early_inc_range(func.getBody().getOps<shard::AllReduceOp>())) {
        CastOp widen = widenedArgument(reduce);
        if (!widen || reduce->use_empty())
          continue;
        // The first reader of the sum, unless the argument is assigned
        // before it (its old value is what is summed).
        Operation *destination = nullptr;
        for (Operation *op = reduce->getNextNode(); op && !destination; op = op->getNextNode()) {
          auto assign = dyn_cast<AssignOp>(op);
          if ((assign && assign.getTarget() == widen.getInput()) ||
              llvm::is_contained(op->getOperands(), reduce.getResult()))
            destination = op;
        }
        if (!destination || destination == reduce->getNextNode())
          continue;
        widen->moveBefore(destination);
        reduce->moveBefore(destination);
      }
    });
  }
};

} // namespace
