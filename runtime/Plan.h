//===- Plan.h - plan.json: what a compiled program holds and does -*- C++ -*-===//
//
// The one description of a compiled program that the compiler writes and
// everything else reads (the driver, `--save-onnx`, `cleave conformance`,
// checkpoints): its inputs and outputs, the stored tensors of the weights
// blob with their offsets and their layout over the mesh in global terms, the
// arena, the collectives of a step and the training step's settings. Its JSON
// form is documented in docs/formats.md; readPlan checks every field it
// reads, so a damaged plan is an error, never a crash.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_PLAN_H
#define CLEAVE_RUNTIME_PLAN_H

#include "runtime/Mesh.h"
#include "runtime/Tensor.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cleave::rt {

/// Version of plan.json's layout (docs/formats.md).
inline constexpr int kPlanFormatVersion = 3;

/// The largest plan.json read.
inline constexpr uint64_t kMaxPlanBytes = 256u << 20;

/// The values a data input may hold where ops index with them
/// (passes/IndexRanges.cpp): [low, high), or `ignored`; `reader` names the
/// first such op.
struct IndexRange {
  int64_t low = 0, high = 0;
  std::optional<int64_t> ignored;
  std::string reader;

  bool holds(int64_t v) const { return (v >= low && v < high) || v == ignored; }
  /// "[0, 10) or -100".
  std::string text() const;
};

struct TensorSpec {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  /// An input's, where ops index with it.
  std::optional<IndexRange> indexRange;
};

/// A dim of a stored tensor split over a mesh axis: the dim is `blocks`
/// equal blocks, each cut into as many equal parts as the axis has ranks;
/// rank r holds part r of every block, one after another.
struct DimSplit {
  int64_t dim = 0;
  std::string axis;
  int64_t blocks = 1;
};

/// A stored tensor (after any DimSplit) flattened, padded with zeros and cut
/// into equal slices over a mesh axis (ZeRO): rank r holds elements
/// [r * slice, (r + 1) * slice) of the `elements` real ones.
struct FlatSlices {
  std::string axis;
  int64_t elements = 0;
  int64_t slice = 0;
};

/// How a stored tensor's global value is laid out over the mesh. Without
/// one, every rank holds the whole tensor.
struct Sharding {
  std::vector<int64_t> globalShape;
  std::optional<DimSplit> split;
  std::optional<FlatSlices> slices;
};

/// A box of a global tensor: its first index and its size along every dim.
struct Box {
  std::vector<int64_t> offset, shape;
};

/// The boxes of the global tensor that rank `coordinate` of the split axis
/// (of `axisSize` ranks) holds, in the order it stores them.
std::vector<Box> splitBoxes(const std::vector<int64_t> &globalShape, const DimSplit &split,
                            int64_t axisSize, int64_t coordinate);

/// Calls f(global, local, count) for each contiguous run of elements of the
/// global tensor (row-major) that rank `coordinate` holds: `count` elements
/// at element `global` of the tensor and `local` of the rank's part, in the
/// part's order. What splitting a tensor and putting it back together walk.
template <typename F>
void forEachSplitRun(const std::vector<int64_t> &globalShape, const DimSplit &split,
                     int64_t axisSize, int64_t coordinate, F &&f) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < split.dim; ++d)
    outer *= globalShape[d];
  for (int64_t d = split.dim + 1; d < static_cast<int64_t>(globalShape.size()); ++d)
    inner *= globalShape[d];
  int64_t local = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (const Box &box : splitBoxes(globalShape, split, axisSize, coordinate)) {
      int64_t count = box.shape[split.dim] * inner;
      f((o * globalShape[split.dim] + box.offset[split.dim]) * inner, local, count);
      local += count;
    }
}

/// What a stored tensor is, for the memory figures and for checkpoints.
/// ModelState: an initializer of the model the step updates without a
/// gradient (a training-mode BatchNorm's running statistics). WeightCopy: a
/// parameter rounded to bf16 or f16 (--precision), made again from the
/// parameter at the start of every step, so checkpoints leave it out.
enum class StoredRole {
  Parameter,
  Accumulator,
  OptimizerState,
  Coordinate,
  ModelState,
  WeightCopy
};

/// A tensor of the weights blob: a parameter, or state (gradient
/// accumulators, optimizer moments, counters, this rank's tp coordinate,
/// running statistics).
struct StoredTensor {
  /// As this rank stores it.
  TensorSpec tensor;
  int64_t offset = 0;
  int64_t bytes = 0;
  StoredRole role = StoredRole::Parameter;
  /// State laid out like a parameter (its moments, its gradient) or like
  /// the flat parameter buffer names it; empty for the others.
  std::string stateOf;
  std::optional<Sharding> sharding;
};

/// ZeRO 1/2's flat parameter buffer: every parameter (as this tp rank holds
/// it) at an element offset, sliced over `slices.axis`.
struct FlatBuffer {
  struct Member {
    std::string name;
    int64_t offset = 0;
    int64_t elements = 0;
  };
  std::string name;
  std::vector<Member> members;
  FlatSlices slices;
};

/// Collectives of one step of one kind on one mesh axis, as the ring
/// algorithm counts them (what is handed to the library, not bytes measured
/// on the wire).
struct CollectiveTraffic {
  std::string kind, axis;
  int64_t callsPerStep = 0;
  int64_t bufferBytes = 0;
  int64_t bytesSentPerRank = 0;
  int64_t analyticMinBytesSent = 0;
};

/// What one function of the program costs, as the compiler estimates it
/// (passes/CostModel.h): `cleave plan` times a layout from these.
/// A kernel that reads and writes more than this many bytes streams them
/// from memory rather than cache (this CPU's shared L3 is 32 MiB; a GPU's L2
/// 50 MiB): `cleave plan` times its bytes at the device's streaming rate.
inline constexpr int64_t kStreamedKernelBytes = int64_t{16} << 20;

/// A matrix product as the CPU's kernel poses it to oneDNN (folded batches
/// in `m`, `batch` products of one primitive, as
/// runtime/cpu/ProductPrimitives.h's matmulProblem and gemmProblem do), and
/// how often a call of its function runs it:
/// `cleave plan --device cpu` times each such product on this machine.
struct ProductCall {
  DType operands = DType::F32, result = DType::F32;
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  /// The result added to (beta 1, a gradient accumulated in place) or not
  /// (beta 0, also a gradient product that writes its accumulator on its
  /// function's only call a step); a row bias added as it is written.
  float beta = 0;
  bool bias = false;
  /// Its factors are bf16 or f16 (counted in low_precision_product_flops),
  /// whatever type the kernel multiplies them in.
  bool lowPrecision = false;
  int64_t calls = 0;
};

struct FunctionCost {
  std::string function;
  /// How often a step runs it (a forward or backward once per microbatch).
  int64_t callsPerStep = 0;
  /// FLOPs of its products (matmul, gemm, conv and conv's adjoints) on f32
  /// or f64 factors, and of its products on bf16 or f16 factors (summed in
  /// f32, --precision): `cleave plan` times each at its own rate.
  int64_t productFlops = 0, lowPrecisionProductFlops = 0;
  /// Bytes the other kernels read and write, and the part of them moved by
  /// kernels that move more than kStreamedKernelBytes each (past the caches).
  int64_t otherBytes = 0, streamedBytes = 0;
  /// Kernel calls (views and constants run none).
  int64_t kernelCalls = 0;
  /// The pipeline messages it sends and receives, and their bytes.
  int64_t messages = 0, messageBytes = 0;
  /// Its f32 and bf16 matrix products on the CPU target, one entry per
  /// distinct product (empty elsewhere).
  std::vector<ProductCall> products;
};

struct MemoryFigures {
  int64_t parameterBytes = 0, gradientBytes = 0, optimizerStateBytes = 0;
  /// The parameters' bf16 or f16 copies (--precision; StoredRole::WeightCopy).
  int64_t weightCopyBytes = 0;
  int64_t activationBytes = 0, inputBytes = 0;
  /// The largest scratch one kernel call allocates (a convolution's columns,
  /// or its operands' copies and oneDNN's scratchpad).
  int64_t scratchBytes = 0;
  /// The copies of constant weights the CPU's products keep in oneDNN's
  /// layout (cleave-constant-weights).
  int64_t packedWeightBytes = 0;
  /// The largest oneDNN scratchpad of the CPU's products, which they share
  /// (runtime/cpu/ProductPrimitives.h).
  int64_t productScratchpadBytes = 0;
  /// The kernels' threads on each rank that oneDNN's scratchpads are
  /// predicted for: a run's default on the machine that compiled it
  /// (runtime/Cores.h), or cleave compile --threads.
  int threads = 1;
  /// A pipeline stage's stash sets: one microbatch's stash times the most
  /// microbatches in flight.
  int64_t stashBytes = 0;
  /// The arena, the weights blob, the inputs, the stash, the scratch, the
  /// packed weights and the products' scratchpad: what the program's
  /// allocations peak at (the driver measures it) on `threads` threads.
  int64_t predictedPeakBytes = 0;
};

/// How the learning rate moves over the steps (docs/training.md).
enum class LrSchedule { Constant, Linear, Cosine };

struct Hyperparameters {
  double beta1 = 0, beta2 = 0, eps = 0, weightDecay = 0, momentum = 0;
  bool nesterov = false;
  double clipGradNorm = 0;
};

/// A pipeline stage's program (a mesh with a pp axis): its stage, the
/// actions its rank runs each step, and the stash its forward keeps for its
/// backward.
struct PipelineSpec {
  /// This program's stage, and the pipeline's: the pp ranks times the
  /// stages each runs (more than one with the interleaved schedule; stage
  /// s runs on pp rank s mod ranks).
  int64_t stage = 0, stages = 1;
  /// gpipe, 1f1b, interleaved or zb-h1.
  std::string schedule;
  /// One step's actions of this stage's rank in order: the microbatch, the
  /// stage, and 'F' (the forward), 'B' (the backward), or with zb-h1 'I'
  /// and 'W' (the backward's inputs' and weights' gradients).
  struct Action {
    char kind = 'F';
    int64_t microbatch = 0;
    int64_t stage = 0;
  };
  std::vector<Action> actions;
  /// The most microbatches whose forward ran through this stage and
  /// backward (B, or W) did not yet: how many stash sets the driver keeps.
  int64_t inFlight = 0;
  /// Each stash: an output of @forward (or, with zb-h1, of @backward) and
  /// the input of the same name of the entry points after it (indices into
  /// Plan::outputs and Plan::inputs).
  std::vector<std::pair<size_t, size_t>> stash;
  /// A message an entry point receives: from pp rank `peer` with `tag`,
  /// `elements` of `dtype`.
  struct Receive {
    int64_t peer = 0, tag = 0;
    DType dtype = DType::F32;
    int64_t elements = 0;
  };
  /// What each entry point an action runs ("forward", "backward",
  /// "backward_weight") receives, in order: the driver posts an action's
  /// receives while the action before it computes.
  std::map<std::string, std::vector<Receive>, std::less<>> receives;

  /// Whether Plan::inputs[input] is a stash (read from its stash set).
  bool isStashInput(size_t input) const {
    return std::any_of(stash.begin(), stash.end(),
                       [&](const auto &pair) { return pair.second == input; });
  }
  /// What `inFlight` is for these actions: the most microbatches at any
  /// point past their forward through this stage and not past its backward
  /// (B or W).
  int64_t mostInFlight() const {
    int64_t now = 0, most = 0;
    for (const Action &action : actions) {
      if (action.stage != stage)
        continue;
      now += action.kind == 'F' ? 1 : action.kind == 'I' ? 0 : -1;
      most = std::max(most, now);
    }
    return most;
  }
  /// The stages this rank runs, in order (this one first): the programs of
  /// its executable.
  std::vector<int64_t> rankStages() const {
    std::vector<int64_t> own{stage};
    for (const Action &action : actions)
      if (std::find(own.begin(), own.end(), action.stage) == own.end())
        own.push_back(action.stage);
    std::sort(own.begin(), own.end());
    return own;
  }
};

/// plan.json's optional "training" object: the program's forward runs one
/// microbatch, its apply one update (docs/training.md).
struct TrainingSpec {
  /// Algorithm "training_info": the model's own algorithm is the whole step,
  /// one forward with an empty apply; no learning rate, schedule or step
  /// inputs (they live in the graph), and gradAccum 1.
  bool trainingInfo = false;
  std::string optimizer;
  double lr = 0;
  LrSchedule schedule = LrSchedule::Constant;
  int64_t warmup = 0;
  Hyperparameters hyperparameters;
  /// A training_info step's assignments: (initializer, value).
  std::vector<std::pair<std::string, std::string>> updateBinding;
  /// Indices into Plan::inputs.
  std::vector<size_t> dataInputs;
  size_t lrInput = 0, stepInput = 0;
  /// Index into Plan::outputs.
  size_t lossOutput = 0;
  /// With --clip-grad-norm: the output holding the gradients' global norm
  /// before clipping (index into Plan::outputs).
  std::optional<size_t> gradNormOutput;
  /// Dim 0 of every data input: the samples of one forward.
  int64_t microBatch = 0;
  /// Forwards (microbatches) per apply.
  int64_t gradAccum = 1;
  /// Samples per step: microBatch * gradAccum.
  int64_t batchSize = 0;
  std::optional<PipelineSpec> pipeline;
  /// Collectives the program starts on the background collectives' thread
  /// (runtime/comm/BackgroundCollectives.h): their mesh axis and each one's
  /// bytes, in the order started.
  struct StartedCollectives {
    std::string axis;
    std::vector<int64_t> bytes;
  };
  /// The gradient buckets the last microbatch's backward starts summing
  /// (passes/OverlapGradients.cpp), which the optimizer waits for. None:
  /// the sums run in the optimizer's call.
  std::optional<StartedCollectives> gradientBuckets;
  /// ZeRO 3's parameter gathers started a compute segment before the op
  /// that reads them (passes/PrefetchGathers.cpp), in one call of each
  /// program that starts them. None: every gather runs where it is read.
  std::optional<StartedCollectives> prefetchedGathers;
  /// ZeRO 2 and 3's gradient reduce-scatters waited for where the next
  /// gradient's starts (passes/OverlapReduceScatters.cpp), in one call of
  /// each program that starts them: their bytes are the whole gradients'.
  /// None: every reduce-scatter runs where its gradient is made.
  std::optional<StartedCollectives> overlappedReduceScatters;
  /// Tensor parallelism's sums of partial sums (an input's gradient) waited
  /// for where they are first read (passes/OverlapTpSums.cpp), in one call
  /// of each program that starts them. None: every tp sum runs where its
  /// partial sums are made.
  std::optional<StartedCollectives> overlappedTpSums;
  /// The four above by their plan.json keys, in the order written (`Spec`:
  /// TrainingSpec, const or not). One background thread runs them all,
  /// over their axes' duplicate communicators.
  template <typename Spec> static auto startedByKey(Spec &spec) {
    return std::array{std::pair{"gradient_buckets", &spec.gradientBuckets},
                      std::pair{"prefetched_gathers", &spec.prefetchedGathers},
                      std::pair{"overlapped_reduce_scatters", &spec.overlappedReduceScatters},
                      std::pair{"overlapped_tp_sums", &spec.overlappedTpSums}};
  }
  /// Dynamic loss scaling (fp16): the initial scale, the steps without inf
  /// or NaN gradients after which it is multiplied by the growth factor (by
  /// the backoff factor after a step with them, which is skipped), and the
  /// outputs (indices into Plan::outputs) holding the scale a step used and
  /// 1 if it skipped.
  struct LossScaling {
    double initialScale = 0;
    int64_t growthInterval = 0;
    double growthFactor = 0, backoffFactor = 0;
    size_t scaleOutput = 0, skippedOutput = 0;
  };
  std::optional<LossScaling> lossScaling;
  /// Whether @apply writes the weights' bf16 or f16 copies as it updates
  /// the weights (passes/UpdateWeightCopies.cpp): @narrow_weights then runs
  /// once, before a run's first step, instead of before every step.
  bool narrowWeightsOnce = false;
};

struct Plan {
  /// Made up by each compile and compiled into its program too, which
  /// refuses a plan.json of another compile.
  std::string buildId;
  /// The ONNX model compiled, as an absolute path.
  std::string model;
  std::string target = "cpu";
  std::vector<TensorSpec> inputs, outputs;
  std::vector<StoredTensor> parameters, state;
  /// ZeRO 1/2's flat parameter buffers: a program's one (none without ZeRO
  /// 1/2); in a pipeline checkpoint's layouts, one per stage.
  std::vector<FlatBuffer> flatBuffers;
  int64_t constantCount = 0, constantBytes = 0;
  int64_t weightsBytes = 0;
  /// The mesh axes the weights blob differs along (one blob per coordinate
  /// of each); empty: one blob for every rank.
  std::vector<std::string> weightsByAxes;
  int64_t arenaBytes = 0;
  int64_t flops = 0;
  std::vector<FunctionCost> costs;
  MemoryFigures memory;
  /// The device mesh a training step is partitioned over.
  std::optional<Mesh> mesh;
  /// Sums over ranks in rank order (bit-identical to one device).
  bool deterministic = false;
  std::vector<CollectiveTraffic> collectives;
  std::optional<TrainingSpec> training;
};

/// The weights blob of the rank at `coordinates` (one per mesh axis):
/// "weights.bin", or "weights.dp1.tp0.bin" for a blob per dp and tp rank.
std::string weightsBlobName(const Plan &plan, const std::vector<int> &coordinates);

/// Whether `plan`'s program keeps bf16 or f16 copies of weights, which its
/// @narrow_weights makes at the start of every step (or of the run's first:
/// TrainingSpec::narrowWeightsOnce).
bool hasWeightCopies(const Plan &plan);

/// The name pattern of the blobs: "weights.dp{dp}.tp{tp}.bin".
std::string weightsBlobPattern(const std::vector<std::string> &byAxes);

/// Reads and checks plan.json; on failure sets `error` (without the path).
bool readPlan(const std::string &path, Plan &plan, std::string &error);

/// The plans of a compile's output directory `dir`: its plan.json, or a
/// pipeline's every stage's (DIR/stage<S>/plan.json, in stage order), with
/// the directory of each in `dirs`. On failure sets `where` (the file) and
/// `error`.
bool readCompiledPlans(const std::string &dir, std::vector<Plan> &plans,
                       std::vector<std::string> &dirs, std::string &where, std::string &error);

/// Checks plan.json's text and reads it into `plan`; on failure sets `error`.
bool parsePlan(const std::string &text, Plan &plan, std::string &error);

/// What a program's generated code takes for granted about its plan, one
/// "FIELD VALUE" line each: the inputs and outputs in order (name, dtype,
/// shape), the arena's and the weights blob's bytes. The compiler compiles
/// it into the program, which refuses a plan.json whose own differs.
std::string programInterface(const Plan &plan);

/// plan.json's text for `plan`.
std::string planJson(const Plan &plan);

/// `stored`'s entry of plan.json without its place in the blob (`offset`,
/// `bytes`): its name, dtype, shape, role and layout, as JSON text with the
/// keys sorted, so two layouts are equal when their texts are.
std::string storedLayoutJson(const Plan &plan, const StoredTensor &stored);

/// flat_parameters' JSON text (plan.json's and a checkpoint index's).
std::string flatBufferJson(const FlatBuffer &flat);

/// Reads back the layouts of stored tensors on `mesh` (storedLayoutJson
/// texts, without places in a blob) and flatBufferJson texts into
/// `layouts`' parameters, state and flat buffers, checked as readPlan checks
/// them; on failure sets `error` naming the field.
bool parseLayouts(const std::optional<Mesh> &mesh, const std::vector<std::string> &stored,
                  const std::vector<std::string> &flatBuffers, Plan &layouts, std::string &error);

/// "8x32", or "scalar" for [].
std::string shapeText(const std::vector<int64_t> &shape);

} // namespace cleave::rt

#endif
