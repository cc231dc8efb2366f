//===- InputPrefetch.h - microbatches gathered ahead of the step -*- C++ -*-===//
//
// Internal to the driver. A training run's data inputs are gathered
// (samples picked in the run's order, copied row by row into one buffer per
// data input) on a thread of their own, "cleave-input", owned by an
// InputPrefetch: while the program computes one microbatch, the thread
// gathers the next into the other of two buffer sets. The main thread takes
// each gathered set in order and copies it to the device, or, on the CPU,
// has the program read it in place. The thread only
// reads the data sets and writes its buffers: it never calls MPI or the
// backend, blocks every signal (they reach the main thread), and ends when
// its owner does.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_DRIVER_INPUTPREFETCH_H
#define CLEAVE_RUNTIME_DRIVER_INPUTPREFETCH_H

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

namespace cleave::rt {

class InputPrefetch {
public:
  /// Row `row` of the microbatch at `position` is sample `sampleAt(position
  /// + row)`; `gather(sample, row, buffers)` copies it into the buffers.
  using SampleAt = std::function<int64_t(uint64_t position)>;
  using Buffers = std::vector<char *>;
  using Gather = std::function<void(int64_t sample, int64_t row, const Buffers &)>;
  /// Where the buffers come from and go back to (the backend's staging
  /// memory: pinned on CUDA).
  using Allocate = std::function<void *(size_t bytes)>;
  using Release = std::function<void(void *memory, size_t bytes)>;

  /// `bufferBytes`: each data input's bytes per microbatch of `rows` rows.
  InputPrefetch(std::vector<size_t> bufferBytes, int64_t rows, SampleAt sampleAt, Gather gather,
                const Allocate &allocate, Release release);
  ~InputPrefetch();
  InputPrefetch(const InputPrefetch &) = delete;
  InputPrefetch &operator=(const InputPrefetch &) = delete;

  /// One microbatch's bytes, every data input's together.
  size_t microbatchBytes() const {
    return std::accumulate(bufferBytes.begin(), bufferBytes.end(), size_t(0));
  }
  /// Asks for the microbatch whose first row is at `position`; at most one
  /// asked for and not yet taken besides the one being used.
  void request(uint64_t position);
  /// Waits for the oldest microbatch asked for and calls `use` on its
  /// buffers, which the thread leaves as they are until the slot is asked
  /// for again (after the next request, that is: two requests later).
  /// Returns the seconds the thread took to gather them.
  double take(const std::function<void(const Buffers &)> &use);

private:
  struct Slot {
    Buffers buffers;
    uint64_t position = 0;
    double seconds = 0;
    bool requested = false, ready = false;
  };
  void run();

  const std::vector<size_t> bufferBytes;
  const int64_t rows;
  const SampleAt sampleAt;
  const Gather gather;
  const Release release;
  Slot slots[2];
  /// The slot the next request fills and the one take() reads next.
  int nextRequest = 0, nextTake = 0;
  bool stopping = false;
  std::mutex mutex;
  std::condition_variable changed;
  std::thread thread;
};

} // namespace cleave::rt

#endif
