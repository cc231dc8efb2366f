//===- ScheduleCommand.h - cleave schedule ----------------------*- C++ -*-===//

#ifndef CLEAVE_COMPILER_SCHEDULECOMMAND_H
#define CLEAVE_COMPILER_SCHEDULECOMMAND_H

#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace cleave {

struct ScheduleOptions {
  std::string schedule = "1f1b";
  int64_t ranks = 2;
  int64_t virtualStages = 1;
  int64_t microbatches = 4;
  /// F, I and W of every stage (B = I + W), or of each stage in turn.
  std::vector<double> costs{1, 1, 1};
  /// Print every rank's list of actions too.
  bool actions = false;
};

/// Builds the schedule (passes/PipelineSimulator.h) for a chain of P x V
/// stages of the given costs, simulates one step and prints the bubble
/// (idle over step time, averaged over the ranks), the step's length, each
/// rank's busy time and end and, with `actions`, every rank's list. Returns the exit code.
int runSchedule(const ScheduleOptions &options, llvm::raw_ostream &os);

} // namespace cleave

#endif
