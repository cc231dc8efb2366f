//===- Driver.h - the main of every generated program -----------*- C++ -*-===//
//
// A compiled model directory holds plan.json, weights.bin and program. The
// driver reads the plan, loads weights and inputs (.npy), runs the forward
// through a Backend, writes outputs as .npy and reports what it measured.
// When the plan has a "training" section, the forward is one training step
// and the driver runs the training loop instead (Training.h).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_DRIVER_DRIVER_H
#define CLEAVE_RUNTIME_DRIVER_DRIVER_H

#include "runtime/Allocations.h"
#include "runtime/ProgramEntry.h"
#include "runtime/Tensor.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cleave::rt {

namespace comm {
class BackgroundCollectives;
class Communicator;
}
class ProgramMarks;

/// Where tensors live and how the generated forward is called.
class Backend {
public:
  virtual ~Backend() = default;
  virtual const char *name() const = 0;
  /// Memory for the program (counted in allocations()).
  virtual void *allocate(std::size_t bytes) = 0;
  virtual void release(void *memory, std::size_t bytes) = 0;
  /// What the program holds: the backend's buffers and kernels' scratch.
  virtual const AllocationMeter &allocations() const = 0;
  virtual void copyToDevice(void *device, const void *host, std::size_t bytes) = 0;
  /// Host memory that the input thread gathers microbatches into
  /// (runtime/driver/InputPrefetch.h): on the CPU the program's own memory,
  /// which it reads in place (readsStaging); pinned memory on CUDA, which
  /// copies to the device fastest.
  virtual void *allocateStaging(std::size_t bytes) = 0;
  virtual void releaseStaging(void *memory, std::size_t bytes) = 0;
  virtual bool readsStaging() const = 0;
  virtual void copyToHost(void *host, const void *device, std::size_t bytes) = 0;
  virtual void setThreads(int threads) = 0;
  /// Makes the kernels' arithmetic, on `threads` threads, flush subnormal
  /// numbers to zero (--flush-subnormals); false where the backend cannot.
  virtual bool flushSubnormals(int threads) = 0;
  /// The training step of the next calls (named by collectives' errors),
  /// the random stream that keys their dropout masks (runtime/Random.h),
  /// and whether they are the step's last microbatch (which starts the
  /// gradient buckets' background all-reduces; the other collectives start
  /// on every call) and their function's first call in the step (which
  /// writes the accumulators that its products add to on later calls).
  virtual void setStep(int64_t step, uint64_t randomStream, bool lastMicrobatch,
                       bool firstCall) = 0;
  /// Where the program's all_reduce_start, all_gather_start and
  /// reduce_scatter_start queue their collectives (null: none); over
  /// duplicates of communicators()'.
  virtual void setBackground(comm::BackgroundCollectives *background) = 0;
  /// The communicators of the mesh axes, in the mesh's order, for the
  /// program's collectives: used as they are (host memory) or, by a device
  /// backend, to start its own over the same ranks.
  virtual void setCommunicators(const std::vector<comm::Communicator *> &axes) = 0;
  /// The communicators the program's collectives go through, one per mesh
  /// axis: setCommunicators' own, or the backend's over the same ranks.
  virtual std::vector<comm::Communicator *> communicators() const = 0;
  /// Where the program's marks go (runtime/StepContext.h) and whether it
  /// marks every kernel; null: no marks are taken. A device backend waits
  /// for its queued work before it passes a mark on, so that a mark's time
  /// is when the work before it is done.
  virtual void setMarks(ProgramMarks *marks, bool ops) = 0;
  /// The phase of @apply the next calls run (runtime/StepContext.h's
  /// applyPhase), and the operand of the next sum over pp the last call
  /// left (null: none, its phase was the last), taken.
  virtual void setApplyPhase(int phase) = 0;
  virtual void *takeStagePartial() = 0;
  /// Runs an entry point (runtime/ProgramEntry.h) of the executable's
  /// program `program` (0, or on a rank of an interleaved pipeline the
  /// index of the stage among its own) and waits for it to finish.
  virtual void run(size_t program, ProgramEntryPoint entry, char *arena, char *weights,
                   const Tensor *inputs, Tensor *outputs) = 0;
};

/// Parses the command line, runs (a forward, or a training run), and returns
/// the process exit code: 0, 1 for bad input (a missing, unknown or
/// mismatched input or data set, a plan.json that is damaged or another
/// compile's, a non-finite loss, no memory for what the plan asks), 2 for
/// bad usage, 3 for an internal error, 128 + N when stopped by signal N
/// (SIGTERM, SIGINT, SIGHUP).
/// `programs`: the identities of the executable's programs (its
/// `cleave_programs`), checked against the plans they run.
int runDriver(int argc, char **argv, const std::vector<ProgramIdentity> &programs,
              Backend &backend);

} // namespace cleave::rt

#endif
