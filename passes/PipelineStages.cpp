//===- PipelineStages.cpp - a split module's stages and schedule ----------===//

#include "passes/PipelineStages.h"

#include "passes/Collectives.h"
#include "passes/CostModel.h"

#include "dialects/Cleave/CleaveOps.h"

#include "llvm/ADT/StringExtras.h"

#include <map>

using namespace mlir;

namespace cleave {

FailureOr<PipelineShape> pipelineShape(ModuleOp module,
                                       SmallVectorImpl<func::FuncOp> &stages) {
  FailureOr<MeshAxes> mesh = getMesh(module);
  if (failed(mesh))
    return failure();
  for (auto func : module.getOps<func::FuncOp>()) {
    auto stage = func->getAttrOfType<IntegerAttr>(kStageAttr);
    if (!stage)
      continue;
    if (stage.getInt() != static_cast<int64_t>(stages.size()))
      return func.emitError("is stage ")
             << stage.getInt() << ", but the stage functions must be stages 0, 1, ... in order";
    stages.push_back(func);
  }
  const int64_t count = stages.size();
  if (count == 0 || count % mesh->ppSize != 0)
    return module.emitError("has ")
           << count << " stage functions, not a whole number of stages for each of the "
           << mesh->ppSize << " pp ranks: run cleave-pipeline-split first";

  PipelineShape shape;
  shape.ranks = mesh->ppSize;
  shape.virtualStages = count / mesh->ppSize;
  shape.sendsTo.assign(count, {});
  // Every send and receive by tag and direction: each must have its
  // partner. Values go to later stages, their gradients back.
  using Key = std::pair<int64_t, bool>;
  std::map<Key, std::pair<int64_t, PipelineSendOp>> sends;
  std::map<Key, std::pair<int64_t, PipelineRecvOp>> recvs;
  auto describe = [](Key key) {
    return (key.second ? "gradient tag " : "tag ") + std::to_string(key.first);
  };
  for (auto [index, func] : llvm::enumerate(stages)) {
    WalkResult walk = func.walk([&, stage = int64_t(index)](Operation *op) -> WalkResult {
      if (auto send = dyn_cast<PipelineSendOp>(op)) {
        int64_t to = send.getPeer();
        Key key{send.getTag(), send.getGradient()};
        bool backwards = send.getGradient();
        if (to >= count || (backwards ? to >= stage : to <= stage))
          return send.emitError("sends ")
                 << describe(key) << " to stage " << to << " from stage " << stage
                 << (backwards ? ": a gradient goes to an earlier stage"
                               : ": a value goes to a later stage");
        if (!sends.emplace(key, std::pair{stage, send}).second)
          return send.emitError() << describe(key) << " is sent twice";
        if (!backwards && !llvm::is_contained(shape.sendsTo[stage], to))
          shape.sendsTo[stage].push_back(to);
      }
      if (auto recv = dyn_cast<PipelineRecvOp>(op)) {
        Key key{recv.getTag(), recv.getGradient()};
        if (!recvs.emplace(key, std::pair{stage, recv}).second)
          return recv.emitError() << describe(key) << " is received twice";
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
  }
  for (auto [key, entry] : sends) {
    auto [from, send] = entry;
    auto it = recvs.find(key);
    if (it == recvs.end() || it->second.first != static_cast<int64_t>(send.getPeer()))
      return send.emitError() << describe(key) << " has no receive in stage " << send.getPeer();
    PipelineRecvOp recv = it->second.second;
    if (static_cast<int64_t>(recv.getPeer()) != from)
      return recv.emitError("receives ")
             << describe(key) << " from stage " << recv.getPeer() << ", but stage " << from
             << " sends it";
    if (recv.getType() != send.getValue().getType())
      return recv.emitError("receives ")
             << describe(key) << " as " << recv.getType() << ", but it is sent as "
             << send.getValue().getType();
    recvs.erase(it);
  }
  if (!recvs.empty())
    return recvs.begin()->second.second.emitError()
           << describe(recvs.begin()->first) << " is never sent";
  return shape;
}

StageCosts estimateStageCosts(ArrayRef<func::FuncOp> stages) {
  StageCosts costs;
  for (func::FuncOp func : stages) {
    // Which values carry a gradient back: those computed from a received
    // value (their chain is I, what the earlier stages wait for), and the
    // parameters and values computed from them alone (W).
    DenseSet<Value> fromReceived, fromParameter;
    for (BlockArgument arg : func.getArguments())
      if (isParameter(arg))
        fromParameter.insert(arg);
    double forward = 0, inputGrad = 0, weightGrad = 0;
    func.walk([&](Operation *op) {
      auto reads = [&](const DenseSet<Value> &set) {
        return llvm::any_of(op->getOperands(), [&](Value v) { return set.contains(v); });
      };
      if (isa<PipelineRecvOp>(op) || reads(fromReceived))
        fromReceived.insert(op->result_begin(), op->result_end());
      else if (reads(fromParameter))
        fromParameter.insert(op->result_begin(), op->result_end());
      if (op->getDialect() != op->getContext()->getLoadedDialect<CleaveDialect>() ||
          isa<PipelineSendOp, PipelineRecvOp>(op))
        return;
      forward += estimateFlops(op);
      inputGrad += estimateGradientFlops(op, [&](Value v) { return fromReceived.contains(v); });
      weightGrad += estimateGradientFlops(op, [&](Value v) { return fromParameter.contains(v); });
    });
    // An empty stage still takes a turn.
    costs.forward.push_back(std::max(forward, 1.0));
    costs.inputGrad.push_back(inputGrad);
    costs.weightGrad.push_back(weightGrad);
  }
  return costs;
}

LogicalResult verifyPipelineSchedule(ModuleOp module) {
  SmallVector<func::FuncOp> stages;
  FailureOr<PipelineShape> shape = pipelineShape(module, stages);
  if (failed(shape))
    return failure();
  auto attr = module->getAttrOfType<DictionaryAttr>(kPipelineScheduleAttr);
  auto microbatches = attr ? attr.getAs<IntegerAttr>("microbatches") : IntegerAttr();
  auto ranks = attr ? attr.getAs<ArrayAttr>("ranks") : ArrayAttr();
  if (!microbatches || microbatches.getInt() < 1 || !ranks)
    return module.emitError("has no ")
           << kPipelineScheduleAttr
           << " with 'microbatches' and 'ranks': run cleave-pipeline-schedule first";
  shape->microbatches = microbatches.getInt();
  PipelineSchedule schedule;
  for (Attribute rank : ranks) {
    auto list = dyn_cast<ArrayAttr>(rank);
    if (!list)
      return module.emitError("'ranks' of ") << kPipelineScheduleAttr << " holds a non-list";
    schedule.emplace_back();
    for (Attribute entry : list) {
      auto text = dyn_cast<StringAttr>(entry);
      std::optional<PipelineAction> action =
          text ? PipelineAction::parse(text.getValue()) : std::nullopt;
      if (!action)
        return module.emitError("schedule entry ")
               << entry << " is not an action such as \"F3@1\" (F, B, I or W; microbatch; stage)";
      schedule.back().push_back(*action);
    }
  }
  std::string error;
  if (!simulateSchedule(schedule, *shape, estimateStageCosts(stages), error))
    return module.emitError("pipeline schedule: ") << error;
  return success();
}

} // namespace cleave
