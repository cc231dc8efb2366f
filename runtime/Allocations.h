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
#include <cstdlib>

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

/// `bytes` of 64-byte aligned memory a kernel keeps for the run (a constant
/// weight's copy in oneDNN's layout), counted in `meter` (null: not
/// counted) for as long as it is held; data() is null when there was no
/// memory for it.
class KeptBuffer {
public:
  KeptBuffer(std::size_t bytes, AllocationMeter *meter)
      : data_(std::aligned_alloc(64, (bytes + 63) / 64 * 64)), bytes(bytes), meter(meter) {
    if (data_ && meter)
      meter->allocated(bytes);
  }
  ~KeptBuffer() {
    if (data_ && meter)
      meter->released(bytes);
    std::free(data_);
  }
  KeptBuffer(const KeptBuffer &) = delete;
  KeptBuffer &operator=(const KeptBuffer &) = delete;

  void *data() const { return data_; }

private:
  void *data_;
  std::size_t bytes;
  AllocationMeter *meter;
};

} // namespace cleave::rt

#endif
