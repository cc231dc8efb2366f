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

#include <cstdint>
#include <vector>

namespace cleave::rt::comm {
class Communicator;
}

namespace cleave::rt {

struct StepContext {
  /// Which microbatch of which training step runs (runtime/Random.h's
  /// trainingStream; 0 outside training): part of every dropout mask's key.
  uint64_t randomStream = 0;
  /// The training step (what a collective's error names); -1 outside.
  int64_t step = -1;
  /// The communicator of each mesh axis, in the mesh's order (all_reduce's
  /// `axis`); empty without a mesh. Owned by the driver.
  std::vector<comm::Communicator *> axes;
  /// Where kernels count the scratch they allocate for a call (a
  /// convolution's columns, runtime/ConvScratch.h); null: not counted.
  AllocationMeter *allocations = nullptr;
};

} // namespace cleave::rt

#endif
