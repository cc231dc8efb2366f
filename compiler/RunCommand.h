//===- RunCommand.h - cleave run --------------------------------*- C++ -*-===//

#ifndef CLEAVE_COMPILER_RUNCOMMAND_H
#define CLEAVE_COMPILER_RUNCOMMAND_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cleave {

/// The command that starts a program on `ranks` local ranks through
/// `mpirun` (the program's own command line follows it).
std::vector<std::string> mpirunCommand(const std::string &mpirun, int ranks);

/// What `cleave run` passes to DIR/program; options left unset are not passed,
/// so the program itself decides what its mode (forward or training) accepts.
struct RunOptions {
  std::string dir;
  std::vector<std::string> inputs;
  std::string outputDir;
  /// Unset: the program's default (the cores shared among the ranks).
  std::optional<int> threads;
  /// Local ranks: above 1, the program runs under mpirun (-n).
  int ranks = 1;
  std::optional<int> repeat;
  bool stats = false;

  // Training (a program compiled with --train): docs/training.md.
  /// NAME=FILE, each possibly a comma-separated list of them.
  std::vector<std::string> data;
  std::optional<int64_t> steps;
  std::optional<double> epochs;
  bool shuffle = false;
  bool noShuffle = false;
  std::optional<uint64_t> seed;
  std::optional<int64_t> totalSteps;
  std::string logJson;
  /// The Chrome trace (docs/training.md, "Profiling"), with a span per
  /// kernel; no progress lines.
  std::string trace;
  bool traceOps = false;
  /// --trace-steps FIRST:LAST, passed on (empty: every step).
  std::string traceSteps;
  bool quiet = false;
  /// Flush subnormal numbers to zero in the CPU kernels (docs/training.md).
  bool flushSubnormals = false;
  std::optional<double> collectiveTimeout;
  /// Checkpoints (runtime/Checkpoint.h): where, how often, how many kept,
  /// and the directory to resume from.
  std::string checkpointDir;
  std::optional<int64_t> checkpointEvery, keepCheckpoints;
  bool checkpointAsync = false;
  std::string resumeDir;
  /// How many times a job whose rank died or timed out is started again
  /// from the latest complete checkpoint in checkpointDir.
  int maxRestarts = 0;
  /// A safetensors file of parameters to start from.
  std::string initFrom;
  /// After training, write the model with its trained parameters here.
  std::string saveOnnx;

  /// Where the program's stderr goes; inherited when empty.
  std::string stderrFile;
};

/// Runs DIR/program with the inputs or data sets (ONNX TensorProto .pb files
/// are turned into .npy first), on `ranks` local ranks through mpirun when
/// there are several, and returns its exit code (mpirun's: the first failing
/// rank's), or prints why it cannot.
int runProgram(const RunOptions &options);

} // namespace cleave

#endif
