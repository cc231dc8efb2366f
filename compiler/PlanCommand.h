//===- PlanCommand.h - cleave plan: choose a parallel layout ----*- C++ -*-===//

#ifndef CLEAVE_COMPILER_PLANCOMMAND_H
#define CLEAVE_COMPILER_PLANCOMMAND_H

#include "compiler/Compile.h"
#include "compiler/Diagnostics.h"

#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

namespace cleave {

struct PlanOptions {
  /// The model and the step's flags (optimizer, batch size, a tp plan...);
  /// the mesh, ZeRO stage, microbatches, schedule and recomputation are what
  /// the planner chooses.
  CompileOptions compile;
  int ranks = 1;
  /// "cpu": measure this machine (cleave-calibrate); else a device file.
  std::string device = "cpu";
  /// Unset: the device's memory per rank.
  std::optional<int64_t> memoryPerRank;
  /// Write the chosen layout's compile flags here.
  std::string writeFlags;
  /// Write the device (measured or read) here, as a device file.
  std::string saveDevice;
  /// Write every layout's prediction here (JSON, docs/formats.md).
  std::string json;
};

/// One way to lay a training step over the ranks.
struct Layout {
  int64_t dp = 1, tp = 1, pp = 1;
  int zero = 0;
  int64_t microbatches = 1;
  std::string schedule = "1f1b";
  /// Stages per pp rank: 2 with the interleaved schedule, else 1.
  int64_t virtualStages = 1;
  std::string recompute = "none";

  /// "pp=2,dp=2,tp=2" (tp fastest, pp slowest; axes of one rank left out).
  std::string mesh() const;
  /// The compile flags that build it.
  std::string flags() const;
  /// Sets the step's mesh, ZeRO stage, microbatches, schedule and
  /// recomputation to this layout's.
  void applyTo(TrainOptions &training) const;
};

/// "2GiB", "512MiB", "64KiB" or a plain count of bytes; nullopt otherwise.
std::optional<int64_t> parseByteCount(const std::string &text);

/// `cleave plan`: enumerates the layouts of the model over `ranks`, compiles
/// each to its memory plan, predicts its step time on the device, prints
/// the ranked table and writes the best one's flags. Returns the exit code.
int runPlan(const PlanOptions &options, llvm::raw_ostream &os);

/// `cleave compile --mesh auto`: the best layout that fits, as runPlan ranks
/// them (its table goes to `os`).
mlir::LogicalResult chooseLayout(const PlanOptions &options, Layout &best, llvm::raw_ostream &os,
                                 UserError &error);

} // namespace cleave

#endif
