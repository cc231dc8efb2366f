//===- OnnxTensor.cpp - ONNX tensors and types to MLIR -------------------===//

#include "compiler/OnnxTensor.h"

#include "onnx/onnx.pb.h"

#include "llvm/ADT/SmallString.h"
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

bool readExternal(const onnx::TensorProto &tensor, StringRef modelDir,
                  std::vector<char> &bytes, std::string &error) {
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const auto &entry : tensor.external_data()) {
    if (entry.key() == "location")
      location = entry.value();
    else if (entry.key() == "offset")
      offset = std::strtoull(entry.value().c_str(), nullptr, 10);
    else if (entry.key() == "length")
      length = std::strtoull(entry.value().c_str(), nullptr, 10);
  }
  if (location.empty()) {
    error = "external data has no location";
    return false;
  }
  llvm::SmallString<256> path(modelDir);
  llvm::sys::path::append(path, location);
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    error = "external data file '" + location + "' not found";
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
  const char *start = (*buffer)->getBufferStart() + offset;
  bytes.assign(start, start + count);
  return true;
}

} // namespace

bool readTensor(MLIRContext *context, const onnx::TensorProto &tensor, StringRef modelDir,
                TensorData &data, std::string &error) {
  Type element = elementTypeFromOnnx(context, tensor.data_type());
  if (!element) {
    error = "element type " + onnxTypeName(tensor.data_type()).str() + " is not supported";
    return false;
  }
  SmallVector<int64_t> shape;
  for (int64_t d : tensor.dims()) {
    if (d < 0) {
      error = "has a negative dim";
      return false;
    }
    shape.push_back(d);
  }
  data.type = RankedTensorType::get(shape, element);
  data.bytes.clear();
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    if (!readExternal(tensor, modelDir, data.bytes, error))
      return false;
  } else if (tensor.has_raw_data()) {
    data.bytes.assign(tensor.raw_data().begin(), tensor.raw_data().end());
  } else {
    readTypedFields(tensor, data.bytes);
  }
  size_t expected = data.type.getNumElements() * elementBytes(element);
  if (data.bytes.size() != expected) {
    error = "holds " + std::to_string(data.bytes.size()) + " bytes of data, but " +
            std::to_string(expected) + " are needed for its shape and type";
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
