//===- OnnxTensor.h - ONNX tensors and types to MLIR ------------*- C++ -*-===//

#ifndef CLEAVE_COMPILER_ONNXTENSOR_H
#define CLEAVE_COMPILER_ONNXTENSOR_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace onnx {
class TensorProto;
}

namespace cleave {

/// The MLIR element type of an ONNX TensorProto.DataType, or null for types
/// cleave does not handle (strings, complex, 4- and 8-bit floats).
mlir::Type elementTypeFromOnnx(mlir::MLIRContext *context, int32_t dataType);

/// The ONNX name of a TensorProto.DataType, for messages ("FLOAT", "STRING").
llvm::StringRef onnxTypeName(int32_t dataType);

/// A tensor's type and bytes in host (little-endian, densely packed) layout;
/// bools are one byte each.
struct TensorData {
  mlir::RankedTensorType type;
  std::vector<char> bytes;
};

/// Reads `tensor`'s values, from its typed fields, raw_data, or an external
/// data file looked up relative to `modelDir`. On failure returns false and
/// sets `error` to a message naming what is wrong.
bool readTensor(mlir::MLIRContext *context, const onnx::TensorProto &tensor,
                llvm::StringRef modelDir, TensorData &data, std::string &error);

/// Reads `tensor`'s type alone (its element type and dims, checked as
/// readTensor checks them), leaving `data.bytes` empty.
bool readTensorType(mlir::MLIRContext *context, const onnx::TensorProto &tensor, TensorData &data,
                    std::string &error);

/// Reads `tensor`'s values into `data.bytes`, for the type readTensorType
/// set in `data`.
bool readTensorValues(const onnx::TensorProto &tensor, llvm::StringRef modelDir, TensorData &data,
                      std::string &error);

/// `data` as a dense literal of its type.
mlir::DenseElementsAttr toElementsAttr(const TensorData &data);

} // namespace cleave

#endif
