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
#include <cstdint>
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

/// 64-byte aligned memory a kernel reuses from call to call (a
/// convolution's scratch, oneDNN's scratchpads), grown to the largest call's
/// and counted in the meter of the call that grew it for as long as it is
/// held, so that a run's peak counts the largest call once, as plan.json
/// predicts it.
class GrowingBuffer {
public:
  GrowingBuffer() = default;
  ~GrowingBuffer() { release(); }
  GrowingBuffer(const GrowingBuffer &) = delete;
  GrowingBuffer &operator=(const GrowingBuffer &) = delete;

  /// At least `bytes`, or null when there is no memory for them, counted in
  /// `meter` (null: not counted). Where it grows, the old memory is let go
  /// first, so growing never holds both.
  void *reserve(int64_t bytes, AllocationMeter *meter) {
    if (bytes <= heldBytes)
      return held;
    release();
    heldMeter = meter;
    held = std::aligned_alloc(64, static_cast<std::size_t>((bytes + 63) / 64 * 64));
    if (!held)
      return nullptr;
    heldBytes = bytes;
    if (heldMeter)
      heldMeter->allocated(static_cast<std::size_t>(bytes));
    return held;
  }

private:
  void release() {
    std::free(held);
    if (heldMeter)
      heldMeter->released(static_cast<std::size_t>(heldBytes));
    held = nullptr;
    heldBytes = 0;
  }
  void *held = nullptr;
  int64_t heldBytes = 0;
  AllocationMeter *heldMeter = nullptr;
};

} // namespace cleave::rt

#endif
