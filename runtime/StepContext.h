//===- StepContext.h - what a kernel knows of its step ----------*- C++ -*-===//
//
// The part of a kernel's Context that the CPU and CUDA backends share: the
// driver sets it before each microbatch the same way for both, and the
// backend points it at the run's allocation meter.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_STEPCONTEXT_H
#define CLEAVE_RUNTIME_STEPCONTEXT_H

#include "runtime/Allocations.h"
#include "runtime/Tensor.h"

#include <cstdint>
#include <vector>

namespace cleave::rt::comm {
class BackgroundCollectives;
class Communicator;
}

namespace cleave::rt {

/// Where a running program says which part of its step it is in, for the
/// run's timeline (runtime/Timeline.h): the lowered @forward of a training
/// step calls markBackward after its loss, and every kernel call is preceded
/// by markOp (passes/LowerToEmitC.cpp). The driver implements it; a device
/// backend waits for its queued work before passing a mark on.
class ProgramMarks {
public:
  virtual ~ProgramMarks() = default;
  /// The backward of the microbatch begins (its loss is computed).
  virtual void backward() = 0;
  /// The kernel `label` ("gemm /fc1/Gemm") is called next.
  virtual void op(const char *label) = 0;
};

struct StepContext {
  /// Which microbatch of which training step runs (runtime/Random.h's
  /// trainingStream; 0 outside training): part of every dropout mask's key.
  uint64_t randomStream = 0;
  /// The training step (what a collective's error names); -1 outside.
  int64_t step = -1;
  /// The communicator of each mesh axis, in the mesh's order (all_reduce's
  /// `axis`); empty without a mesh. Owned by the driver.
  std::vector<comm::Communicator *> axes;
  /// Where all_reduce_start and all_gather_start queue their collectives
  /// (runtime/comm/BackgroundCollectives.h); null: the program starts none.
  /// Owned by the driver.
  comm::BackgroundCollectives *background = nullptr;
  /// Whether the calls that run now are the step's last microbatch, whose
  /// backward starts the sums.
  bool lastMicrobatch = false;
  /// Whether the calls that run now are their function's first in the
  /// step, where a gemm marked `firstCallWrites` writes its accumulator.
  bool firstCall = false;
  /// Where kernels count the scratch they allocate for a call (a
  /// convolution's columns, runtime/ConvScratch.h); null: not counted.
  AllocationMeter *allocations = nullptr;
  /// Where the program's marks go; null (no --trace): none are taken.
  ProgramMarks *marks = nullptr;
  /// Whether markOp passes the kernels' marks on (--trace-ops).
  bool markOps = false;
  /// On a rank of an interleaved pipeline, the phase of @apply a call runs
  /// (LowerToEmitC's `phased-apply`): phase k runs the kernels from its
  /// k-th sum over pp to the next, and leaves the next sum's f32 operand
  /// here, for the driver to add the rank's stages' together first; null
  /// when the phase was the last.
  int applyPhase = 0;
  void *stagePartial = nullptr;
};

/// Whether the calls that run now are their function's first in the step
/// (an accumulator's add marked first_call_writes copies then).
inline bool isFirstCall(const StepContext &ctx) { return ctx.firstCall; }

/// Whether a phased @apply's kernels of `phase` run now.
inline bool inApplyPhase(const StepContext &ctx, int phase) { return ctx.applyPhase == phase; }
/// Where a phased @apply leaves the operand of its next sum over pp.
inline void leaveStagePartial(StepContext &ctx, const Tensor &partial) {
  ctx.stagePartial = partial.data;
}

/// This rank's part along dim 0 of `in` over mesh axis `axis`, of shape
/// `part`: a view of its bytes (shard.all_slice moves nothing). Fails
/// unless `in` splits into the axis's parts of that shape.
Tensor rankPart(const StepContext &ctx, const Tensor &in, Dims part, int64_t axis);

/// What the lowered program calls: a load and a branch each when marks are
/// not taken.
inline void markBackward(StepContext &ctx) {
  if (ctx.marks)
    ctx.marks->backward();
}
inline void markOp(StepContext &ctx, const char *label) {
  if (ctx.markOps)
    ctx.marks->op(label);
}

} // namespace cleave::rt

#endif
