//===- Allocations.h - the bytes a program holds in its buffers -*- C++ -*-===//
//
// Counts what a run allocates for its program through the backend (arena,
// weights blob, inputs) and what kernels allocate for one call (a
// convolution's column buffer): the measured peak that plan.json's
// predicted_peak_bytes is compared with. Host-side copies (the data sets,
// the staged microbatch, the weights' host copy) and the communicators' own
// buffers are not the program's and are not counted.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_ALLOCATIONS_H
#define CLEAVE_RUNTIME_ALLOCATIONS_H

#include <algorithm>
#include <cstddef>

namespace cleave::rt {

class AllocationMeter {
public:
  void allocated(std::size_t bytes) {
    current += bytes;
    peak = std::max(peak, current);
  }
  void released(std::size_t bytes) { current -= bytes; }
  std::size_t peakBytes() const { return peak; }

private:
  std::size_t current = 0, peak = 0;
};

} // namespace cleave::rt

#endif
