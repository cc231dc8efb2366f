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
                                       const std::string &resultsDir,
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

  // The trained blobs: one, or one per tp rank (plan.json's weights file
  // names them with {tp}).
  std::string file = "weights.bin";
  if (plan.contains("weights") && plan["weights"].is_object() &&
      plan["weights"].value("file", "").size() > 0)
    file = plan["weights"]["file"].get<std::string>();
  int64_t tpRanks = 1, dpRanks = 1;
  if (plan.contains("mesh") && plan["mesh"].contains("axes"))
    for (const auto &axis : plan["mesh"]["axes"]) {
      if (axis.value("name", "") == "tp")
        tpRanks = axis.value("size", int64_t(1));
      if (axis.value("name", "") == "dp")
        dpRanks = axis.value("size", int64_t(1));
    }
  if (file.find("{tp}") == std::string::npos)
    tpRanks = 1;
  if (file.find("{dp}") == std::string::npos)
    dpRanks = 1;
  // blobs[dp][tp]
  std::vector<std::vector<std::unique_ptr<llvm::MemoryBuffer>>> blobs(dpRanks);
  for (int64_t dp = 0; dp < dpRanks; ++dp) {
    for (int64_t tp = 0; tp < tpRanks; ++tp) {
      std::string name = file;
      for (auto [placeholder, rank] : {std::pair<std::string, int64_t>("{dp}", dp),
                                       std::pair<std::string, int64_t>("{tp}", tp)})
        if (size_t at = name.find(placeholder); at != std::string::npos)
          name.replace(at, placeholder.size(), std::to_string(rank));
      std::string path = resultsDir + "/" + name;
      auto blob = llvm::MemoryBuffer::getFile(path, false, false);
      if (!blob)
        return fail(path, "cannot open: " + blob.getError().message());
      blobs[dp].push_back(std::move(*blob));
    }
  }
  const std::string weightsPath = resultsDir + "/" + file;
  std::string modelPath = plan["model"].get<std::string>();
  auto modelBytes = llvm::MemoryBuffer::getFile(modelPath, false, false);
  onnx::ModelProto model;
  if (!modelBytes || !model.ParseFromArray((*modelBytes)->getBufferStart(),
                                           static_cast<int>((*modelBytes)->getBufferSize())))
    return fail(modelPath, "the compiled model cannot be read any more");

  // Parameters, and state that is an initializer too (a training_info step's
  // moments and counters); optimizer slots of cleave's own are not.
  llvm::StringMap<const nlohmann::json *> placed, state;
  for (const auto &entry : plan["parameters"])
    placed[entry.value("name", "")] = &entry;
  if (plan.contains("state") && plan["state"].is_array())
    for (const auto &entry : plan["state"])
      state[entry.value("name", "")] = &entry;
  size_t replaced = 0;
  auto replace = [&](onnx::TensorProto &tensor, bool &isParameter) {
    auto found = placed.find(tensor.name());
    isParameter = found != placed.end();
    if (!isParameter && (found = state.find(tensor.name())) == state.end())
      return true;
    const nlohmann::json &entry = *found->second;
    int64_t offset = entry.value("offset", int64_t(0)), bytes = entry.value("bytes", int64_t(0));
    for (const auto &row : blobs)
      for (const auto &blob : row)
        if (offset + bytes > static_cast<int64_t>(blob->getBufferSize()))
          return false;
    // Each tp rank's part: its bytes, or with ZeRO 3 its dp ranks' slices of
    // the flattened part one after another, cut to the part's elements.
    std::vector<std::string> parts;
    for (int64_t tp = 0; tp < tpRanks; ++tp) {
      std::string part;
      if (entry.contains("zero3")) {
        for (const auto &row : blobs)
          part.append(row[tp]->getBufferStart() + offset, bytes);
        int64_t element = bytes / entry["zero3"]["slice"].get<int64_t>();
        part.resize(entry["zero3"]["elements"].get<int64_t>() * element);
      } else {
        part.assign(blobs[0][tp]->getBufferStart() + offset, bytes);
      }
      parts.push_back(std::move(part));
    }
    std::string value = parts[0];
    if (entry.contains("split")) {
      // Rank r's part of each block of the split dim, interleaved back.
      std::vector<int64_t> shape = entry["global_shape"].get<std::vector<int64_t>>();
      int64_t dim = entry["split"]["dim"].get<int64_t>();
      int64_t blocks = entry["split"]["blocks"].get<int64_t>();
      int64_t ranks = static_cast<int64_t>(parts.size());
      int64_t partBytes = static_cast<int64_t>(parts[0].size());
      int64_t outer = 1, total = 1;
      for (int64_t d = 0; d < dim; ++d)
        outer *= shape[d];
      for (int64_t size : shape)
        total *= size;
      int64_t inner = partBytes * ranks / total;
      for (int64_t d = dim + 1; d < static_cast<int64_t>(shape.size()); ++d)
        inner *= shape[d];
      int64_t piece = shape[dim] / blocks / ranks;
      value.clear();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t k = 0; k < blocks; ++k)
          for (const std::string &part : parts)
            value.append(part, ((o * blocks + k) * piece) * inner, piece * inner);
    }
    tensor.clear_float_data();
    tensor.clear_double_data();
    tensor.clear_int32_data();
    tensor.clear_int64_data();
    tensor.clear_uint64_data();
    tensor.clear_external_data();
    tensor.set_data_location(onnx::TensorProto::DEFAULT);
    tensor.set_raw_data(value);
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
