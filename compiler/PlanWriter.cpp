//===- PlanWriter.cpp - plan.json and weights.bin ------------------------===//

#include "compiler/PlanWriter.h"

#include "dialects/Cleave/CleaveOps.h"
#include "passes/Collectives.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <cstring>
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

/// The part of `data` that tp rank `rank` of `ranks` holds when its dim
/// `dim` is `blocks` equal blocks, each split `ranks` ways.
std::vector<char> rankPart(const TensorData &data, int64_t dim, int64_t blocks, int64_t ranks,
                           int64_t rank) {
  ArrayRef<int64_t> shape = data.type.getShape();
  int64_t element = static_cast<int64_t>(data.bytes.size()) / data.type.getNumElements();
  int64_t outer = 1, inner = element;
  for (int64_t d = 0; d < dim; ++d)
    outer *= shape[d];
  for (int64_t d = dim + 1; d < static_cast<int64_t>(shape.size()); ++d)
    inner *= shape[d];
  int64_t block = shape[dim] / blocks, part = block / ranks;
  std::vector<char> out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < blocks; ++k) {
      auto first = data.bytes.begin() + (o * shape[dim] + k * block + rank * part) * inner;
      out.insert(out.end(), first, first + part * inner);
    }
  return out;
}

/// The module's device mesh, if it has one.
shard::GridOp getGrid(ModuleOp module) {
  auto grids = module.getOps<shard::GridOp>();
  return grids.empty() ? shard::GridOp() : *grids.begin();
}

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
  // Parameters whose initial bytes differ by rank: split over tp (dim >= 0)
  // and/or sliced over dp by ZeRO 3 (slice > 0: this rank's elements of the
  // flattened, padded parameter).
  struct SplitParameter {
    const Parameter *parameter;
    int64_t offset, dim, blocks, slice;
  };
  std::vector<SplitParameter> splitParameters;
  // Where each tp rank's blob holds its tp coordinate (an i64).
  std::vector<int64_t> tpCoordinates;

  llvm::StringMap<const Parameter *> byName;
  for (const Parameter &p : model.parameters)
    byName[p.name] = &p;
  for (const Parameter &p : model.state)
    byName[p.name] = &p;
  // Functions share inputs and stored arguments by name (cleave-memory-plan).
  std::map<int64_t, std::pair<nlohmann::json, int64_t>> inputsByIndex; // entry, bytes
  nlohmann::json parameters = nlohmann::json::array(), state = nlohmann::json::array(),
                 outputs = nlohmann::json::array();
  llvm::StringSet<> seen;
  int64_t constantCount = 0, constantBytesTotal = 0, flops = 0;
  int64_t parameterBytes = 0, gradientBytes = 0, optimizerBytes = 0;
  // Collectives per step, by kind and mesh axis.
  struct Traffic {
    int64_t calls = 0, bufferBytes = 0, payloadBytes = 0, sentBytes = 0;
  };
  // What one rank sends for one call by the ring algorithm (as the runtime
  // counts it): an all-reduce 2(n-1)/n of its buffer, a reduce-scatter or
  // all-gather (n-1)/n of the whole buffer.
  shard::GridOp meshGrid = getGrid(module);
  auto count = [&](Traffic &traffic, StringRef kind, int64_t axis, int64_t calls,
                   int64_t buffer, int64_t payload) {
    int64_t n = meshGrid.getShape()[axis], factor = kind == "all_reduce" ? 2 : 1;
    traffic.calls += calls;
    traffic.bufferBytes += calls * buffer;
    traffic.payloadBytes += calls * payload;
    traffic.sentBytes += calls * (factor * (n - 1) * buffer / n);
  };
  std::map<std::pair<std::string, int64_t>, Traffic> collectives;
  // The flat parameter buffer's unpadded bytes (ZeRO): what its collectives
  // must move at least.
  int64_t flatPayload = 0;
  for (auto func : module.getOps<func::FuncOp>())
    if (func.getSymName() == "forward")
      for (auto [i, arg] : llvm::enumerate(func.getArguments()))
        if (auto group = func.getArgAttrOfType<StringAttr>(i, "cleave.flat_member");
            group && group.getValue() == "flat:params")
          flatPayload += tensorBytes(cast<RankedTensorType>(arg.getType()));
  for (auto func : module.getOps<func::FuncOp>()) {
    for (auto [i, arg] : llvm::enumerate(func.getArguments())) {
      StringRef name = func.getArgAttrOfType<StringAttr>(i, "cleave.name").getValue();
      auto offset = func.getArgAttrOfType<IntegerAttr>(i, "cleave.weights_offset");
      if (!offset) {
        int64_t index = func.getArgAttrOfType<IntegerAttr>(i, "cleave.input_index").getInt();
        inputsByIndex[index] = {tensorJson(name, arg.getType()),
                                tensorBytes(cast<RankedTensorType>(arg.getType()))};
        continue;
      }
      // A flat buffer is its members' bytes again (they are listed).
      if (!seen.insert(name).second || func.getArgAttr(i, "cleave.flat_size"))
        continue;
      nlohmann::json entry = tensorJson(name, arg.getType());
      entry["offset"] = offset.getInt();
      entry["bytes"] = tensorBytes(cast<RankedTensorType>(arg.getType()));
      // Optimizer state and accumulators start at zero (the blob's initial
      // bytes); state a training_info step updates at its initializer's value.
      if (func.getArgAttr(i, "cleave.tp_coordinate"))
        tpCoordinates.push_back(offset.getInt());
      if (func.getArgAttrOfType<StringAttr>(i, "cleave.kind").getValue() == "state") {
        (func.getArgAttr(i, "cleave.accumulator") ? gradientBytes : optimizerBytes) +=
            entry["bytes"].get<int64_t>();
        if (const Parameter *initial = byName.lookup(name))
          std::copy(initial->value.bytes.begin(), initial->value.bytes.end(),
                    weights.begin() + offset.getInt());
        state.push_back(entry);
        continue;
      }
      parameterBytes += entry["bytes"].get<int64_t>();
      const Parameter *parameter = byName.lookup(name);
      auto dim = func.getArgAttrOfType<IntegerAttr>(i, "cleave.split_dim");
      auto zero3 = func.getArgAttrOfType<IntegerAttr>(i, "cleave.zero3_elements");
      if (dim || zero3) {
        // Each rank's blob gets its own part (below).
        SplitParameter split{parameter, offset.getInt(), -1, 1, 0};
        ArrayRef<int64_t> global = parameter->value.type.getShape();
        entry["global_shape"] = std::vector<int64_t>(global.begin(), global.end());
        if (dim) {
          split.dim = dim.getInt();
          split.blocks = func.getArgAttrOfType<IntegerAttr>(i, "cleave.split_blocks").getInt();
          entry["split"] = {{"dim", split.dim}, {"blocks", split.blocks}, {"axis", "tp"}};
        }
        if (zero3) {
          split.slice = cast<RankedTensorType>(arg.getType()).getNumElements();
          entry["zero3"] = {{"elements", zero3.getInt()}, {"slice", split.slice}, {"axis", "dp"}};
        }
        splitParameters.push_back(split);
      } else {
        std::copy(parameter->value.bytes.begin(), parameter->value.bytes.end(),
                  weights.begin() + offset.getInt());
      }
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
    // @forward runs once per microbatch.
    int64_t repeats = func.getSymName() == "forward" ? options.training.gradAccum : 1;
    for (auto &run : allReduceRuns(func)) {
      auto spans = reductionSpans(func, run);
      if (failed(spans)) {
        error = UserError{options.model, "a collective cannot be lowered (a cleave bug)", "",
                          kExitInternal};
        return failure();
      }
      for (const ReductionSpan &span : *spans)
        count(collectives[{"all_reduce", span.axis}], "all_reduce", span.axis, repeats,
              span.bytes, span.payload);
    }
    func.walk([&](Operation *op) {
      auto reduce = dyn_cast<shard::AllReduceOp>(op);
      if (isa<shard::AllSliceOp>(op) || (reduce && isInPlace(reduce)) ||
          !isa<shard::AllReduceOp, shard::ReduceScatterOp, shard::AllGatherOp>(op))
        return;
      // The whole buffer: a reduce-scatter's input, an all-gather's output.
      Value whole = isa<shard::ReduceScatterOp>(op) ? op->getOperand(0) : op->getResult(0);
      auto type = cast<RankedTensorType>(whole.getType());
      auto axes = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
      // Without padding: the gradients a packed buffer concatenates, a ZeRO 3
      // parameter's own elements, the flat parameter buffer's parameters.
      int64_t payload = tensorBytes(type);
      auto slice = dyn_cast<BlockArgument>(op->getOperand(0));
      auto elements = slice ? func.getArgAttrOfType<IntegerAttr>(slice.getArgNumber(),
                                                                 "cleave.zero3_elements")
                            : IntegerAttr();
      if (auto concat = whole.getDefiningOp<ConcatOp>()) {
        payload = 0;
        for (Value part : concat.getOperands())
          if (!part.getDefiningOp<ConstantOp>())
            payload += tensorBytes(cast<RankedTensorType>(part.getType()));
      } else if (elements) {
        payload = elements.getInt() * tensorBytes(type) / type.getNumElements();
      } else if (flatPayload > 0 && type.getRank() == 1 && tensorBytes(type) >= flatPayload) {
        payload = flatPayload;
      }
      std::string kind = op->getName().stripDialect().str();
      count(collectives[{kind, axes[0]}], kind, axes[0], repeats, tensorBytes(type), payload);
    });
    for (auto [i, type] : llvm::enumerate(func.getResultTypes()))
      outputs.push_back(
          tensorJson(func.getResultAttrOfType<StringAttr>(i, "cleave.name").getValue(), type));
  }
  nlohmann::json inputs = nlohmann::json::array();
  int64_t inputBytes = 0;
  for (auto &[index, input] : inputsByIndex) {
    inputs.push_back(input.first);
    inputBytes += input.second;
  }

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
      {"memory",
       {{"parameter_bytes", parameterBytes},
        {"gradient_bytes", gradientBytes},
        {"optimizer_state_bytes", optimizerBytes},
        {"activation_bytes", arenaBytes},
        {"input_bytes", inputBytes},
        {"predicted_peak_bytes", weightsBytes + arenaBytes + inputBytes}}},
  };
  if (shard::GridOp grid = meshGrid) {
    auto names = grid->getAttrOfType<ArrayAttr>("cleave.axes");
    nlohmann::json axes = nlohmann::json::array();
    for (auto [name, size] : llvm::zip(names.getAsValueRange<StringAttr>(), grid.getShape()))
      axes.push_back({{"name", name.str()}, {"size", size}});
    int64_t ranks = 1;
    for (int64_t size : grid.getShape())
      ranks *= size;
    plan["mesh"] = {{"axes", axes},
                    {"ranks", ranks},
                    {"deterministic", options.training.deterministic}};
    // Per rank and step, next to the analytic minimum: the same ring
    // amounts of the buffers without the blob's alignment padding.
    nlohmann::json list = nlohmann::json::array();
    for (const auto &[key, traffic] : collectives) {
      int64_t n = grid.getShape()[key.second];
      int64_t factor = key.first == "all_reduce" ? 2 : 1;
      list.push_back({{"kind", key.first},
                      {"axis", cast<StringAttr>(names[key.second]).str()},
                      {"calls_per_step", traffic.calls},
                      {"buffer_bytes", traffic.bufferBytes},
                      {"bytes_sent_per_rank", traffic.sentBytes},
                      {"analytic_min_bytes_sent",
                       factor * (n - 1) * traffic.payloadBytes / n}});
    }
    plan["collectives"] = list;
  }
  if (options.train && model.trainingAlgorithm) {
    // The model's training_info is the whole step: every input is data, the
    // learning rate and step live in the graph.
    nlohmann::json dataInputs = nlohmann::json::array(), updates = nlohmann::json::array();
    for (const auto &input : inputs)
      dataInputs.push_back(input["name"]);
    for (const auto &[initializer, value] : model.trainingAlgorithm->updates)
      updates.push_back({{"initializer", initializer}, {"value", value}});
    plan["state"] = state;
    plan["training"] = {
        {"algorithm", "training_info"},
        {"data_inputs", dataInputs},
        {"grad_accum", 1},
        {"loss", model.trainingAlgorithm->loss},
        {"update_binding", updates},
    };
  } else if (options.train) {
    const TrainOptions &t = options.training;
    nlohmann::json dataInputs = nlohmann::json::array();
    for (const auto &input : inputs)
      if (input["name"] != "cleave.lr" && input["name"] != "cleave.step")
        dataInputs.push_back(input["name"]);
    plan["state"] = state;
    plan["training"] = {
        {"algorithm", "cleave"},
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
  // Parameters split over tp make one blob per tp rank (weights.tp{R}.bin),
  // ZeRO 3 one per dp rank too (weights.dp{D}[.tp{R}].bin).
  int64_t tpRanks = 1, dpRanks = 1;
  if (shard::GridOp grid = meshGrid) {
    auto names = grid->getAttrOfType<ArrayAttr>("cleave.axes");
    for (auto [name, size] : llvm::zip(names.getAsValueRange<StringAttr>(), grid.getShape())) {
      if (name == "tp")
        tpRanks = size;
      if (name == "dp")
        dpRanks = size;
    }
  }
  bool byTp = !tpCoordinates.empty() ||
              llvm::any_of(splitParameters, [](const SplitParameter &p) { return p.dim >= 0; });
  bool byDp = llvm::any_of(splitParameters, [](const SplitParameter &p) { return p.slice > 0; });
  if (!byTp)
    tpRanks = 1;
  if (!byDp)
    dpRanks = 1;
  auto blobName = [&](StringRef dp, StringRef tp) {
    return "weights" + (byDp ? ".dp" + dp.str() : "") + (byTp ? ".tp" + tp.str() : "") + ".bin";
  };
  plan["weights"]["file"] = blobName("{dp}", "{tp}");
  std::string planText = plan.dump(2) + "\n";
  if (failed(writeFile("plan.json", planText)))
    return failure();
  for (int64_t dp = 0; dp < dpRanks; ++dp) {
    for (int64_t tp = 0; tp < tpRanks; ++tp) {
      for (const SplitParameter &split : splitParameters) {
        std::vector<char> part =
            split.dim >= 0 ? rankPart(split.parameter->value, split.dim, split.blocks, tpRanks, tp)
                           : split.parameter->value.bytes;
        if (split.slice > 0) {
          // This dp rank's elements of the flattened part, zero past its end.
          size_t element = split.parameter->value.bytes.size() /
                           split.parameter->value.type.getNumElements();
          size_t bytes = split.slice * element;
          std::vector<char> slice(bytes, 0);
          size_t first = dp * bytes;
          if (first < part.size())
            std::copy(part.begin() + first, part.begin() + std::min(part.size(), first + bytes),
                      slice.begin());
          part = std::move(slice);
        }
        std::copy(part.begin(), part.end(), weights.begin() + split.offset);
      }
      for (int64_t offset : tpCoordinates)
        std::memcpy(weights.data() + offset, &tp, sizeof tp);
      std::string name = blobName(std::to_string(dp), std::to_string(tp));
      if (failed(writeFile(name, StringRef(weights.data(), weights.size()))))
        return failure();
    }
  }
  return success();
}

} // namespace cleave
