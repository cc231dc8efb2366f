//===- ScheduleCommand.cpp - cleave schedule ------------------------------===//
//
// The pipeline schedules without a model: the simulator that builds and
// verifies a compiled pipeline's lists, on any number of ranks and
// microbatches, so a schedule can be judged past the machines at hand.
//
//===----------------------------------------------------------------------===//

#include "compiler/ScheduleCommand.h"

#include "compiler/Diagnostics.h"
#include "passes/PipelineSimulator.h"

#include "llvm/Support/Format.h"

namespace cleave {

int runSchedule(const ScheduleOptions &options, llvm::raw_ostream &os) {
  std::optional<ScheduleKind> kind = parseScheduleKind(options.schedule);
  if (!kind) {
    printError({"--schedule " + options.schedule, "unknown pipeline schedule",
                "the schedules are gpipe, 1f1b, interleaved and zb-h1", kExitBadUsage});
    return kExitBadUsage;
  }
  if (options.costs.size() != 3 ||
      llvm::any_of(options.costs, [](double c) { return !(c >= 0); }) ||
      options.costs[0] + options.costs[1] + options.costs[2] <= 0) {
    printError({"--costs", "takes three non-negative costs F,I,W, not all zero", "e.g. --costs 1,1,1",
                kExitBadUsage});
    return kExitBadUsage;
  }
  PipelineShape shape;
  shape.ranks = options.ranks;
  shape.virtualStages = options.virtualStages;
  shape.microbatches = options.microbatches;
  StageCosts costs = StageCosts::uniform(shape.stages(), options.costs[0], options.costs[1],
                                         options.costs[2]);
  std::string error;
  std::optional<PipelineSchedule> schedule = buildSchedule(*kind, shape, costs, error);
  std::optional<SimulatedStep> step;
  if (schedule)
    step = simulateSchedule(*schedule, shape, costs, error);
  if (!step) {
    printError({"--schedule " + options.schedule, error, "", kExitBadUsage});
    return kExitBadUsage;
  }
  os << "schedule " << options.schedule << ": " << shape.ranks << " ranks, "
     << shape.virtualStages << " stage(s) per rank, " << shape.microbatches
     << " microbatches; F, I, W = " << llvm::format("%g, %g, %g", options.costs[0],
                                                    options.costs[1], options.costs[2])
     << " per stage\n";
  os << "bubble: " << llvm::format("%.6f", step->bubble())
     << " (simulated idle over step time, mean over ranks)\n";
  os << "step: " << llvm::format("%.6g", step->makespan) << "\n";
  if (options.actions)
    for (auto [rank, list] : llvm::enumerate(*schedule)) {
      os << "rank " << rank << ":";
      for (const PipelineAction &action : list)
        os << " " << action.str();
      os << "\n";
    }
  return 0;
}

} // namespace cleave
