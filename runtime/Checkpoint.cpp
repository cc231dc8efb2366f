//===- Checkpoint.cpp - checkpoints of a training run --------------------===//

#include "runtime/Checkpoint.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cleave::rt {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

/// The largest safetensors header and index.json read.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;
constexpr uint64_t kMaxIndexBytes = 256u << 20;

constexpr std::array<uint32_t, 256> crcTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t n = 0; n < 256; ++n) {
    uint32_t c = n;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[n] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrcTable = crcTable();

/// safetensors' spelling of each dtype.
const char *safetensorsDType(DType type) {
  switch (type) {
  case DType::F32:
    return "F32";
  case DType::F64:
    return "F64";
  case DType::F16:
    return "F16";
  case DType::BF16:
    return "BF16";
  case DType::I8:
    return "I8";
  case DType::I16:
    return "I16";
  case DType::I32:
    return "I32";
  case DType::I64:
    return "I64";
  case DType::U8:
    return "U8";
  case DType::U16:
    return "U16";
  case DType::U32:
    return "U32";
  case DType::U64:
    return "U64";
  case DType::Bool:
    return "BOOL";
  }
  return "F32";
}

bool dtypeFromSafetensors(const std::string &name, DType &type) {
  for (DType t :
       {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I8, DType::I16, DType::I32,
        DType::I64, DType::U8, DType::U16, DType::U32, DType::U64, DType::Bool})
    if (name == safetensorsDType(t)) {
      type = t;
      return true;
    }
  return false;
}

/// The bytes of `shape` elements of `type`, or nullopt past INT64_MAX.
std::optional<uint64_t> byteCount(const std::vector<int64_t> &shape, DType type) {
  uint64_t n = dtypeSize(type);
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && n > static_cast<uint64_t>(INT64_MAX) / static_cast<uint64_t>(d)))
      return std::nullopt;
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

std::string systemError(const char *what) {
  return std::string(what) + ": " + std::strerror(errno);
}

/// Flushes a directory's entries (a rename in it) to disk.
bool syncDirectory(const std::string &path, std::string &error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    error = systemError("cannot flush the directory");
    if (fd >= 0)
      ::close(fd);
    return false;
  }
  ::close(fd);
  return true;
}

/// The number N of a name "step-N" (digits only, no sign); nullopt for any
/// other name.
std::optional<int64_t> stepOfName(const std::string &name) {
  const std::string prefix = "step-";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.size() > prefix.size() + 18)
    return std::nullopt;
  int64_t step = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9')
      return std::nullopt;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

/// Whether `path` resolves (through any symlinks) to `root` or inside it.
bool resolvesInside(const std::string &path, const std::string &root) {
  char resolved[PATH_MAX], resolvedRoot[PATH_MAX];
  if (!::realpath(path.c_str(), resolved) || !::realpath(root.c_str(), resolvedRoot))
    return false;
  std::string inner(resolved), outer(resolvedRoot);
  return inner == outer || inner.compare(0, outer.size() + 1, outer + "/") == 0;
}

/// "8 hex digits" of a CRC-32.
std::string crcText(uint32_t crc) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", crc);
  return text;
}

/// A file descriptor, closed with its owner.
class Descriptor {
public:
  explicit Descriptor(int fd) : fd(fd) {}
  ~Descriptor() {
    if (fd >= 0)
      ::close(fd);
  }
  Descriptor(const Descriptor &) = delete;
  Descriptor &operator=(const Descriptor &) = delete;
  int get() const { return fd; }
  int release() { return std::exchange(fd, -1); }

private:
  int fd;
};

/// Reads `bytes` bytes at `offset` of `fd` into `out`.
bool readAt(int fd, uint64_t offset, std::size_t bytes, char *out, std::string &error) {
  while (bytes > 0) {
    ssize_t got = ::pread(fd, out, bytes, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0) {
      error = got < 0 ? systemError("cannot read")
                      : "ends before byte " + std::to_string(offset + bytes) + " (truncated)";
      return false;
    }
    out += got;
    offset += static_cast<uint64_t>(got);
    bytes -= static_cast<std::size_t>(got);
  }
  return true;
}

int64_t elementsOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// The parameter of `layouts` named `name`, or null.
const StoredTensor *parameterNamed(const Plan &layouts, const std::string &name) {
  for (const StoredTensor &parameter : layouts.parameters)
    if (parameter.tensor.name == name)
      return &parameter;
  return nullptr;
}

/// The flat buffer of ZeRO 1/2 that `stored` is an optimizer slot of (a
/// pipeline's layouts hold one per stage), or null; its members' slots are
/// named PREFIX:MEMBER for its name PREFIX:FLAT.
const FlatBuffer *flatBufferOf(const Plan &layouts, const StoredTensor &stored) {
  for (const FlatBuffer &flat : layouts.flatBuffers)
    if (stored.stateOf == flat.name)
      return &flat;
  return nullptr;
}

std::string flatSlotPrefix(const FlatBuffer &flat, const StoredTensor &stored) {
  const std::string suffix = ":" + flat.name;
  const std::string &name = stored.tensor.name;
  return name.size() > suffix.size() &&
                 name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0
             ? name.substr(0, name.size() - suffix.size())
             : name;
}

/// The runs (global element, element of the part, count) of the part of
/// `stored` (its tp part, or the whole tensor) on the rank at `coordinate`
/// of its split axis.
std::vector<std::array<int64_t, 3>> partRuns(const Plan &layouts, const StoredTensor &stored,
                                             const std::map<std::string, int> &coordinates) {
  std::vector<std::array<int64_t, 3>> runs;
  if (stored.sharding && stored.sharding->split) {
    const DimSplit &split = *stored.sharding->split;
    auto at = coordinates.find(split.axis);
    forEachSplitRun(stored.sharding->globalShape, split,
                    layouts.mesh->shape[layouts.mesh->axisIndex(split.axis)],
                    at == coordinates.end() ? 0 : at->second,
                    [&](int64_t global, int64_t local, int64_t count) {
                      runs.push_back({global, local, count});
                    });
  } else {
    runs.push_back({0, 0, elementsOf(stored.sharding ? stored.sharding->globalShape
                                                     : stored.tensor.shape)});
  }
  return runs;
}

/// Reads index.json's fields, recording the first bad one as "PATH: WHAT".
class IndexReader {
public:
  explicit IndexReader(std::string &error) : error(error) {}

  bool fail(const std::string &path, const std::string &what) {
    if (error.empty())
      error = path + ": " + what;
    return false;
  }
  const Json *field(const Json &object, const std::string &path, const char *key) {
    if (object.is_object() && object.contains(key))
      return &object[key];
    fail(path + key, "is missing");
    return nullptr;
  }
  bool integer(const Json &object, const std::string &path, const char *key, int64_t &out,
               int64_t min = 0) {
    const Json *value = field(object, path, key);
    if (!value)
      return false;
    if (!value->is_number_integer() || value->get<int64_t>() < min)
      return fail(path + key, "is not an integer >= " + std::to_string(min));
    out = value->get<int64_t>();
    return true;
  }
  bool string(const Json &object, const std::string &path, const char *key, std::string &out) {
    const Json *value = field(object, path, key);
    if (!value)
      return false;
    if (!value->is_string())
      return fail(path + key, "is not a string");
    out = value->get<std::string>();
    return true;
  }
  const Json *list(const Json &object, const std::string &path, const char *key) {
    const Json *value = field(object, path, key);
    if (value && !value->is_array()) {
      fail(path + key, "is not a list");
      return nullptr;
    }
    return value;
  }

  bool position(const Json &json, TrainingPosition &position);
  bool optimizer(const Json &json, std::string &name);
  bool mesh(const Json &json, std::optional<Mesh> &mesh);
  bool tensors(const Json &json, std::vector<CheckpointTensor> &tensors);
  bool files(const Json &json, std::vector<CheckpointFile> &files);

private:
  std::string &error;
};

bool IndexReader::position(const Json &json, TrainingPosition &position) {
  const Json *sampler = field(json, "", "sampler");
  const Json *schedule = field(json, "", "lr_schedule");
  if (!sampler || !schedule || !integer(json, "", "step", position.step, 1) ||
      !integer(json, "", "batch_size", position.batchSize, 1) ||
      !integer(*sampler, "sampler.", "samples", position.samples, 1) ||
      !integer(*schedule, "lr_schedule.", "total_steps", position.totalSteps, 1))
    return false;
  const Json *shuffle = field(*sampler, "sampler.", "shuffle");
  const Json *seed = field(*sampler, "sampler.", "seed");
  if (!shuffle || !seed)
    return false;
  if (!shuffle->is_boolean())
    return fail("sampler.shuffle", "is not true or false");
  if (!seed->is_number_unsigned())
    return fail("sampler.seed", "is not an integer in [0, 2^64)");
  position.shuffle = shuffle->get<bool>();
  position.seed = seed->get<uint64_t>();
  return true;
}

bool IndexReader::optimizer(const Json &json, std::string &name) {
  const Json *optimizer = field(json, "", "optimizer");
  std::string algorithm;
  if (!optimizer || !string(*optimizer, "optimizer.", "algorithm", algorithm))
    return false;
  if (algorithm == "training_info") {
    name = algorithm;
    return true;
  }
  return string(*optimizer, "optimizer.", "name", name);
}

bool IndexReader::mesh(const Json &json, std::optional<Mesh> &mesh) {
  const Json *value = field(json, "", "mesh");
  if (!value || value->is_null())
    return value != nullptr;
  std::string text;
  if (!string(*value, "mesh.", "text", text))
    return false;
  Mesh parsed;
  std::string problem;
  if (!Mesh::parse(text, parsed, problem))
    return fail("mesh.text", problem);
  mesh = parsed;
  return true;
}

bool IndexReader::tensors(const Json &json, std::vector<CheckpointTensor> &tensors) {
  const Json *entries = list(json, "", "tensors");
  if (!entries)
    return false;
  for (size_t i = 0; i < entries->size(); ++i) {
    const Json &entry = (*entries)[i];
    const std::string path = "tensors[" + std::to_string(i) + "].";
    CheckpointTensor tensor;
    const Json *layout = field(entry, path, "layout");
    const Json *shards = list(entry, path, "shards");
    if (!string(entry, path, "name", tensor.name) || !layout || !shards)
      return false;
    if (!layout->is_object())
      return fail(path + "layout", "is not an object");
    tensor.layout = layout->dump();
    for (size_t s = 0; s < shards->size(); ++s) {
      const Json &shardJson = (*shards)[s];
      const std::string at = path + "shards[" + std::to_string(s) + "].";
      CheckpointShard shard;
      const Json *coordinates = field(shardJson, at, "coordinates");
      if (!string(shardJson, at, "file", shard.file) || !string(shardJson, at, "key", shard.key) ||
          !coordinates)
        return false;
      if (!coordinates->is_object())
        return fail(at + "coordinates", "is not an object");
      for (const auto &[axis, coordinate] : coordinates->items()) {
        if (!coordinate.is_number_integer() || coordinate.get<int64_t>() < 0 ||
            coordinate.get<int64_t>() > INT_MAX)
          return fail(at + "coordinates." + axis, "is not a coordinate");
        shard.coordinates[axis] = coordinate.get<int>();
      }
      tensor.shards.push_back(std::move(shard));
    }
    tensors.push_back(std::move(tensor));
  }
  return true;
}

bool IndexReader::files(const Json &json, std::vector<CheckpointFile> &files) {
  const Json *entries = list(json, "", "files");
  if (!entries)
    return false;
  for (size_t i = 0; i < entries->size(); ++i) {
    const std::string path = "files[" + std::to_string(i) + "].";
    CheckpointFile file;
    int64_t bytes = 0;
    std::string crc;
    if (!string((*entries)[i], path, "name", file.name) ||
        !integer((*entries)[i], path, "bytes", bytes) || !string((*entries)[i], path, "crc32", crc))
      return false;
    char *end = nullptr;
    unsigned long value = std::strtoul(crc.c_str(), &end, 16);
    if (crc.size() != 8 || *end != '\0')
      return fail(path + "crc32", "is not 8 hex digits");
    file.bytes = static_cast<uint64_t>(bytes);
    file.crc32 = static_cast<uint32_t>(value);
    files.push_back(std::move(file));
  }
  return true;
}

/// The mesh axes `stored` differs along: its tp split, its ZeRO slices, and
/// for a slot of ZeRO 1/2's flat buffer the flat slices and its members'
/// splits. Every rank holds the same value along the other axes.
std::vector<std::string> varyingAxes(const Plan &plan, const StoredTensor &stored) {
  std::vector<std::string> axes;
  auto add = [&](const std::string &axis) {
    if (std::find(axes.begin(), axes.end(), axis) == axes.end())
      axes.push_back(axis);
  };
  if (stored.sharding && stored.sharding->split)
    add(stored.sharding->split->axis);
  if (stored.sharding && stored.sharding->slices)
    add(stored.sharding->slices->axis);
  if (const FlatBuffer *flat = flatBufferOf(plan, stored)) {
    add(flat->slices.axis);
    for (const FlatBuffer::Member &member : flat->members)
      for (const StoredTensor &parameter : plan.parameters)
        if (parameter.tensor.name == member.name && parameter.sharding && parameter.sharding->split)
          add(parameter.sharding->split->axis);
  }
  return axes;
}

} // namespace

std::string optimizerName(const Plan &plan) {
  return plan.training && plan.training->trainingInfo ? "training_info"
         : plan.training                              ? plan.training->optimizer
                                                      : "";
}

bool isModelInitializer(const GlobalTensor &tensor, const std::string &optimizer) {
  return tensor.role == StoredRole::Parameter || tensor.role == StoredRole::ModelState ||
         optimizer == "training_info";
}

bool globalTensorsOf(const Plan &layouts, const StoredTensor &stored,
                     std::vector<GlobalTensor> &tensors, std::string &error) {
  const FlatBuffer *flat = flatBufferOf(layouts, stored);
  if (!flat) {
    tensors.push_back({stored.tensor.name, stored.tensor.dtype,
                       stored.sharding ? stored.sharding->globalShape : stored.tensor.shape,
                       stored.role});
    return true;
  }
  const std::string prefix = flatSlotPrefix(*flat, stored);
  for (const FlatBuffer::Member &member : flat->members) {
    const StoredTensor *parameter = parameterNamed(layouts, member.name);
    if (!parameter) {
      error = "flat_parameters: member '" + member.name + "' is not a parameter";
      return false;
    }
    tensors.push_back({prefix + ":" + member.name, stored.tensor.dtype,
                       parameter->sharding ? parameter->sharding->globalShape
                                           : parameter->tensor.shape,
                       stored.role});
  }
  return true;
}

std::vector<GlobalRun> globalRuns(const Plan &layouts, const StoredTensor &stored,
                                  const std::map<std::string, int> &coordinates,
                                  bool onlyFirstCopy) {
  auto coordinate = [&](const std::string &axis) {
    auto at = coordinates.find(axis);
    return static_cast<int64_t>(at == coordinates.end() ? 0 : at->second);
  };
  std::vector<GlobalRun> runs;
  // Emits the part's elements [begin, end) of `name`, the first at local
  // element `local`.
  auto emit = [&](const std::string &name, const std::vector<std::array<int64_t, 3>> &part,
                  int64_t begin, int64_t end, int64_t local) {
    for (const auto &[global, element, count] : part) {
      int64_t from = std::max(begin, element), to = std::min(end, element + count);
      if (from < to)
        runs.push_back({name, global + from - element, local + from - begin, to - from});
    }
  };
  if (const FlatBuffer *slot = flatBufferOf(layouts, stored)) {
    // This rank's slice of the flat buffer, over the members it meets.
    const FlatBuffer &flat = *slot;
    const int64_t first = coordinate(flat.slices.axis) * flat.slices.slice;
    const std::string prefix = flatSlotPrefix(flat, stored);
    // Every tp rank's flat buffer holds the members it does not split too.
    std::vector<std::string> splitAxes;
    for (const FlatBuffer::Member &member : flat.members)
      if (const StoredTensor *parameter = parameterNamed(layouts, member.name);
          parameter && parameter->sharding && parameter->sharding->split)
        splitAxes.push_back(parameter->sharding->split->axis);
    for (const FlatBuffer::Member &member : flat.members) {
      const StoredTensor *parameter = parameterNamed(layouts, member.name);
      const bool copy = std::any_of(splitAxes.begin(), splitAxes.end(), [&](const std::string &a) {
        return coordinate(a) != 0 &&
               !(parameter && parameter->sharding && parameter->sharding->split &&
                 parameter->sharding->split->axis == a);
      });
      if (onlyFirstCopy && copy)
        continue;
      int64_t begin = std::max(first, member.offset),
              end = std::min(first + flat.slices.slice, member.offset + member.elements);
      if (parameter && begin < end)
        emit(prefix + ":" + member.name, partRuns(layouts, *parameter, coordinates),
             begin - member.offset, end - member.offset, begin - first);
    }
    return runs;
  }
  const std::vector<std::array<int64_t, 3>> part = partRuns(layouts, stored, coordinates);
  if (stored.sharding && stored.sharding->slices) {
    const FlatSlices &slices = *stored.sharding->slices;
    const int64_t first = coordinate(slices.axis) * slices.slice;
    emit(stored.tensor.name, part, first, std::min(first + slices.slice, slices.elements), 0);
  } else {
    emit(stored.tensor.name, part, 0, elementsOf(stored.tensor.shape), 0);
  }
  return runs;
}

bool indexLayouts(const CheckpointIndex &index, Plan &layouts, std::string &error) {
  std::vector<std::string> texts;
  for (const CheckpointTensor &tensor : index.tensors)
    texts.push_back(tensor.layout);
  return parseLayouts(index.mesh, texts, index.flatBuffers, layouts, error);
}

bool checkpointFitsPlan(const CheckpointIndex &index, const Plan &layouts,
                        const std::vector<const Plan *> &plans, std::string &field,
                        std::string &error) {
  const Plan &plan = *plans.front();
  if (index.optimizer != optimizerName(plan)) {
    field = "optimizer";
    error = "is " + index.optimizer + ", the program's is " + optimizerName(plan) +
            ": its state does not carry over";
    return false;
  }
  std::vector<GlobalTensor> saved, wanted;
  for (const std::vector<StoredTensor> *list : {&layouts.parameters, &layouts.state})
    for (const StoredTensor &stored : *list)
      if (!globalTensorsOf(layouts, stored, saved, error)) {
        field = "flat_parameters";
        return false;
      }
  for (const Plan *stage : plans)
    for (const StoredTensor *stored : checkpointedTensors(*stage))
      if (!globalTensorsOf(*stage, *stored, wanted, error))
        return false;
  auto text = [](const GlobalTensor &t) {
    return std::string(dtypeName(t.dtype)) + " " + shapeText(t.shape);
  };
  for (const GlobalTensor &want : wanted) {
    auto found = std::find_if(saved.begin(), saved.end(),
                              [&](const GlobalTensor &t) { return t.name == want.name; });
    field = "tensor '" + want.name + "'";
    if (found == saved.end()) {
      error = "is missing, the program stores " + text(want);
      return false;
    }
    if (found->dtype != want.dtype || found->shape != want.shape) {
      error = "is " + text(*found) + ", the program's is " + text(want);
      return false;
    }
  }
  for (const GlobalTensor &have : saved)
    if (std::none_of(wanted.begin(), wanted.end(),
                     [&](const GlobalTensor &t) { return t.name == have.name; })) {
      field = "tensor '" + have.name + "'";
      error = "is not a tensor of the program (another model)";
      return false;
    }
  return true;
}

GlobalTensorReader::~GlobalTensorReader() {
  for (int fd : descriptors)
    ::close(fd);
}

const GlobalTensor *GlobalTensorReader::find(const std::string &name) const {
  auto found = byName.find(name);
  return found == byName.end() ? nullptr : &list[found->second];
}

bool GlobalTensorReader::openFile(const std::string &path,
                                  std::vector<SafetensorsTensor> &tensors, std::string &error) {
  Descriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat info {};
  if (fd.get() < 0 || ::fstat(fd.get(), &info) != 0) {
    error = systemError("cannot open");
    return false;
  }
  const uint64_t size = static_cast<uint64_t>(info.st_size);
  char length[8];
  if (size < 8 || !readAt(fd.get(), 0, 8, length, error)) {
    error = "is " + std::to_string(size) + " bytes, too short for a safetensors header";
    return false;
  }
  uint64_t headerBytes = 0;
  for (int i = 0; i < 8; ++i)
    headerBytes |= static_cast<uint64_t>(static_cast<unsigned char>(length[i])) << (8 * i);
  if (headerBytes > kMaxHeaderBytes || headerBytes > size - 8) {
    error = "its safetensors header claims " + std::to_string(headerBytes) +
            " bytes, more than the file holds";
    return false;
  }
  std::string header(headerBytes, '\0');
  if (!readAt(fd.get(), 8, headerBytes, header.data(), error) ||
      !parseSafetensorsHeader(header, size - 8 - headerBytes, tensors, error))
    return false;
  paths.push_back(path);
  descriptors.push_back(fd.release());
  return true;
}

bool GlobalTensorReader::checkCoverage(std::string &error) {
  byName.clear();
  for (size_t i = 0; i < list.size(); ++i)
    byName.emplace(list[i].name, i);
  for (const GlobalTensor &tensor : list) {
    std::vector<Piece> &held = pieces[tensor.name];
    std::sort(held.begin(), held.end(),
              [](const Piece &a, const Piece &b) { return a.global < b.global; });
    int64_t covered = 0;
    bool exact = true;
    for (const Piece &piece : held) {
      exact = exact && piece.global == covered;
      if (exact)
        covered += piece.count;
    }
    if (!exact || covered != elementsOf(tensor.shape)) {
      error = "tensor '" + tensor.name + "': its shards do not hold each of its " +
              std::to_string(elementsOf(tensor.shape)) +
              " elements exactly once (a gap or overlap at element " + std::to_string(covered) +
              ")";
      return false;
    }
  }
  return true;
}

bool GlobalTensorReader::openCheckpoint(const std::string &checkpoint,
                                        const CheckpointIndex &index, std::string &where,
                                        std::string &error) {
  where = checkpoint + "/index.json";
  Plan layouts;
  if (!indexLayouts(index, layouts, error))
    return false;
  std::map<std::string, size_t> fileNumbers;
  std::vector<std::vector<SafetensorsTensor>> headers;
  for (const CheckpointFile &file : index.files) {
    where = checkpoint + "/" + file.name;
    headers.emplace_back();
    if (!openFile(where, headers.back(), error))
      return false;
    fileNumbers[file.name] = headers.size() - 1;
  }
  for (const std::vector<StoredTensor> *group : {&layouts.parameters, &layouts.state})
    for (const StoredTensor &stored : *group)
      if (!globalTensorsOf(layouts, stored, list, error))
        return false;
  for (const CheckpointTensor &entry : index.tensors) {
    const StoredTensor *stored = nullptr;
    for (const std::vector<StoredTensor> *group : {&layouts.parameters, &layouts.state})
      for (const StoredTensor &candidate : *group)
        if (candidate.tensor.name == entry.name)
          stored = &candidate;
    for (const CheckpointShard &shard : entry.shards) {
      auto number = fileNumbers.find(shard.file);
      if (number == fileNumbers.end()) {
        error = "tensor '" + entry.name + "': its shard's file '" + shard.file +
                "' is not listed in files";
        return false;
      }
      where = checkpoint + "/" + shard.file;
      const std::vector<SafetensorsTensor> &held = headers[number->second];
      auto found = std::find_if(held.begin(), held.end(),
                                [&](const SafetensorsTensor &t) { return t.key == shard.key; });
      if (found == held.end()) {
        error = "tensor '" + shard.key + "': is missing";
        return false;
      }
      if (found->dtype != stored->tensor.dtype || found->shape != stored->tensor.shape) {
        error = "tensor '" + shard.key + "': is " + dtypeName(found->dtype) + " " +
                shapeText(found->shape) + ", the checkpoint's layout stores " +
                dtypeName(stored->tensor.dtype) + " " + shapeText(stored->tensor.shape);
        return false;
      }
      const uint64_t element = dtypeSize(found->dtype);
      for (const GlobalRun &run :
           globalRuns(layouts, *stored, shard.coordinates, /*onlyFirstCopy=*/true))
        pieces[run.tensor].push_back({number->second,
                                      found->offset + static_cast<uint64_t>(run.local) * element,
                                      run.global, run.count});
    }
  }
  where = checkpoint + "/index.json";
  return checkCoverage(error);
}

bool GlobalTensorReader::openSafetensors(const std::string &path, std::string &error) {
  std::vector<SafetensorsTensor> tensors;
  if (!openFile(path, tensors, error))
    return false;
  for (const SafetensorsTensor &tensor : tensors) {
    list.push_back({tensor.key, tensor.dtype, tensor.shape, StoredRole::Parameter});
    pieces[tensor.key].push_back({paths.size() - 1, tensor.offset, 0, elementsOf(tensor.shape)});
  }
  return checkCoverage(error);
}

bool GlobalTensorReader::openTrainedBlobs(const std::vector<const Plan *> &plans,
                                          const std::vector<std::string> &dirs, bool staged,
                                          std::string &where, std::string &error) {
  const Plan &first = *plans.front();
  const Mesh mesh = first.mesh ? *first.mesh : Mesh::line("dp", 1);
  const CheckpointIndex index = makeIndex(plans, {}, {});
  std::map<std::string, size_t> blobs;
  for (const CheckpointTensor &tensor : index.tensors) {
    // The first plan that holds it, and where.
    size_t s = 0;
    const StoredTensor *stored = nullptr;
    for (; s < plans.size() && !stored; ++s)
      for (const StoredTensor *candidate : checkpointedTensors(*plans[s]))
        if (candidate->tensor.name == tensor.name)
          stored = candidate;
    const Plan &plan = *plans[s - 1];
    if (!globalTensorsOf(plan, *stored, list, error))
      return false;
    const size_t element = dtypeSize(stored->tensor.dtype);
    for (const CheckpointShard &shard : tensor.shards) {
      std::vector<int> coordinates(mesh.axisNames.size(), 0);
      for (const auto &[axis, coordinate] : shard.coordinates)
        coordinates[static_cast<size_t>(mesh.axisIndex(axis))] = coordinate;
      std::string path = dirs[s - 1] + "/" + weightsBlobName(plan, coordinates);
      if (staged)
        path = FileSet::stagedName(path);
      auto blob = blobs.find(path);
      if (blob == blobs.end()) {
        where = path;
        Descriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
        struct stat info {};
        if (fd.get() < 0 || ::fstat(fd.get(), &info) != 0) {
          error = systemError("cannot open");
          return false;
        }
        if (info.st_size != plan.weightsBytes) {
          error = "is not the " + std::to_string(plan.weightsBytes) + " bytes plan.json says";
          return false;
        }
        paths.push_back(path);
        descriptors.push_back(fd.release());
        blob = blobs.emplace(path, paths.size() - 1).first;
      }
      for (const GlobalRun &run :
           globalRuns(plan, *stored, shard.coordinates, /*onlyFirstCopy=*/true))
        pieces[run.tensor].push_back(
            {blob->second,
             static_cast<uint64_t>(stored->offset) + static_cast<uint64_t>(run.local) * element,
             run.global, run.count});
    }
  }
  where = dirs.front();
  return checkCoverage(error);
}

bool GlobalTensorReader::read(const std::string &name, int64_t begin, int64_t count, char *out,
                              std::string &where, std::string &error) const {
  const GlobalTensor *tensor = find(name);
  auto found = pieces.find(name);
  if (!tensor || found == pieces.end()) {
    error = "has no tensor '" + name + "'";
    return false;
  }
  const std::vector<Piece> &held = found->second;
  const std::size_t element = dtypeSize(tensor->dtype);
  const int64_t end = begin + count;
  // The first piece that ends after `begin`: pieces cover the tensor in order.
  auto piece = std::upper_bound(held.begin(), held.end(), begin, [](int64_t at, const Piece &p) {
    return at < p.global + p.count;
  });
  for (; piece != held.end() && piece->global < end; ++piece) {
    int64_t from = std::max(begin, piece->global), to = std::min(end, piece->global + piece->count);
    if (!readAt(descriptors[piece->file],
                piece->offset + static_cast<uint64_t>(from - piece->global) * element,
                static_cast<std::size_t>(to - from) * element,
                out + static_cast<std::size_t>(from - begin) * element, error)) {
      where = paths[piece->file];
      return false;
    }
  }
  return true;
}

uint32_t crc32(const void *data, std::size_t bytes, uint32_t crc) {
  const auto *p = static_cast<const unsigned char *>(data);
  crc = ~crc;
  for (std::size_t i = 0; i < bytes; ++i)
    crc = kCrcTable[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

std::string safetensorsHeader(const std::vector<SafetensorsTensor> &tensors,
                              const std::map<std::string, std::string> &metadata) {
  OrderedJson header = OrderedJson::object();
  header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const SafetensorsTensor &tensor : tensors) {
    header[tensor.key] = {{"dtype", safetensorsDType(tensor.dtype)},
                          {"shape", tensor.shape},
                          {"data_offsets", {offset, offset + tensor.bytes}}};
    offset += tensor.bytes;
  }
  std::string text = header.dump();
  // The data start 8-byte aligned, as the safetensors library writes them.
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>((static_cast<uint64_t>(text.size()) >> (8 * i)) & 0xFF);
  return bytes + text;
}

bool parseSafetensorsHeader(const std::string &header, uint64_t dataBytes,
                            std::vector<SafetensorsTensor> &tensors, std::string &error) {
  const uint64_t dataStart = 8 + header.size();
  Json json = Json::parse(header, nullptr, false);
  if (!json.is_object()) {
    error = "its safetensors header is not a JSON object";
    return false;
  }
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  tensors.clear();
  for (const auto &[key, entry] : json.items()) {
    if (key == "__metadata__")
      continue;
    const std::string where = "tensor '" + key + "': ";
    SafetensorsTensor tensor;
    tensor.key = key;
    if (!entry.is_object() || !entry.contains("dtype") || !entry["dtype"].is_string() ||
        !dtypeFromSafetensors(entry["dtype"].get<std::string>(), tensor.dtype)) {
      error = where + "has no dtype safetensors knows";
      return false;
    }
    if (!entry.contains("shape") || !entry["shape"].is_array()) {
      error = where + "has no shape";
      return false;
    }
    for (const Json &dim : entry["shape"]) {
      if (!dim.is_number_integer() || dim.get<int64_t>() < 0) {
        error = where + "has a shape that is not a list of dims >= 0";
        return false;
      }
      tensor.shape.push_back(dim.get<int64_t>());
    }
    const Json *offsets = entry.contains("data_offsets") ? &entry["data_offsets"] : nullptr;
    if (!offsets || !offsets->is_array() || offsets->size() != 2 ||
        !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
      error = where + "has no data_offsets [begin, end]";
      return false;
    }
    uint64_t begin = (*offsets)[0].get<uint64_t>(), end = (*offsets)[1].get<uint64_t>();
    std::optional<uint64_t> expected = byteCount(tensor.shape, tensor.dtype);
    if (begin > end || end > dataBytes) {
      error = where + "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
              "] lie outside the " + std::to_string(dataBytes) + " bytes of data";
      return false;
    }
    if (!expected || *expected != end - begin) {
      error = where + "holds " + std::to_string(end - begin) + " bytes, but " +
              dtypeName(tensor.dtype) + " " + shapeText(tensor.shape) + " takes " +
              (expected ? std::to_string(*expected) : std::string("more than 2^63"));
      return false;
    }
    tensor.offset = dataStart + begin;
    tensor.bytes = static_cast<std::size_t>(end - begin);
    ranges.push_back({begin, end});
    tensors.push_back(std::move(tensor));
  }
  // safetensors' own rule: the tensors cover the data exactly, without gaps
  // or overlaps.
  std::sort(ranges.begin(), ranges.end());
  uint64_t covered = 0;
  for (const auto &[begin, end] : ranges) {
    if (begin != covered) {
      error = "its safetensors data has a gap or overlap at byte " + std::to_string(covered);
      return false;
    }
    covered = end;
  }
  if (covered != dataBytes) {
    error = "holds " + std::to_string(dataBytes - covered) +
            " bytes after its last tensor (truncated or appended to)";
    return false;
  }
  return true;
}

std::vector<const StoredTensor *> checkpointedTensors(const Plan &plan) {
  std::vector<const StoredTensor *> tensors;
  for (const std::vector<StoredTensor> *list : {&plan.parameters, &plan.state})
    for (const StoredTensor &stored : *list)
      if (stored.role != StoredRole::Accumulator && stored.role != StoredRole::Coordinate &&
          stored.role != StoredRole::WeightCopy)
        tensors.push_back(&stored);
  return tensors;
}

std::optional<int64_t> checkpointStep(const std::string &name) { return stepOfName(name); }

std::string shardFileName(int rank) { return "rank-" + std::to_string(rank) + ".safetensors"; }

CheckpointIndex makeIndex(const std::vector<const Plan *> &plans,
                          const TrainingPosition &position, std::vector<CheckpointFile> files) {
  const Plan &plan = *plans.front();
  CheckpointIndex index;
  index.position = position;
  index.buildId = plan.buildId;
  index.model = plan.model;
  index.optimizer = optimizerName(plan);
  index.mesh = plan.mesh;
  for (const Plan *stage : plans)
    for (const FlatBuffer &flat : stage->flatBuffers)
      index.flatBuffers.push_back(flatBufferJson(flat));
  index.files = std::move(files);
  const Mesh mesh = plan.mesh ? *plan.mesh : Mesh::line("dp", 1);
  std::set<std::string> indexed;
  for (size_t stage = 0; stage < plans.size(); ++stage) {
    const Plan &owner = *plans[stage];
    for (const StoredTensor *stored : checkpointedTensors(owner)) {
      if (!indexed.insert(stored->tensor.name).second)
        continue;
      CheckpointTensor tensor;
      tensor.name = stored->tensor.name;
      tensor.layout = storedLayoutJson(owner, *stored);
      const std::vector<std::string> axes = varyingAxes(owner, *stored);
      const FlatBuffer *flat = flatBufferOf(owner, *stored);
      for (int rank = 0; rank < mesh.size(); ++rank) {
        const std::vector<int> coordinates = mesh.coordinates(rank);
        bool writes = true;
        CheckpointShard shard;
        for (size_t a = 0; a < mesh.axisNames.size(); ++a) {
          if (std::find(axes.begin(), axes.end(), mesh.axisNames[a]) != axes.end())
            shard.coordinates[mesh.axisNames[a]] = coordinates[a];
          else
            // Stage s runs on pp rank s mod pp (more stages than ranks:
            // the interleaved schedule).
            writes = writes &&
                     coordinates[a] ==
                         (mesh.axisNames[a] == "pp" ? static_cast<int>(stage) % mesh.shape[a] : 0);
        }
        if (!writes)
          continue;
        shard.file = shardFileName(rank);
        shard.key = stored->tensor.name;
        if (stored->sharding) {
          const Sharding &sharding = *stored->sharding;
          if (sharding.split)
            shard.boxes = splitBoxes(sharding.globalShape, *sharding.split,
                                     mesh.shape[mesh.axisIndex(sharding.split->axis)],
                                     shard.coordinates[sharding.split->axis]);
          else
            shard.boxes = {
                {std::vector<int64_t>(sharding.globalShape.size(), 0), sharding.globalShape}};
        }
        const FlatSlices *slices = stored->sharding && stored->sharding->slices
                                       ? &*stored->sharding->slices
                                   : flat ? &flat->slices
                                          : nullptr;
        if (slices) {
          int64_t r = shard.coordinates[slices->axis];
          shard.elements = {r * slices->slice, (r + 1) * slices->slice};
        }
        tensor.shards.push_back(std::move(shard));
      }
      index.tensors.push_back(std::move(tensor));
    }
  }
  return index;
}

std::string indexJson(const Plan &plan, const CheckpointIndex &index) {
  const TrainingPosition &position = index.position;
  OrderedJson json;
  json["format_version"] = kCheckpointFormatVersion;
  json["step"] = position.step;
  json["build_id"] = index.buildId;
  json["model"] = index.model;
  if (index.mesh) {
    OrderedJson axes = OrderedJson::array();
    for (size_t a = 0; a < index.mesh->axisNames.size(); ++a)
      axes.push_back({{"name", index.mesh->axisNames[a]}, {"size", index.mesh->shape[a]}});
    json["mesh"] = {{"text", index.mesh->text()}, {"axes", axes}};
  } else {
    json["mesh"] = nullptr;
  }
  json["weights_by_axes"] = plan.weightsByAxes;
  const TrainingSpec &spec = *plan.training;
  json["batch_size"] = position.batchSize;
  json["grad_accum"] = spec.gradAccum;
  if (spec.trainingInfo) {
    json["optimizer"] = {{"algorithm", "training_info"}};
  } else {
    const Hyperparameters &h = spec.hyperparameters;
    json["optimizer"] = {{"algorithm", "cleave"},
                         {"name", spec.optimizer},
                         {"lr", spec.lr},
                         {"hyperparameters",
                          {{"beta1", h.beta1},
                           {"beta2", h.beta2},
                           {"eps", h.eps},
                           {"weight_decay", h.weightDecay},
                           {"momentum", h.momentum},
                           {"nesterov", h.nesterov},
                           {"clip_grad_norm", h.clipGradNorm}}}};
  }
  const char *schedule = spec.schedule == LrSchedule::Linear   ? "linear"
                         : spec.schedule == LrSchedule::Cosine ? "cosine"
                                                               : "constant";
  json["lr_schedule"] = {{"kind", spec.trainingInfo ? "none" : schedule},
                         {"warmup", spec.warmup},
                         {"total_steps", position.totalSteps},
                         {"last_lr", position.lr},
                         {"next_step", position.step + 1}};
  const uint64_t consumed =
      static_cast<uint64_t>(position.step) * static_cast<uint64_t>(position.batchSize);
  json["sampler"] = {{"shuffle", position.shuffle},
                     {"seed", position.seed},
                     {"samples", position.samples},
                     {"epoch", consumed / static_cast<uint64_t>(position.samples)},
                     {"position", consumed % static_cast<uint64_t>(position.samples)}};
  json["rng"] = {{"dropout", "counter-based: stream = step * 2^32 + microbatch"},
                 {"next_stream", (static_cast<uint64_t>(position.step) + 1) << 32}};
  OrderedJson tensors = OrderedJson::array();
  for (const CheckpointTensor &tensor : index.tensors) {
    OrderedJson shards = OrderedJson::array();
    for (const CheckpointShard &shard : tensor.shards) {
      OrderedJson entry = {{"file", shard.file}, {"key", shard.key}};
      entry["coordinates"] = OrderedJson::object();
      for (const auto &[axis, coordinate] : shard.coordinates)
        entry["coordinates"][axis] = coordinate;
      if (!shard.boxes.empty()) {
        entry["boxes"] = OrderedJson::array();
        for (const Box &box : shard.boxes)
          entry["boxes"].push_back({{"offset", box.offset}, {"shape", box.shape}});
      }
      if (shard.elements)
        entry["elements"] = {shard.elements->first, shard.elements->second};
      shards.push_back(std::move(entry));
    }
    tensors.push_back({{"name", tensor.name},
                       {"layout", OrderedJson::parse(tensor.layout)},
                       {"shards", std::move(shards)}});
  }
  json["tensors"] = std::move(tensors);
  if (!index.flatBuffers.empty()) {
    OrderedJson flats = OrderedJson::array();
    for (const std::string &flat : index.flatBuffers)
      flats.push_back(OrderedJson::parse(flat));
    json["flat_parameters"] = flats;
  }
  OrderedJson files = OrderedJson::array();
  for (const CheckpointFile &file : index.files)
    files.push_back({{"name", file.name}, {"bytes", file.bytes}, {"crc32", crcText(file.crc32)}});
  json["files"] = std::move(files);
  // One key a line, and one tensor or file a line, so an index stays
  // readable and diffable.
  std::string text = "{";
  bool first = true;
  for (const auto &[key, value] : json.items()) {
    text += std::string(first ? "\n" : ",\n") + "  " + OrderedJson(key).dump() + ": ";
    first = false;
    if (!value.is_array() || value.empty()) {
      text += value.dump();
      continue;
    }
    for (size_t i = 0; i < value.size(); ++i)
      text += (i == 0 ? "[\n    " : ",\n    ") + value[i].dump();
    text += "\n  ]";
  }
  return text + "\n}\n";
}

bool parseIndex(const std::string &text, CheckpointIndex &index, std::string &error) {
  Json json = Json::parse(text, nullptr, false);
  if (!json.is_object()) {
    error = "is not a JSON object";
    return false;
  }
  IndexReader read(error);
  int64_t version = 0;
  if (!read.integer(json, "", "format_version", version))
    return false;
  if (version != kCheckpointFormatVersion)
    return read.fail("format_version", "is " + std::to_string(version) + ", this cleave reads " +
                                           std::to_string(kCheckpointFormatVersion));
  if (!read.string(json, "", "build_id", index.buildId) ||
      !read.string(json, "", "model", index.model) || !read.position(json, index.position) ||
      !read.optimizer(json, index.optimizer) || !read.mesh(json, index.mesh) ||
      !read.tensors(json, index.tensors) || !read.files(json, index.files))
    return false;
  // A list, one per pipeline stage; a checkpoint written before pipelines
  // had ZeRO 1/2 holds the one object.
  if (json.contains("flat_parameters")) {
    const auto &flats = json["flat_parameters"];
    if (flats.is_array())
      for (const auto &flat : flats)
        index.flatBuffers.push_back(flat.dump());
    else
      index.flatBuffers.push_back(flats.dump());
  }
  return true;
}

std::string CheckpointStore::stagingDir(int64_t step) const { return checkpointDir(step) + ".tmp"; }

std::string CheckpointStore::checkpointDir(int64_t step) const {
  return dir + "/step-" + std::to_string(step);
}

bool CheckpointStore::prepare(int64_t step, std::string &error) const {
  std::error_code ec;
  std::filesystem::remove_all(stagingDir(step), ec);
  if (!ec)
    std::filesystem::create_directories(stagingDir(step), ec);
  if (ec) {
    error = "cannot create: " + ec.message();
    return false;
  }
  return true;
}

bool CheckpointStore::writeShard(int64_t step, const std::string &file,
                                 const std::vector<SafetensorsTensor> &tensors,
                                 const std::map<std::string, std::string> &metadata,
                                 CheckpointFile &written, std::string &error) const {
  const std::string header = safetensorsHeader(tensors, metadata);
  std::vector<FileChunk> chunks{{header.data(), header.size()}};
  written = {file, header.size(), crc32(header.data(), header.size())};
  for (const SafetensorsTensor &tensor : tensors) {
    chunks.push_back({tensor.data, tensor.bytes});
    written.bytes += tensor.bytes;
    written.crc32 = crc32(tensor.data, tensor.bytes, written.crc32);
  }
  return writeFileAtomically(stagingDir(step) + "/" + file, chunks, error);
}

bool CheckpointStore::publish(int64_t step, const std::string &indexText, int64_t keep,
                              std::string &where, std::string &error) const {
  const std::string staging = stagingDir(step), target = checkpointDir(step);
  where = staging + "/index.json";
  if (!writeFileAtomically(where, {{indexText.data(), indexText.size()}}, error))
    return false;
  where = staging;
  if (!syncDirectory(staging, error))
    return false;
  where = target;
  std::error_code ec;
  std::filesystem::remove_all(target, ec);
  if (ec || std::rename(staging.c_str(), target.c_str()) != 0) {
    error = ec ? "cannot replace: " + ec.message() : systemError("cannot rename the staging dir");
    return false;
  }
  where = dir;
  if (!syncDirectory(dir, error))
    return false;
  where = dir + "/latest";
  const std::string latest = "step-" + std::to_string(step) + "\n";
  if (!writeFileAtomically(where, {{latest.data(), latest.size()}}, error))
    return false;
  where = dir;
  if (!syncDirectory(dir, error))
    return false;
  // The oldest complete checkpoints beyond `keep`, and staging directories
  // a crash left behind.
  std::vector<std::pair<int64_t, std::filesystem::path>> complete;
  for (const auto &entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0 &&
        stepOfName(name.substr(0, name.size() - 4)))
      std::filesystem::remove_all(entry.path(), ec);
    else if (std::optional<int64_t> n = stepOfName(name); n && *n != step)
      complete.push_back({*n, entry.path()});
  }
  std::sort(complete.begin(), complete.end());
  const size_t others = keep > 0 ? static_cast<size_t>(keep - 1) : complete.size();
  for (size_t i = 0; i + others < complete.size(); ++i)
    std::filesystem::remove_all(complete[i].second, ec);
  return true;
}

bool CheckpointStore::readLatest(std::string &checkpoint, CheckpointIndex &index,
                                 std::string &where, std::string &error) const {
  int64_t step = 0;
  return readLatestStep(step, where, error) &&
         readCheckpoint(step, checkpoint, index, where, error);
}

bool CheckpointStore::readLatestStep(int64_t &step, std::string &where, std::string &error) const {
  where = dir + "/latest";
  std::string latest;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    where = dir;
    error = "is not a directory";
    return false;
  }
  if (!readFile(where, 4096, latest, error)) {
    if (::access(where.c_str(), F_OK) != 0)
      error = "is missing: no complete checkpoint in " + dir;
    return false;
  }
  while (!latest.empty() && (latest.back() == '\n' || latest.back() == '\r'))
    latest.pop_back();
  std::optional<int64_t> named = stepOfName(latest);
  if (!named) {
    error = "does not name a checkpoint (step-N): '" + latest.substr(0, 64) + "'";
    return false;
  }
  step = *named;
  return true;
}

std::vector<int64_t> CheckpointStore::completeSteps() const {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const auto &entry : std::filesystem::directory_iterator(dir, ec))
    if (std::optional<int64_t> step = stepOfName(entry.path().filename().string()))
      steps.push_back(*step);
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

bool CheckpointStore::readCheckpoint(int64_t step, std::string &checkpoint,
                                     CheckpointIndex &index, std::string &where,
                                     std::string &error) const {
  std::error_code ec;
  checkpoint = checkpointDir(step);
  const bool present = std::filesystem::is_directory(checkpoint, ec);
  if (!present || !resolvesInside(checkpoint, dir)) {
    where = checkpoint;
    error = present ? "leaves " + dir + " (a symlink out)" : "is missing";
    return false;
  }
  where = checkpoint + "/index.json";
  std::string text;
  if (!readFile(where, kMaxIndexBytes, text, error) || !parseIndex(text, index, error))
    return false;
  if (index.position.step != step) {
    error = "step: is " + std::to_string(index.position.step) + ", but the directory is step-" +
            std::to_string(step);
    return false;
  }
  for (const CheckpointFile &file : index.files) {
    const bool plain = !file.name.empty() && file.name != "." && file.name != ".." &&
                       file.name.find('/') == std::string::npos &&
                       file.name.find('\0') == std::string::npos;
    if (!plain) {
      error = "files: '" + file.name + "' is not a file name inside the checkpoint";
      return false;
    }
  }
  for (const CheckpointTensor &tensor : index.tensors)
    for (const CheckpointShard &shard : tensor.shards)
      if (std::none_of(index.files.begin(), index.files.end(),
                       [&](const CheckpointFile &file) { return file.name == shard.file; })) {
        error = "tensor '" + tensor.name + "': its shard's file '" + shard.file +
                "' is not listed in files";
        return false;
      }
  return true;
}

bool CheckpointStore::verifyFile(const std::string &checkpoint, const CheckpointFile &file,
                                 std::string &error) const {
  const std::string path = checkpoint + "/" + file.name;
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    error = "is missing";
    return false;
  }
  if (!resolvesInside(path, checkpoint)) {
    error = "leaves the checkpoint " + checkpoint + " (a symlink out)";
    return false;
  }
  if (static_cast<uint64_t>(info.st_size) != file.bytes) {
    error = "is " + std::to_string(info.st_size) + " bytes, index.json says " +
            std::to_string(file.bytes) + " (truncated or replaced)";
    return false;
  }
  Descriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    error = systemError("cannot open");
    return false;
  }
  // Read through in pieces: a shard may be far larger than what one rank
  // needs of it.
  std::vector<char> buffer(4u << 20);
  uint32_t crc = 0;
  uint64_t done = 0;
  while (done < file.bytes) {
    ssize_t got = ::read(fd.get(), buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0) {
      error = got < 0 ? systemError("cannot read") : "ended early (truncated while read)";
      return false;
    }
    crc = crc32(buffer.data(), static_cast<std::size_t>(got), crc);
    done += static_cast<uint64_t>(got);
  }
  if (crc != file.crc32) {
    error = "has CRC-32 " + crcText(crc) + ", index.json says " + crcText(file.crc32) +
            " (the file is damaged)";
    return false;
  }
  return true;
}

} // namespace cleave::rt
