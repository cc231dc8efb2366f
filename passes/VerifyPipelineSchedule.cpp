//===- VerifyPipelineSchedule.cpp - prove a schedule cannot deadlock ------===//

#include "passes/Passes.h"
#include "passes/PipelineStages.h"

namespace cleave {
#define GEN_PASS_DEF_VERIFYPIPELINESCHEDULE
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

struct VerifyPipelineSchedulePass
    : public cleave::impl::VerifyPipelineScheduleBase<VerifyPipelineSchedulePass> {
  void runOnOperation() override {
    if (failed(verifyPipelineSchedule(getOperation())))
      signalPassFailure();
  }
};

} // namespace
