//===- PipelineSchedule.cpp - each pipeline rank's list of actions --------===//

#include "passes/Passes.h"
#include "passes/PipelineStages.h"

#include "dialects/Cleave/CleaveDialect.h"

#include "mlir/IR/Builders.h"

namespace cleave {
#define GEN_PASS_DEF_PIPELINESCHEDULE
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

struct PipelineSchedulePass : public cleave::impl::PipelineScheduleBase<PipelineSchedulePass> {
  using PipelineScheduleBase::PipelineScheduleBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<ScheduleKind> kind = parseScheduleKind(schedule);
    if (!kind) {
      module.emitError("unknown pipeline schedule '")
          << schedule << "': the schedules are gpipe, 1f1b, interleaved and zb-h1";
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> stages;
    FailureOr<PipelineShape> shape = pipelineShape(module, stages);
    if (failed(shape))
      return signalPassFailure();
    shape->microbatches = microbatches;
    std::string error;
    std::optional<cleave::PipelineSchedule> lists =
        buildSchedule(*kind, *shape, estimateStageCosts(stages), error);
    if (!lists) {
      module.emitError(error);
      return signalPassFailure();
    }
    Builder b(module.getContext());
    SmallVector<Attribute> ranks;
    for (const std::vector<PipelineAction> &list : *lists) {
      SmallVector<Attribute> actions;
      for (const PipelineAction &action : list)
        actions.push_back(b.getStringAttr(action.str()));
      ranks.push_back(b.getArrayAttr(actions));
    }
    module->setAttr(kPipelineScheduleAttr,
                    b.getDictionaryAttr({b.getNamedAttr("kind", b.getStringAttr(schedule)),
                                         b.getNamedAttr("microbatches",
                                                        b.getI64IntegerAttr(microbatches)),
                                         b.getNamedAttr("ranks", b.getArrayAttr(ranks))}));
    if (failed(verifyPipelineSchedule(module)))
      return signalPassFailure();
  }
};

} // namespace
