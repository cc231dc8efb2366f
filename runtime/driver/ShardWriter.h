//===- ShardWriter.h - a rank's checkpoint file, at once or behind training -*- C++ -*-===//
//
// Internal to the driver. One rank's safetensors file of a checkpoint,
// written into the checkpoint's staging directory either at once or, with
// `cleave run --checkpoint-async`, on a thread of its own, "cleave-ckpt",
// owned by the ShardWriter, while training goes on. The thread only writes
// and flushes that file (CheckpointStore::writeShard): it never calls MPI or
// the backend, blocks every signal (they reach the main thread), and is
// joined when its owner ends. The tensors it writes are views of a snapshot
// of the weights blob on the host, which the training loop leaves alone
// until the write is finished; publishing the checkpoint (every rank's
// sizes and checksums, the index, the renames) stays on the main thread.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_DRIVER_SHARDWRITER_H
#define CLEAVE_RUNTIME_DRIVER_SHARDWRITER_H

#include "runtime/Checkpoint.h"

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace cleave::rt {

class ShardWriter {
public:
  using Clock = std::chrono::steady_clock;

  /// Writes `tensors` as `file` of checkpoint `step`'s staging directory in
  /// `store`: on the thread "cleave-ckpt" when `background`, else before
  /// returning.
  ShardWriter(CheckpointStore store, int64_t step, std::string file,
              std::vector<SafetensorsTensor> tensors, std::map<std::string, std::string> metadata,
              bool background);
  ShardWriter(const ShardWriter &) = delete;
  ShardWriter &operator=(const ShardWriter &) = delete;
  ~ShardWriter();

  /// Whether the write has ended (never blocks).
  bool ended() const { return done.load(std::memory_order_acquire); }
  /// Waits for the write to end; false with `error` when it failed.
  bool finish(CheckpointFile &result, std::string &error);
  /// When the write ran (valid once finished).
  Clock::time_point begin() const { return began; }
  Clock::time_point end() const { return endedAt; }

private:
  void write();

  const CheckpointStore store;
  const int64_t step;
  const std::string file;
  const std::vector<SafetensorsTensor> tensors;
  const std::map<std::string, std::string> metadata;
  CheckpointFile written;
  std::string failure;
  bool ok = false;
  Clock::time_point began, endedAt;
  std::atomic<bool> done{false};
  std::thread thread;
};

} // namespace cleave::rt

#endif
