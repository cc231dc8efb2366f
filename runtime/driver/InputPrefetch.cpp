//===- InputPrefetch.cpp - microbatches gathered ahead of the step ---------===//

#include "runtime/driver/InputPrefetch.h"

#include "runtime/OwnThread.h"

namespace cleave::rt {

InputPrefetch::InputPrefetch(std::vector<size_t> bufferBytes, int64_t rows, SampleAt sampleAt,
                             Gather gather, const Allocate &allocate, Release release)
    : bufferBytes(std::move(bufferBytes)), rows(rows), sampleAt(std::move(sampleAt)),
      gather(std::move(gather)), release(std::move(release)) {
  for (Slot &slot : slots)
    for (size_t bytes : this->bufferBytes)
      slot.buffers.push_back(static_cast<char *>(allocate(bytes)));
  thread = startOwnThread("cleave-input", [this] { run(); });
}

InputPrefetch::~InputPrefetch() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  changed.notify_all();
  thread.join();
  for (Slot &slot : slots)
    for (size_t d = 0; d < slot.buffers.size(); ++d)
      release(slot.buffers[d], bufferBytes[d]);
}

void InputPrefetch::request(uint64_t position) {
  {
    std::unique_lock<std::mutex> lock(mutex);
    Slot &slot = slots[nextRequest];
    // The slot is free once take() has used what it held.
    changed.wait(lock, [&] { return !slot.requested; });
    slot.position = position;
    slot.requested = true;
    slot.ready = false;
    nextRequest ^= 1;
  }
  changed.notify_all();
}

double InputPrefetch::take(const std::function<void(const Buffers &)> &use) {
  Slot &slot = slots[nextTake];
  {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return slot.ready; });
  }
  use(slot.buffers);
  const double seconds = slot.seconds;
  {
    std::lock_guard<std::mutex> lock(mutex);
    slot.requested = slot.ready = false;
    nextTake ^= 1;
  }
  changed.notify_all();
  return seconds;
}

void InputPrefetch::run() {
  for (int next = 0;; next ^= 1) {
    Slot &slot = slots[next];
    uint64_t position;
    {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock, [&] { return stopping || (slot.requested && !slot.ready); });
      if (stopping)
        return;
      position = slot.position;
    }
    // The buffers are this thread's until the slot is marked ready.
    const auto begin = std::chrono::steady_clock::now();
    for (int64_t row = 0; row < rows; ++row)
      gather(sampleAt(position + static_cast<uint64_t>(row)), row, slot.buffers);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - begin;
    {
      std::lock_guard<std::mutex> lock(mutex);
      slot.seconds = took.count();
      slot.ready = true;
    }
    changed.notify_all();
  }
}

} // namespace cleave::rt
