//===- DataParallel.cpp - all-reduce the accumulators over dp --------------===//

#include "passes/Passes.h"

#include "passes/Collectives.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace cleave {
#define GEN_PASS_DEF_DATAPARALLEL
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

struct DataParallelPass : public cleave::impl::DataParallelBase<DataParallelPass> {
  using DataParallelBase::DataParallelBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<MeshAxes> layout = getMesh(module);
    if (failed(layout))
      return signalPassFailure();
    auto apply = module.lookupSymbol<func::FuncOp>("apply");
    if (!apply || apply.isExternal()) {
      module.emitError("has no @apply: run cleave-build-train-step first");
      return signalPassFailure();
    }
    if (layout->dpSize == 1)
      return;
    auto dpAxis = static_cast<shard::GridAxis>(layout->dpAxis);

    OpBuilder b(module.getContext());
    b.setInsertionPointToStart(&apply.getBody().front());
    for (BlockArgument arg : apply.getArguments()) {
      if (!apply.getArgAttr(arg.getArgNumber(), kAccumulatorAttr))
        continue;
      auto reduced = shard::AllReduceOp::create(b, arg.getLoc(), arg, kMeshName, {dpAxis},
                                                shard::ReductionKind::Sum);
      // The final zeroing still assigns to the argument itself.
      arg.replaceUsesWithIf(reduced.getResult(), [&](OpOperand &use) {
        auto assign = dyn_cast<AssignOp>(use.getOwner());
        return use.getOwner() != reduced && !(assign && use.getOperandNumber() == 0);
      });
    }
  }
};

} // namespace
