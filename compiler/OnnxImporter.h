//===- OnnxImporter.h - ONNX ModelProto to the cleave dialect ---*- C++ -*-===//

#ifndef CLEAVE_COMPILER_ONNXIMPORTER_H
#define CLEAVE_COMPILER_ONNXIMPORTER_H

#include "compiler/Diagnostics.h"
#include "compiler/OnnxTensor.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <map>
#include <string>
#include <vector>

namespace cleave {

/// The oldest default-domain opset the importer accepts.
inline constexpr int64_t kMinOpset = 13;
/// The oldest IR version the importer accepts (the one opset 13 came with).
inline constexpr int64_t kMinIrVersion = 7;

struct ImportOptions {
  /// Static dims for graph inputs (`--input-shape name=8x32`).
  std::map<std::string, std::vector<int64_t>> inputShapes;
  /// Values for graph inputs that ops read as constants (a Reshape's shape,
  /// a Slice's starts...): such an input becomes a constant. Values for
  /// inputs read as tensors are ignored; those stay inputs.
  std::map<std::string, TensorData> inputValues;
  /// When positive, dim 0 of every graph input that --input-shape does not
  /// bind (the micro-batch of `cleave compile --batch-size`).
  int64_t batchSize = 0;
};

/// A float initializer: a trainable parameter, passed to @forward as an
/// argument named after it. Its initial value stays on the host.
struct Parameter {
  std::string name;
  TensorData value;
};

struct ImportedModel {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::vector<Parameter> parameters;
};

/// Imports the ONNX model at `path` into a module holding `func.func @forward`.
/// On bad input fills `error` and fails; never aborts.
mlir::FailureOr<ImportedModel> importOnnxModel(mlir::MLIRContext &context,
                                               llvm::StringRef path,
                                               const ImportOptions &options,
                                               UserError &error);

/// Parses one `--input-shape` value, `name=8x32` (a scalar is `name=`).
mlir::LogicalResult parseInputShape(llvm::StringRef flag, ImportOptions &options,
                                    UserError &error);

} // namespace cleave

#endif
