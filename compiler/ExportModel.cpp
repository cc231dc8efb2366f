//===- ExportModel.cpp - trained weights back into the ONNX model --------===//

#include "compiler/ExportModel.h"

#include "onnx/onnx.pb.h"
#include "runtime/Plan.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstring>

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
  std::string planPath = programDir + "/plan.json", planError;
  rt::Plan plan;
  if (!rt::readPlan(planPath, plan, planError))
    return fail(planPath, planError);

  // The trained blobs: one, or one per coordinate of the axes the plan
  // splits or slices parameters along, as blobs[dp][tp].
  const rt::Mesh mesh = plan.mesh ? *plan.mesh : rt::Mesh::line("dp", 1);
  auto ranksAlong = [&](const char *axis) {
    int index = mesh.axisIndex(axis);
    return llvm::is_contained(plan.weightsByAxes, axis) && index >= 0 ? mesh.shape[index] : 1;
  };
  const int dpRanks = ranksAlong("dp"), tpRanks = ranksAlong("tp");
  std::vector<std::vector<std::unique_ptr<llvm::MemoryBuffer>>> blobs(dpRanks);
  for (int dp = 0; dp < dpRanks; ++dp) {
    for (int tp = 0; tp < tpRanks; ++tp) {
      std::vector<int> coordinates(mesh.shape.size(), 0);
      if (int axis = mesh.axisIndex("dp"); axis >= 0)
        coordinates[axis] = dp;
      if (int axis = mesh.axisIndex("tp"); axis >= 0)
        coordinates[axis] = tp;
      std::string path = resultsDir + "/" + rt::weightsBlobName(plan, coordinates);
      if (staged)
        path = rt::FileSet::stagedName(path);
      auto blob = llvm::MemoryBuffer::getFile(path, false, false);
      if (!blob)
        return fail(path, "cannot open: " + blob.getError().message());
      if (static_cast<int64_t>((*blob)->getBufferSize()) != plan.weightsBytes)
        return fail(path,
                    "is not the " + std::to_string(plan.weightsBytes) + " bytes plan.json says");
      blobs[dp].push_back(std::move(*blob));
    }
  }
  const std::string &modelPath = plan.model;
  auto modelBytes = llvm::MemoryBuffer::getFile(modelPath, false, false);
  onnx::ModelProto model;
  if (!modelBytes || !model.ParseFromArray((*modelBytes)->getBufferStart(),
                                           static_cast<int>((*modelBytes)->getBufferSize())))
    return fail(modelPath, "the compiled model cannot be read any more");

  // Parameters, and state that is an initializer too (a training_info step's
  // moments and counters); optimizer slots of cleave's own are not.
  llvm::StringMap<const rt::StoredTensor *> placed, state;
  for (const rt::StoredTensor &entry : plan.parameters)
    placed[entry.tensor.name] = &entry;
  for (const rt::StoredTensor &entry : plan.state)
    state[entry.tensor.name] = &entry;
  size_t replaced = 0;
  auto replace = [&](onnx::TensorProto &tensor, bool &isParameter) {
    auto found = placed.find(tensor.name());
    isParameter = found != placed.end();
    if (!isParameter && (found = state.find(tensor.name())) == state.end())
      return;
    const rt::StoredTensor &entry = *found->second;
    std::optional<rt::Sharding> sharding = entry.sharding;
    // Each tp rank's part: its bytes, or with ZeRO 3 its dp ranks' slices of
    // the flattened part one after another, cut to the part's elements.
    std::vector<std::string> parts;
    for (int tp = 0; tp < (sharding && sharding->split ? tpRanks : 1); ++tp) {
      std::string part;
      if (sharding && sharding->slices) {
        for (const auto &row : blobs)
          part.append(row[tp]->getBufferStart() + entry.offset, entry.bytes);
        part.resize(sharding->slices->elements * rt::dtypeSize(entry.tensor.dtype));
      } else {
        part.assign(blobs[0][tp]->getBufferStart() + entry.offset, entry.bytes);
      }
      parts.push_back(std::move(part));
    }
    std::string value = parts[0];
    if (sharding && sharding->split) {
      // Each tp rank's part put back where it lies in the whole tensor.
      size_t element = rt::dtypeSize(entry.tensor.dtype);
      value.assign(parts[0].size() * parts.size(), '\0');
      for (int tp = 0; tp < tpRanks; ++tp)
        rt::forEachSplitRun(sharding->globalShape, *sharding->split, tpRanks, tp,
                            [&](int64_t global, int64_t local, int64_t count) {
                              std::memcpy(value.data() + global * element,
                                          parts[tp].data() + local * element, count * element);
                            });
    }
    setTensorBytes(tensor, std::move(value));
  };
  auto replaceAll = [&](auto &initializers) {
    for (onnx::TensorProto &tensor : initializers) {
      bool isParameter = false;
      replace(tensor, isParameter);
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
  std::string written;
  if (!files.stage(outputPath, {{serialized.data(), serialized.size()}}, written)) {
    error = UserError{outputPath, written, "", kExitBadInput};
    return mlir::failure();
  }
  return mlir::success();
}

} // namespace cleave
