//===- OnnxTensor.cpp - ONNX tensors and types to MLIR -------------------===//

#include "compiler/OnnxTensor.h"
#include "dialects/Cleave/CleaveOps.h"

#include "onnx/onnx.pb.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cstring>

using namespace mlir;

namespace cleave {

Type elementTypeFromOnnx(MLIRContext *context, int32_t dataType) {
  auto integer = [&](unsigned width, bool isUnsigned) -> Type {
    return IntegerType::get(context, width,
                            isUnsigned ? IntegerType::Unsigned : IntegerType::Signless);
  };
  switch (dataType) {
  case onnx::TensorProto::FLOAT: return Float32Type::get(context);
  case onnx::TensorProto::DOUBLE: return Float64Type::get(context);
  case onnx::TensorProto::FLOAT16: return Float16Type::get(context);
  case onnx::TensorProto::BFLOAT16: return BFloat16Type::get(context);
  case onnx::TensorProto::INT8: return integer(8, false);
  case onnx::TensorProto::INT16: return integer(16, false);
  case onnx::TensorProto::INT32: return integer(32, false);
  case onnx::TensorProto::INT64: return integer(64, false);
  case onnx::TensorProto::UINT8: return integer(8, true);
  case onnx::TensorProto::UINT16: return integer(16, true);
  case onnx::TensorProto::UINT32: return integer(32, true);
  case onnx::TensorProto::UINT64: return integer(64, true);
  case onnx::TensorProto::BOOL: return integer(1, false);
  default: return nullptr;
  }
}

StringRef onnxTypeName(int32_t dataType) {
  if (!onnx::TensorProto::DataType_IsValid(dataType))
    return "UNKNOWN";
  static_assert(sizeof(int) == sizeof(int32_t));
  return onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(dataType));
}

namespace {

size_t elementBytes(Type type) {
  unsigned width = type.getIntOrFloatBitWidth();
  return width == 1 ? 1 : width / 8;
}

template <typename T, typename Field>
void appendAs(std::vector<char> &bytes, const Field &values) {
  for (auto v : values) {
    T narrowed = static_cast<T>(v);
    const char *p = reinterpret_cast<const char *>(&narrowed);
    bytes.insert(bytes.end(), p, p + sizeof(T));
  }
}

/// Values held in the typed repeated fields (no raw_data).
void readTypedFields(const onnx::TensorProto &tensor, std::vector<char> &bytes) {
  switch (tensor.data_type()) {
  case onnx::TensorProto::FLOAT: appendAs<float>(bytes, tensor.float_data()); break;
  case onnx::TensorProto::DOUBLE: appendAs<double>(bytes, tensor.double_data()); break;
  case onnx::TensorProto::INT64: appendAs<int64_t>(bytes, tensor.int64_data()); break;
  case onnx::TensorProto::UINT32: appendAs<uint32_t>(bytes, tensor.uint64_data()); break;
  case onnx::TensorProto::UINT64: appendAs<uint64_t>(bytes, tensor.uint64_data()); break;
  case onnx::TensorProto::INT32: appendAs<int32_t>(bytes, tensor.int32_data()); break;
  case onnx::TensorProto::INT16: appendAs<int16_t>(bytes, tensor.int32_data()); break;
  case onnx::TensorProto::UINT16:
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16: appendAs<uint16_t>(bytes, tensor.int32_data()); break;
  case onnx::TensorProto::INT8: appendAs<int8_t>(bytes, tensor.int32_data()); break;
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::BOOL: appendAs<uint8_t>(bytes, tensor.int32_data()); break;
  default: break;
  }
}

/// A decimal count of external_data (offset, length): digits only, no sign.
bool parseCount(const std::string &text, uint64_t &value) {
  return !text.empty() && !llvm::StringRef(text).getAsInteger(10, value);
}

/// The file `location` names, which must lie inside `modelDir` once every
/// link is followed, as onnx.checker requires: a model never reads a file
/// outside its own folder.
bool resolveInside(StringRef modelDir, const std::string &location, std::string &resolved,
                   std::string &error) {
  auto outside = [&](StringRef why) {
    error = "external data location '" + location + "' " + why.str() +
            ": it must name a file inside the model's folder";
    return false;
  };
  if (location.find('\0') != std::string::npos)
    return outside("holds a NUL byte");
  if (llvm::sys::path::is_absolute(location))
    return outside("is an absolute path");
  for (StringRef component : llvm::make_range(llvm::sys::path::begin(location),
                                              llvm::sys::path::end(location)))
    if (component == "..")
      return outside("leads out through '..'");
  llvm::SmallString<256> path(modelDir), realDir, realPath;
  llvm::sys::path::append(path, location);
  if (llvm::sys::fs::real_path(modelDir, realDir)) {
    error = "the model's folder '" + modelDir.str() + "' cannot be resolved";
    return false;
  }
  if (llvm::sys::fs::real_path(path, realPath)) {
    error = "external data file '" + location + "' not found";
    return false;
  }
  llvm::sys::path::append(realDir, "");
  if (!StringRef(realPath).starts_with(realDir))
    return outside("resolves to '" + realPath.str().str() + "'");
  if (!llvm::sys::fs::is_regular_file(realPath))
    return outside("is not a regular file");
  resolved = realPath.str().str();
  return true;
}

/// The bytes of `tensor` in its external data file, a view into `file`.
bool readExternal(const onnx::TensorProto &tensor, StringRef modelDir,
                  std::unique_ptr<llvm::MemoryBuffer> &file, StringRef &bytes,
                  std::string &error) {
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const auto &entry : tensor.external_data()) {
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset" || entry.key() == "length") {
      uint64_t value;
      if (!parseCount(entry.value(), value)) {
        error = "external data " + entry.key() + " '" + entry.value() +
                "' is not a byte count";
        return false;
      }
      (entry.key() == "offset" ? offset : length.emplace()) = value;
    }
  }
  if (location.empty()) {
    error = "external data has no location";
    return false;
  }
  std::string path;
  if (!resolveInside(modelDir, location, path, error))
    return false;
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    error = "external data file '" + location + "' cannot be read: " +
            buffer.getError().message();
    return false;
  }
  uint64_t size = (*buffer)->getBufferSize();
  uint64_t count = length.value_or(size > offset ? size - offset : 0);
  if (offset > size || count > size - offset) {
    error = "external data file '" + location + "' is too short (" + std::to_string(size) +
            " bytes) for offset " + std::to_string(offset) + " and length " +
            std::to_string(count);
    return false;
  }
  file = std::move(*buffer);
  bytes = file->getBuffer().substr(offset, count);
  return true;
}

} // namespace

bool readTensorType(MLIRContext *context, const onnx::TensorProto &tensor, TensorData &data,
                    std::string &error) {
  Type element = elementTypeFromOnnx(context, tensor.data_type());
  if (!element) {
    error = "element type " + onnxTypeName(tensor.data_type()).str() + " is not supported";
    return false;
  }
  SmallVector<int64_t> shape(tensor.dims().begin(), tensor.dims().end());
  if (std::optional<std::string> why = tensorShapeError(shape)) {
    error = *why;
    return false;
  }
  data.type = RankedTensorType::get(shape, element);
  data.bytes.clear();
  return true;
}

bool readTensor(MLIRContext *context, const onnx::TensorProto &tensor, StringRef modelDir,
                TensorData &data, std::string &error) {
  return readTensorType(context, tensor, data, error) &&
         readTensorValues(tensor, modelDir, data, error);
}

bool readTensorValues(const onnx::TensorProto &tensor, StringRef modelDir, TensorData &data,
                      std::string &error) {
  Type element = data.type.getElementType();
  uint64_t expected = data.type.getNumElements() * elementBytes(element);
  auto holds = [&](uint64_t size) {
    if (size == expected)
      return true;
    error = "holds " + std::to_string(size) + " bytes of data, but " + std::to_string(expected) +
            " are needed for its shape and type";
    return false;
  };
  data.bytes.clear();
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    std::unique_ptr<llvm::MemoryBuffer> file;
    StringRef bytes;
    if (!readExternal(tensor, modelDir, file, bytes, error) || !holds(bytes.size()))
      return false;
    data.bytes.assign(bytes.begin(), bytes.end());
  } else if (tensor.has_raw_data()) {
    if (!holds(tensor.raw_data().size()))
      return false;
    data.bytes.assign(tensor.raw_data().begin(), tensor.raw_data().end());
  } else {
    readTypedFields(tensor, data.bytes);
    if (!holds(data.bytes.size()))
      return false;
  }
  return true;
}

DenseElementsAttr toElementsAttr(const TensorData &data) {
  if (data.type.getElementType().isInteger(1)) {
    SmallVector<bool> values;
    for (char byte : data.bytes)
      values.push_back(byte != 0);
    return DenseElementsAttr::get(data.type, ArrayRef<bool>(values));
  }
  return DenseElementsAttr::getFromRawBuffer(data.type, data.bytes);
}

} // namespace cleave
