//===- DriverSupport.h - the plan and helpers both driver modes share -*- C++ -*-===//
//
// Internal to the driver: plan.json as read, the one-line error format, device
// buffers, the weights blob, and writing a file whole or not at all.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_DRIVER_DRIVERSUPPORT_H
#define CLEAVE_RUNTIME_DRIVER_DRIVERSUPPORT_H

#include "runtime/Files.h"
#include "runtime/driver/Driver.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cleave::rt {

struct TensorSpec {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};

/// How the learning rate moves over the steps (docs/training.md).
enum class LrSchedule { Constant, Linear, Cosine };

/// plan.json's optional "training" object: the program's forward runs one
/// microbatch, its apply one update (docs/training.md).
struct TrainingSpec {
  /// Algorithm "training_info": the model's own algorithm is the whole step,
  /// one forward with an empty apply; no learning rate, schedule or step
  /// inputs (they live in the graph), and gradAccum 1.
  bool trainingInfo = false;
  std::string optimizer;
  double lr = 0;
  LrSchedule schedule = LrSchedule::Constant;
  int64_t warmup = 0;
  /// Indices into Plan::inputs.
  std::vector<size_t> dataInputs;
  size_t lrInput = 0, stepInput = 0;
  /// Index into Plan::outputs.
  size_t lossOutput = 0;
  /// Dim 0 of every data input: the samples of one forward.
  int64_t microBatch = 0;
  /// Forwards (microbatches) per apply.
  int64_t gradAccum = 1;
  /// Samples per step: microBatch * gradAccum.
  int64_t batchSize = 0;
};

/// plan.json's optional "mesh" object: the device mesh a training step is
/// partitioned over.
struct MeshSpec {
  /// Axis names and sizes, in order (row-major over the ranks).
  std::vector<std::pair<std::string, int>> axes;
  /// Sums over ranks in rank order (bit-identical to one device).
  bool deterministic = false;
};

struct Plan {
  std::vector<TensorSpec> inputs, outputs;
  int64_t arenaBytes = 0;
  int64_t weightsBytes = 0;
  std::string weightsFile;
  std::optional<TrainingSpec> training;
  std::optional<MeshSpec> mesh;
};

/// Prints `cleave: error: WHERE: WHAT` (and `note: NOTE`) to stderr and
/// returns `code`.
int fail(const std::string &where, const std::string &what, int code,
         const std::string &note = "");

/// "8x32", or "scalar" for [].
std::string shapeText(const std::vector<int64_t> &shape);

/// Reads and checks plan.json; on failure sets `error` (without the path).
bool readPlan(const std::string &path, Plan &plan, std::string &error);

/// Reads DIR/weights.bin into `weights`, or prints why it cannot and returns
/// the exit code.
int loadWeights(const std::string &dir, const Plan &plan, std::vector<char> &weights);


/// Whether `path` can be created (by creating and removing `path.partial`).
bool canCreate(const std::string &path, std::string &error);

/// Device memory owned for the length of the run.
class Buffer {
public:
  Buffer(Backend &backend, std::size_t bytes)
      : backend(backend), memory(static_cast<char *>(backend.allocate(bytes))) {}
  ~Buffer() { backend.release(memory); }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  char *get() const { return memory; }

private:
  Backend &backend;
  char *memory;
};

/// Sends stderr to /dev/null until restore() or the end of the scope, when
/// `silence` is set: ranks other than 0 of a job check the same plan and data
/// as rank 0, so only rank 0 reports what is wrong with them.
class StderrSilencer {
public:
  explicit StderrSilencer(bool silence);
  ~StderrSilencer() { restore(); }
  StderrSilencer(const StderrSilencer &) = delete;
  StderrSilencer &operator=(const StderrSilencer &) = delete;
  void restore();

private:
  int saved = -1;
};

/// A tensor view of `spec` at `data`.
Tensor tensorAt(void *data, const TensorSpec &spec);

} // namespace cleave::rt

#endif
