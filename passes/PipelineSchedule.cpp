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

/// The stage costs the lists were built from, for a reader of the module.
DictionaryAttr flopsAttr(Builder &b, const StageCosts &costs) {
  return b.getDictionaryAttr(
      {b.getNamedAttr("forward", b.getDenseF64ArrayAttr(costs.forward)),
       b.getNamedAttr("input_grad", b.getDenseF64ArrayAttr(costs.inputGrad)),
       b.getNamedAttr("weight_grad", b.getDenseF64ArrayAttr(costs.weightGrad))});
}

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
    const StageCosts costs = estimateStageCosts(stages);
    std::optional<cleave::PipelineSchedule> lists = buildSchedule(*kind, *shape, costs, error);
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
    module->setAttr(
        kPipelineScheduleAttr,
        b.getDictionaryAttr({b.getNamedAttr("kind", b.getStringAttr(schedule)),
                             b.getNamedAttr("microbatches", b.getI64IntegerAttr(microbatches)),
                             b.getNamedAttr("ranks", b.getArrayAttr(ranks)),
                             b.getNamedAttr("estimated_flops", flopsAttr(b, costs))}));
    if (failed(verifyPipelineSchedule(module)))
      return signalPassFailure();
  }
};

} // namespace
