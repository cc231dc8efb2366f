//===- Compile.h - ONNX model to a native program ---------------*- C++ -*-===//

#ifndef CLEAVE_COMPILER_COMPILE_H
#define CLEAVE_COMPILER_COMPILE_H

#include "compiler/Diagnostics.h"
#include "compiler/OnnxImporter.h"

#include "mlir/IR/MLIRContext.h"

#include <optional>
#include <string>

namespace cleave {

/// The optimizer and learning rate of a training step (`cleave compile --train`).
struct TrainOptions {
  std::string optimizer = "sgd";
  double lr = 0.01;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  double weightDecay = 0.0;
  double momentum = 0.9;
  bool nesterov = false;
  /// Global gradient-norm clipping threshold; 0 turns it off.
  double clipGradNorm = 0.0;
  std::string lrSchedule = "constant";
  int64_t warmup = 0;
  /// Microbatches whose gradients one step accumulates.
  int64_t gradAccum = 1;
  /// Samples per step (all microbatches of all data-parallel ranks); unset
  /// takes the model's input shapes as one rank's micro-batch.
  std::optional<int64_t> batchSize;
  /// The device mesh, "dp=2" (empty: one device).
  std::string mesh;
  /// A plan file: parameter-name globs and their layouts over the mesh
  /// (docs/formats.md); empty: every parameter replicated.
  std::string plan;
  /// ZeRO stage over the mesh's dp axis: 0 (replicated optimizer), 1
  /// (optimizer state sharded), 2 (gradients too).
  int zero = 0;
  /// Reduce in a fixed rank order, so data-parallel runs are bit-identical
  /// to one device with the same accumulation.
  bool deterministic = false;
  /// Training-mode BatchNorm statistics over every dp rank's microbatch
  /// together (SyncBatchNorm), not each rank's own.
  bool syncBatchNorm = false;
  /// Forward values the backward makes again instead of keeping them
  /// (cleave-recompute): none, selective or full.
  std::string recompute = "none";
  /// The matrix products' operand type (cleave-autocast): fp32, bf16 or
  /// fp16 (summed in f32; everything else stays f32).
  std::string precision = "fp32";
  /// The type the gradients are summed over dp in (cleave-narrow-gradient-
  /// sums): fp32 or bf16.
  std::string gradReduceDtype = "fp32";
  /// The type the gradient accumulators are kept in (cleave-narrow-
  /// gradient-accumulators): fp32 or bf16 (with --precision bf16).
  std::string gradAccumDtype = "fp32";
  /// With fp16: dynamic loss scaling's initial scale, the steps without
  /// inf or NaN gradients after which it grows, and the factors it grows
  /// and backs off by (unset: GradScaler's defaults, below).
  std::optional<double> lossScale;
  std::optional<int64_t> lossScaleWindow;
  std::optional<double> lossScaleGrowth, lossScaleBackoff;
  static constexpr double kDefaultLossScale = 65536.0;
  static constexpr int64_t kDefaultLossScaleWindow = 2000;
  static constexpr double kDefaultLossScaleGrowth = 2.0, kDefaultLossScaleBackoff = 0.5;
  double initialLossScale() const { return lossScale.value_or(kDefaultLossScale); }
  int64_t lossScaleGrowthInterval() const {
    return lossScaleWindow.value_or(kDefaultLossScaleWindow);
  }
  double lossScaleGrowthFactor() const { return lossScaleGrowth.value_or(kDefaultLossScaleGrowth); }
  double lossScaleBackoffFactor() const {
    return lossScaleBackoff.value_or(kDefaultLossScaleBackoff);
  }
  /// MiB of gradients per bucket that the last microbatch's backward starts
  /// summing over dp (cleave-overlap-gradients): "auto" (a quarter of the
  /// gradients, 4 KiB to 25 MiB; off for --target cuda) or a number, 0 for
  /// none (the sums run in the optimizer's step).
  std::string bucketMb = "auto";
  /// Whether ZeRO 3's parameter gathers start a compute segment before the
  /// ops that read them, on the background thread (cleave-prefetch-gathers),
  /// and ZeRO 2 and 3's gradient reduce-scatters run there while the
  /// backward makes the next layer's gradient
  /// (cleave-overlap-reduce-scatters): "on" or "off" (the default: on this
  /// CPU the background thread takes the cores the compute runs on,
  /// docs/performance.md).
  std::string prefetchGathers = "off";
  std::string overlapReduceScatters = "off";
  /// Whether tensor parallelism's sums of an input's gradient run on the
  /// background thread while the backward computes the weight's gradient,
  /// waited for where they are first read (cleave-overlap-tp-sums): "on" or
  /// "off" (the default, as the two above).
  std::string overlapTpSums = "off";
  /// With a pp axis: the pipeline schedule, gpipe, 1f1b, interleaved or
  /// zb-h1.
  std::string schedule = "1f1b";
  /// With a pp axis: the stages each rank runs (2 or more: the interleaved
  /// schedule).
  int64_t virtualStages = 1;
  /// With a pp axis: "auto" (a balanced cut, or the model's pipeline_stage
  /// annotations) or a stages file (docs/formats.md).
  std::string stages = "auto";
};

struct CompileOptions {
  std::string model;
  std::string outDir;
  std::string target = "cpu";
  /// How far to go: "plan" (plan.json alone: no weights, and the parameters'
  /// values are not read), "mlir" (+ the weights, the planned and lowered
  /// IR), "cpp" (+ the C++ or CUDA source), "program" (+ the executable).
  std::string emit = "program";
  bool printIrAfterAll = false;
  /// Also compute the gradient of the loss for every parameter (outputs named
  /// grad:<parameter>), through the cleave-autodiff pass.
  bool gradients = false;
  /// The output to differentiate; empty: the only scalar float output.
  std::string loss;
  /// Globs of parameters to freeze (no gradient, no update).
  std::vector<std::string> freeze;
  /// Compile one training step instead of a forward (implies gradients).
  bool train = false;
  /// With `train`: build the step with cleave's own optimizers even when the
  /// model has a training_info (which otherwise defines the step).
  bool ignoreTrainingInfo = false;
  /// The flags given that configure cleave's own step builder (--optimizer,
  /// --lr, --grad-accum above 1, --mesh, --freeze, --loss KIND:...): refused
  /// when the model's training_info defines the step.
  std::vector<std::string> stepFlags;
  TrainOptions training;
  ImportOptions import;
  /// The kernels' threads on each rank that plan.json's memory is predicted
  /// for (oneDNN's scratchpads depend on them); 0: a run's default here,
  /// this machine's cores shared among the mesh's ranks.
  int threads = 0;
  /// Print the model's training warnings (cleave plan prints them once, not
  /// once per layout it compiles).
  bool warnings = true;
};

/// Imports, plans and lowers the model and writes the output directory:
/// forward.mlir, program.mlir, program.cpp (.cu), plan.json, weights.bin and
/// program. The directory appears whole or not at all: work happens in
/// OUT.partial and is renamed at the end; on a failure OUT.partial is left for
/// inspection only when it holds the generated source the error points to.
mlir::LogicalResult compileModel(mlir::MLIRContext &context, const CompileOptions &options,
                                 UserError &error);

} // namespace cleave

#endif
