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
// A checkpoint loads into any layout of the same model and optimizer
// (resharding): every stored tensor is a set of runs of elements of global
// tensors (a parameter, or one optimizer slot of one parameter, whatever
// tp parts, ZeRO slices or flat buffers hold it), so a rank reads, for each
// run it holds, the byte ranges of the files that hold those elements
// (GlobalTensorReader). Consolidating and exporting read whole tensors the
// same way.
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
inline constexpr int kCheckpointFormatVersion = 2;

/// CRC-32 (the IEEE polynomial, as zlib's crc32), continued from `crc`.
uint32_t crc32(const void *data, std::size_t bytes, uint32_t crc = 0);

/// One tensor of a safetensors file, as written or as found in one.
struct SafetensorsTensor {
  std::string key;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  /// Writing: the bytes.
  const char *data = nullptr;
  std::size_t bytes = 0;
  /// Reading: where they lie in the file.
  uint64_t offset = 0;
};

/// The safetensors header for `tensors`, laid out one after another in their
/// order: the 8-byte little-endian length, then the JSON, padded with spaces
/// to a multiple of 8 bytes.
std::string safetensorsHeader(const std::vector<SafetensorsTensor> &tensors,
                              const std::map<std::string, std::string> &metadata);

/// Parses a safetensors file's JSON header (without its 8-byte length),
/// followed in the file by `dataBytes` of data, checking every dtype, shape
/// and data offset and that the tensors cover the data exactly; each
/// tensor's offset is from the start of the file. On failure sets `error`.
bool parseSafetensorsHeader(const std::string &header, uint64_t dataBytes,
                            std::vector<SafetensorsTensor> &tensors, std::string &error);

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
/// the accumulators, zero or first written at the start of every step, and
/// the tp coordinate).
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
  /// The optimizer's name, or "training_info" for a model's own step.
  std::string optimizer;
  std::optional<Mesh> mesh;
  std::vector<CheckpointTensor> tensors;
  /// ZeRO 1/2's flat buffers (flatBufferJson): none without ZeRO 1/2, one
  /// per pipeline stage.
  std::vector<std::string> flatBuffers;
  std::vector<CheckpointFile> files;
};

/// A tensor as one device holds it: a parameter, a state tensor, or one
/// optimizer slot of one parameter of ZeRO 1/2's flat buffer ("adam.m:P").
struct GlobalTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  StoredRole role = StoredRole::Parameter;
};

/// Whether `tensor` is an initializer of the ONNX model, for a run of
/// `optimizer` (optimizerName): a parameter, model state (running
/// statistics), or the state of a training_info step (its moments and
/// counters are initializers; cleave's own optimizer slots are not).
bool isModelInitializer(const GlobalTensor &tensor, const std::string &optimizer);

/// `count` elements of global tensor `tensor` from its row-major element
/// `global`, held at element `local` of a stored tensor.
struct GlobalRun {
  std::string tensor;
  int64_t global = 0, local = 0, count = 0;
};

/// The global tensors that `stored` (of `layouts`, a plan or a checkpoint's
/// layouts) holds parts of, appended to `tensors`; on a flat slot whose
/// member is not a parameter of `layouts` sets `error`.
bool globalTensorsOf(const Plan &layouts, const StoredTensor &stored,
                     std::vector<GlobalTensor> &tensors, std::string &error);

/// The runs of global tensors that `stored` holds on the rank at
/// `coordinates` (by axis; an axis left out is 0), in local order. Padding
/// (ZeRO's, the flat buffer's) is in no run. With `onlyFirstCopy`, a flat
/// slot leaves out the members that it holds as a copy of the tp rank 0's
/// (those it does not split), so that a checkpoint's shards hold each
/// element once.
std::vector<GlobalRun> globalRuns(const Plan &layouts, const StoredTensor &stored,
                                  const std::map<std::string, int> &coordinates,
                                  bool onlyFirstCopy = false);

/// A checkpoint's tensors' layouts read back from `index` into `layouts`
/// (mesh, parameters, state, flat buffer); on failure sets `error` naming
/// the field.
bool indexLayouts(const CheckpointIndex &index, Plan &layouts, std::string &error);

/// Whether the checkpoint of `index` (with its `layouts`) can continue the
/// run of `plans` (one program's, or every stage's of a pipeline) on their
/// layout, whatever the layout that wrote it: the same optimizer and the
/// same global tensors, dtypes and shapes. On a mismatch sets `field` (of
/// index.json) and `error`.
bool checkpointFitsPlan(const CheckpointIndex &index, const Plan &layouts,
                        const std::vector<const Plan *> &plans, std::string &field,
                        std::string &error);

/// Reads any region of the global tensors of a checkpoint (or of one
/// safetensors file of whole tensors) from the files that hold it: only the
/// byte ranges asked for are read, each with pread.
class GlobalTensorReader {
public:
  GlobalTensorReader() = default;
  ~GlobalTensorReader();
  GlobalTensorReader(const GlobalTensorReader &) = delete;
  GlobalTensorReader &operator=(const GlobalTensorReader &) = delete;

  /// The tensors of the checkpoint at `checkpoint`: its index's layouts and
  /// the safetensors header of each of its files (the headers only), every
  /// shard checked against them and every global tensor covered exactly
  /// once. Its files' sizes and checksums are CheckpointStore::verifyFile's.
  /// On failure sets `where` (the file) and `error`.
  bool openCheckpoint(const std::string &checkpoint, const CheckpointIndex &index,
                      std::string &where, std::string &error);
  /// The tensors of one safetensors file, each whole under its key.
  bool openSafetensors(const std::string &path, std::string &error);
  /// The checkpointed tensors of a trained run's weights blobs: those of
  /// `plans[i]` in `dirs[i]` (one program's, or each pipeline stage's; one
  /// blob per coordinate of the plan's weightsByAxes; under their staged
  /// names with `staged`), each element read from the blob of the rank a
  /// checkpoint would take it from (makeIndex's shards). On failure sets
  /// `where` (the blob) and `error`.
  bool openTrainedBlobs(const std::vector<const Plan *> &plans,
                        const std::vector<std::string> &dirs, bool staged, std::string &where,
                        std::string &error);

  /// The global tensors, in the order of the index (or the file's header).
  const std::vector<GlobalTensor> &tensors() const { return list; }
  const GlobalTensor *find(const std::string &name) const;
  /// Reads elements [begin, begin + count) of tensor `name` into `out`. On
  /// failure sets `where` (the file) and `error`.
  bool read(const std::string &name, int64_t begin, int64_t count, char *out, std::string &where,
            std::string &error) const;

private:
  /// Elements [global, global + count) of a tensor at byte `offset` of file
  /// `file`.
  struct Piece {
    size_t file = 0;
    uint64_t offset = 0;
    int64_t global = 0, count = 0;
  };
  bool openFile(const std::string &path, std::vector<SafetensorsTensor> &tensors,
                std::string &error);
  /// Indexes the tensors by name, sorts each one's pieces and checks that
  /// they cover it exactly.
  bool checkCoverage(std::string &error);

  std::vector<std::string> paths;
  std::vector<int> descriptors;
  std::vector<GlobalTensor> list;
  std::map<std::string, size_t> byName;
  std::map<std::string, std::vector<Piece>> pieces;
};

/// The stored tensors a checkpoint holds, in plan.json's order.
std::vector<const StoredTensor *> checkpointedTensors(const Plan &plan);

/// N of a checkpoint directory's name "step-N"; nullopt for another name.
std::optional<int64_t> checkpointStep(const std::string &name);

/// The safetensors file rank `rank` writes.
std::string shardFileName(int rank);

/// The index of a checkpoint of the run of `plans` (one program's, or every
/// stage's of a pipeline, in stage order) at `position`: every tensor's
/// shards, written by the ranks with coordinate 0 on the axes it does not
/// vary along (on a pipeline's pp axis, the coordinate of its stage; a
/// tensor several stages hold, a tied weight, by the first), and `files`
/// (name, size, checksum).
CheckpointIndex makeIndex(const std::vector<const Plan *> &plans,
                          const TrainingPosition &position, std::vector<CheckpointFile> files);

/// index.json's text.
std::string indexJson(const Plan &plan, const CheckpointIndex &index);

/// Checks index.json's text and reads it; on failure sets `error` naming
/// the field.
bool parseIndex(const std::string &text, CheckpointIndex &index, std::string &error);

/// "training_info", or the name of `plan`'s optimizer.
std::string optimizerName(const Plan &plan);

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
  /// The step N of the checkpoint `latest` names (D/step-N).
  bool readLatestStep(int64_t &step, std::string &where, std::string &error) const;
  /// Reads checkpoint D/step-N as readLatest does.
  bool readCheckpoint(int64_t step, std::string &checkpoint, CheckpointIndex &index,
                      std::string &where, std::string &error) const;
  /// The steps N of the directories D/step-N, newest first.
  std::vector<int64_t> completeSteps() const;
  /// Checks `file` of the checkpoint at `checkpoint` (a name the index
  /// lists): that it stays inside the checkpoint, its size and its checksum
  /// (read through, not kept).
  bool verifyFile(const std::string &checkpoint, const CheckpointFile &file,
                  std::string &error) const;

private:
  std::string dir;
};

} // namespace cleave::rt

#endif
