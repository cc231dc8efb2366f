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

#include <numeric>

namespace cleave {

int runSchedule(const ScheduleOptions &options, llvm::raw_ostream &os) {
  std::optional<ScheduleKind> kind = parseScheduleKind(options.schedule);
  if (!kind) {
    printError({"--schedule " + options.schedule, "unknown pipeline schedule",
                "the schedules are gpipe, 1f1b, interleaved and zb-h1", kExitBadUsage});
    return kExitBadUsage;
  }
  PipelineShape shape;
  shape.ranks = options.ranks;
  shape.virtualStages = options.virtualStages;
  shape.microbatches = options.microbatches;
  const std::vector<double> &given = options.costs;
  // One triple for every stage, or one per stage.
  const bool uniform = given.size() == 3;
  if ((!uniform && given.size() != 3 * static_cast<size_t>(shape.stages())) ||
      llvm::any_of(given, [](double c) { return !(c >= 0); }) ||
      std::accumulate(given.begin(), given.end(), 0.0) <= 0) {
    printError({"--costs",
                "takes three non-negative costs F,I,W, or three for each of the " +
                    std::to_string(shape.stages()) + " stages, not all zero",
                "e.g. --costs 1,1,1", kExitBadUsage});
    return kExitBadUsage;
  }
  StageCosts costs;
  for (int64_t stage = 0; stage < shape.stages(); ++stage) {
    const size_t at = uniform ? 0 : 3 * static_cast<size_t>(stage);
    costs.forward.push_back(given[at]);
    costs.inputGrad.push_back(given[at + 1]);
    costs.weightGrad.push_back(given[at + 2]);
  }
  std::string error;
  std::optional<PipelineSchedule> schedule = buildSchedule(*kind, shape, costs, error);
  std::optional<SimulatedStep> step;
  if (schedule)
    step = simulateSchedule(*schedule, shape, costs, error);
  if (!step) {
    printError({"--schedule " + options.schedule, error, "", kExitBadUsage});
    return kExitBadUsage;
  }
  os << "schedule " << options.schedule << ": " << shape.ranks << " ranks, " << shape.virtualStages
     << " stage(s) per rank, " << shape.microbatches << " microbatches; F, I, W =";
  for (int64_t stage = 0; stage < (uniform ? 1 : shape.stages()); ++stage)
    os << (stage ? ";" : "")
       << llvm::format(" %g, %g, %g", costs.forward[stage], costs.inputGrad[stage],
                       costs.weightGrad[stage]);
  os << (uniform ? " per stage\n" : " by stage\n");
  os << "bubble: " << llvm::format("%.6f", step->bubble())
     << " (simulated idle over step time, mean over ranks)\n";
  os << "step: " << llvm::format("%.6g", step->makespan) << "\n";
  auto perRank = [&](const char *label, const std::vector<double> &values, const char *what) {
    os << label << ":";
    for (double value : values)
      os << llvm::format(" %.6g", value);
    os << " (" << what << ")\n";
  };
  perRank("busy", step->busy, "each rank's time in actions");
  perRank("ends", step->ends, "when each rank's last action ends");
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
