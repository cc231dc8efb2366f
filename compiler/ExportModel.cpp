//===- ExportModel.cpp - trained weights back into the ONNX model --------===//

#include "compiler/ExportModel.h"

#include "onnx/onnx.pb.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <fstream>

#include <nlohmann/json.hpp>

namespace cleave {

mlir::LogicalResult exportTrainedModel(const std::string &programDir,
                                       const std::string &weightsPath,
                                       const std::string &outputPath, UserError &error) {
  auto fail = [&](const std::string &where, const std::string &what) {
    error = UserError{where, what, "", kExitBadInput};
    return mlir::failure();
  };
  std::string planPath = programDir + "/plan.json";
  std::ifstream planFile(planPath);
  nlohmann::json plan = nlohmann::json::parse(planFile, nullptr, /*allow_exceptions=*/false);
  if (!plan.is_object() || !plan.contains("model") || !plan["model"].is_string() ||
      !plan.contains("parameters") || !plan["parameters"].is_array())
    return fail(planPath, "not a plan with a model and parameters");

  auto weights = llvm::MemoryBuffer::getFile(weightsPath, false, false);
  if (!weights)
    return fail(weightsPath, "cannot open: " + weights.getError().message());
  std::string modelPath = plan["model"].get<std::string>();
  auto modelBytes = llvm::MemoryBuffer::getFile(modelPath, false, false);
  onnx::ModelProto model;
  if (!modelBytes || !model.ParseFromArray((*modelBytes)->getBufferStart(),
                                           static_cast<int>((*modelBytes)->getBufferSize())))
    return fail(modelPath, "the compiled model cannot be read any more");

  llvm::StringMap<std::pair<int64_t, int64_t>> placed, state; // name -> offset, bytes
  for (const auto &entry : plan["parameters"])
    placed[entry.value("name", "")] = {entry.value("offset", int64_t(0)),
                                       entry.value("bytes", int64_t(0))};
  // State that is an initializer too (a training_info step's moments and
  // counters) is written back as well; optimizer slots of cleave's own are not.
  if (plan.contains("state") && plan["state"].is_array())
    for (const auto &entry : plan["state"])
      state[entry.value("name", "")] = {entry.value("offset", int64_t(0)),
                                        entry.value("bytes", int64_t(0))};
  size_t replaced = 0;
  auto replace = [&](onnx::TensorProto &tensor, bool &isParameter) {
    auto found = placed.find(tensor.name());
    isParameter = found != placed.end();
    if (!isParameter && (found = state.find(tensor.name())) == state.end())
      return true;
    auto [offset, bytes] = found->second;
    if (offset + bytes > static_cast<int64_t>((*weights)->getBufferSize()))
      return false;
    tensor.clear_float_data();
    tensor.clear_double_data();
    tensor.clear_int32_data();
    tensor.clear_int64_data();
    tensor.clear_uint64_data();
    tensor.clear_external_data();
    tensor.set_data_location(onnx::TensorProto::DEFAULT);
    tensor.set_raw_data((*weights)->getBufferStart() + offset, bytes);
    return true;
  };
  auto replaceAll = [&](auto &initializers) {
    for (onnx::TensorProto &tensor : initializers) {
      bool isParameter = false;
      if (!replace(tensor, isParameter))
        return fail(weightsPath, "is too short for '" + tensor.name() + "'");
      replaced += isParameter;
    }
    return mlir::success();
  };
  if (failed(replaceAll(*model.mutable_graph()->mutable_initializer())))
    return mlir::failure();
  for (onnx::TrainingInfoProto &info : *model.mutable_training_info())
    if (failed(replaceAll(*info.mutable_algorithm()->mutable_initializer())))
      return mlir::failure();
  if (replaced != placed.size())
    return fail(modelPath, "holds " + std::to_string(replaced) + " of the " +
                               std::to_string(placed.size()) + " parameters the plan lists");
  std::string serialized;
  if (!model.SerializeToString(&serialized))
    return fail(outputPath, "the model is too large to serialize (over 2 GiB)");
  if (llvm::Error written = llvm::writeToOutput(outputPath, [&](llvm::raw_ostream &os) {
        os << serialized;
        return llvm::Error::success();
      })) {
    error = UserError{outputPath,
                      "cannot write: " + llvm::errorToErrorCode(std::move(written)).message(),
                      "", kExitBadUsage};
    return mlir::failure();
  }
  return mlir::success();
}

} // namespace cleave
