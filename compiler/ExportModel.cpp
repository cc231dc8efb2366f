//===- ExportModel.cpp - trained weights back into the ONNX model --------===//

#include "compiler/ExportModel.h"

#include "onnx/onnx.pb.h"
#include "runtime/Checkpoint.h"
#include "runtime/Plan.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstring>
#include <set>

namespace cleave {

void setTensorBytes(onnx::TensorProto &tensor, std::string bytes) {
  tensor.clear_float_data();
  tensor.clear_double_data();
  tensor.clear_int32_data();
  tensor.clear_int64_data();
  tensor.clear_uint64_data();
  tensor.clear_external_data();
  tensor.set_data_location(onnx::TensorProto::DEFAULT);
  tensor.set_raw_data(std::move(bytes));
}

mlir::LogicalResult exportTrainedModel(const std::string &programDir, const std::string &resultsDir,
                                       bool staged, const std::string &outputPath,
                                       rt::FileSet &files, UserError &error) {
  auto fail = [&](const std::string &where, const std::string &what) {
    error = UserError{where, what, "", kExitBadInput};
    return mlir::failure();
  };
  // One program's plan, or each pipeline stage's.
  std::vector<rt::Plan> plans;
  std::vector<std::string> programDirs, blobDirs;
  std::string where, message;
  if (!rt::readCompiledPlans(programDir, plans, programDirs, where, message))
    return fail(where, message);
  const rt::Plan &plan = plans.front();
  std::vector<const rt::Plan *> planList;
  std::set<std::string> parameters;
  for (size_t s = 0; s < plans.size(); ++s) {
    planList.push_back(&plans[s]);
    blobDirs.push_back(plans.size() == 1 ? resultsDir : resultsDir + "/stage" + std::to_string(s));
    for (const rt::StoredTensor &parameter : plans[s].parameters)
      parameters.insert(parameter.tensor.name);
  }

  // The trained tensors, put together from the blobs as a checkpoint's are
  // from its shards.
  rt::GlobalTensorReader trained;
  if (!trained.openTrainedBlobs(planList, blobDirs, staged, where, message))
    return fail(where, message);
  const std::string &modelPath = plan.model;
  auto modelBytes = llvm::MemoryBuffer::getFile(modelPath, false, false);
  onnx::ModelProto model;
  if (!modelBytes || !model.ParseFromArray((*modelBytes)->getBufferStart(),
                                           static_cast<int>((*modelBytes)->getBufferSize())))
    return fail(modelPath, "the compiled model cannot be read any more");

  size_t replaced = 0;
  auto replace = [&](onnx::TensorProto &tensor, bool &isParameter) {
    const rt::GlobalTensor *value = trained.find(tensor.name());
    isParameter = value && value->role == rt::StoredRole::Parameter;
    if (!value || !rt::isModelInitializer(*value, rt::optimizerName(plan)))
      return mlir::success();
    int64_t elements = 1;
    for (int64_t d : value->shape)
      elements *= d;
    std::string bytes(static_cast<size_t>(elements) * rt::dtypeSize(value->dtype), '\0');
    if (!trained.read(value->name, 0, elements, bytes.data(), where, message))
      return fail(where, message);
    setTensorBytes(tensor, std::move(bytes));
    return mlir::success();
  };
  auto replaceAll = [&](auto &initializers) {
    for (onnx::TensorProto &tensor : initializers) {
      bool isParameter = false;
      if (failed(replace(tensor, isParameter)))
        return mlir::failure();
      replaced += isParameter;
    }
    return mlir::success();
  };
  if (failed(replaceAll(*model.mutable_graph()->mutable_initializer())))
    return mlir::failure();
  for (onnx::TrainingInfoProto &info : *model.mutable_training_info())
    if (failed(replaceAll(*info.mutable_algorithm()->mutable_initializer())))
      return mlir::failure();
  if (replaced != parameters.size())
    return fail(modelPath, "holds " + std::to_string(replaced) + " of the " +
                               std::to_string(parameters.size()) +
                               " parameters the plan lists");
  std::string serialized;
  if (!model.SerializeToString(&serialized))
    return fail(outputPath, "the model is too large to serialize (over 2 GiB)");
  std::string written;
  if (!files.stage(outputPath, {{serialized.data(), serialized.size()}}, written)) {
    error = UserError{outputPath, written, "", kExitBadInput};
    return mlir::failure();
  }
  return mlir::success();
}

} // namespace cleave
