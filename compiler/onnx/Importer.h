//===- Importer.h - the state of one import, shared by its parts -*- C++ -*-===//
//
// The importer's core (compiler/OnnxImporter.cpp) reads the model, builds
// @forward's signature and imports the nodes; TrainingInfo.cpp adds the
// algorithms of a training_info step. Both are members of Importer.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COMPILER_ONNX_IMPORTER_H
#define CLEAVE_COMPILER_ONNX_IMPORTER_H

#include "compiler/OnnxImporter.h"
#include "compiler/onnx/NodeContext.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"

namespace cleave {

inline constexpr llvm::StringLiteral kTrainingDomain = "ai.onnx.preview.training";

inline llvm::StringRef displayDomain(llvm::StringRef domain) {
  return domain.empty() ? "ai.onnx" : domain;
}

inline bool isDefaultDomain(llvm::StringRef domain) {
  return domain.empty() || domain == "ai.onnx";
}

/// Tensors by name, in the order they are created.
using NamedTensors = std::vector<std::pair<std::string, TensorData>>;

// The annotations a model carries (Annotations.cpp, TrainingInfo.cpp), as
// attributes; each null when the model has none.

/// ONNX 1.18 `configuration`, for `cleave.configurations`.
mlir::ArrayAttr configurationsAttr(mlir::Builder &builder, const onnx::ModelProto &model);
/// A node's ONNX 1.18 `device_configurations` (sharding specs, pipeline
/// stage), for `cleave.device_config` on the op it produced.
mlir::ArrayAttr deviceConfigAttr(mlir::Builder &builder, const onnx::NodeProto &node);
/// training_info kept as it is (algorithm nodes, their initializers, the
/// bindings), for `cleave.training_info`.
mlir::ArrayAttr trainingInfoAttr(mlir::Builder &builder, const onnx::ModelProto &model);

class Importer {
public:
  Importer(mlir::MLIRContext &context, llvm::StringRef path, const ImportOptions &options,
           UserError &error);

  mlir::FailureOr<ImportedModel> run();

private:
  /// @forward's arguments, in order, and the tensors it starts with as
  /// constants.
  struct Signature {
    llvm::SmallVector<mlir::Type> types;
    llvm::SmallVector<std::string> names, kinds;
    NamedTensors constants;
  };
  /// How the nodes read each tensor: as a constant at import (a shape, a
  /// ratio) or as a tensor.
  struct Reads {
    llvm::StringSet<> asConstant, asTensor;
    /// What the main graph's nodes read as tensors.
    llvm::StringSet<> byGraph;
    bool onlyAsConstant(llvm::StringRef name) const {
      return asConstant.contains(name) && !asTensor.contains(name);
    }
  };
  /// @forward's results, in order.
  struct Outputs {
    llvm::SmallVector<mlir::Value> values;
    llvm::SmallVector<std::string> names;
  };

  mlir::LogicalResult fail(const llvm::Twine &what, const llvm::Twine &note = "",
                           ExitCode code = kExitBadInput) {
    error = UserError{path, what.str(), note.str(), code};
    return mlir::failure();
  }

  // The steps of run(), in order.
  mlir::LogicalResult readModel();
  mlir::LogicalResult readOpsets();
  mlir::LogicalResult checkSingleAssignment();
  mlir::LogicalResult checkInitializerInputs();
  mlir::LogicalResult checkInputShapes();
  mlir::LogicalResult checkTrainingInfo();
  Reads scanReads();
  mlir::LogicalResult readInitializers(const Reads &reads, ImportedModel &imported,
                                       Signature &signature);
  mlir::LogicalResult addInputs(const Reads &reads, Signature &signature);
  mlir::func::FuncOp createForward(ImportedModel &imported, const Signature &signature);
  mlir::LogicalResult importNodes(const onnx::GraphProto &graph, llvm::StringRef scope = {});
  mlir::LogicalResult collectOutputs(Outputs &outputs);
  mlir::LogicalResult importTrainingAlgorithms(ImportedModel &imported, Outputs &outputs);
  void finishForward(mlir::func::FuncOp forward, const Outputs &outputs);
  void annotateModule(mlir::ModuleOp module);

  mlir::FailureOr<mlir::RankedTensorType> inputType(const onnx::ValueInfoProto &input);
  mlir::LogicalResult importNode(const onnx::NodeProto &node, int index, llvm::StringRef scope);
  const OpImporterTable *tableFor(llvm::StringRef domain) const;
  std::string unsupportedOperators() const;
  mlir::LogicalResult checkOutput(const onnx::ValueInfoProto &output, mlir::Value value);
  /// Adds to `warnings` what training would do to `node`'s parameter inputs
  /// that its user may not expect.
  void noteTrainingHazards(const onnx::NodeProto &node, llvm::StringRef where,
                           llvm::ArrayRef<mlir::Value> inputs);
  /// Adds a cleave.constant for each of `tensors`, known by its name.
  void addConstants(const NamedTensors &tensors);

  // The parts of importTrainingAlgorithms (TrainingInfo.cpp).
  mlir::FailureOr<std::string>
  addTrainingLoss(Outputs &outputs, const llvm::StringMap<mlir::Value> &algorithmOutputs);
  void assignUpdates(const TrainingAlgorithm &algorithm,
                     const llvm::StringMap<mlir::Value> &current);

  mlir::MLIRContext &context;
  std::string path;
  const ImportOptions &options;
  UserError &error;
  mlir::OpBuilder builder;
  std::string modelDir;
  OpImporterTable opImporters;
  OpImporterTable trainingOpImporters;

  onnx::ModelProto model;
  llvm::StringMap<int64_t> opsets;
  llvm::StringMap<mlir::Value> values;
  llvm::StringSet<> initializerNames;
  std::vector<Warning> warnings;
  /// Whether @forward is the step of the model's training_info
  /// (ImportOptions::trainingInfo and a model that has one).
  bool stepFromTrainingInfo = false;

  // With a training_info step:
  /// Each update_binding key, with the index of its TrainingInfoProto.
  llvm::StringMap<unsigned> bound;
  /// The unbound initializers of each algorithm graph, which are constants.
  std::vector<NamedTensors> algorithmConstants;
  /// The names of the graph's inputs, arguments, parameters and state, and
  /// its constants: what every algorithm starts from.
  llvm::StringMap<mlir::Value> graphBase;
  /// The values earlier algorithms assigned, which a later algorithm reads
  /// as initializers: Gradient takes them as constants.
  llvm::DenseSet<mlir::Value> assignedEarlier;
};

} // namespace cleave

#endif
