//===- Pipelines.cpp - the compile pipeline, registered by name ----------===//

#include "passes/Pipelines.h"

#include "passes/Passes.h"
#include "runtime/Mesh.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace cleave {

void buildTrainPipeline(OpPassManager &pm, const TrainPipelineOptions &options) {
  std::string loss = options.loss;
  if (!options.appendLossKind.empty()) {
    pm.addNestedPass<func::FuncOp>(createAppendLoss(
        {options.appendLossKind, options.appendLossOutput, options.appendLossTarget}));
    loss = "loss";
  }
  pm.addNestedPass<func::FuncOp>(createIndexRanges());
  pm.addNestedPass<func::FuncOp>(createUnmergeBatchDims());
  AutodiffOptions autodiff;
  autodiff.loss = loss;
  autodiff.freeze.assign(options.freeze.begin(), options.freeze.end());
  autodiff.lossScale = options.lossScale;
  if (options.gradientsOnly) {
    pm.addNestedPass<func::FuncOp>(createAutodiff(autodiff));
    return;
  }
  // Training differentiates the loss's sum; the step divides by the global
  // count once.
  pm.addNestedPass<func::FuncOp>(createSplitLoss({loss}));
  autodiff.loss = "loss.sum";
  const bool distributed = !options.mesh.empty();
  if (distributed) {
    CreateMeshOptions mesh;
    mesh.mesh.assign(options.mesh.begin(), options.mesh.end());
    mesh.wholeSums = options.deterministic;
    pm.addPass(createCreateMesh(mesh));
    AnnotateShardingOptions annotate;
    annotate.plan.assign(options.plan.begin(), options.plan.end());
    pm.addPass(createAnnotateSharding(annotate));
  }
  // Tensor parallelism: upstream propagation (forward only: shardings flow
  // from the parameters) and partitioning of @forward, before autodiff
  // differentiates its rank's part. (A mesh that does not parse is
  // cleave-create-mesh's error.)
  rt::Mesh parsed;
  std::string error;
  const bool tensorParallel =
      distributed && rt::Mesh::parse(llvm::join(options.mesh, ","), parsed, error) &&
      parsed.axisIndex("tp") >= 0 && parsed.shape[parsed.axisIndex("tp")] > 1;
  if (tensorParallel) {
    shard::ShardingPropagationOptions propagation;
    propagation.traversal = shard::TraversalOrder::Forward;
    pm.addNestedPass<func::FuncOp>(shard::createShardingPropagation(propagation));
    pm.addNestedPass<func::FuncOp>(createCheckSharding());
    pm.addNestedPass<func::FuncOp>(shard::createPartition());
    pm.addNestedPass<func::FuncOp>(createSliceLeadingDim());
  }
  // Pipeline parallelism: each stage is a program of its own.
  const bool pipelined = distributed && parsed.axisIndex("pp") >= 0;
  if (pipelined) {
    PipelineSplitOptions split;
    split.stageParams.assign(options.stageParams.begin(), options.stageParams.end());
    split.virtualStages = options.virtualStages;
    split.sendTiedWeights = options.deterministic;
    pm.addPass(createPipelineSplit(split));
    pm.addPass(createPipelineSchedule({options.schedule, options.microbatches}));
    pm.addPass(createPipelineSelectStage({options.stage}));
  }
  pm.addNestedPass<func::FuncOp>(createBatchNormStatistics({options.syncBatchNorm}));
  pm.addNestedPass<func::FuncOp>(createAutodiff(autodiff));
  if (tensorParallel && options.deterministic)
    pm.addPass(createGatherSplitProducts());
  BuildTrainStepOptions step;
  step.optimizer = options.optimizer;
  step.beta1 = options.beta1;
  step.beta2 = options.beta2;
  step.epsilon = options.epsilon;
  step.weightDecay = options.weightDecay;
  step.momentum = options.momentum;
  step.nesterov = options.nesterov;
  step.clipGradNorm = options.clipGradNorm;
  step.zero = options.zero;
  // Mixed precision keeps the f32 parameters as ZeRO's master slices only.
  step.slicedMasters = options.precision != "fp32";
  step.lossScale = options.lossScale;
  step.lossScaleWindow = options.lossScaleWindow;
  step.lossScaleGrowth = options.lossScaleGrowth;
  step.lossScaleBackoff = options.lossScaleBackoff;
  pm.addPass(createBuildTrainStep(step));
  if (pipelined)
    pm.addPass(createPipelineTiedGradients());
  if (distributed) {
    pm.addPass(createDataParallel());
    pm.addPass(createNarrowGradientSums({options.gradReduceDtype}));
  }
  pm.addPass(createNarrowGradientAccumulators({options.gradAccumDtype}));
  if (options.precision != "fp32") {
    pm.addPass(createAutocast({options.precision}));
    pm.addPass(createUpdateWeightCopies());
  }
  if (options.recompute != "none")
    pm.addPass(createRecompute({options.recompute}));
  if (pipelined)
    pm.addPass(createSplitBackward({options.schedule == "zb-h1"}));
}

void buildProgramTail(OpPassManager &pm, const ProgramTailOptions &options) {
  pm.addPass(createFoldTransposes());
  pm.addPass(createConstantWeights());
  pm.addPass(createFoldBiasAdds());
  pm.addPass(createFuseActivations());
  pm.addPass(createFuseSoftmax());
  pm.addPass(createAccumulateIntoProducts());
  pm.addPass(createFuseElementwise());
  pm.addPass(createOrderUpdates());
  pm.addPass(createSinkWidenedSums());
  if (options.prefetchGathers)
    pm.addPass(createPrefetchGathers());
  if (options.overlapReduceScatters)
    pm.addPass(createOverlapReduceScatters());
  if (options.overlapTpSums)
    pm.addPass(createOverlapTpSums());
  pm.addPass(createMemoryPlan());
  pm.addPass(createOverlapGradients({options.bucketBytes}));
}

void registerCleavePipelines() {
  PassPipelineRegistration<TrainPipelineOptions>(
      "cleave-train-pipeline",
      "The passes of cleave compile --train (or --gradients) up to the memory plan: what "
      "it writes as forward.mlir",
      [](OpPassManager &pm, const TrainPipelineOptions &options) {
        buildTrainPipeline(pm, options);
        buildProgramTail(pm, {options.bucketBytes, options.prefetchGathers,
                              options.overlapReduceScatters, options.overlapTpSums});
      });
}

} // namespace cleave
