//===- PlanWriter.cpp - plan.json and weights.bin ------------------------===//

#include "compiler/PlanWriter.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <map>

using namespace mlir;

namespace cleave {
namespace {

std::string dtypeName(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

nlohmann::json tensorJson(StringRef name, Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return {{"name", name.str()},
          {"dtype", dtypeName(tensor.getElementType())},
          {"shape", std::vector<int64_t>(tensor.getShape().begin(), tensor.getShape().end())}};
}

/// A constant's bytes in host layout (bools one byte each).
std::vector<char> constantBytes(ConstantOp op) {
  auto dense = cast<DenseElementsAttr>(op.getValue());
  auto type = cast<RankedTensorType>(dense.getType());
  std::vector<char> bytes;
  if (type.getElementType().isInteger(1)) {
    for (bool v : dense.getValues<bool>())
      bytes.push_back(v ? 1 : 0);
    return bytes;
  }
  int64_t size = tensorBytes(type);
  ArrayRef<char> raw = dense.getRawData();
  for (int64_t i = 0; i < size; ++i)
    bytes.push_back(raw[dense.isSplat() ? i % raw.size() : i]);
  return bytes;
}

std::string absolutePath(StringRef path) {
  llvm::SmallString<256> absolute(path);
  llvm::sys::fs::make_absolute(absolute);
  return absolute.str().str();
}

int64_t elements(Value v) { return cast<RankedTensorType>(v.getType()).getNumElements(); }

} // namespace

int64_t estimateFlops(Operation *op) {
  if (auto matmul = dyn_cast<MatMulOp>(op)) {
    auto lhs = cast<RankedTensorType>(matmul.getLhs().getType());
    return 2 * elements(matmul.getOutput()) * lhs.getShape().back();
  }
  if (auto gemm = dyn_cast<GemmOp>(op)) {
    auto a = cast<RankedTensorType>(gemm.getA().getType());
    int64_t k = gemm.getTransA() ? a.getDimSize(0) : a.getDimSize(1);
    return 2 * elements(gemm.getOutput()) * k;
  }
  if (auto conv = dyn_cast<ConvOp>(op)) {
    auto w = cast<RankedTensorType>(conv.getW().getType());
    return 2 * elements(conv.getY()) * (w.getNumElements() / w.getDimSize(0));
  }
  if (isa<ConstantOp, ReshapeOp, FlattenOp, SqueezeOp, UnsqueezeOp, IdentityOp>(op))
    return 0;
  int64_t flops = 0;
  for (Value result : op->getResults())
    flops += elements(result);
  return flops;
}

LogicalResult writePlan(ModuleOp module, const ImportedModel &model,
                        const CompileOptions &options, StringRef dir, UserError &error) {
  int64_t weightsBytes = module->getAttrOfType<IntegerAttr>("cleave.weights_bytes").getInt();
  int64_t arenaBytes = module->getAttrOfType<IntegerAttr>("cleave.arena_bytes").getInt();
  std::vector<char> weights(weightsBytes, 0);

  llvm::StringMap<const Parameter *> byName;
  for (const Parameter &p : model.parameters)
    byName[p.name] = &p;
  // Functions share inputs and stored arguments by name (cleave-memory-plan).
  std::map<int64_t, nlohmann::json> inputsByIndex;
  nlohmann::json parameters = nlohmann::json::array(), state = nlohmann::json::array(),
                 outputs = nlohmann::json::array();
  llvm::StringSet<> seen;
  int64_t constantCount = 0, constantBytesTotal = 0, flops = 0;
  for (auto func : module.getOps<func::FuncOp>()) {
    for (auto [i, arg] : llvm::enumerate(func.getArguments())) {
      StringRef name = func.getArgAttrOfType<StringAttr>(i, "cleave.name").getValue();
      auto offset = func.getArgAttrOfType<IntegerAttr>(i, "cleave.weights_offset");
      if (!offset) {
        int64_t index = func.getArgAttrOfType<IntegerAttr>(i, "cleave.input_index").getInt();
        inputsByIndex[index] = tensorJson(name, arg.getType());
        continue;
      }
      if (!seen.insert(name).second)
        continue;
      nlohmann::json entry = tensorJson(name, arg.getType());
      entry["offset"] = offset.getInt();
      entry["bytes"] = tensorBytes(cast<RankedTensorType>(arg.getType()));
      // Optimizer state and accumulators start at zero (the blob's initial bytes).
      if (func.getArgAttrOfType<StringAttr>(i, "cleave.kind").getValue() == "state") {
        state.push_back(entry);
        continue;
      }
      const Parameter *parameter = byName.lookup(name);
      std::copy(parameter->value.bytes.begin(), parameter->value.bytes.end(),
                weights.begin() + offset.getInt());
      parameters.push_back(entry);
    }
    func.walk([&](Operation *op) {
      if (op->getDialect() && isa<CleaveDialect>(op->getDialect()))
        flops += estimateFlops(op);
      auto constant = dyn_cast<ConstantOp>(op);
      auto offset = op->getAttrOfType<IntegerAttr>("cleave.weights_offset");
      if (!constant || !offset)
        return;
      std::vector<char> bytes = constantBytes(constant);
      std::copy(bytes.begin(), bytes.end(), weights.begin() + offset.getInt());
      ++constantCount;
      constantBytesTotal += bytes.size();
    });
    for (auto [i, type] : llvm::enumerate(func.getResultTypes()))
      outputs.push_back(
          tensorJson(func.getResultAttrOfType<StringAttr>(i, "cleave.name").getValue(), type));
  }
  nlohmann::json inputs = nlohmann::json::array();
  for (auto &[index, input] : inputsByIndex)
    inputs.push_back(input);

  nlohmann::json plan = {
      {"format_version", kPlanFormatVersion},
      {"model", absolutePath(options.model)},
      {"target", options.target},
      {"inputs", inputs},
      {"outputs", outputs},
      {"parameters", parameters},
      {"constants", {{"count", constantCount}, {"bytes", constantBytesTotal}}},
      {"weights", {{"file", "weights.bin"}, {"bytes", weightsBytes}}},
      {"arena", {{"bytes", arenaBytes}}},
      {"flops", flops},
  };
  if (options.train) {
    const TrainOptions &t = options.training;
    nlohmann::json dataInputs = nlohmann::json::array();
    for (const auto &input : inputs)
      if (input["name"] != "cleave.lr" && input["name"] != "cleave.step")
        dataInputs.push_back(input["name"]);
    plan["state"] = state;
    plan["training"] = {
        {"optimizer", t.optimizer},
        {"lr", t.lr},
        {"lr_schedule", t.lrSchedule},
        {"warmup", t.warmup},
        {"hyperparameters",
         {{"beta1", t.beta1},
          {"beta2", t.beta2},
          {"eps", t.epsilon},
          {"weight_decay", t.weightDecay},
          {"momentum", t.momentum},
          {"nesterov", t.nesterov},
          {"clip_grad_norm", t.clipGradNorm}}},
        {"data_inputs", dataInputs},
        {"grad_accum", t.gradAccum},
        {"lr_input", "cleave.lr"},
        {"step_input", "cleave.step"},
        {"loss", outputs.empty() ? std::string() : outputs[0]["name"].get<std::string>()},
    };
  }
  auto writeFile = [&](StringRef name, StringRef bytes) {
    std::string path = (dir + "/" + name).str();
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (!ec)
      os << bytes;
    if (!ec)
      os.close();
    if (ec || os.has_error()) {
      error = UserError{path, "cannot write", "", kExitBadUsage};
      return failure();
    }
    return success();
  };
  std::string planText = plan.dump(2) + "\n";
  if (failed(writeFile("plan.json", planText)) ||
      failed(writeFile("weights.bin", StringRef(weights.data(), weights.size()))))
    return failure();
  return success();
}

} // namespace cleave
