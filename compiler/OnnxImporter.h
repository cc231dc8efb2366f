//===- OnnxImporter.h - ONNX ModelProto to the cleave dialect ---*- C++ -*-===//

#ifndef CLEAVE_COMPILER_ONNXIMPORTER_H
#define CLEAVE_COMPILER_ONNXIMPORTER_H

#include "compiler/Diagnostics.h"
#include "compiler/OnnxTensor.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cleave {

/// The oldest default-domain opset the importer accepts.
inline constexpr int64_t kMinOpset = 13;
/// The oldest IR version the importer accepts (the one opset 13 came with).
inline constexpr int64_t kMinIrVersion = 7;
/// The newest default-domain opset and IR version the importer knows: those
/// of ONNX 1.19. A newer model may hold semantics cleave has never seen.
inline constexpr int64_t kMaxOpset = 24;
inline constexpr int64_t kMaxIrVersion = 12;

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
  /// Import the model's training_info, when it has one, as the training step
  /// (`cleave compile --train`): @forward runs the main graph, then each
  /// algorithm graph, and ends with a `cleave.assign` per update_binding.
  /// Without it training_info is kept as the module attribute
  /// `cleave.training_info`.
  bool trainingInfo = false;
  /// With `trainingInfo`: the output logged as the step's loss (`--loss
  /// NAME`); empty: the main graph's only scalar float output.
  std::string trainingLoss;
  /// With `trainingInfo`: the flags given for cleave's own step builder
  /// (`--optimizer`, `--lr`...), refused when training_info defines the step.
  std::vector<std::string> stepFlags;
  /// Read the parameters' values; false: only their types (`--emit plan`,
  /// which writes no weights: a model's external data may then be absent).
  bool parameterValues = true;
};

/// An initializer held in the weights blob and passed to @forward as an
/// argument named after it: a float initializer (a trainable parameter, kind
/// "param"), or state a training_info step updates (kind "state"). Its
/// initial value stays on the host.
struct Parameter {
  std::string name;
  TensorData value;
};

/// The training step a model's training_info defines, as imported
/// (ImportOptions::trainingInfo).
struct TrainingAlgorithm {
  /// The result of @forward the driver logs as the step's loss.
  std::string loss;
  /// Every update_binding, in order: the initializer assigned and the output
  /// that gives its new value.
  std::vector<std::pair<std::string, std::string>> updates;
};

struct ImportedModel {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// Arguments of kind "param".
  std::vector<Parameter> parameters;
  /// Arguments of kind "state" with an initial value: the initializers a
  /// training_info step updates that are not parameters (optimizer moments,
  /// iteration counters).
  std::vector<Parameter> state;
  /// Set when @forward is the step of the model's training_info.
  std::optional<TrainingAlgorithm> trainingAlgorithm;
  /// What training this model would do that its user may not expect
  /// (parameters shared behind Identity, inference-mode BatchNorm statistics
  /// that would train); `cleave compile --train` prints them.
  std::vector<Warning> trainingWarnings;
};

/// Imports the ONNX model at `path` into a module holding `func.func @forward`.
/// On bad input fills `error` and fails; never aborts.
mlir::FailureOr<ImportedModel> importOnnxModel(mlir::MLIRContext &context,
                                               llvm::StringRef path,
                                               const ImportOptions &options,
                                               UserError &error);

/// Parses one `--input-shape` value: `name=8x32` (a scalar is `name=`), or
/// several joined by commas, `a=8x16,b=8x16`; a name bound twice is refused.
mlir::LogicalResult parseInputShape(llvm::StringRef flag, ImportOptions &options,
                                    UserError &error);

} // namespace cleave

#endif
