//===- ShardWriter.cpp - a rank's checkpoint file, at once or behind training -===//

#include "runtime/driver/ShardWriter.h"

#include "runtime/OwnThread.h"

namespace cleave::rt {

ShardWriter::ShardWriter(CheckpointStore store, int64_t step, std::string file,
                         std::vector<SafetensorsTensor> tensors,
                         std::map<std::string, std::string> metadata, bool background)
    : store(std::move(store)), step(step), file(std::move(file)), tensors(std::move(tensors)),
      metadata(std::move(metadata)) {
  if (background)
    thread = startOwnThread("cleave-ckpt", [this] { write(); });
  else
    write();
}

ShardWriter::~ShardWriter() {
  if (thread.joinable())
    thread.join();
}

void ShardWriter::write() {
  began = Clock::now();
  ok = store.writeShard(step, file, tensors, metadata, written, failure);
  endedAt = Clock::now();
  done.store(true, std::memory_order_release);
}

bool ShardWriter::finish(CheckpointFile &result, std::string &error) {
  if (thread.joinable())
    thread.join();
  result = written;
  error = failure;
  return ok;
}

} // namespace cleave::rt
