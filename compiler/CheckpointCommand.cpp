//===- CheckpointCommand.cpp - cleave ckpt -------------------------------===//

#include "compiler/CheckpointCommand.h"

#include "compiler/Diagnostics.h"
#include "compiler/ExportModel.h"
#include "onnx/onnx.pb.h"
#include "runtime/Checkpoint.h"
#include "runtime/Files.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <map>

namespace cleave {
namespace {

/// A checkpoint opened for reading, every file verified.
struct OpenCheckpoint {
  std::string dir;
  rt::CheckpointIndex index;
  rt::GlobalTensorReader reader;
};

/// Opens `dir`: a step-N directory (it holds index.json), or a
/// --checkpoint-dir, for the checkpoint its `latest` names.
bool openCheckpoint(const std::string &dir, OpenCheckpoint &open, UserError &error) {
  std::string where, message;
  llvm::StringRef path = llvm::sys::path::remove_leading_dotslash(dir);
  while (path.size() > 1 && path.ends_with("/"))
    path = path.drop_back();
  std::optional<int64_t> step = rt::checkpointStep(llvm::sys::path::filename(path).str());
  const bool stepDir = step && llvm::sys::fs::exists(dir + "/index.json");
  const std::string parent = llvm::sys::path::parent_path(path).str();
  const rt::CheckpointStore store(stepDir ? (parent.empty() ? "." : parent) : path.str());
  bool read = stepDir ? store.readCheckpoint(*step, open.dir, open.index, where, message)
                      : store.readLatest(open.dir, open.index, where, message);
  for (size_t i = 0; read && i < open.index.files.size(); ++i) {
    where = open.dir + "/" + open.index.files[i].name;
    read = store.verifyFile(open.dir, open.index.files[i], message);
  }
  if (read)
    read = open.reader.openCheckpoint(open.dir, open.index, where, message);
  if (!read)
    error = {where, message, "", kExitBadInput};
  return read;
}

/// What leaves a checkpoint as a model's initializers.
std::vector<const rt::GlobalTensor *> initializerTensors(const OpenCheckpoint &open) {
  std::vector<const rt::GlobalTensor *> tensors;
  for (const rt::GlobalTensor &tensor : open.reader.tensors())
    if (rt::isModelInitializer(tensor, open.index.optimizer))
      tensors.push_back(&tensor);
  return tensors;
}

int64_t elementCount(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Reads the whole of `tensor`.
bool readWhole(const OpenCheckpoint &open, const rt::GlobalTensor &tensor, std::string &bytes,
               UserError &error) {
  bytes.assign(static_cast<size_t>(elementCount(tensor.shape)) * rt::dtypeSize(tensor.dtype),
               '\0');
  std::string where, message;
  if (open.reader.read(tensor.name, 0, elementCount(tensor.shape), bytes.data(), where,
                       message))
    return true;
  error = {where, message, "", kExitBadInput};
  return false;
}

std::optional<int32_t> onnxDataType(rt::DType type) {
  using rt::DType;
  switch (type) {
  case DType::F32: return onnx::TensorProto::FLOAT;
  case DType::F64: return onnx::TensorProto::DOUBLE;
  case DType::F16: return onnx::TensorProto::FLOAT16;
  case DType::BF16: return onnx::TensorProto::BFLOAT16;
  case DType::I8: return onnx::TensorProto::INT8;
  case DType::I16: return onnx::TensorProto::INT16;
  case DType::I32: return onnx::TensorProto::INT32;
  case DType::I64: return onnx::TensorProto::INT64;
  case DType::U8: return onnx::TensorProto::UINT8;
  case DType::U16: return onnx::TensorProto::UINT16;
  case DType::U32: return onnx::TensorProto::UINT32;
  case DType::U64: return onnx::TensorProto::UINT64;
  case DType::Bool: return onnx::TensorProto::BOOL;
  }
  return std::nullopt;
}

std::string boxText(const rt::Box &box) {
  std::string text = "[";
  for (size_t d = 0; d < box.offset.size(); ++d)
    text += (d ? ", " : "") + std::to_string(box.offset[d]) + ":" +
            std::to_string(box.offset[d] + box.shape[d]);
  return text + "]";
}

} // namespace

int inspectCheckpoint(const std::string &dir, llvm::raw_ostream &os) {
  OpenCheckpoint open;
  UserError error;
  if (!openCheckpoint(dir, open, error)) {
    printError(error);
    return error.code;
  }
  const rt::CheckpointIndex &index = open.index;
  const rt::TrainingPosition &at = index.position;
  os << "checkpoint " << open.dir << "\n";
  os << "step " << at.step << ", mesh " << (index.mesh ? index.mesh->text() : "none")
     << ", optimizer " << index.optimizer << ", batch " << at.batchSize << ", sampler "
     << (at.shuffle ? "shuffled, seed " + std::to_string(at.seed) : std::string("in file order"))
     << " over " << at.samples << " samples, schedule of " << at.totalSteps << " steps\n";
  os << "tensors (" << open.reader.tensors().size() << "):\n";
  for (const rt::GlobalTensor &tensor : open.reader.tensors())
    os << "  " << tensor.name << "  " << rt::dtypeName(tensor.dtype) << " "
       << rt::shapeText(tensor.shape) << "\n";
  os << "shards:\n";
  for (const rt::CheckpointTensor &tensor : index.tensors)
    for (const rt::CheckpointShard &shard : tensor.shards) {
      os << "  " << tensor.name << "  " << shard.file << " '" << shard.key << "'";
      for (const auto &[axis, coordinate] : shard.coordinates)
        os << " " << axis << "=" << coordinate;
      for (const rt::Box &box : shard.boxes)
        os << " " << boxText(box);
      if (shard.elements)
        os << " elements " << shard.elements->first << ":" << shard.elements->second;
      os << "\n";
    }
  os << "files (" << index.files.size() << "), every checksum verified:\n";
  for (const rt::CheckpointFile &file : index.files) {
    char crc[9];
    std::snprintf(crc, sizeof crc, "%08x", file.crc32);
    os << "  " << file.name << "  " << file.bytes << " bytes  crc32 " << crc << "\n";
  }
  return kExitOk;
}

int consolidateCheckpoint(const std::string &dir, const std::string &output) {
  OpenCheckpoint open;
  UserError error;
  if (!openCheckpoint(dir, open, error)) {
    printError(error);
    return error.code;
  }
  const std::vector<const rt::GlobalTensor *> tensors = initializerTensors(open);
  std::vector<std::string> values(tensors.size());
  std::vector<rt::SafetensorsTensor> entries;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!readWhole(open, *tensors[i], values[i], error)) {
      printError(error);
      return error.code;
    }
    entries.push_back({tensors[i]->name, tensors[i]->dtype, tensors[i]->shape, values[i].data(),
                       values[i].size()});
  }
  const std::string header = rt::safetensorsHeader(
      entries, {{"format", "cleave"}, {"step", std::to_string(open.index.position.step)}});
  std::vector<rt::FileChunk> chunks{{header.data(), header.size()}};
  for (const std::string &value : values)
    chunks.push_back({value.data(), value.size()});
  std::string message;
  if (!rt::writeFileAtomically(output, chunks, message)) {
    printError({output, message, "", kExitBadInput});
    return kExitBadInput;
  }
  return kExitOk;
}

int exportCheckpoint(const std::string &dir, const std::string &modelPath,
                     const std::string &output) {
  OpenCheckpoint open;
  UserError error;
  if (!openCheckpoint(dir, open, error)) {
    printError(error);
    return error.code;
  }
  auto bytes = llvm::MemoryBuffer::getFile(modelPath, false, false);
  onnx::ModelProto model;
  if (!bytes) {
    printError({modelPath, "cannot open: " + bytes.getError().message()});
    return kExitBadInput;
  }
  if (!model.ParseFromArray((*bytes)->getBufferStart(),
                            static_cast<int>((*bytes)->getBufferSize()))) {
    printError({modelPath, "is not an ONNX model"});
    return kExitBadInput;
  }
  // The model's initializers by name: the main graph's, then those of its
  // training algorithms.
  std::map<std::string, onnx::TensorProto *> initializers;
  for (onnx::TensorProto &tensor : *model.mutable_graph()->mutable_initializer())
    initializers.emplace(tensor.name(), &tensor);
  for (onnx::TrainingInfoProto &info : *model.mutable_training_info())
    for (onnx::TensorProto &tensor : *info.mutable_algorithm()->mutable_initializer())
      initializers.emplace(tensor.name(), &tensor);
  for (const rt::GlobalTensor *tensor : initializerTensors(open)) {
    auto found = initializers.find(tensor->name);
    const std::string where = modelPath + ": initializer '" + tensor->name + "'";
    if (found == initializers.end()) {
      printError({where, "is missing: the checkpoint is of another model",
                  "pass the model the checkpoint's run compiled: " + open.index.model});
      return kExitBadInput;
    }
    onnx::TensorProto &initializer = *found->second;
    std::vector<int64_t> dims(initializer.dims().begin(), initializer.dims().end());
    if (onnxDataType(tensor->dtype) != initializer.data_type() || dims != tensor->shape) {
      printError({where,
                  "is not the checkpoint's " + std::string(rt::dtypeName(tensor->dtype)) + " " +
                      rt::shapeText(tensor->shape) + ": the checkpoint is of another model",
                  "pass the model the checkpoint's run compiled: " + open.index.model});
      return kExitBadInput;
    }
    std::string value;
    if (!readWhole(open, *tensor, value, error)) {
      printError(error);
      return error.code;
    }
    setTensorBytes(initializer, std::move(value));
  }
  std::string serialized, message;
  if (!model.SerializeToString(&serialized)) {
    printError({output, "the model is too large to serialize (over 2 GiB)"});
    return kExitBadInput;
  }
  if (!rt::writeFileAtomically(output, {{serialized.data(), serialized.size()}}, message)) {
    printError({output, message, "", kExitBadInput});
    return kExitBadInput;
  }
  return kExitOk;
}

} // namespace cleave
