//===- Pipelines.h - the compile pipeline, registered by name -*- C++ -*-===//
//
// `cleave compile` and `cleave-opt --cleave-train-pipeline='...'` build the
// same passes from the same options, so any compile can be replayed on
// `cleave import`'s output.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PASSES_PIPELINES_H
#define CLEAVE_PASSES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace cleave {

struct TrainPipelineOptions : public mlir::PassPipelineOptions<TrainPipelineOptions> {
  Option<bool> gradientsOnly{*this, "gradients-only",
                             llvm::cl::desc("Only differentiate the loss (cleave compile "
                                            "--gradients): no step, no distribution"),
                             llvm::cl::init(false)};
  Option<std::string> loss{*this, "loss",
                           llvm::cl::desc("The result to train on (its cleave.name); default: "
                                          "the only scalar float result, or the appended loss")};
  Option<std::string> appendLossKind{
      *this, "append-loss-kind",
      llvm::cl::desc("Append a loss first: cross_entropy or mse (empty: none)")};
  Option<std::string> appendLossOutput{*this, "append-loss-output",
                                       llvm::cl::desc("The output the appended loss reads")};
  Option<std::string> appendLossTarget{*this, "append-loss-target",
                                       llvm::cl::desc("The new input of the appended loss")};
  ListOption<std::string> freeze{*this, "freeze",
                                 llvm::cl::desc("Globs of parameters to leave untrained")};
  ListOption<std::string> mesh{
      *this, "mesh", llvm::cl::desc("Mesh axes in order, NAME=SIZE each (empty: one device)")};
  ListOption<std::string> plan{*this, "plan",
                               llvm::cl::desc("Tensor-parallel layouts, GLOB=DIM/DIM/... each")};
  Option<std::string> optimizer{*this, "optimizer", llvm::cl::init("sgd"),
                                llvm::cl::desc("sgd, momentum, adagrad, adam or adamw")};
  Option<double> beta1{*this, "beta1", llvm::cl::init(0.9), llvm::cl::desc("Adam's beta1")};
  Option<double> beta2{*this, "beta2", llvm::cl::init(0.999), llvm::cl::desc("Adam's beta2")};
  Option<double> epsilon{*this, "eps", llvm::cl::init(1e-8),
                         llvm::cl::desc("Adam's and Adagrad's epsilon")};
  Option<double> weightDecay{*this, "weight-decay", llvm::cl::init(0.0),
                             llvm::cl::desc("L2 or decoupled (adamw) weight decay")};
  Option<double> momentum{*this, "momentum", llvm::cl::init(0.9),
                          llvm::cl::desc("Velocity decay of momentum")};
  Option<bool> nesterov{*this, "nesterov", llvm::cl::init(false),
                        llvm::cl::desc("Nesterov momentum")};
  Option<double> clipGradNorm{*this, "clip-grad-norm", llvm::cl::init(0.0),
                              llvm::cl::desc("Global gradient-norm clipping (0: off)")};
  Option<int> zero{*this, "zero", llvm::cl::init(0), llvm::cl::desc("ZeRO stage 0..3")};
  Option<std::string> schedule{*this, "schedule", llvm::cl::init("1f1b"),
                               llvm::cl::desc("With a pp axis: the pipeline schedule")};
  Option<int64_t> microbatches{*this, "microbatches", llvm::cl::init(1),
                               llvm::cl::desc("With a pp axis: microbatches a step")};
  ListOption<std::string> stageParams{
      *this, "stage-params",
      llvm::cl::desc("With a pp axis: GLOB=STAGE each, the stage of the parameters")};
  Option<int64_t> virtualStages{
      *this, "virtual-stages", llvm::cl::init(1),
      llvm::cl::desc("With a pp axis: the stages each rank runs (the interleaved schedule)")};
  Option<bool> deterministic{
      *this, "deterministic", llvm::cl::init(false),
      llvm::cl::desc("Every layout's sums as one device adds them (--deterministic): a "
                     "parameter read in several pipeline stages sent from the first each "
                     "microbatch, tp's partial products and cross-entropy made whole")};
  Option<int64_t> stage{*this, "stage", llvm::cl::init(0),
                        llvm::cl::desc("With a pp axis: the stage this program runs")};
  Option<std::string> recompute{
      *this, "recompute", llvm::cl::init("none"),
      llvm::cl::desc("Forward values the backward makes again: none, selective or full")};
  Option<std::string> gradReduceDtype{
      *this, "grad-reduce-dtype", llvm::cl::init("fp32"),
      llvm::cl::desc("The type the gradients are summed over dp in: fp32 or bf16 "
                     "(cleave-narrow-gradient-sums)")};
  Option<std::string> gradAccumDtype{
      *this, "grad-accum-dtype", llvm::cl::init("fp32"),
      llvm::cl::desc("The type the gradient accumulators are kept in: fp32 or bf16 "
                     "(cleave-narrow-gradient-accumulators)")};
  Option<std::string> precision{
      *this, "precision", llvm::cl::init("fp32"),
      llvm::cl::desc("The products' operand type: fp32, bf16 or fp16 (summed in f32)")};
  Option<double> lossScale{*this, "loss-scale", llvm::cl::init(0.0),
                           llvm::cl::desc("Dynamic loss scaling's initial scale (0: none)")};
  Option<int64_t> lossScaleWindow{
      *this, "loss-scale-window", llvm::cl::init(2000),
      llvm::cl::desc("Steps without inf or NaN gradients after which the loss scale grows")};
  Option<double> lossScaleGrowth{
      *this, "loss-scale-growth", llvm::cl::init(2.0),
      llvm::cl::desc("What the loss scale is multiplied by when it grows")};
  Option<double> lossScaleBackoff{
      *this, "loss-scale-backoff", llvm::cl::init(0.5),
      llvm::cl::desc("What the loss scale is multiplied by after a step with inf or NaN "
                     "gradients")};
  Option<int64_t> bucketBytes{
      *this, "bucket-bytes", llvm::cl::init(0),
      llvm::cl::desc("cleave-overlap-gradients' bucket bytes (-1: auto, 0: none), run after "
                     "the memory plan")};
  Option<bool> prefetchGathers{
      *this, "prefetch-gathers", llvm::cl::init(false),
      llvm::cl::desc("Run cleave-prefetch-gathers (ZeRO 3's gathers started a compute segment "
                     "early) before the memory plan")};
  Option<bool> overlapReduceScatters{
      *this, "overlap-reduce-scatters", llvm::cl::init(false),
      llvm::cl::desc("Run cleave-overlap-reduce-scatters (ZeRO's gradient reduce-scatters "
                     "during the backward) before the memory plan")};
  Option<bool> overlapTpSums{
      *this, "overlap-tp-sums", llvm::cl::init(false),
      llvm::cl::desc("Run cleave-overlap-tp-sums (tp sums waited for where first read) before "
                     "the memory plan")};
  Option<bool> syncBatchNorm{*this, "sync-batchnorm", llvm::cl::init(false),
                             llvm::cl::desc("Training-mode BatchNorm statistics over every dp "
                                            "rank's microbatch together")};
};

/// The passes from @forward as imported to the differentiated training step
/// partitioned over the mesh: append-loss, split-loss, create-mesh,
/// annotate-sharding, sharding-propagation, check-sharding, shard-partition
/// (with a tp axis), with a pp axis pipeline-split, pipeline-schedule and
/// pipeline-select-stage (the program of stage `stage`), batchnorm-statistics,
/// autodiff, build-train-step, data-parallel, autocast, recompute, with a pp axis
/// split-backward, as each option asks.
void buildTrainPipeline(mlir::OpPassManager &pm, const TrainPipelineOptions &options);

/// What the program tail overlaps with compute: cleave-overlap-gradients'
/// bucket bytes (0: none), and whether cleave-prefetch-gathers,
/// cleave-overlap-reduce-scatters and cleave-overlap-tp-sums run.
struct ProgramTailOptions {
  int64_t bucketBytes = 0;
  bool prefetchGathers = false;
  bool overlapReduceScatters = false;
  bool overlapTpSums = false;
};

/// The passes every program runs last, trained or not, before it is
/// lowered: cleave-fold-transposes, cleave-constant-weights,
/// cleave-fold-bias-adds, cleave-fuse-activations, cleave-fuse-softmax,
/// cleave-accumulate-into-products, cleave-fuse-elementwise,
/// cleave-order-updates, cleave-sink-widened-sums,
/// cleave-prefetch-gathers, cleave-overlap-reduce-scatters and
/// cleave-overlap-tp-sums as `options` say, cleave-memory-plan and
/// cleave-overlap-gradients.
void buildProgramTail(mlir::OpPassManager &pm, const ProgramTailOptions &options);

/// Registers `cleave-train-pipeline`: buildTrainPipeline, then
/// buildProgramTail (what `cleave compile` writes as forward.mlir).
void registerCleavePipelines();

} // namespace cleave

#endif
