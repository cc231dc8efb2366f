//===- Training.h - the driver's training loop ------------------*- C++ -*-===//
//
// When plan.json has a "training" object, the program's forward runs the
// forward and backward of one microbatch, adding its gradients, loss sum and
// count into accumulators in the weights blob; its apply reads the learning
// rate and step number, updates the parameters and optimizer state in place
// and outputs the step's loss. The loop here feeds each step's microbatches
// from .npy data sets for a number of steps or epochs (docs/training.md).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_DRIVER_TRAINING_H
#define CLEAVE_RUNTIME_DRIVER_TRAINING_H

#include "runtime/StepWindow.h"
#include "runtime/driver/DriverSupport.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cleave::rt {

struct TrainingOptions {
  /// NAME=FILE.npy, each possibly a comma-separated list of them.
  std::vector<std::string> data;
  std::optional<int64_t> steps;
  std::optional<double> epochs;
  bool shuffle = true;
  std::optional<uint64_t> seed;
  std::optional<int64_t> totalSteps;
  std::string logJson;
  /// Where the Chrome trace of the run goes (empty: none), and whether it
  /// has a span per kernel.
  std::string trace;
  bool traceOps = false;
  /// The steps the trace keeps (--trace-steps; none given: every step).
  std::optional<StepWindow> traceSteps;
  /// No progress lines.
  bool quiet = false;
  /// The kernels' threads on each rank (reported in --log-json).
  int threads = 1;
  std::string outputDir;
  /// Leave the results staged (FileSet::keepStaged) for cleave run to put in
  /// place together with the --save-onnx model.
  bool deferCommit = false;
  /// Seconds any one collective may take before the job is ended.
  double collectiveTimeout = 300;
  /// Where checkpoints are written (runtime/Checkpoint.h); empty: none.
  std::string checkpointDir;
  /// A checkpoint after every this many steps (0: only after the last).
  int64_t checkpointEvery = 0;
  /// Complete checkpoints kept (0: all).
  int64_t keepCheckpoints = 0;
  /// Each rank's checkpoint file written on the thread "cleave-ckpt" while
  /// training goes on (ShardWriter.h), but the run's last.
  bool checkpointAsync = false;
  /// Continue from the latest complete checkpoint in this directory.
  std::string resumeDir;
  /// Start from the parameters of this safetensors file (whole tensors
  /// under their names) instead of the model's initializers.
  std::string initFrom;
};

/// Runs the training loop and returns the process exit code. `plans`: those
/// of the executable's programs (Backend::run), read from `dirs`.
int runTraining(const std::vector<std::string> &dirs, const std::vector<Plan> &plans,
                const TrainingOptions &options, Backend &backend);

/// The learning rate of step `step` (1-based) of `totalSteps`.
double learningRate(const TrainingSpec &spec, int64_t step, int64_t totalSteps);

/// Epoch `epoch`'s (0-based) order of `count` samples: Fisher-Yates driven by
/// std::mt19937_64 seeded with seed * 1000003 + epoch.
std::vector<int64_t> shuffledOrder(int64_t count, uint64_t seed, uint64_t epoch);

} // namespace cleave::rt

#endif
