//===- OverlapTpSums.cpp - tp sums moving while the compute goes on -------===//

#include "passes/Passes.h"

#include "passes/Collectives.h"
#include "passes/CostModel.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace cleave {
#define GEN_PASS_DEF_OVERLAPTPSUMS
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

struct OverlapTpSumsPass : public cleave::impl::OverlapTpSumsBase<OverlapTpSumsPass> {
  void runOnOperation() override {
    if (failed(
            forEachFunctionOver(getOperation(), SplitAxis::TensorParallel,
                                [&](func::FuncOp func, int64_t tpAxis) { overlap(func, tpAxis); })))
      signalPassFailure();
  }

  /// The first of `reduce`'s readers in its block, when a product comes
  /// between the two (something to hide the sum behind); else null.
  static Operation *firstReaderAfterAProduct(shard::AllReduceOp reduce) {
    Operation *first = nullptr;
    for (Operation *user : reduce->getUsers()) {
      if (user->getBlock() != reduce->getBlock())
        return nullptr;
      if (!first || user->isBeforeInBlock(first))
        first = user;
    }
    for (Operation *op = reduce->getNextNode(); op && op != first; op = op->getNextNode())
      if (isProduct(op))
        return first;
    return nullptr;
  }

  /// Marks each sum over tp that works in its operand's buffer and has a
  /// product before its first reader `cleave.started` (the runtime queues it
  /// where it is) and waits for it, with a cleave.collective_wait, just
  /// before that reader.
  static void overlap(func::FuncOp func, int64_t tpAxis) {
    SmallVector<std::pair<shard::AllReduceOp, Operation *>> sums;
    for (auto reduce : func.getBody().front().getOps<shard::AllReduceOp>())
      if (!reduce->hasAttr(kStartedAttr) && reduce.getGridAxes().size() == 1 &&
          reduce.getGridAxes()[0] == tpAxis && sumsItsOperandInPlace(reduce))
        if (Operation *reader = firstReaderAfterAProduct(reduce))
          sums.push_back({reduce, reader});
    OpBuilder b(func.getContext());
    for (auto [reduce, reader] : sums) {
      reduce->setAttr(kStartedAttr, b.getUnitAttr());
      b.setInsertionPoint(reader);
      auto wait =
          CollectiveWaitOp::create(b, reduce.getLoc(), reduce.getResult(), reduce.getInput());
      reduce.getResult().replaceAllUsesExcept(wait.getOutput(), wait);
    }
  }
};

} // namespace
