//===- PlanCommand.cpp - cleave plan: choose a parallel layout ------------===//
//
// Every layout of the step over N ranks (dp x tp x pp = N, ZeRO stage,
// microbatches, pipeline schedule, recomputation) is compiled as far as its
// memory plan (--emit plan, in a scratch directory), so the memory a rank
// needs is the real plan's, not a formula. Its step time comes from the
// plan's costs on a device model (compiler/DeviceModel.h):
//
//   a function     product FLOPs / product rate + other kernels' bytes /
//                  memory rate (streaming rate for those past the caches) +
//                  kernel calls x call time, times its calls
//   a collective   calls x steps x link latency + bytes sent / bandwidth,
//                  on the intra- or inter-node link its axis group spans
//   a pipeline     the schedule simulated with each stage's forward and
//                  backward (passes/PipelineSimulator.h), then each rank's
//                  update and collectives after its last backward (after
//                  every rank's where the updates sum over pp)
//
// docs/training.md ("Choosing a layout") says what the model leaves out.
//
//===----------------------------------------------------------------------===//

#include "compiler/PlanCommand.h"

#include "compiler/BuildConfig.h"
#include "compiler/DeviceModel.h"
#include "compiler/RunCommand.h"
#include "passes/CostModel.h"
#include "passes/Passes.h"
#include "passes/PipelineSimulator.h"
#include "runtime/Allocations.h"
#include "runtime/MedianTime.h"
#include "runtime/Npy.h"
#include "runtime/cpu/ProductPrimitives.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <thread>
#include <utility>

using namespace mlir;

namespace cleave {

using Json = nlohmann::json;

std::string Layout::mesh() const {
  std::string text;
  for (auto [name, size] : {std::pair{"pp", pp}, {"dp", dp}, {"tp", tp}})
    if (size > 1)
      text += (text.empty() ? "" : ",") + std::string(name) + "=" + std::to_string(size);
  return text;
}

std::string Layout::flags() const {
  std::string text = mesh().empty() ? "" : "--mesh " + mesh();
  auto add = [&](const std::string &flag) { text += (text.empty() ? "" : " ") + flag; };
  if (zero > 0)
    add("--zero " + std::to_string(zero));
  if (microbatches > 1)
    add("--grad-accum " + std::to_string(microbatches));
  if (pp > 1)
    add("--schedule " + schedule);
  if (virtualStages > 1)
    add("--virtual-stages " + std::to_string(virtualStages));
  if (recompute != "none")
    add("--recompute " + recompute);
  return text;
}

void Layout::applyTo(TrainOptions &training) const {
  training.mesh = mesh();
  training.zero = zero;
  training.gradAccum = microbatches;
  training.schedule = schedule;
  training.virtualStages = virtualStages;
  training.recompute = recompute;
}

std::optional<int64_t> parseByteCount(const std::string &text) {
  llvm::StringRef rest(text);
  uint64_t count = 0;
  if (rest.consumeInteger(10, count))
    return std::nullopt;
  for (auto [suffix, scale] :
       {std::pair{"", 1}, {"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}})
    if (rest == suffix) {
      if (count == 0 || count > uint64_t(INT64_MAX) / scale)
        return std::nullopt;
      return static_cast<int64_t>(count * scale);
    }
  return std::nullopt;
}

namespace {

/// A layout's prediction, or why it has none.
struct Prediction {
  Layout layout;
  /// Why it has no prediction (the compiler's error); `what` is empty when
  /// it has one.
  UserError failure;

  bool compiled() const { return failure.what.empty(); }
  int64_t peakBytes = 0;
  int64_t modelStateBytes = 0;
  /// Samples per step.
  int64_t batch = 0;
  double stepSeconds = 0, communicationSeconds = 0, exposedSeconds = 0, bubble = 0;
  bool fits = false;

  double secondsPerSample() const { return stepSeconds / static_cast<double>(batch); }
};

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> result;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0)
      result.push_back(d);
  return result;
}

/// The most pp ranks the interleaved schedule is tried on: its 2P stages'
/// plans double a layout's compile; on GPT-2 over 64 ranks, trying it on 16
/// to 64 ranks too took the planner 98 s instead of 75 s.
constexpr int64_t kMostInterleavedRanks = 8;

/// Every layout over `ranks`: tp only with a plan file, recomputation not in
/// pipelines (refused there), M in {P, 2P} for a pipeline and {1, 2} without,
/// the interleaved schedule (V = 2) on up to kMostInterleavedRanks pp ranks;
/// each layout without recomputation before the same with it.
std::vector<Layout> enumerateLayouts(const PlanOptions &options) {
  const TrainOptions &t = options.compile.training;
  std::vector<Layout> layouts;
  for (int64_t tp : divisors(options.ranks)) {
    if (tp > 1 && t.plan.empty())
      continue;
    for (int64_t pp : divisors(options.ranks / tp)) {
      Layout layout;
      layout.tp = tp;
      layout.pp = pp;
      layout.dp = options.ranks / (tp * pp);
      for (int zero = 0; zero <= (layout.dp > 1 ? 3 : 0); ++zero)
        for (int64_t microbatches :
             pp > 1 ? std::vector<int64_t>{pp, 2 * pp} : std::vector<int64_t>{1, 2})
          for (const char *schedule :
               pp > 1 ? std::vector<const char *>{"gpipe", "1f1b", "interleaved", "zb-h1"}
                      : std::vector<const char *>{"1f1b"})
            for (const char *recompute : {"none", "selective", "full"}) {
              if (t.batchSize && *t.batchSize % (layout.dp * microbatches) != 0)
                continue;
              if (schedule == std::string("interleaved") && pp > kMostInterleavedRanks)
                continue;
              layout.zero = zero;
              layout.microbatches = microbatches;
              layout.schedule = schedule;
              layout.virtualStages = layout.schedule == "interleaved" ? 2 : 1;
              layout.recompute = recompute;
              layouts.push_back(layout);
            }
    }
  }
  return layouts;
}

/// The JSON object in the file at `path`, when there is one.
std::optional<Json> readJson(const std::string &path) {
  Json json;
  std::string error;
  if (!readJsonObject(path, json, error))
    return std::nullopt;
  return json;
}

/// What a model's step takes on this machine over what the device's rates
/// predict, for its products, its other kernels and its collectives apart:
/// measured on one layout with --device cpu (the rates of one product, one
/// elementwise kernel and one collective timed alone miss what a model's
/// own kernels and sums achieve in its step, and by different factors), 1
/// with a device file.
struct ComputeScale {
  double products = 1, other = 1;
  /// By kind of collective ("all_reduce", "reduce_scatter", "all_gather").
  std::map<std::string, double> collectives = {
      {"all_reduce", 1}, {"reduce_scatter", 1}, {"all_gather", 1}};

  /// The scale of collectives of `kind` (the all-reduces' for a kind not
  /// listed).
  double collective(const std::string &kind) const {
    auto found = collectives.find(kind);
    return found != collectives.end() ? found->second : collectives.at("all_reduce");
  }
};

/// This machine's time of each matrix product a plan lists (its `cost`
/// entries' `products`), timed on first need, alone, on the kernels' threads
/// of a rank: a product's rate depends on its shape and on whether it adds
/// to its result (the bench MLP's run at 103 to 172 GFLOP/s on one thread
/// here), which one product's rate from cleave-calibrate does not see.
class ProductTimes {
public:
  explicit ProductTimes(int threads) : threads(threads) {}

  /// Seconds of one call of the product `entry` describes; nullopt where
  /// oneDNN does not make it.
  std::optional<double> seconds(const Json &entry) {
    Json product = entry;
    product.erase("calls");
    const std::string key = product.dump();
    auto known = timed.find(key);
    if (known == timed.end())
      known = timed.emplace(key, time(product)).first;
    return known->second;
  }

  /// Every product timed, each as plan.json lists it (without its calls)
  /// with its `seconds`: what the predictions took.
  Json json() const {
    Json products = Json::array();
    for (const auto &[key, seconds] : timed) {
      if (!seconds)
        continue;
      Json product = Json::parse(key);
      product["seconds"] = *seconds;
      products.push_back(product);
    }
    return products;
  }

private:
  std::optional<double> time(const Json &entry) {
    rt::cpu::ProductProblem problem;
    if (!rt::dtypeFromName(entry["operands"].get<std::string>(), problem.operands) ||
        !rt::dtypeFromName(entry["result"].get<std::string>(), problem.result))
      return std::nullopt;
    problem.transA = entry["trans_a"];
    problem.transB = entry["trans_b"];
    problem.m = entry["m"];
    problem.n = entry["n"];
    problem.k = entry["k"];
    problem.batch = entry.value("batch", int64_t{1});
    problem.lda = problem.transA ? problem.m : problem.k;
    problem.ldb = problem.transB ? problem.k : problem.n;
    problem.ldc = problem.n;
    problem.beta = entry["beta"];
    if (entry["bias"].get<bool>()) {
      problem.biasRows = 1;
      problem.biasColumns = problem.n;
    }
    // Zeroed, each aligned as the program's arena places tensors (a large
    // std::vector's data lies 16 bytes past a page, so its rows straddle
    // cache lines where the program's do not).
    auto aligned = [](int64_t bytes) {
      return (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
    };
    const int64_t factor = static_cast<int64_t>(rt::dtypeSize(problem.operands));
    const int64_t batch = problem.batch;
    const int64_t aBytes = aligned(batch * problem.m * problem.k * factor),
                  bBytes = aligned(batch * problem.k * problem.n * factor),
                  cBytes = aligned(batch * problem.m * problem.n *
                                   static_cast<int64_t>(rt::dtypeSize(problem.result))),
                  biasBytes = aligned(problem.n * static_cast<int64_t>(sizeof(float)));
    rt::KeptBuffer buffer(aBytes + bBytes + cBytes + biasBytes, nullptr);
    if (!buffer.data())
      return std::nullopt;
    char *a = static_cast<char *>(buffer.data()), *b = a + aBytes, *c = b + bBytes,
         *bias = c + cBytes;
    std::memset(a, 0, aBytes + bBytes + cBytes + biasBytes);
    auto run = [&] {
      return primitives.run(problem, threads, a, b,
                            problem.hasBias() ? reinterpret_cast<float *>(bias) : nullptr, c,
                            nullptr);
    };
    if (!run())
      return std::nullopt;
    return rt::medianSecondsPerCall(run, 5, 0.01);
  }

  int threads;
  rt::cpu::ProductPrimitives primitives;
  std::map<std::string, std::optional<double>> timed;
};

/// Times a layout's plans (one, or a pipeline's per stage) on `device`.
class StepTimer {
public:
  /// `scale` multiplies each kind of kernel's time from the rates; `times`
  /// (null with a device file) times each listed product on this machine.
  StepTimer(const DeviceModel &device, const Layout &layout, ComputeScale scale,
            ProductTimes *times)
      : device(device), layout(layout), scale(scale), times(times) {}

  /// Seconds of one call's products of the function whose plan.json `cost`
  /// entry this is: each product it lists as timed here, the others (all of
  /// them with a device file) at the device's rates.
  double productSeconds(const Json &cost) const {
    double flops = cost["product_flops"].get<double>();
    double lowPrecision = cost["low_precision_product_flops"].get<double>();
    double seconds = 0;
    for (const Json &product : times ? cost.value("products", Json::array()) : Json::array()) {
      std::optional<double> one = times->seconds(product);
      if (!one)
        continue;
      const double calls = product["calls"].get<double>();
      seconds += calls * *one;
      (product["low_precision"].get<bool>() ? lowPrecision : flops) -=
          calls * 2.0 * product.value("batch", 1.0) * product["m"].get<double>() *
          product["n"].get<double>() * product["k"].get<double>();
    }
    return seconds + std::max(0.0, flops) / device.productFlopsPerSecond +
           (lowPrecision > 0 ? lowPrecision / device.lowPrecisionProductFlopsPerSecond : 0);
  }

  /// Seconds of one call's other kernels, at the device's rates.
  double otherSeconds(const Json &cost) const {
    return (cost["other_bytes"].get<double>() - cost["streamed_bytes"].get<double>()) /
               device.memoryBytesPerSecond +
           cost["streamed_bytes"].get<double>() / device.streamingBytesPerSecond +
           cost["kernel_calls"].get<double>() * device.kernelSeconds;
  }

  /// Seconds of one call of the function whose plan.json `cost` entry this is.
  double callSeconds(const Json &cost) const {
    return scale.products * productSeconds(cost) + scale.other * otherSeconds(cost);
  }

  /// Seconds of one call's pipeline messages, each a step of the pp axis's
  /// link and its bytes at the link's bandwidth.
  double messageSeconds(const Json &cost) const {
    const LinkRate &link = linkOf("pp");
    return cost.value("messages", 0.0) * link.latencySeconds +
           cost.value("message_bytes", 0.0) / link.bandwidthBytesPerSecond;
  }

  /// Seconds of one call of `function` with its messages, or of all of a
  /// step's calls (`perStep`; none of a @narrow_weights run once a run); 0
  /// when the plan has no such function.
  double functionSeconds(const Json &plan, const std::string &function,
                         bool perStep = false) const {
    for (const Json &cost : plan["cost"])
      if (cost["function"] == function)
        return (perStep ? cost["calls_per_step"].get<double>() : 1.0) *
               (callSeconds(cost) + messageSeconds(cost));
    return 0;
  }

  /// Seconds of every call of every function a step runs.
  double computeSeconds(const Json &plan) const {
    auto [products, other] = computeSecondsByKind(plan);
    return scale.products * products + scale.other * other;
  }

  /// Seconds of a step's products and of its other kernels, at the
  /// device's rates.
  std::pair<double, double> computeSecondsByKind(const Json &plan) const {
    double products = 0, other = 0;
    for (const Json &cost : plan["cost"]) {
      products += cost["calls_per_step"].get<double>() * productSeconds(cost);
      other += cost["calls_per_step"].get<double>() * otherSeconds(cost);
    }
    return {products, other};
  }

  /// Seconds of a step's calls of one plan.json `collectives` entry at its
  /// link's rates (unscaled).
  double collectiveSeconds(const Json &c) const {
    const std::string axis = c["axis"], kind = c["kind"];
    const int64_t n = axisSize(axis);
    const LinkRate &link = linkOf(axis).rateOf(kind);
    const double steps = kind == "all_reduce" ? 2.0 * (n - 1) : double(n - 1);
    // bytes_sent_per_rank counts every call of the step.
    return c["calls_per_step"].get<double>() * steps * link.latencySeconds +
           c["bytes_sent_per_rank"].get<double>() / link.bandwidthBytesPerSecond;
  }

  /// Seconds of the step's collectives; `bucketed` gets the dp all-reduces
  /// that gradient buckets start during the backward.
  double communicationSeconds(const Json &plan, double &bucketed) const {
    double seconds = 0;
    bucketed = 0;
    const bool buckets = plan.contains("training") && plan["training"].contains("gradient_buckets");
    for (const Json &c : plan.value("collectives", Json::array())) {
      const std::string axis = c["axis"], kind = c["kind"];
      const double all = scale.collective(kind) * collectiveSeconds(c);
      seconds += all;
      // ZeRO 1's and 2's buckets are reduce-scatters.
      if (buckets && (kind == "all_reduce" || kind == "reduce_scatter") && axis == "dp")
        bucketed += all;
    }
    return seconds;
  }

private:
  int64_t axisSize(const std::string &axis) const {
    return axis == "dp" ? layout.dp : axis == "tp" ? layout.tp : layout.pp;
  }

  /// The intra-node link when an axis group's ranks lie in one node (ranks
  /// are row-major over pp, dp, tp: tp's groups are consecutive ranks).
  const LinkModel &linkOf(const std::string &axis) const {
    int64_t stride = axis == "tp" ? 1 : axis == "dp" ? layout.tp : layout.tp * layout.dp;
    bool withinNode = stride * axisSize(axis) <= device.ranksPerNode;
    return withinNode || !device.interNode ? device.intraNode : *device.interNode;
  }

  const DeviceModel &device;
  const Layout &layout;
  ComputeScale scale;
  ProductTimes *times;
};

/// Fills `p`'s time and memory from the compiled plans: each pp rank's
/// are those of the stages it runs (stage s on rank s mod pp; more than one
/// with the interleaved schedule), the layout's the largest rank's.
bool predictFromPlans(const std::vector<Json> &plans, const DeviceModel &device,
                      ComputeScale computeScale, ProductTimes *times, Prediction &p,
                      std::string &error) {
  StepTimer timer(device, p.layout, computeScale, times);
  const size_t ranks = static_cast<size_t>(p.layout.pp);
  // Per pp rank: its stages' peaks without their scratch and its largest
  // scratch and products' scratchpad (which a process's kernels share),
  // model state, communication, exposed communication, and update with what
  // it exposes.
  std::vector<int64_t> held(ranks), scratch(ranks), scratchpad(ranks), state(ranks);
  std::vector<double> communicated(ranks), exposed(ranks), tail(ranks);
  std::vector<double> forward, backward, backwardWeight;
  // Whether the stages' updates sum over pp (clipping's norm and fp16's
  // overflow check, all-reduces; a tied weight's gradient, sent between
  // them): each waits for every stage.
  bool updatesMeet = false;
  for (auto [s, plan] : llvm::enumerate(plans)) {
    const size_t rank = s % ranks;
    const Json &memory = plan["memory"];
    const int64_t kernelScratch = memory["scratch_bytes"].get<int64_t>();
    const int64_t productScratchpad = memory["product_scratchpad_bytes"].get<int64_t>();
    held[rank] += memory["predicted_peak_bytes"].get<int64_t>() - kernelScratch - productScratchpad;
    scratch[rank] = std::max(scratch[rank], kernelScratch);
    scratchpad[rank] = std::max(scratchpad[rank], productScratchpad);
    state[rank] +=
        memory["parameter_bytes"].get<int64_t>() + memory["weight_copy_bytes"].get<int64_t>() +
        memory["gradient_bytes"].get<int64_t>() + memory["optimizer_state_bytes"].get<int64_t>();
    double bucketed = 0;
    double communication = timer.communicationSeconds(plan, bucketed);
    // A bucket summed beside the backward hides behind it where the device
    // computes and communicates at once (the backward: about 2/3 of a
    // microbatch's forward-and-backward).
    double hidden = device.overlapsCommunication
                        ? std::min(bucketed, 2.0 / 3.0 * timer.functionSeconds(plan, "forward"))
                        : 0;
    communicated[rank] += communication;
    exposed[rank] += communication - hidden;
    for (const Json &c : plan.value("collectives", Json::array()))
      updatesMeet |= c["axis"] == "pp";
    for (const Json &cost : plan["cost"])
      updatesMeet |= cost["function"] == "apply" && cost.value("messages", 0) > 0;
    if (p.layout.pp == 1) {
      p.stepSeconds = timer.computeSeconds(plan) + communication - hidden;
      continue;
    }
    forward.push_back(timer.functionSeconds(plan, "forward"));
    backward.push_back(timer.functionSeconds(plan, "backward"));
    backwardWeight.push_back(timer.functionSeconds(plan, "backward_weight"));
    tail[rank] += timer.functionSeconds(plan, "narrow_weights", /*perStep=*/true) +
                  timer.functionSeconds(plan, "apply") + communication - hidden;
  }
  for (size_t rank = 0; rank < ranks; ++rank) {
    p.peakBytes = std::max(p.peakBytes, held[rank] + scratch[rank] + scratchpad[rank]);
    p.modelStateBytes = std::max(p.modelStateBytes, state[rank]);
    p.communicationSeconds = std::max(p.communicationSeconds, communicated[rank]);
    p.exposedSeconds = std::max(p.exposedSeconds, exposed[rank]);
  }
  if (p.layout.pp > 1) {
    PipelineShape shape;
    shape.ranks = p.layout.pp;
    shape.virtualStages = p.layout.virtualStages;
    shape.microbatches = p.layout.microbatches;
    StageCosts costs{forward, backward, backwardWeight};
    std::optional<ScheduleKind> kind = parseScheduleKind(p.layout.schedule);
    std::optional<PipelineSchedule> schedule = buildSchedule(*kind, shape, costs, error);
    std::optional<SimulatedStep> step;
    if (schedule)
      step = simulateSchedule(*schedule, shape, costs, error);
    if (!step)
      return false;
    p.bubble = step->bubble();
    // A rank updates as soon as its last backward ends, unless the updates
    // meet: then every rank after the last one's.
    const double slowestTail = *std::max_element(tail.begin(), tail.end());
    for (size_t rank = 0; rank < ranks; ++rank)
      p.stepSeconds = std::max(p.stepSeconds, updatesMeet ? step->makespan + slowestTail
                                                          : step->ends[rank] + tail[rank]);
  }
  return true;
}

/// The plan.json of each program a compile wrote into `dir`.
std::vector<Json> compiledPlans(const std::string &dir, int64_t stages) {
  std::vector<Json> plans;
  for (int64_t s = 0; s < stages; ++s) {
    std::string path =
        stages == 1 ? dir + "/plan.json" : dir + "/stage" + std::to_string(s) + "/plan.json";
    if (std::optional<Json> plan = readJson(path))
      plans.push_back(std::move(*plan));
  }
  return plans;
}

/// The samples of one dp rank's microbatch: the first data input's dim 0.
int64_t microbatchSamples(const Json &plan) {
  for (const Json &input : plan["inputs"])
    if (input["name"] == plan["training"]["data_inputs"][0])
      return input["shape"].empty() ? 1 : input["shape"][0].get<int64_t>();
  return 1;
}

/// Compiles `layout` into `dir` as far as `emit`.
LogicalResult compileLayout(const PlanOptions &options, const Layout &layout,
                            const std::string &dir, const std::string &emit, bool warnings,
                            UserError &error) {
  CompileOptions c = options.compile;
  c.train = true;
  c.emit = emit;
  c.outDir = dir;
  c.warnings = warnings;
  layout.applyTo(c.training);
  // A model whose training_info defines the step refuses these, as compile
  // does when they are given.
  if (!c.training.mesh.empty())
    c.stepFlags.push_back("--mesh");
  if (c.training.gradAccum > 1)
    c.stepFlags.push_back("--grad-accum");
  // The plan file says how parameters lie over tp: a mesh without tp has none.
  if (layout.tp == 1)
    c.training.plan.clear();
  MLIRContext context(MLIRContext::Threading::DISABLED);
  return compileModel(context, c, error);
}

/// Compiles `layout` into `dir` and predicts it.
Prediction predict(const PlanOptions &options, const Layout &layout, const DeviceModel &device,
                   ComputeScale computeScale, ProductTimes *times, const std::string &dir,
                   bool warnings) {
  Prediction p;
  p.layout = layout;
  UserError error;
  if (failed(compileLayout(options, layout, dir, "plan", warnings, error))) {
    p.failure = error;
    return p;
  }
  const int64_t stages = layout.pp * layout.virtualStages;
  std::vector<Json> plans = compiledPlans(dir, stages);
  std::string why;
  if (plans.size() != static_cast<size_t>(stages) ||
      !predictFromPlans(plans, device, computeScale, times, p, why)) {
    p.failure = {options.compile.model,
                 why.empty() ? "its plan.json cannot be read (a cleave bug)" : why, "",
                 kExitInternal};
    return p;
  }
  p.batch = layout.dp * layout.microbatches * microbatchSamples(plans.front());
  return p;
}

/// Writes random data for the program in `dir` (its plan `plan`): each data
/// input over `samples` samples, integers within their index range (else 0);
/// appends the run's --data flags to `data`.
bool writeRandomData(const Json &plan, const std::string &dir, int64_t samples,
                     std::vector<std::string> &data, std::string &error) {
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  for (const Json &name : plan["training"]["data_inputs"])
    for (const Json &input : plan["inputs"]) {
      if (input["name"] != name)
        continue;
      rt::DType dtype;
      if (!rt::dtypeFromName(input["dtype"].get<std::string>(), dtype)) {
        error = "data input '" + name.get<std::string>() + "' has an unknown dtype";
        return false;
      }
      std::vector<int64_t> shape = input["shape"];
      if (shape.empty())
        shape.push_back(1);
      shape[0] = samples;
      int64_t count = 1;
      for (int64_t dim : shape)
        count *= dim;
      std::vector<char> bytes(count * rt::dtypeSize(dtype));
      const Json range = input.value("index_range", Json::object());
      const int64_t low = range.value("low", 0), high = range.value("high", 1);
      for (int64_t i = 0; i < count; ++i) {
        if (dtype == rt::DType::F32)
          reinterpret_cast<float *>(bytes.data())[i] = (next() % 2001) / 1000.0f - 1.0f;
        else if (dtype == rt::DType::I64)
          reinterpret_cast<int64_t *>(bytes.data())[i] = low + next() % (high - low);
        else if (dtype == rt::DType::I32)
          reinterpret_cast<int32_t *>(bytes.data())[i] = low + next() % (high - low);
      }
      std::string path = dir + "/" + rt::npyFileName(name.get<std::string>());
      if (!rt::writeNpy(path, dtype, shape, bytes.data(), error))
        return false;
      data.push_back(name.get<std::string>() + "=" + path);
    }
  return true;
}

/// A step measured on a rank: its compute, its products' kernels, and its
/// collectives moving data (not waiting for the slowest rank), by kind.
struct MeasuredStep {
  double seconds = 0, productSeconds = 0;
  std::map<std::string, double> transferSeconds;
};

/// The seconds a rank's step spends in the spans `counts` takes, from a
/// run's `trace` (docs/training.md, "Profiling"): per rank the median over
/// its steps after the first (as the compute measurement takes its median:
/// one step slowed by the machine moves neither), then the mean over the
/// ranks.
double secondsInSteps(const Json &trace, llvm::function_ref<bool(const Json &event)> counts) {
  // Per rank (the trace's process): its steps after the first, and the
  // spans counted.
  std::map<int64_t, std::vector<std::pair<double, double>>> steps;
  std::map<int64_t, std::vector<std::pair<double, double>>> counted;
  for (const Json &event : trace.value("traceEvents", Json::array())) {
    if (event.value("ph", "") != "X")
      continue;
    const std::string name = event.value("name", ""), category = event.value("cat", "");
    const int64_t rank = event.value("pid", int64_t{0});
    const std::pair<double, double> span{event.value("ts", 0.0), event.value("dur", 0.0)};
    if (category == "compute" && llvm::StringRef(name).starts_with("step ") && name != "step 1")
      steps[rank].push_back(span);
    else if (counts(event))
      counted[rank].push_back(span);
  }
  double sum = 0;
  for (const auto &[rank, spans] : steps) {
    std::vector<double> inStep;
    for (auto [stepStart, stepLength] : spans) {
      double seconds = 0;
      for (auto [start, duration] : counted[rank])
        if (start >= stepStart && start < stepStart + stepLength)
          seconds += duration;
      inStep.push_back(seconds);
    }
    sum += rt::median(std::move(inStep));
  }
  return steps.empty() ? 0 : sum / static_cast<double>(steps.size()) * 1e-6;
}

/// A step's "transfer" spans by the kind of the collective that holds
/// them: the timeline's collectives (category "communication") are each a
/// span of the whole call, its kind in `args`, and its "wait" and
/// "transfer" parts on the same track.
std::map<std::string, double> transferSecondsByKind(const Json &trace) {
  struct Call {
    double start, end;
    std::string kind;
  };
  std::map<std::pair<int64_t, int64_t>, std::vector<Call>> calls; // by process and thread
  auto track = [](const Json &event) {
    return std::pair{event.value("pid", int64_t{0}), event.value("tid", int64_t{0})};
  };
  const Json none = Json::array();
  for (const Json &event : trace.value("traceEvents", none))
    if (event.value("ph", "") == "X" && event.value("cat", "") == "communication" &&
        event.contains("args") && event["args"].contains("kind")) {
      const double start = event.value("ts", 0.0);
      calls[track(event)].push_back(
          {start, start + event.value("dur", 0.0), event["args"]["kind"].get<std::string>()});
    }
  std::map<std::string, double> byKind;
  for (const std::string kind : {"all_reduce", "reduce_scatter", "all_gather"})
    byKind[kind] = secondsInSteps(trace, [&](const Json &event) {
      if (event.value("cat", "") != "communication" || event.value("name", "") != "transfer")
        return false;
      const double start = event.value("ts", 0.0);
      auto found = calls.find(track(event));
      return found != calls.end() && llvm::any_of(found->second, [&](const Call &call) {
               return call.kind == kind && call.start <= start && start < call.end;
             });
    });
  return byKind;
}

/// The step's compute measured on this machine for `layout`, which has no
/// pipeline: compiled into `dir`, run on random data for a few steps, its
/// kernels traced (the median over the steps after the first of the ranks'
/// mean compute, and the ranks' mean seconds in products).
bool measureCompute(const PlanOptions &options, const Layout &layout, const std::string &dir,
                    MeasuredStep &measured, Json &plan, UserError &error) {
  // Every all-reduce after the backward: on this CPU a bucket summed during
  // it takes a core from the kernels, which would count as their time.
  PlanOptions timing = options;
  timing.compile.training.bucketMb = "0";
  if (failed(compileLayout(timing, layout, dir, "program", /*warnings=*/false, error)))
    return false;
  std::optional<Json> compiled = readJson(dir + "/plan.json");
  RunOptions run;
  run.dir = dir;
  run.ranks = options.ranks;
  run.steps = 10;
  run.quiet = true;
  run.noShuffle = true;
  run.logJson = dir + "/metrics.json";
  run.trace = dir + "/trace.json";
  run.traceOps = true;
  std::string why = "its plan.json cannot be read (a cleave bug)";
  if (compiled &&
      writeRandomData(*compiled, dir,
                      2 * layout.dp * layout.microbatches * microbatchSamples(*compiled), run.data,
                      why))
    why = runProgram(run) == 0 ? "" : "the run failed (its error is above)";
  if (!why.empty()) {
    error = {"--device cpu", "cannot time the model on " + layout.mesh() + ": " + why,
             "give a device file instead (devices/)", kExitBadInput};
    return false;
  }
  std::optional<Json> metrics = readJson(run.logJson);
  std::optional<Json> trace = readJson(run.trace);
  std::vector<double> steps;
  for (const Json &step : metrics ? (*metrics)["step_times"] : Json::array()) {
    double sum = 0;
    for (const Json &rank : step["ranks"])
      sum += rank["compute_seconds"].get<double>();
    steps.push_back(sum / static_cast<double>(step["ranks"].size()));
  }
  if (steps.size() < 2 || !trace) {
    error = {"--device cpu", "the timing run of " + layout.mesh() + " logged no steps", "",
             kExitInternal};
    return false;
  }
  measured.seconds = rt::median({steps.begin() + 1, steps.end()});
  measured.productSeconds = secondsInSteps(*trace, [](const Json &event) {
    return event.value("cat", "") == "ops" &&
           isProductKernel(llvm::StringRef(event.value("name", "")).split(' ').first);
  });
  measured.transferSeconds = transferSecondsByKind(*trace);
  plan = std::move(*compiled);
  return true;
}

std::string bytesText(int64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return text;
}

std::string layoutText(const Layout &l) {
  std::string text = l.mesh().empty() ? "1 rank" : l.mesh();
  if (l.dp > 1)
    text += " zero=" + std::to_string(l.zero);
  text += " M=" + std::to_string(l.microbatches);
  if (l.pp > 1)
    text += " " + l.schedule;
  if (l.virtualStages > 1)
    text += " V=" + std::to_string(l.virtualStages);
  return text + " recompute=" + l.recompute;
}

/// The device: a file, or this machine measured for `ranks`.
bool loadDevice(const PlanOptions &options, DeviceModel &device, UserError &error) {
  std::string why;
  if (options.device != "cpu") {
    if (!readDeviceFile(options.device, device, why)) {
      error = {options.device, why, "docs/formats.md describes device files; devices/ has some",
               kExitBadUsage};
      return false;
    }
    if (options.ranks > device.ranksPerNode * device.nodes) {
      error = {"--ranks " + std::to_string(options.ranks),
               "is more than the device file's " +
                   std::to_string(device.ranksPerNode * device.nodes) + " ranks",
               "", kExitBadUsage};
      return false;
    }
    if (options.compile.training.precision != "fp32" &&
        device.lowPrecisionProductFlopsPerSecond == 0) {
      error = {options.device,
               "gives no low_precision_product_flops_per_second, so it cannot time the products "
               "of --precision " +
                   options.compile.training.precision,
               "add the rate of products of bf16 or f16 factors summed in f32 (docs/formats.md)",
               kExitBadUsage};
      return false;
    }
    return true;
  }
  if (options.compile.target != "cpu") {
    error = {"--device cpu", "measures this machine's CPU, not --target " + options.compile.target,
             "plan for a device file, e.g. --device devices/h100-8x-nvlink.json", kExitBadUsage};
    return false;
  }
  // Measuring starts every rank here at once: a few per core at most.
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  if (options.ranks > 4 * cores) {
    error = {"--ranks " + std::to_string(options.ranks),
             "is more than --device cpu measures here (4 ranks a core, " +
                 std::to_string(4 * cores) + ")",
             "plan for a device file instead, e.g. --device devices/cpu-cluster.json",
             kExitBadUsage};
    return false;
  }
  if (!calibrateThisMachine(CLEAVE_CALIBRATE_PROGRAM, options.ranks, device, why)) {
    error = {"--device cpu", "cannot measure this machine: " + why, "", kExitInternal};
    return false;
  }
  return true;
}

/// A scratch directory, removed with everything in it when it goes.
struct ScratchDirectory {
  llvm::SmallString<128> path;
  ~ScratchDirectory() {
    if (!path.empty())
      llvm::sys::fs::remove_directories(path);
  }
};

/// What planning found: the device, the measured correction of its compute
/// rates for this model, and every layout's prediction.
struct Planning {
  DeviceModel device;
  /// Measured over predicted compute of the reference layout, its products
  /// and its other kernels apart (1 with a device file), and what was
  /// measured, for the table's head.
  ComputeScale computeScale;
  std::string computeScaleText;
  /// This machine's time of each product (--device cpu; null otherwise).
  std::unique_ptr<ProductTimes> productTimes;
  std::vector<Prediction> predictions;
};

/// Each kind of collective's measured transfers over what `rates` predict
/// for `plan`'s collectives of that kind, for the kinds the run has.
std::map<std::string, double> collectiveScales(const StepTimer &rates, const Json &plan,
                                               const MeasuredStep &measured,
                                               std::map<std::string, double> &predicted) {
  predicted.clear();
  for (const Json &c : plan.value("collectives", Json::array()))
    predicted[c["kind"].get<std::string>()] += rates.collectiveSeconds(c);
  std::map<std::string, double> scales;
  for (auto [kind, seconds] : predicted)
    if (auto found = measured.transferSeconds.find(kind);
        seconds > 0 && found != measured.transferSeconds.end() && found->second > 0)
      scales[kind] = found->second / seconds;
  return scales;
}

/// With --device cpu: times the first layout without a pipeline (every rank
/// a dp rank where the batch allows) on this machine, so the products timed
/// alone and the cleave-calibrate rates of one elementwise kernel and of
/// each collective are scaled to what this model's kernels and sums achieve
/// in a job; and, where ZeRO layouts are planned, the first of those, for
/// its reduce-scatters' and all-gathers' scales (else the all-reduces').
bool measureComputeScale(const PlanOptions &options, const std::vector<Layout> &layouts,
                         const std::string &scratch, Planning &planning, UserError &error) {
  auto reference = llvm::find_if(layouts, [](const Layout &l) { return l.pp == 1; });
  if (options.device != "cpu" || reference == layouts.end())
    return true;
  MeasuredStep measured;
  Json plan;
  if (!measureCompute(options, *reference, scratch + "/reference", measured, plan, error))
    return false;
  StepTimer rates(planning.device, *reference, ComputeScale(), planning.productTimes.get());
  auto [products, other] = rates.computeSecondsByKind(plan);
  // Where a kind has no predicted time (a model without products) or the
  // measurement leaves it none, the whole step's scale stands for it.
  const double whole = measured.seconds / (products + other);
  const double measuredOther = measured.seconds - measured.productSeconds;
  ComputeScale &scale = planning.computeScale;
  scale.products =
      products > 0 && measured.productSeconds > 0 ? measured.productSeconds / products : whole;
  scale.other = other > 0 && measuredOther > 0 ? measuredOther / other : whole;
  std::map<std::string, double> predicted;
  const std::map<std::string, double> measuredScales =
      collectiveScales(rates, plan, measured, predicted);
  // A reference without collectives (one rank) leaves theirs at the rates.
  auto allReduceScale = measuredScales.find("all_reduce");
  const double allReduce = allReduceScale != measuredScales.end() ? allReduceScale->second : 1;
  for (auto &[kind, kindScale] : scale.collectives)
    kindScale = allReduce;
  planning.computeScaleText =
      llvm::formatv("compute scale: products {0:F2}, other kernels {1:F2}, all-reduces {2:F2} "
                    "({3} measured {4:F3}, {5:F3} and {6:F3} ms a step, predicted {7:F3}, {8:F3} "
                    "and {9:F3} ms)",
                    scale.products, scale.other, allReduce, layoutText(*reference),
                    measured.productSeconds * 1e3, measuredOther * 1e3,
                    measured.transferSeconds["all_reduce"] * 1e3, products * 1e3, other * 1e3,
                    predicted["all_reduce"] * 1e3)
          .str();
  auto zero = llvm::find_if(layouts, [](const Layout &l) { return l.pp == 1 && l.zero > 0; });
  if (zero == layouts.end())
    return true;
  MeasuredStep sliced;
  Json slicedPlan;
  if (!measureCompute(options, *zero, scratch + "/reference-zero", sliced, slicedPlan, error))
    return false;
  StepTimer slicedRates(planning.device, *zero, ComputeScale(), planning.productTimes.get());
  for (auto [kind, kindScale] : collectiveScales(slicedRates, slicedPlan, sliced, predicted))
    if (kind != "all_reduce")
      scale.collectives[kind] = kindScale;
  planning.computeScaleText +=
      llvm::formatv(", reduce-scatters {0:F2} and all-gathers {1:F2} ({2} measured {3:F3} and "
                    "{4:F3} ms a step, predicted {5:F3} and {6:F3} ms)",
                    scale.collectives["reduce_scatter"], scale.collectives["all_gather"],
                    layoutText(*zero), sliced.transferSeconds["reduce_scatter"] * 1e3,
                    sliced.transferSeconds["all_gather"] * 1e3, predicted["reduce_scatter"] * 1e3,
                    predicted["all_gather"] * 1e3)
          .str();
  return true;
}

/// Every layout predicted, the fitting ones fastest first (per sample),
/// then those that do not fit, then those that do not compile. Fails when
/// none fits.
bool planLayouts(const PlanOptions &options, Planning &planning, UserError &error) {
  ScratchDirectory scratch;
  if (std::error_code ec = llvm::sys::fs::createUniqueDirectory("cleave-plan", scratch.path)) {
    error = {"cleave plan", "cannot create a scratch directory: " + ec.message(), "",
             kExitBadUsage};
    return false;
  }
  std::vector<Layout> layouts = enumerateLayouts(options);
  // A measured machine times each product itself.
  if (planning.device.kernelThreads > 0)
    planning.productTimes = std::make_unique<ProductTimes>(planning.device.kernelThreads);
  if (!measureComputeScale(options, layouts, scratch.path.str().str(), planning, error))
    return false;
  const int64_t limit = options.memoryPerRank.value_or(planning.device.memoryPerRankBytes);
  std::vector<Prediction> &predictions = planning.predictions;
  // Recomputation only buys memory: a layout is tried with it only where it
  // compiles but does not fit without it (the enumeration puts `none`
  // first). One that does not compile fails alike with it.
  std::set<std::string> tooLargeWithoutRecompute;
  for (auto [i, layout] : llvm::enumerate(layouts)) {
    Layout plain = layout;
    plain.recompute = "none";
    if (layout.recompute != "none" && !tooLargeWithoutRecompute.count(plain.flags()))
      continue;
    std::string dir = (scratch.path + "/layout" + std::to_string(i)).str();
    Prediction p = predict(options, layout, planning.device, planning.computeScale,
                           planning.productTimes.get(), dir, /*warnings=*/i == 0);
    p.fits = p.compiled() && p.peakBytes <= limit;
    if (p.compiled() && !p.fits && layout.recompute == "none")
      tooLargeWithoutRecompute.insert(layout.flags());
    predictions.push_back(std::move(p));
    llvm::sys::fs::remove_directories(dir);
  }
  std::stable_sort(predictions.begin(), predictions.end(),
                   [](const Prediction &a, const Prediction &b) {
                     if (a.fits != b.fits)
                       return a.fits;
                     if (!a.compiled() || !b.compiled())
                       return a.compiled() && !b.compiled();
                     if (a.secondsPerSample() != b.secondsPerSample())
                       return a.secondsPerSample() < b.secondsPerSample();
                     return a.peakBytes < b.peakBytes;
                   });
  // No layout compiled: the model itself is at fault (the first error says
  // how), not a layout.
  if (!predictions.empty() && !predictions.front().fits &&
      llvm::none_of(predictions, [](const Prediction &p) { return p.compiled(); })) {
    error = predictions.front().failure;
    predictions.clear();
    return false;
  }
  if (predictions.empty() || !predictions.front().fits) {
    error = {options.compile.model,
             predictions.empty() ? "no layout of the step over " + std::to_string(options.ranks) +
                                       " ranks fits the batch size"
                                 : "no layout fits in " + bytesText(limit) + " per rank",
             predictions.empty() ? "choose a --batch-size that dp x microbatches divides"
                                 : "raise --memory-per-rank, or add ranks",
             kExitBadInput};
    return false;
  }
  return true;
}

void printTable(const PlanOptions &options, const Planning &planning, llvm::raw_ostream &os) {
  const DeviceModel &device = planning.device;
  const std::vector<Prediction> &predictions = planning.predictions;
  os << "device: " << device.name << " (" << device.source << ")\n";
  os << llvm::format("  product %.3g GFLOP/s", device.productFlopsPerSecond / 1e9);
  if (device.lowPrecisionProductFlopsPerSecond > 0)
    os << llvm::format(" (bf16/f16 factors %.3g GFLOP/s)",
                       device.lowPrecisionProductFlopsPerSecond / 1e9);
  os << llvm::format(", memory %.3g GB/s (streaming %.3g GB/s), kernel call %.3g us",
                     device.memoryBytesPerSecond / 1e9, device.streamingBytesPerSecond / 1e9,
                     device.kernelSeconds * 1e6);
  auto linkText = [&](const char *name, const LinkModel &link) {
    os << llvm::format(", %s %.3g us a step, %.3g GB/s", name, link.latencySeconds * 1e6,
                       link.bandwidthBytesPerSecond / 1e9);
    for (const auto &[kind, rate] : link.kinds)
      os << llvm::format(" (%s %.3g us, %.3g GB/s)", kind.c_str(), rate.latencySeconds * 1e6,
                         rate.bandwidthBytesPerSecond / 1e9);
  };
  if (options.ranks > 1)
    linkText("link", device.intraNode);
  if (device.interNode && options.ranks > device.ranksPerNode)
    linkText("between nodes", *device.interNode);
  os << "\n";
  if (!planning.computeScaleText.empty())
    os << "  " << planning.computeScaleText << "\n";
  os << llvm::format("%4s  %-52s %12s %12s %10s %7s %7s %14s\n", "rank", "layout", "memory/rank",
                     "model state", "step ms", "comm", "bubble", "rank-s/sample");
  int rank = 0;
  for (const Prediction &p : predictions) {
    if (!p.compiled())
      continue;
    std::string place = p.fits ? std::to_string(++rank) : "-";
    os << llvm::format("%4s  %-52s %12s %12s %10.4g %6.1f%% %6.1f%% %14.4g\n", place.c_str(),
                       layoutText(p.layout).c_str(), bytesText(p.peakBytes).c_str(),
                       bytesText(p.modelStateBytes).c_str(), p.stepSeconds * 1e3,
                       100 * p.exposedSeconds / p.stepSeconds, 100 * p.bubble,
                       options.ranks * p.secondsPerSample());
  }
  for (const Prediction &p : predictions)
    if (!p.compiled())
      os << "   x  " << layoutText(p.layout) << ": " << p.failure.what << "\n";
  os << "(-: does not fit in memory; x: does not compile; comm: exposed communication "
        "over the step)\n";
}

/// Every prediction, in the table's order, for scripts (docs/formats.md).
std::string predictionsJson(const PlanOptions &options, const Planning &planning) {
  Json layouts = Json::array();
  for (const Prediction &p : planning.predictions) {
    const Layout &l = p.layout;
    Json entry = {{"mesh", l.mesh()},
                  {"dp", l.dp},
                  {"tp", l.tp},
                  {"pp", l.pp},
                  {"zero", l.zero},
                  {"microbatches", l.microbatches},
                  {"schedule", l.schedule},
                  {"virtual_stages", l.virtualStages},
                  {"recompute", l.recompute},
                  {"flags", l.flags()}};
    if (!p.compiled()) {
      entry["error"] = p.failure.what;
    } else {
      entry["fits"] = p.fits;
      entry["predicted_peak_bytes"] = p.peakBytes;
      entry["model_state_bytes"] = p.modelStateBytes;
      entry["batch"] = p.batch;
      entry["step_seconds"] = p.stepSeconds;
      entry["communication_seconds"] = p.communicationSeconds;
      entry["exposed_communication_seconds"] = p.exposedSeconds;
      entry["bubble"] = p.bubble;
      entry["rank_seconds_per_sample"] = options.ranks * p.secondsPerSample();
    }
    layouts.push_back(entry);
  }
  Json json = {
      {"model", options.compile.model},
      {"ranks", options.ranks},
      {"device", deviceObject(planning.device)},
      {"compute_scale",
       {{"products", planning.computeScale.products},
        {"other", planning.computeScale.other},
        {"collectives", planning.computeScale.collectives}}},
      {"product_times", planning.productTimes ? planning.productTimes->json() : Json::array()},
      {"layouts", layouts}};
  return json.dump(2) + "\n";
}

} // namespace

LogicalResult chooseLayout(const PlanOptions &options, Layout &best, llvm::raw_ostream &os,
                           UserError &error) {
  Planning planning;
  if (!loadDevice(options, planning.device, error) || !planLayouts(options, planning, error))
    return failure();
  printTable(options, planning, os);
  best = planning.predictions.front().layout;
  return success();
}

int runPlan(const PlanOptions &options, llvm::raw_ostream &os) {
  UserError error;
  Planning planning;
  if (!loadDevice(options, planning.device, error)) {
    printError(error);
    return error.code;
  }
  // Whole or not at all.
  auto writeFile = [&](const std::string &path, const std::string &text) {
    llvm::Error written = llvm::writeToOutput(path, [&](llvm::raw_ostream &out) {
      out << text;
      return llvm::Error::success();
    });
    if (written) {
      printError({path, "cannot write: " + llvm::toString(std::move(written)), "", kExitBadUsage});
      return false;
    }
    return true;
  };
  if (!options.saveDevice.empty() && !writeFile(options.saveDevice, deviceJson(planning.device)))
    return kExitBadUsage;
  bool found = planLayouts(options, planning, error);
  if (!planning.predictions.empty())
    printTable(options, planning, os);
  if (!options.json.empty() && !writeFile(options.json, predictionsJson(options, planning)))
    return kExitBadUsage;
  if (!found) {
    printError(error);
    return error.code;
  }
  const Layout &best = planning.predictions.front().layout;
  os << "best: " << (best.flags().empty() ? "one rank (no flags)" : best.flags()) << "\n";
  if (!options.writeFlags.empty() && !writeFile(options.writeFlags, best.flags() + "\n"))
    return kExitBadUsage;
  return kExitOk;
}

} // namespace cleave
