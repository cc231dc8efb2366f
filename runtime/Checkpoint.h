//===- Checkpoint.h - checkpoints of a training run -------------*- C++ -*-===//
//
// The one definition of a checkpoint's files (docs/formats.md, "Checkpoints"):
// a directory D holds `step-N/` per complete checkpoint and `latest` naming
// the newest. A checkpoint is each writing rank's `rank-R.safetensors` (what
// it holds that no rank before it on the axes the tensor does not vary along
// holds: parameters, tp parts, ZeRO slices, optimizer state) and rank 0's
// `index.json`: the step, the mesh, every tensor's global layout and which
// file and key hold each shard, the run's training settings and sampler, and
// the size and CRC-32 of every file.
//
// A checkpoint is written into `D/step-N.tmp/`, every file flushed, renamed
// to `D/step-N/` only after every file is written, and then `latest` is
// replaced (latest.tmp, rename): a crash at any moment leaves the previous
// checkpoint whole. CheckpointStore does the file work; which rank writes
// what, and the barriers between them, are the driver's (Training.cpp).
//
// Reading checks everything before anything is used: the index's fields, the
// file names (plain names inside the checkpoint, no symlink out), each
// file's size and checksum, and the safetensors headers against the index.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_CHECKPOINT_H
#define CLEAVE_RUNTIME_CHECKPOINT_H

#include "runtime/Files.h"
#include "runtime/Plan.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cleave::rt {

/// Version of index.json's layout (docs/formats.md).
inline constexpr int kCheckpointFormatVersion = 1;

/// CRC-32 (the IEEE polynomial, as zlib's crc32), continued from `crc`.
uint32_t crc32(const void *data, std::size_t bytes, uint32_t crc = 0);

/// One tensor of a safetensors file, as written or as found in one.
struct SafetensorsTensor {
  std::string key;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  /// Writing: the bytes; reading: where they lie in the file's bytes.
  const char *data = nullptr;
  std::size_t bytes = 0;
};

/// The safetensors header for `tensors`, laid out one after another in their
/// order: the 8-byte little-endian length, then the JSON, padded with spaces
/// to a multiple of 8 bytes.
std::string safetensorsHeader(const std::vector<SafetensorsTensor> &tensors,
                              const std::map<std::string, std::string> &metadata);

/// Parses a whole safetensors file's `bytes` (which must outlive `tensors`),
/// checking the header, every dtype, shape and data offset; on failure sets
/// `error`.
bool parseSafetensors(const std::string &bytes, std::vector<SafetensorsTensor> &tensors,
                      std::string &error);

/// Where one rank's part of a tensor lies: in which file under which key,
/// for the rank at `coordinates` on the axes the tensor varies along; its
/// boxes of the global tensor (a tp part), and with ZeRO slices the elements
/// [begin, end) of the flattened part.
struct CheckpointShard {
  std::string file, key;
  std::map<std::string, int> coordinates;
  std::vector<Box> boxes;
  std::optional<std::pair<int64_t, int64_t>> elements;
};

/// A stored tensor of the run (plan.json's parameters and state other than
/// the accumulators, zero after every step, and the tp coordinate).
struct CheckpointTensor {
  std::string name;
  /// Its plan.json entry without offset and bytes (storedLayoutJson).
  std::string layout;
  std::vector<CheckpointShard> shards;
};

struct CheckpointFile {
  std::string name;
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};

/// Where the run stood after `step`: what a resumed run must agree with to
/// continue it exactly. The sampler's epoch and position and the dropout
/// streams follow from the step (docs/training.md).
struct TrainingPosition {
  int64_t step = 0;
  /// The learning rate step `step` took (0 for a training_info step).
  double lr = 0;
  /// Samples per step (all ranks, all microbatches) and in the data sets.
  int64_t batchSize = 0;
  int64_t samples = 0;
  bool shuffle = true;
  uint64_t seed = 0;
  /// The learning-rate schedule's length.
  int64_t totalSteps = 0;
};

/// index.json.
struct CheckpointIndex {
  TrainingPosition position;
  std::string buildId, model;
  std::optional<Mesh> mesh;
  std::vector<CheckpointTensor> tensors;
  std::vector<CheckpointFile> files;
};

/// The stored tensors a checkpoint holds, in plan.json's order.
std::vector<const StoredTensor *> checkpointedTensors(const Plan &plan);

/// The safetensors file rank `rank` writes.
std::string shardFileName(int rank);

/// The index of a checkpoint of `plan`'s run at `position`: every tensor's
/// shards, written by the ranks with coordinate 0 on the axes it does not
/// vary along, and `files` (name, size, checksum).
CheckpointIndex makeIndex(const Plan &plan, const TrainingPosition &position,
                          std::vector<CheckpointFile> files);

/// index.json's text.
std::string indexJson(const Plan &plan, const CheckpointIndex &index);

/// Checks index.json's text and reads it; on failure sets `error` naming
/// the field.
bool parseIndex(const std::string &text, CheckpointIndex &index, std::string &error);

/// Whether a checkpoint of `index` can continue `plan`'s run exactly: the
/// same mesh, the same tensors with the same layouts. On a mismatch sets
/// `field` and `error`.
bool indexMatchesPlan(const CheckpointIndex &index, const Plan &plan, std::string &field,
                      std::string &error);

/// The checkpoints under one directory.
class CheckpointStore {
public:
  explicit CheckpointStore(std::string dir) : dir(std::move(dir)) {}

  /// D/step-N.tmp and D/step-N.
  std::string stagingDir(int64_t step) const;
  std::string checkpointDir(int64_t step) const;

  /// Empties and creates the staging directory of `step` (one rank, before
  /// any writes).
  bool prepare(int64_t step, std::string &error) const;
  /// Writes one rank's safetensors file into the staging directory, flushed
  /// to disk, and says its size and checksum in `written`.
  bool writeShard(int64_t step, const std::string &file,
                  const std::vector<SafetensorsTensor> &tensors,
                  const std::map<std::string, std::string> &metadata, CheckpointFile &written,
                  std::string &error) const;
  /// Writes index.json, renames the staging directory to D/step-N (after
  /// every rank's writeShard), replaces `latest` and removes the oldest
  /// complete checkpoints beyond `keep` (0: none). On failure sets `where`.
  bool publish(int64_t step, const std::string &indexText, int64_t keep, std::string &where,
               std::string &error) const;

  /// Reads the checkpoint `latest` names: its directory in `checkpoint` and
  /// its index. On failure sets `where` (the file) and `error`.
  bool readLatest(std::string &checkpoint, CheckpointIndex &index, std::string &where,
                  std::string &error) const;
  /// Reads `file` of the checkpoint at `checkpoint` (a name the index lists)
  /// into `bytes`, checking that it stays inside the checkpoint and its size
  /// and checksum, and parses it into `tensors`.
  bool readShard(const std::string &checkpoint, const CheckpointFile &file, std::string &bytes,
                 std::vector<SafetensorsTensor> &tensors, std::string &error) const;

private:
  std::string dir;
};

} // namespace cleave::rt

#endif
