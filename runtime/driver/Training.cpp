//===- Training.cpp - the driver's training loop -------------------------===//

#include "runtime/driver/Training.h"

#include "runtime/Checkpoint.h"
#include "runtime/Npy.h"
#include "runtime/Random.h"
#include "runtime/comm/Start.h"
#include "runtime/driver/InputPrefetch.h"
#include "runtime/driver/Profile.h"
#include "runtime/driver/Progress.h"
#include "runtime/driver/ShardWriter.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>

namespace cleave::rt {
namespace {

/// A uniform integer in [0, bound), bound > 0: rejection sampling on 64-bit
/// draws, so every platform draws the same numbers (unlike
/// std::uniform_int_distribution, whose algorithm is up to the library).
uint64_t uniformBelow(std::mt19937_64 &rng, uint64_t bound) {
  // 2^64 mod bound: draws below it would make the low residues likelier.
  uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    uint64_t r = rng();
    if (r >= threshold)
      return r % bound;
  }
}

/// The sample at each position of the concatenation of epochs. Positions are
/// asked for in increasing order, so one epoch's order is kept at a time.
class SampleOrder {
public:
  SampleOrder(int64_t count, bool shuffle, uint64_t seed)
      : count(count), shuffle(shuffle), seed(seed) {}

  int64_t at(uint64_t position) {
    uint64_t epoch = position / static_cast<uint64_t>(count);
    int64_t index = static_cast<int64_t>(position % static_cast<uint64_t>(count));
    if (!shuffle)
      return index;
    if (!cached || epoch != cachedEpoch) {
      order = shuffledOrder(count, seed, epoch);
      cachedEpoch = epoch;
      cached = true;
    }
    return order[static_cast<size_t>(index)];
  }

private:
  int64_t count;
  bool shuffle;
  uint64_t seed;
  bool cached = false;
  uint64_t cachedEpoch = 0;
  std::vector<int64_t> order;
};

/// "Nx32" for a data input of shape [B, 32]: the shape a data file needs.
std::string dataShapeText(const std::vector<int64_t> &shape) {
  std::string text = "N";
  for (size_t i = 1; i < shape.size(); ++i)
    text += "x" + std::to_string(shape[i]);
  return text;
}

/// Splits the comma form (--data x=x.npy,labels=y.npy) into one NAME=FILE
/// each; a piece without '=' belongs to the file name before it.
std::vector<std::string> splitDataFlags(const std::vector<std::string> &flags) {
  std::vector<std::string> entries;
  for (const std::string &flag : flags) {
    bool first = true;
    std::stringstream stream(flag);
    std::string piece;
    while (std::getline(stream, piece, ',')) {
      if (piece.empty())
        continue;
      if (first || piece.find('=') != std::string::npos)
        entries.push_back(piece);
      else
        entries.back() += "," + piece;
      first = false;
    }
    if (first)
      entries.push_back(flag);
  }
  return entries;
}

/// Rank 0's bytes sent over the run per collective kind and mesh axis
/// (ring-algorithm counts, runtime/comm), the background collectives' with
/// its axis's: [{kind, axis, bytes}].
nlohmann::ordered_json bytesSentJson(const Mesh &mesh,
                                     const std::vector<comm::Communicator *> &axes,
                                     const comm::BackgroundCollectives *background) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (size_t a = 0; a < axes.size(); ++a) {
    for (int kind = 0; kind < comm::kCollectiveKinds; ++kind) {
      const auto k = static_cast<comm::CollectiveKind>(kind);
      uint64_t bytes = axes[a]->bytesSent()[k];
      if (const comm::Communicator *group =
              background ? background->group(static_cast<int64_t>(a)) : nullptr)
        bytes += group->bytesSent()[k];
      if (bytes > 0)
        list.push_back(
            {{"kind", comm::collectiveName(k)}, {"axis", mesh.axisNames[a]}, {"bytes", bytes}});
    }
  }
  return list;
}

std::string formatDouble(const char *format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

} // namespace

double learningRate(const TrainingSpec &spec, int64_t step, int64_t totalSteps) {
  const double t = static_cast<double>(step);
  const double warmup = static_cast<double>(spec.warmup);
  if (spec.warmup > 0 && step <= spec.warmup)
    return spec.lr * t / warmup;
  const double span = static_cast<double>(totalSteps) - warmup;
  if (span <= 0)
    return spec.lr;
  const double progress = (t - warmup) / span;
  switch (spec.schedule) {
  case LrSchedule::Constant:
    return spec.lr;
  case LrSchedule::Linear:
    return spec.lr * (1.0 - progress);
  case LrSchedule::Cosine:
    return spec.lr * 0.5 * (1.0 + std::cos(M_PI * progress));
  }
  return spec.lr;
}

std::vector<int64_t> shuffledOrder(int64_t count, uint64_t seed, uint64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    order[static_cast<size_t>(i)] = i;
  std::mt19937_64 rng(seed * 1000003u + epoch);
  for (int64_t i = count - 1; i > 0; --i) {
    uint64_t j = uniformBelow(rng, static_cast<uint64_t>(i) + 1);
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

namespace {

/// With --checkpoint-dir, SIGTERM, SIGINT and SIGHUP stop the run after
/// its step, with a checkpoint, instead of ending the program at once (the
/// driver's handlers): for the scope of one object, the handlers only note
/// the signal.
class StopRequests {
public:
  StopRequests() {
    struct sigaction noting {};
    noting.sa_handler = note;
    sigemptyset(&noting.sa_mask);
    for (size_t i = 0; i < kSignals.size(); ++i)
      sigaction(kSignals[i], &noting, &saved[i]);
  }
  ~StopRequests() {
    for (size_t i = 0; i < kSignals.size(); ++i)
      sigaction(kSignals[i], &saved[i], nullptr);
  }
  StopRequests(const StopRequests &) = delete;
  StopRequests &operator=(const StopRequests &) = delete;
  /// The stop signal received, or 0.
  int received() const { return signal; }

private:
  static constexpr std::array<int, 3> kSignals = {SIGTERM, SIGINT, SIGHUP};
  static void note(int sig) { signal = sig; }
  // A signal handler reaches only static storage.
  static inline volatile std::sig_atomic_t signal = 0;
  std::array<struct sigaction, 3> saved{};
};

/// The job's ranks: the mesh, its communicators, and where this rank is.
struct Job {
  Mesh mesh;
  std::unique_ptr<comm::Communication> communication;
  std::vector<comm::Communicator *> axes;
  /// The gradient buckets' sums and ZeRO's prefetched gathers and
  /// overlapped reduce-scatters, on a thread of their own (plan.json's
  /// training.gradient_buckets, prefetched_gathers and
  /// overlapped_reduce_scatters); declared after `communication`, so it
  /// stops before MPI does.
  std::unique_ptr<comm::BackgroundCollectives> background;
  std::vector<int> coordinates;
  int64_t dpSize = 1, dpRank = 0;
  /// Rank 0 prints progress and writes what every rank holds alike.
  bool reporting = true;
  /// A pipeline's every stage's plan, in stage order (read from the stage
  /// directories beside this one): what its checkpoints hold.
  std::vector<Plan> stagePlans;

  /// The plans a checkpoint of this run covers.
  std::vector<const Plan *> checkpointPlans(const Plan &plan) const {
    if (stagePlans.empty())
      return {&plan};
    std::vector<const Plan *> plans;
    for (const Plan &stage : stagePlans)
      plans.push_back(&stage);
    return plans;
  }
};

/// "rank R (dp=0,tp=1)" for every rank R of the job: its process in the
/// trace.
std::vector<std::string> processNames(const Job &job) {
  std::vector<std::string> names;
  for (int rank = 0; rank < job.communication->size(); ++rank) {
    std::string name = "rank " + std::to_string(rank);
    if (job.communication->size() > 1) {
      const std::vector<int> at = job.mesh.coordinates(rank);
      name += " (";
      for (size_t a = 0; a < at.size(); ++a)
        name += (a ? "," : "") + job.mesh.axisNames[a] + "=" + std::to_string(at[a]);
      name += ")";
    }
    names.push_back(name);
  }
  return names;
}

/// The data sets, whole, in host memory, in the order of the plan's data
/// inputs.
struct DataSets {
  std::vector<std::string> files;
  std::vector<NpyArray> arrays;
  std::vector<size_t> sampleBytes;
  int64_t samples = 0;
};

/// A program's buffers on the backend.
struct ProgramState {
  /// Which of the executable's programs (Backend::run).
  size_t index = 0;
  std::string blobName;
  std::vector<char> hostWeights;
  std::unique_ptr<Buffer> weights, arena;
  std::vector<std::unique_ptr<Buffer>> inputBuffers;
  std::vector<Tensor> inputs, outputs;
  /// A pipeline stage's stash sets (one per microbatch in flight), each
  /// one buffer per stash of plan.json: where a microbatch's forward leaves
  /// what its backward reads.
  std::vector<std::vector<std::unique_ptr<Buffer>>> stashSets;

  void run(Backend &backend, ProgramEntryPoint entry) {
    backend.run(index, entry, arena->get(), weights->get(), inputs.data(), outputs.data());
  }
  /// Points the stash outputs of the forward and inputs of the backward at
  /// the set of microbatch `k`.
  void useStashOf(const PipelineSpec &pipeline, int64_t k) {
    const auto &set = stashSets[static_cast<size_t>(k % pipeline.inFlight)];
    for (size_t i = 0; i < pipeline.stash.size(); ++i) {
      auto [output, input] = pipeline.stash[i];
      inputs[input].data = set[i]->get();
      outputs[output] = inputs[input];
    }
  }
};

struct StepRecord {
  int64_t step;
  double loss, lr;
  StepTimes times;
  /// With loss scaling (fp16): the scale the step used, and whether its
  /// gradients held inf or NaN, so that it updated nothing.
  double lossScale = 0;
  bool skipped = false;
  /// With clipping: the gradients' global norm before it.
  std::optional<double> gradNorm;
};

/// What the ranks measured, gathered to rank 0 (RunProfile::finish): per
/// rank, its steps' figures, and the trace file's text (with --trace).
struct RunReport {
  std::vector<std::vector<StepTimes>> ranks;
  std::string trace;
};

/// What writing one checkpoint cost: how long training stood still, the
/// bytes every rank wrote, the step after which it was published (its own
/// unless written behind training) and, then, how long rank 0's file took.
struct CheckpointRecord {
  int64_t step;
  double seconds;
  uint64_t bytes;
  int64_t publishedAfter;
  std::optional<double> writeSeconds;
};

/// The checkpoint a run continues from (--resume), and the layouts of the
/// run that wrote it.
struct ResumePoint {
  std::string checkpoint;
  CheckpointIndex index;
  Plan layouts;
  /// Its files, checked whole and against the index.
  std::unique_ptr<GlobalTensorReader> reader;
};

int checkFlags(const TrainingSpec &spec, const TrainingOptions &options) {
  if (options.steps.has_value() == options.epochs.has_value())
    return fail("usage", "a training program takes one of --steps N and --epochs E", 2,
                "see --help");
  if (!options.shuffle && options.seed)
    return fail("--seed", "has no effect with --no-shuffle", 2);
  if (spec.trainingInfo && options.totalSteps)
    return fail("--total-steps",
                "the model's training_info defines the step: it has no "
                "learning-rate schedule",
                2);
  if (!options.initFrom.empty() && !options.resumeDir.empty())
    return fail("--init-from", "cannot be combined with --resume, which continues a run", 2);
  if (options.traceOps && options.trace.empty())
    return fail("--trace-ops", "needs --trace FILE", 2);
  if (options.traceSteps && options.trace.empty())
    return fail("--trace-steps", "needs --trace FILE", 2);
  if (options.checkpointDir.empty() &&
      (options.checkpointEvery || options.keepCheckpoints || options.checkpointAsync))
    return fail(options.checkpointEvery   ? "--checkpoint-every"
                : options.keepCheckpoints ? "--keep"
                                          : "--checkpoint-async",
                "needs --checkpoint-dir D", 2);
  if (options.totalSteps && options.steps && *options.totalSteps < *options.steps)
    return fail("--total-steps " + std::to_string(*options.totalSteps),
                "is fewer than the " + std::to_string(*options.steps) + " steps of this run", 2);
  return 0;
}

/// Starts the mesh's communicators (one local rank without a mesh), and
/// the background collectives where any of `plans` (the rank's programs:
/// several on a rank of an interleaved pipeline) starts some.
int startJob(const std::vector<Plan> &plans, const TrainingOptions &options, Backend &backend,
             Job &job) {
  const Plan &plan = plans.front();
  job.mesh = plan.mesh ? *plan.mesh : Mesh::line("dp", 1);
  comm::CommOptions commOptions;
  commOptions.timeoutSeconds = options.collectiveTimeout;
  commOptions.deterministic = plan.deterministic;
  if (std::string why = launchMismatch(plan.mesh, comm::launchedRanks()); !why.empty())
    return fail(plan.mesh ? "mesh " + plan.mesh->text() : "program", why, 2);
  std::string error;
  job.communication = comm::startCommunication(job.mesh, commOptions, error);
  if (!job.communication)
    return fail("mesh " + job.mesh.text(), error, 2);
  for (const std::string &name : job.mesh.axisNames)
    job.axes.push_back(job.communication->axis(name));
  backend.setCommunicators(job.axes);
  job.coordinates = job.mesh.coordinates(job.communication->rank());
  const int dpAxis = job.mesh.axisIndex("dp");
  job.dpSize = dpAxis < 0 ? 1 : job.mesh.shape[dpAxis];
  job.dpRank = dpAxis < 0 ? 0 : job.coordinates[dpAxis];
  job.reporting = job.communication->rank() == 0;
  // One thread runs the started collectives of every axis, each on a
  // duplicate of the axis's communicator.
  std::set<int> startedAxes;
  for (const Plan &program : plans)
    if (program.training)
      for (const auto &keyed : TrainingSpec::startedByKey(*program.training))
        if (*keyed.second)
          startedAxes.insert(job.mesh.axisIndex((*keyed.second)->axis));
  std::vector<comm::BackgroundCollectives::Axis> groups;
  for (int axis : startedAxes) {
    std::unique_ptr<comm::Communicator> group = backend.communicators()[axis]->duplicate(error);
    if (!group)
      return fail("the background collectives", error, 1);
    groups.push_back({axis, std::move(group)});
  }
  if (!groups.empty()) {
    job.background = std::make_unique<comm::BackgroundCollectives>(std::move(groups));
    backend.setBackground(job.background.get());
  }
  return 0;
}

/// Reads every data input's file (--data NAME=FILE) and checks it holds
/// samples of the input's shape, as many for every input, at least a batch.
int readDataSets(const Plan &plan, const TrainingOptions &options, int64_t batch, DataSets &data) {
  const TrainingSpec &spec = *plan.training;
  std::vector<std::string> names;
  for (size_t index : spec.dataInputs)
    names.push_back(plan.inputs[index].name);
  std::map<std::string, std::string> files;
  if (int code =
          parseNamedFiles(splitDataFlags(options.data), "--data", "data input", names, files))
    return code;
  for (size_t index : spec.dataInputs) {
    const TensorSpec &input = plan.inputs[index];
    if (!files.count(input.name))
      return fail("data '" + input.name + "'", "is missing", 1,
                  "pass --data " + input.name + "=FILE.npy holding " + dtypeName(input.dtype) +
                      " " + dataShapeText(input.shape) + " (N samples)");
    data.files.push_back(files[input.name]);
  }
  data.arrays.resize(spec.dataInputs.size());
  for (size_t k = 0; k < spec.dataInputs.size(); ++k) {
    const TensorSpec &input = plan.inputs[spec.dataInputs[k]];
    const std::string where = "data '" + input.name + "' (" + data.files[k] + ")";
    std::string error;
    if (!readNpy(data.files[k], data.arrays[k], error))
      return fail(where, error, 1);
    const NpyArray &array = data.arrays[k];
    bool matches = array.dtype == input.dtype && array.shape.size() == input.shape.size() &&
                   std::equal(input.shape.begin() + 1, input.shape.end(), array.shape.begin() + 1);
    if (!matches)
      return fail(where,
                  std::string("is ") + dtypeName(array.dtype) + " " + shapeText(array.shape) +
                      ", the model takes " + dtypeName(input.dtype) + " " +
                      dataShapeText(input.shape) + " (N samples)",
                  1);
    int64_t count = array.shape[0];
    if (k == 0)
      data.samples = count;
    else if (count != data.samples)
      return fail(where,
                  "holds " + std::to_string(count) + " samples, but '" + names[0] + "' (" +
                      data.files[0] + ") holds " + std::to_string(data.samples),
                  1);
    data.sampleBytes.push_back(array.data.size() /
                               static_cast<size_t>(std::max<int64_t>(count, 1)));
  }
  if (data.samples < batch)
    return fail("data '" + names[0] + "' (" + data.files[0] + ")",
                "holds " + std::to_string(data.samples) + " samples, fewer than the batch size " +
                    std::to_string(batch),
                1);
  return 0;
}

/// Element `i` of an array of indices (i32 or i64).
int64_t indexAt(const NpyArray &array, size_t i) {
  if (array.dtype == DType::I32) {
    int32_t value;
    std::memcpy(&value, array.data.data() + i * sizeof value, sizeof value);
    return value;
  }
  int64_t value;
  std::memcpy(&value, array.data.data() + i * sizeof value, sizeof value);
  return value;
}

/// The data inputs that ops index with (token ids, class targets), checked
/// against what those ops take (plan.json's index ranges) before the first
/// step: the first sample this run reads that holds a value out of range is
/// named with its data input and the step that would read it, which a
/// kernel's range error, mid-step, cannot say. Samples the run does not
/// read are not refused.
int checkIndexRanges(const Plan &plan, const DataSets &data, int64_t batch, int64_t firstStep,
                     int64_t steps, SampleOrder order) {
  const TrainingSpec &spec = *plan.training;
  for (size_t k = 0; k < spec.dataInputs.size(); ++k) {
    const TensorSpec &input = plan.inputs[spec.dataInputs[k]];
    const NpyArray &array = data.arrays[k];
    if (!input.indexRange || (array.dtype != DType::I32 && array.dtype != DType::I64) ||
        data.samples == 0)
      continue;
    const IndexRange &range = *input.indexRange;
    const size_t perSample = array.data.size() / dtypeSize(array.dtype) /
                             static_cast<size_t>(data.samples);
    std::map<int64_t, int64_t> bad; // sample -> its first value out of range
    for (size_t i = 0; i < perSample * static_cast<size_t>(data.samples); ++i)
      if (int64_t value = indexAt(array, i); !range.holds(value))
        bad.emplace(static_cast<int64_t>(i / perSample), value);
    if (bad.empty())
      continue;
    for (int64_t step = firstStep; step <= steps; ++step)
      for (int64_t b = 0; b < batch; ++b) {
        int64_t sample = order.at(static_cast<uint64_t>((step - 1) * batch + b));
        if (auto found = bad.find(sample); found != bad.end())
          return fail("data '" + input.name + "' (" + data.files[k] + ")",
                      "sample " + std::to_string(sample) + ", read at step " +
                          std::to_string(step) + ", holds " + std::to_string(found->second) +
                          ": " + range.reader + " take " + range.text(),
                      1);
      }
  }
  return 0;
}

/// The steps of this run (--steps, or whole batches of --epochs) and of the
/// learning-rate schedule.
int countSteps(const TrainingOptions &options, int64_t samples, int64_t batch, int64_t &steps,
               int64_t &totalSteps) {
  if (options.steps) {
    steps = *options.steps;
  } else {
    double epochs = *options.epochs;
    // 2^63: past it the step count does not fit (and such a run never ends).
    if (epochs * static_cast<double>(samples) / static_cast<double>(batch) >= 0x1p63)
      return fail("--epochs " + formatDouble("%g", epochs),
                  "makes more than 2^63 - 1 steps (a batch is " + std::to_string(batch) +
                      " of the " + std::to_string(samples) + " samples)",
                  2);
    if (std::floor(epochs) == epochs && epochs < 9e15)
      steps = static_cast<int64_t>(epochs) * samples / batch;
    else
      steps = static_cast<int64_t>(std::floor(epochs * samples / batch + 1e-9));
    if (steps < 1)
      return fail("--epochs " + formatDouble("%g", epochs),
                  "makes no step (a batch is " + std::to_string(batch) + " of the " +
                      std::to_string(samples) + " samples)",
                  2);
  }
  totalSteps = options.totalSteps ? *options.totalSteps : steps;
  if (totalSteps < steps)
    return fail("--total-steps " + std::to_string(totalSteps),
                "is fewer than the " + std::to_string(steps) + " steps of this run", 2);
  return 0;
}

/// Finds out now, not after the run, that the results cannot be written.
int checkWritable(const TrainingOptions &options) {
  std::string error;
  if (!options.outputDir.empty() && !std::filesystem::is_directory(options.outputDir))
    return fail(options.outputDir, "is not a directory", 2);
  if (!options.outputDir.empty() && !canCreate(options.outputDir + "/weights.bin", error))
    return fail(options.outputDir + "/weights.bin", error, 2);
  if (!options.logJson.empty() && !canCreate(options.logJson, error))
    return fail(options.logJson, error, 2);
  if (!options.trace.empty() && !canCreate(options.trace, error))
    return fail("--trace " + options.trace, error, 2);
  return 0;
}

/// Creates --checkpoint-dir, which may not hold another run's checkpoints: a
/// fresh run writing there would mix its steps with theirs.
int checkCheckpointDir(const TrainingOptions &options, bool resuming) {
  if (options.checkpointDir.empty())
    return 0;
  const std::string where = "--checkpoint-dir " + options.checkpointDir;
  std::error_code ec;
  std::filesystem::create_directories(options.checkpointDir, ec);
  if (ec || !std::filesystem::is_directory(options.checkpointDir, ec))
    return fail(where, "cannot create: " + (ec ? ec.message() : "not a directory"), 2);
  const bool continuing =
      resuming && std::filesystem::equivalent(options.checkpointDir, options.resumeDir, ec);
  if (std::filesystem::exists(options.checkpointDir + "/latest", ec) && !continuing)
    return fail(where, "holds the checkpoints of another run", 2,
                "pass --resume " + options.checkpointDir + " to continue it, or another directory");
  return 0;
}

/// Checks that the checkpoint read into `resume` continues this run on this
/// layout, whichever wrote it: the same optimizer and global tensors
/// (index.json against plan.json), the same global batch, data set, sampler
/// and schedule, and steps left to run.
int checkResumePoint(const Plan &plan, const TrainingOptions &options, const Job &job,
                     const DataSets &data, int64_t batch, int64_t steps, int64_t totalSteps,
                     const ResumePoint &resume) {
  std::string error, field;
  const std::string indexPath = resume.checkpoint + "/index.json";
  if (!checkpointFitsPlan(resume.index, resume.layouts, job.checkpointPlans(plan), field, error))
    return fail(indexPath + ": " + field, error, 1,
                "a checkpoint loads into any layout of the same model and optimizer");
  const TrainingPosition &at = resume.index.position;
  if (at.batchSize != batch)
    return fail(indexPath + ": batch_size",
                "is " + std::to_string(at.batchSize) + ", the program's is " +
                    std::to_string(batch),
                1, "any layout with the checkpoint's global batch size continues it");
  if (at.samples != data.samples)
    return fail("--data",
                "holds " + std::to_string(data.samples) + " samples, the checkpoint's run had " +
                    std::to_string(at.samples),
                2, "resume with the same data sets");
  if (at.shuffle != options.shuffle)
    return fail(options.shuffle ? "--shuffle" : "--no-shuffle",
                std::string("differs from the checkpoint's run, which ran ") +
                    (at.shuffle ? "shuffled" : "in file order"),
                2);
  if (options.seed && *options.seed != at.seed)
    return fail("--seed " + std::to_string(*options.seed),
                "differs from the checkpoint's seed " + std::to_string(at.seed), 2,
                "leave --seed out to take the checkpoint's");
  const TrainingSpec &spec = *plan.training;
  if (!spec.trainingInfo && spec.schedule != LrSchedule::Constant && at.totalSteps != totalSteps)
    return fail("--total-steps " + std::to_string(totalSteps),
                "differs from the checkpoint's schedule of " + std::to_string(at.totalSteps) +
                    " steps",
                2, "pass --total-steps " + std::to_string(at.totalSteps));
  if (at.step >= steps)
    return fail("--steps " + std::to_string(steps),
                "leaves nothing to run: the checkpoint " + resume.checkpoint + " is at step " +
                    std::to_string(at.step),
                2);
  return 0;
}

/// Copies into `weights`, at the plan's offsets, what this rank holds of
/// every checkpointed tensor of the plan that `reader` has, reading only
/// those elements.
int readHeldTensors(const Plan &plan, const Job &job, const GlobalTensorReader &reader,
                    std::vector<char> &weights) {
  std::map<std::string, int> coordinates;
  for (size_t a = 0; a < job.mesh.axisNames.size(); ++a)
    coordinates[job.mesh.axisNames[a]] = job.coordinates[a];
  std::string where, error;
  for (const StoredTensor *stored : checkpointedTensors(plan)) {
    const size_t element = dtypeSize(stored->tensor.dtype);
    for (const GlobalRun &run : globalRuns(plan, *stored, coordinates))
      if (reader.find(run.tensor) &&
          !reader.read(run.tensor, run.global, run.count,
                       weights.data() + stored->offset + static_cast<size_t>(run.local) * element,
                       where, error))
        return fail(where, error, 1, "nothing was loaded");
  }
  return 0;
}

/// A pipeline stage's run that checkpoints, resumes or starts from a file
/// reads every stage's plan from the stage directories beside its own
/// (DIR/../stage<S>/plan.json): its checkpoints, and the file it starts
/// from, cover the whole model.
int readStagePlans(const std::string &dir, const Plan &plan, const TrainingOptions &options,
                   std::vector<Plan> &stages) {
  const std::optional<PipelineSpec> &pipeline = plan.training->pipeline;
  if (!pipeline ||
      (options.checkpointDir.empty() && options.resumeDir.empty() && options.initFrom.empty()))
    return 0;
  std::vector<std::string> dirs;
  std::string where, error;
  if (!readCompiledPlans(dir + "/..", stages, dirs, where, error))
    return fail(where, error, 1, "a pipeline's checkpoints need every stage's plan");
  return 0;
}

/// The first file of `resume`'s checkpoint that is not whole (its size or
/// checksum wrong), or -1, the same on every rank: the files are dealt
/// round the ranks, so each is read through once.
int64_t firstDamagedFile(const Job &job, const ResumePoint &resume) {
  CheckpointStore store(resume.checkpoint);
  comm::Communicator &world = job.communication->world();
  std::string error;
  int64_t mine = -1;
  for (size_t i = static_cast<size_t>(world.rank()); i < resume.index.files.size() && mine < 0;
       i += static_cast<size_t>(world.size()))
    if (!store.verifyFile(resume.checkpoint, resume.index.files[i], error))
      mine = static_cast<int64_t>(i);
  std::vector<int64_t> all(static_cast<size_t>(world.size()));
  world.allGather(&mine, all.data(), 1, DType::I64, {-1, "checkpoint"});
  int64_t first = -1;
  for (int64_t file : all)
    if (file >= 0 && (first < 0 || file < first))
      first = file;
  return first;
}

/// Chooses the checkpoint of --resume D to continue from: the one `latest`
/// names, or, when it is damaged (an index, file or header fault), the
/// newest earlier complete one, with a warning that names what was skipped
/// and why. A checkpoint that does not fit this run is an error, not
/// skipped. Every rank reads the same indexes and headers and verifies its
/// share of the files; rank 0 reports.
int readResumePoint(const Plan &plan, const TrainingOptions &options, const Job &job,
                    const DataSets &data, int64_t batch, int64_t steps, int64_t totalSteps,
                    ResumePoint &resume) {
  const CheckpointStore store(options.resumeDir);
  std::string where, error;
  int64_t latest = 0;
  if (!store.readLatestStep(latest, where, error))
    return fail(where, error, 1, "nothing was loaded");
  std::vector<int64_t> candidates{latest};
  for (int64_t step : store.completeSteps())
    if (step < latest)
      candidates.push_back(step);
  for (size_t c = 0; c < candidates.size(); ++c) {
    // A damaged checkpoint is skipped while an earlier one is left to try.
    auto damaged = [&](const std::string &at, const std::string &fault) {
      if (c + 1 == candidates.size())
        return fail(at, fault, 1, "nothing was loaded");
      if (job.reporting)
        std::fprintf(stderr, "cleave: warning: %s: %s: skipped step-%lld, trying step-%lld\n",
                     at.c_str(), fault.c_str(), static_cast<long long>(candidates[c]),
                     static_cast<long long>(candidates[c + 1]));
      return 0;
    };
    resume = ResumePoint{};
    if (!store.readCheckpoint(candidates[c], resume.checkpoint, resume.index, where, error) ||
        !indexLayouts(resume.index, resume.layouts, error)) {
      if (int code = damaged(where, error))
        return code;
      continue;
    }
    if (int code = checkResumePoint(plan, options, job, data, batch, steps, totalSteps, resume))
      return code;
    if (int64_t file = firstDamagedFile(job, resume); file >= 0) {
      // The rank that found the fault is silent here: rank 0 says it again.
      const CheckpointFile &listed = resume.index.files[static_cast<size_t>(file)];
      CheckpointStore(resume.checkpoint).verifyFile(resume.checkpoint, listed, error);
      if (int code = damaged(resume.checkpoint + "/" + listed.name, error))
        return code;
      continue;
    }
    resume.reader = std::make_unique<GlobalTensorReader>();
    if (!resume.reader->openCheckpoint(resume.checkpoint, resume.index, where, error)) {
      if (int code = damaged(where, error))
        return code;
      continue;
    }
    return 0;
  }
  return 1;
}

/// A checkpoint on its way: every rank writes its shards into D/step-N.tmp
/// (at once, or on the thread "cleave-ckpt" with --checkpoint-async), then,
/// after all have, rank 0 writes the index and renames it to D/step-N
/// (CheckpointStore::publish).
struct PendingCheckpoint {
  TrainingPosition position;
  CheckpointIndex index;
  /// This rank's file; none where it holds nothing to write.
  std::unique_ptr<ShardWriter> shard;
  /// How long training stood still for it so far.
  double stalled = 0;
};

/// Begins the checkpoint after `position.step`: the staging directory, the
/// weights copied to the host (where the shards' bytes stay until they are
/// written), and this rank's file, written on the thread when `background`.
/// Every rank ends with the same result: a rank that fails says why, and
/// every rank returns 1.
int beginCheckpoint(const std::vector<Plan> &plans, const TrainingOptions &options, Job &job,
                    Backend &backend, std::vector<ProgramState> &programs,
                    const TrainingPosition &position, bool background,
                    std::optional<PendingCheckpoint> &pending) {
  const auto start = std::chrono::steady_clock::now();
  const CheckpointStore store(options.checkpointDir);
  comm::Communicator &world = job.communication->world();
  const int rank = world.rank();
  std::string error;
  int32_t failed = 0;
  if (rank == 0 && !store.prepare(position.step, error))
    failed = fail(store.stagingDir(position.step), error, 1);
  world.broadcast(&failed, 1, DType::I32, 0, {position.step, "checkpoint"});
  if (failed)
    return 1;

  // The index says which rank writes which tensor; this rank writes the
  // shards it names in this rank's file (of a pipeline's tensors, those of
  // its stages).
  pending.emplace();
  pending->position = position;
  pending->index = makeIndex(job.checkpointPlans(plans.front()), position, {});
  std::map<std::string, const char *> held;
  std::map<std::string, const StoredTensor *> stored;
  for (size_t c = 0; c < plans.size(); ++c) {
    ProgramState &program = programs[c];
    backend.copyToHost(program.hostWeights.data(), program.weights->get(),
                       program.hostWeights.size());
    for (const StoredTensor *tensor : checkpointedTensors(plans[c]))
      if (stored.emplace(tensor->tensor.name, tensor).second)
        held[tensor->tensor.name] = program.hostWeights.data() + tensor->offset;
  }
  const std::string file = shardFileName(rank);
  std::vector<SafetensorsTensor> tensors;
  for (const CheckpointTensor &tensor : pending->index.tensors)
    for (const CheckpointShard &shard : tensor.shards)
      if (const auto it = stored.find(tensor.name); shard.file == file && it != stored.end())
        tensors.push_back({shard.key, it->second->tensor.dtype, it->second->tensor.shape,
                           held[tensor.name], static_cast<size_t>(it->second->bytes)});
  if (!tensors.empty())
    pending->shard = std::make_unique<ShardWriter>(
        store, position.step, file, std::move(tensors),
        std::map<std::string, std::string>{{"format", "cleave"},
                                           {"step", std::to_string(position.step)},
                                           {"rank", std::to_string(rank)}},
        background);
  pending->stalled =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return 0;
}

/// Whether every rank's file of `pending` is written, asked after `step`
/// by every rank.
bool shardsWritten(const PendingCheckpoint &pending, comm::Communicator &world, int64_t step) {
  int32_t writing = pending.shard && !pending.shard->ended();
  world.allReduceSum(&writing, 1, DType::I32, {step, "checkpoint"});
  return writing == 0;
}

/// Publishes `pending` once every rank's file is written (waiting for this
/// rank's): rank 0 lists every rank's size and checksum in the index and
/// renames the staging directory. Every rank ends with the same result: a
/// rank that fails says why, and every rank returns 1.
int publishCheckpoint(const Plan &plan, const TrainingOptions &options, Job &job,
                      PendingCheckpoint &pending, int64_t step, RunProfile &profile,
                      std::vector<CheckpointRecord> &records) {
  const auto start = std::chrono::steady_clock::now();
  const CheckpointStore store(options.checkpointDir);
  comm::Communicator &world = job.communication->world();
  const comm::CallSite site{step, "checkpoint"};
  const int64_t number = pending.position.step;
  std::string error, where;
  // Per rank: its file's bytes (-1 for no file, -2 for a failed write) and CRC.
  int64_t mine[2] = {-1, 0};
  if (pending.shard) {
    CheckpointFile written;
    if (pending.shard->finish(written, error)) {
      mine[0] = static_cast<int64_t>(written.bytes);
      mine[1] = written.crc32;
    } else {
      mine[0] = -2;
      fail(store.stagingDir(number) + "/" + shardFileName(world.rank()), error, 1);
    }
  }
  std::vector<int64_t> all(2 * static_cast<size_t>(world.size()));
  world.allGather(mine, all.data(), 2, DType::I64, site);
  uint64_t bytes = 0;
  for (int r = 0; r < world.size(); ++r) {
    if (all[2 * r] == -2)
      return 1;
    if (all[2 * r] >= 0) {
      pending.index.files.push_back({shardFileName(r), static_cast<uint64_t>(all[2 * r]),
                                     static_cast<uint32_t>(all[2 * r + 1])});
      bytes += static_cast<uint64_t>(all[2 * r]);
    }
  }
  int32_t failed = 0;
  if (world.rank() == 0) {
    const std::string text = indexJson(plan, pending.index);
    bytes += text.size();
    if (!store.publish(number, text, options.keepCheckpoints, where, error))
      failed = fail(where, error, 1, "the previous checkpoint is still whole");
  }
  world.broadcast(&failed, 1, DType::I32, 0, site);
  if (failed)
    return 1;
  const double seconds =
      pending.stalled +
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Published after a later step: written behind training.
  CheckpointRecord record{number, seconds, bytes, step};
  if (step > number) {
    if (pending.shard) {
      record.writeSeconds =
          std::chrono::duration<double>(pending.shard->end() - pending.shard->begin()).count();
      profile.checkpointWrite(number, pending.shard->begin(), pending.shard->end());
    }
    profile.checkpoint("publish checkpoint", number, start,
                       job.reporting ? std::optional(bytes) : std::nullopt);
  }
  records.push_back(record);
  if (job.reporting && step == number)
    std::fprintf(stderr, "checkpoint %s: %llu bytes in %.3f s\n",
                 store.checkpointDir(number).c_str(), static_cast<unsigned long long>(bytes),
                 seconds);
  else if (job.reporting)
    std::fprintf(stderr,
                 "checkpoint %s: %llu bytes, training stood still %.3f s (written while "
                 "steps %lld to %lld ran)\n",
                 store.checkpointDir(number).c_str(), static_cast<unsigned long long>(bytes),
                 seconds, static_cast<long long>(number + 1), static_cast<long long>(step));
  return 0;
}

/// PyTorch's BatchNorm counter in a module's state_dict: it counts steps
/// for a momentum of None, which ONNX's BatchNormalization (a fixed
/// momentum) has no counterpart of, so --init-from passes over it.
bool isBatchNormCounter(const GlobalTensor &tensor) {
  const std::string suffix = "num_batches_tracked";
  const std::string &name = tensor.name;
  return tensor.dtype == DType::I64 && tensor.shape.empty() && name.size() >= suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
         (name.size() == suffix.size() || name[name.size() - suffix.size() - 1] == '.');
}

/// Copies into `weights` what this rank holds of the tensors of the
/// safetensors file `path` (whole tensors under their names): every
/// parameter, and any other checkpointed tensor it holds (PyTorch's
/// BatchNorm counters are passed over). Every rank reads
/// the same header; rank 0 reports what does not fit.
int initializeFrom(const std::string &path, const Plan &plan, const Job &job,
                   std::vector<char> &weights) {
  GlobalTensorReader reader;
  std::string error;
  auto refuse = [&](const std::string &at, const std::string &what) {
    return job.reporting ? fail(at, what, 1, "nothing was loaded") : 1;
  };
  if (!reader.openSafetensors(path, error))
    return refuse(path, error);
  // What this program holds, and what the whole model does (a pipeline
  // stage holds its stage's tensors; the file holds every stage's).
  std::vector<GlobalTensor> wanted, known;
  for (const StoredTensor *stored : checkpointedTensors(plan))
    if (!globalTensorsOf(plan, *stored, wanted, error))
      return refuse(path, error);
  for (const Plan *whole : job.checkpointPlans(plan))
    for (const StoredTensor *stored : checkpointedTensors(*whole))
      if (!globalTensorsOf(*whole, *stored, known, error))
        return refuse(path, error);
  for (const GlobalTensor &want : wanted) {
    const GlobalTensor *found = reader.find(want.name);
    const std::string text = std::string(dtypeName(want.dtype)) + " " + shapeText(want.shape);
    if (!found && want.role == StoredRole::Parameter)
      return refuse(path + ": tensor '" + want.name + "'", "is missing (a parameter, " + text + ")");
    if (found && (found->dtype != want.dtype || found->shape != want.shape))
      return refuse(path + ": tensor '" + want.name + "'",
                    std::string("is ") + dtypeName(found->dtype) + " " + shapeText(found->shape) +
                        ", the program's is " + text);
  }
  for (const GlobalTensor &tensor : reader.tensors())
    if (std::none_of(known.begin(), known.end(),
                     [&](const GlobalTensor &t) { return t.name == tensor.name; }) &&
        !isBatchNormCounter(tensor))
      return refuse(path + ": tensor '" + tensor.name + "'", "is not a tensor of the program");
  return readHeldTensors(plan, job, reader, weights);
}

/// This rank's weights blob (from the checkpoint when resuming, with the
/// parameters of --init-from when given), the arena and the input buffers
/// on the backend.
int loadProgram(const std::string &dir, const Plan &plan, Job &job, const ResumePoint *resume,
                const std::string &initFrom, Backend &backend, ProgramState &program) {
  // A plan that splits parameters over tp has one blob per tp rank, ZeRO 3
  // one per dp rank too.
  program.blobName = weightsBlobName(plan, job.coordinates);
  int code = loadWeights(dir, program.blobName, plan, program.hostWeights);
  if (!code && resume) // its files are known whole (readResumePoint): read the ranges held
    code = readHeldTensors(plan, job, *resume->reader, program.hostWeights);
  else if (!code && !initFrom.empty())
    code = initializeFrom(initFrom, plan, job, program.hostWeights);
  // Every rank loads, or none goes on: a rank that found a fault said which,
  // and the others must not wait for it in the first collective (and it for
  // them in MPI_Finalize) until the collective timeout.
  int32_t failed = code != 0;
  job.communication->world().allReduceSum(&failed, 1, DType::I32, {-1, "loading weights"});
  if (failed)
    return code ? code : 1;
  program.weights = std::make_unique<Buffer>(backend, program.hostWeights.size());
  backend.copyToDevice(program.weights->get(), program.hostWeights.data(),
                       program.hostWeights.size());
  program.arena = std::make_unique<Buffer>(backend, static_cast<size_t>(plan.arenaBytes));
  const std::vector<size_t> &dataInputs = plan.training->dataInputs;
  const std::optional<PipelineSpec> &pipeline = plan.training->pipeline;
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    Tensor view = tensorAt(nullptr, plan.inputs[i]);
    // The program reads a data input where the input thread gathered it
    // (set for each microbatch) when the backend reads its staging memory,
    // and a stash in its microbatch's set.
    bool staged = backend.readsStaging() &&
                  std::find(dataInputs.begin(), dataInputs.end(), i) != dataInputs.end();
    if (!staged && !(pipeline && pipeline->isStashInput(i))) {
      program.inputBuffers.push_back(std::make_unique<Buffer>(backend, view.bytes()));
      view.data = program.inputBuffers.back()->get();
    }
    program.inputs.push_back(view);
  }
  program.outputs.resize(plan.outputs.size());
  if (pipeline)
    for (int64_t k = 0; k < pipeline->inFlight; ++k) {
      auto &set = program.stashSets.emplace_back();
      for (auto [output, input] : pipeline->stash)
        set.push_back(std::make_unique<Buffer>(backend, program.inputs[input].bytes()));
    }
  return 0;
}

/// Where microbatch `k` of step `step` of this rank begins in the run's
/// order: batch `step` is positions [(step-1)B, step B) of the epochs one
/// after another; this rank's microbatch k of it the (dpRank K + k)-th run
/// of micro-batch positions (docs/training.md), so every layout with the
/// same global batch sees the same samples.
uint64_t microbatchPosition(const TrainingSpec &spec, const Job &job, int64_t step, int64_t k) {
  const int64_t micro = spec.microBatch, batch = spec.batchSize * job.dpSize;
  return static_cast<uint64_t>(step - 1) * static_cast<uint64_t>(batch) +
         static_cast<uint64_t>((job.dpRank * spec.gradAccum + k) * micro);
}

/// The run's input thread: each microbatch's rows in `order`, gathered
/// from the data sets into one buffer per data input.
std::unique_ptr<InputPrefetch> startInput(const TrainingSpec &spec, const DataSets &data,
                                          SampleOrder order, Backend &backend) {
  std::vector<size_t> bytes;
  for (size_t sampleBytes : data.sampleBytes)
    bytes.push_back(sampleBytes * static_cast<size_t>(spec.microBatch));
  return std::make_unique<InputPrefetch>(
      bytes, spec.microBatch,
      [order = std::move(order)](uint64_t position) mutable { return order.at(position); },
      [&data](int64_t sample, int64_t row, const InputPrefetch::Buffers &buffers) {
        for (size_t d = 0; d < data.arrays.size(); ++d)
          std::memcpy(buffers[d] + static_cast<size_t>(row) * data.sampleBytes[d],
                      data.arrays[d].data.data() + static_cast<size_t>(sample) * data.sampleBytes[d],
                      data.sampleBytes[d]);
      },
      [&backend](size_t size) { return backend.allocateStaging(size); },
      [&backend](void *memory, size_t size) { backend.releaseStaging(memory, size); });
}

/// The entry point a pipeline action runs: the forward (F), the backward
/// (B, or zb-h1's inputs' gradients I) or the weights' gradients (W).
ProgramEntryPoint actionEntryPoint(const PipelineSpec::Action &action) {
  return action.kind == 'F'   ? ProgramEntryPoint::Forward
         : action.kind == 'W' ? ProgramEntryPoint::BackwardWeight
                              : ProgramEntryPoint::Backward;
}

/// A weight that several of the rank's stages train (on a rank of an
/// interleaved pipeline: a tied weight whose stages all run here, which
/// cleave-pipeline-tied-gradients leaves to the driver): its f32 gradient
/// accumulator's elements and where each stage's program holds it, in
/// stage order.
struct TiedAccumulator {
  size_t elements = 0;
  std::vector<std::pair<size_t, int64_t>> copies; // program, weights offset
};

/// The rank's tied accumulators, found once from its plans.
std::vector<TiedAccumulator> tiedAccumulators(const std::vector<Plan> &plans) {
  std::map<std::string, TiedAccumulator> byName;
  for (size_t c = 0; c < plans.size(); ++c)
    for (const StoredTensor &state : plans[c].state)
      if (state.tensor.name.rfind("grad:", 0) == 0 && state.tensor.dtype == DType::F32) {
        TiedAccumulator &tied = byName[state.tensor.name];
        tied.elements = static_cast<size_t>(state.bytes) / sizeof(float);
        tied.copies.emplace_back(c, state.offset);
      }
  std::vector<TiedAccumulator> tied;
  for (auto &[name, accumulator] : byName)
    if (accumulator.copies.size() > 1)
      tied.push_back(std::move(accumulator));
  return tied;
}

/// Sums each tied accumulator's copies in stage order into every copy, as
/// the stages of several ranks sum theirs with messages.
void sumTiedGradients(const std::vector<TiedAccumulator> &tied, std::vector<ProgramState> &programs,
                      Backend &backend) {
  for (const TiedAccumulator &accumulator : tied) {
    std::vector<float> sum(accumulator.elements, 0.0f), part(accumulator.elements);
    const size_t bytes = accumulator.elements * sizeof(float);
    for (auto [c, offset] : accumulator.copies) {
      backend.copyToHost(part.data(), programs[c].weights->get() + offset, bytes);
      for (size_t i = 0; i < accumulator.elements; ++i)
        sum[i] += part[i];
    }
    for (auto [c, offset] : accumulator.copies)
      backend.copyToDevice(programs[c].weights->get() + offset, sum.data(), bytes);
  }
}

/// Runs the update of each of the rank's programs, once the copies of each
/// weight tied between its stages hold their sum. On a rank of an
/// interleaved pipeline each stage's @apply runs in phases
/// (runtime/StepContext.h's applyPhase): before a sum over pp of a scalar
/// every stage adds to (the clip's squares, the loss scale's overflow
/// flag), the rank's stages add theirs, in stage order, and each stage then
/// sums the rank's total over pp. A program of one phase runs whole.
void applyStep(const std::vector<TiedAccumulator> &tied, Backend &backend,
               std::vector<ProgramState> &programs) {
  sumTiedGradients(tied, programs, backend);
  for (int phase = 0;; ++phase) {
    backend.setApplyPhase(phase);
    std::vector<void *> partials;
    for (ProgramState &stage : programs) {
      stage.run(backend, ProgramEntryPoint::Apply);
      if (void *partial = backend.takeStagePartial())
        partials.push_back(partial);
    }
    if (partials.empty())
      break;
    float total = 0;
    for (void *partial : partials) {
      float value = 0;
      backend.copyToHost(&value, partial, sizeof value);
      total += value;
    }
    for (void *partial : partials)
      backend.copyToDevice(partial, &total, sizeof total);
  }
  backend.setApplyPhase(0);
}

/// Scalar output `index` (f32 or f64) of the step, as a double.
double readScalarOutput(const Plan &plan, Backend &backend, const ProgramState &program,
                        size_t index) {
  double result = 0;
  if (plan.outputs[index].dtype == DType::F64) {
    backend.copyToHost(&result, program.outputs[index].data, sizeof result);
  } else {
    float value = 0;
    backend.copyToHost(&value, program.outputs[index].data, sizeof value);
    result = value;
  }
  return result;
}

/// The step's loss, as a double.
double readLoss(const Plan &plan, Backend &backend, const ProgramState &program) {
  return readScalarOutput(plan, backend, program, plan.training->lossOutput);
}

/// Sets the step's loss output to `loss`.
void writeLoss(const Plan &plan, Backend &backend, ProgramState &program, double loss) {
  const size_t index = plan.training->lossOutput;
  const float single = static_cast<float>(loss);
  const bool f64 = plan.outputs[index].dtype == DType::F64;
  backend.copyToDevice(program.outputs[index].data, f64 ? static_cast<const void *>(&loss) : &single,
                       f64 ? sizeof loss : sizeof single);
}

int stageMetrics(const Plan &plan, const TrainingOptions &options, const Job &job, Backend &backend,
                 const std::vector<StepRecord> &records,
                 const std::vector<CheckpointRecord> &checkpoints, const RunReport &report,
                 double seconds, FileSet &files);

/// Writes the trained weights blob of each of the rank's programs (one rank
/// per blob), and on rank 0 the last step's outputs and the metrics.
int writeResults(const std::vector<Plan> &plans, const TrainingOptions &options, const Job &job,
                 Backend &backend, std::vector<ProgramState> &programs,
                 const std::vector<StepRecord> &records,
                 const std::vector<CheckpointRecord> &checkpoints, const RunReport &report,
                 double seconds) {
  // The parameters are the same on every rank of an axis the blob does not
  // differ along: rank 0 of it writes the blob. Each pipeline stage writes
  // its own, in stage<S>/ as it was compiled.
  const Plan &plan = plans.front();
  const ProgramState &program = programs.front();
  const std::optional<PipelineSpec> &pipeline = plan.training->pipeline;
  for (size_t a = 0; a < job.coordinates.size(); ++a)
    if (job.coordinates[a] != 0 && !(pipeline && job.mesh.axisNames[a] == "pp") &&
        std::find(plan.weightsByAxes.begin(), plan.weightsByAxes.end(), job.mesh.axisNames[a]) ==
            plan.weightsByAxes.end())
      return 0;
  // The blobs, the outputs and the metrics are replaced as one set.
  FileSet files;
  std::string error, failed;
  for (size_t c = 0; c < plans.size() && !options.outputDir.empty(); ++c) {
    ProgramState &stage = programs[c];
    backend.copyToHost(stage.hostWeights.data(), stage.weights->get(), stage.hostWeights.size());
    std::string dir = options.outputDir;
    if (const std::optional<PipelineSpec> &spec = plans[c].training->pipeline) {
      dir += "/stage" + std::to_string(spec->stage);
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      if (ec)
        return fail(dir, "cannot create: " + ec.message(), 1);
    }
    std::string path = dir + "/" + stage.blobName;
    if (!files.stage(path, {{stage.hostWeights.data(), stage.hostWeights.size()}}, error))
      return fail(path, error, 1);
  }
  if (job.reporting && !options.outputDir.empty()) {
    // A pipeline stage's stash is no result: it writes the loss alone.
    const size_t loss = plan.training->lossOutput;
    if (int code = pipeline ? stageOutputs({plan.outputs[loss]}, {program.outputs[loss]},
                                           options.outputDir, backend, files)
                            : stageOutputs(plan.outputs, program.outputs, options.outputDir,
                                           backend, files))
      return code;
  }
  if (job.reporting && !options.logJson.empty())
    if (int code = stageMetrics(plan, options, job, backend, records, checkpoints, report, seconds,
                                files))
      return code;
  if (job.reporting && !options.trace.empty() &&
      !files.stage(options.trace, {{report.trace.data(), report.trace.size()}}, error))
    return fail(options.trace, error, 1);
  if (options.deferCommit)
    files.keepStaged();
  else if (!files.commit(failed, error))
    return fail(failed, error, 1);
  return 0;
}

/// Stages the --log-json metrics in `files`.
int stageMetrics(const Plan &plan, const TrainingOptions &options, const Job &job, Backend &backend,
                 const std::vector<StepRecord> &records,
                 const std::vector<CheckpointRecord> &checkpoints, const RunReport &report,
                 double seconds, FileSet &files) {
  const TrainingSpec &spec = *plan.training;
  const int64_t batch = spec.batchSize * job.dpSize;
  // One step a line, so long logs stay readable and diffable.
  const int64_t steps = static_cast<int64_t>(records.size());
  const double rate = seconds > 0 ? static_cast<double>(steps * batch) / seconds : 0;
  std::string text =
      "{\n  \"format_version\": 1,\n  \"backend\": " + nlohmann::json(backend.name()).dump() +
      ",\n  \"batch_size\": " + std::to_string(batch) +
      ",\n  \"grad_accum\": " + std::to_string(spec.gradAccum) +
      ",\n  \"samples_per_second\": " + nlohmann::json(rate).dump() +
      ",\n  \"seconds\": " + nlohmann::json(seconds).dump() +
      ",\n  \"ranks\": " + std::to_string(job.communication->size()) +
      ",\n  \"threads\": " + std::to_string(options.threads) +
      ",\n  \"peak_bytes_allocated\": " + std::to_string(backend.allocations().peakBytes()) +
      ",\n  \"process_peak_rss_bytes\": " + std::to_string(processPeakRssBytes()) +
      ",\n  \"bytes_sent\": " + bytesSentJson(job.mesh, job.axes, job.background.get()).dump();
  if (spec.lossScaling)
    text += ",\n  \"skipped_steps\": " +
            std::to_string(std::count_if(records.begin(), records.end(),
                                         [](const StepRecord &r) { return r.skipped; }));
  if (!options.checkpointDir.empty()) {
    text += ",\n  \"checkpoints\": [";
    for (size_t i = 0; i < checkpoints.size(); ++i) {
      const CheckpointRecord &written = checkpoints[i];
      nlohmann::ordered_json entry = {
          {"step", written.step}, {"seconds", written.seconds}, {"bytes", written.bytes}};
      if (written.writeSeconds) {
        entry["published_after_step"] = written.publishedAfter;
        entry["write_seconds"] = *written.writeSeconds;
      }
      text += (i == 0 ? "\n    " : ",\n    ") + entry.dump();
    }
    text += "\n  ]";
  }
  text += ",\n  \"steps\": [";
  for (size_t i = 0; i < records.size(); ++i) {
    nlohmann::ordered_json entry = {{"step", records[i].step}, {"loss", records[i].loss}};
    if (!spec.trainingInfo)
      entry["lr"] = records[i].lr;
    if (spec.lossScaling) {
      entry["loss_scale"] = records[i].lossScale;
      entry["skipped"] = records[i].skipped;
    }
    if (records[i].gradNorm)
      entry["grad_norm"] = *records[i].gradNorm;
    text += (i == 0 ? "\n    " : ",\n    ") + entry.dump();
  }
  text += "\n  ],\n  \"step_times\": [";
  for (size_t i = 0; i < records.size(); ++i) {
    nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
    for (const std::vector<StepTimes> &rank : report.ranks)
      ranks.push_back({{"seconds", rank[i].seconds},
                       {"compute_seconds", rank[i].compute},
                       {"communication_seconds", rank[i].communication},
                       {"exposed_communication_seconds", rank[i].exposedCommunication},
                       {"input_wait_seconds", rank[i].input},
                       {"input_read_seconds", rank[i].inputRead}});
    text += (i == 0 ? "\n    " : ",\n    ") +
            nlohmann::ordered_json{{"step", records[i].step}, {"ranks", ranks}}.dump();
  }
  text += "\n  ]\n}\n";
  std::string error;
  if (!files.stage(options.logJson, {{text.data(), text.size()}}, error))
    return fail(options.logJson, error, 1);
  return 0;
}

} // namespace

int runTraining(const std::vector<std::string> &dirs, const std::vector<Plan> &plans,
                const TrainingOptions &options, Backend &backend) {
  const Plan &plan = plans.front();
  const TrainingSpec &spec = *plan.training;
  // Ranks other than 0 check the same flags, plan and data as rank 0, which
  // alone reports what is wrong with them (once, not once per rank).
  StderrSilencer quiet(comm::launchedRank() != 0);
  Job job;
  DataSets data;
  int64_t steps = 0, totalSteps = 0;
  if (int code = checkFlags(spec, options))
    return code;
  if (int code = startJob(plans, options, backend, job))
    return code;
  if (int code = readStagePlans(dirs.front(), plan, options, job.stagePlans))
    return code;
  RunProfile profile(!options.logJson.empty(), !options.trace.empty(),
                     options.traceSteps.value_or(StepWindow{}), options.traceOps,
                     spec.trainingInfo);
  profile.attach(backend);
  const int64_t batch = spec.batchSize * job.dpSize;
  if (int code = readDataSets(plan, options, batch, data))
    return code;
  if (int code = countSteps(options, data.samples, batch, steps, totalSteps))
    return code;
  if (int code = checkWritable(options))
    return code;
  std::optional<ResumePoint> resume;
  if (!options.resumeDir.empty()) {
    resume.emplace();
    if (int code = readResumePoint(plan, options, job, data, batch, steps, totalSteps, *resume))
      return code;
  }
  if (int code = checkCheckpointDir(options, resume.has_value()))
    return code;
  const int64_t firstStep = resume ? resume->index.position.step + 1 : 1;
  const uint64_t seed = resume ? resume->index.position.seed : options.seed.value_or(0);
  if (int code = checkIndexRanges(plan, data, batch, firstStep, steps,
                                  SampleOrder(data.samples, options.shuffle, seed)))
    return code;
  // From here on every rank speaks for itself: its own weights blob, and a
  // collective that times out names the rank that waited.
  quiet.restore();
  // The rank's programs: one, or on a rank of an interleaved pipeline one
  // per stage it runs, each with its input thread.
  std::vector<ProgramState> programs(plans.size());
  std::vector<std::unique_ptr<InputPrefetch>> inputs;
  for (size_t c = 0; c < plans.size(); ++c) {
    programs[c].index = c;
    if (int code = loadProgram(dirs[c], plans[c], job, resume ? &*resume : nullptr,
                               options.initFrom, backend, programs[c]))
      return code;
  }
  // The program of each of a pipeline rank's actions: its stage's, whose
  // index among the rank's stages (in order) is the program's.
  std::vector<size_t> actionPrograms;
  if (spec.pipeline) {
    const std::vector<int64_t> stages = spec.pipeline->rankStages();
    for (const PipelineSpec::Action &action : spec.pipeline->actions)
      actionPrograms.push_back(static_cast<size_t>(
          std::find(stages.begin(), stages.end(), action.stage) - stages.begin()));
  }
  const std::vector<TiedAccumulator> tied = tiedAccumulators(plans);
  // Where each program takes each data input (in the first plan's order, the
  // data sets'): stages number their inputs apart, and each reads them all.
  std::vector<std::vector<size_t>> dataSlots(plans.size());
  for (size_t c = 0; c < plans.size(); ++c)
    for (size_t index : spec.dataInputs) {
      const std::vector<TensorSpec> &own = plans[c].inputs;
      const auto slot = std::find_if(own.begin(), own.end(), [&](const TensorSpec &input) {
        return input.name == plan.inputs[index].name;
      });
      if (slot == own.end())
        return fail("stage " + std::to_string(plans[c].training->pipeline->stage),
                    "does not read the data input '" + plan.inputs[index].name + "'", 1,
                    "recompile the model with cleave compile");
      dataSlots[c].push_back(static_cast<size_t>(slot - own.begin()));
    }
  if (resume && job.reporting)
    std::fprintf(stderr, "resuming from %s at step %lld\n", resume->checkpoint.c_str(),
                 static_cast<long long>(firstStep));

  for (size_t c = 0; c < plans.size(); ++c) {
    inputs.push_back(
        startInput(spec, data, SampleOrder(data.samples, options.shuffle, seed), backend));
    inputs.back()->request(microbatchPosition(spec, job, firstStep, 0));
  }
  Progress progress(job.reporting && !options.quiet, firstStep, steps,
                    job.communication->size() > 1);
  const std::string &lossName = plan.outputs[spec.lossOutput].name;
  std::vector<StepRecord> records;
  std::vector<CheckpointRecord> checkpoints;
  records.reserve(static_cast<size_t>(std::min<int64_t>(steps - firstStep + 1, 1 << 20)));
  std::optional<StopRequests> stops;
  if (!options.checkpointDir.empty())
    stops.emplace();
  std::optional<PendingCheckpoint> pending;
  profile.alignClocks(job.communication->world());
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  for (int64_t step = firstStep; step <= steps; ++step) {
    profile.beginStep(step);
    const double lr = learningRate(spec, step, totalSteps);
    if (!spec.trainingInfo) { // else the learning rate and step live in the graph
      const float lrValue = static_cast<float>(lr), stepValue = static_cast<float>(step);
      for (size_t c = 0; c < plans.size(); ++c) {
        const TrainingSpec &own = *plans[c].training;
        backend.copyToDevice(programs[c].inputs[own.lrInput].data, &lrValue, sizeof lrValue);
        backend.copyToDevice(programs[c].inputs[own.stepInput].data, &stepValue, sizeof stepValue);
      }
    }
    // The weights' bf16 or f16 copies every microbatch of the step reads
    // (where @apply keeps them, made once).
    for (size_t c = 0; c < plans.size(); ++c)
      if (hasWeightCopies(plans[c]) &&
          (step == firstStep || !plans[c].training->narrowWeightsOnce)) {
        const std::optional<PipelineSpec> &pipeline = plans[c].training->pipeline;
        profile.beginCall(-1, ProgramEntryPoint::NarrowWeights,
                          pipeline ? std::optional(pipeline->stage) : std::nullopt);
        programs[c].run(backend, ProgramEntryPoint::NarrowWeights);
        profile.endCall();
      }
    // Microbatch k's forward or backward. Masks are keyed by the
    // microbatch's place in the global batch: a dp layout draws what one
    // device accumulating the same microbatches does. Each program's
    // entry points called so far this step: a first call writes the
    // accumulators the later ones add to.
    std::set<std::pair<size_t, ProgramEntryPoint>> called;
    auto runMicrobatch = [&](ProgramState &stage, int64_t k, ProgramEntryPoint entry) {
      backend.setStep(step, trainingStream(step, job.dpRank * spec.gradAccum + k),
                      k + 1 == spec.gradAccum, called.emplace(stage.index, entry).second);
      const std::optional<PipelineSpec> &pipeline = plans[stage.index].training->pipeline;
      profile.beginCall(k, entry, pipeline ? std::optional(pipeline->stage) : std::nullopt);
      stage.run(backend, entry);
      profile.endCall();
    };
    // Each forward takes its microbatch's data; a program's forwards come in
    // order.
    auto forward = [&](size_t c, int64_t k) {
      InputPrefetch &input = *inputs[c];
      const auto reading = profile.now();
      // The thread gathers the next microbatch while this one computes.
      const bool last = k + 1 == spec.gradAccum;
      if (!last || step < steps)
        input.request(microbatchPosition(spec, job, last ? step + 1 : step, last ? 0 : k + 1));
      // The CPU reads the gathered buffers in place: the thread refills
      // them only when asked, after this microbatch's forward.
      const double gathered = input.take([&](const InputPrefetch::Buffers &buffers) {
        for (size_t d = 0; d < buffers.size(); ++d) {
          Tensor &tensor = programs[c].inputs[dataSlots[c][d]];
          if (backend.readsStaging())
            tensor.data = buffers[d];
          else
            backend.copyToDevice(tensor.data, buffers[d], tensor.bytes());
        }
      });
      profile.input(k, reading, input.microbatchBytes(), gathered);
      runMicrobatch(programs[c], k, ProgramEntryPoint::Forward);
    };
    if (const std::optional<PipelineSpec> &pipeline = spec.pipeline) {
      // A pipeline rank runs its actions, each through its stage's program,
      // each action's messages expected while the action before it runs.
      comm::Communicator &pp = *backend.communicators()[job.mesh.axisIndex("pp")];
      auto expectReceives = [&](size_t a) {
        const PipelineSpec &stage = *plans[actionPrograms[a]].training->pipeline;
        auto found = stage.receives.find(entryPointName(actionEntryPoint(pipeline->actions[a])));
        if (found == stage.receives.end())
          return;
        for (const PipelineSpec::Receive &r : found->second)
          pp.expect(static_cast<std::size_t>(r.elements), r.dtype, static_cast<int>(r.peer),
                    static_cast<int>(r.tag), {step, "pipeline messages"});
      };
      if (!pipeline->actions.empty())
        expectReceives(0);
      for (size_t a = 0; a < pipeline->actions.size(); ++a) {
        const PipelineSpec::Action &action = pipeline->actions[a];
        const size_t c = actionPrograms[a];
        if (a + 1 < pipeline->actions.size())
          expectReceives(a + 1);
        programs[c].useStashOf(*plans[c].training->pipeline, action.microbatch);
        if (action.kind == 'F')
          forward(c, action.microbatch);
        else
          runMicrobatch(programs[c], action.microbatch, actionEntryPoint(action));
      }
    } else {
      for (int64_t k = 0; k < spec.gradAccum; ++k)
        forward(0, k);
    }
    profile.beginCall(-1, ProgramEntryPoint::Apply, std::nullopt);
    applyStep(tied, backend, programs);
    profile.endCall();
    if (job.background)
      profile.background(*job.background, job.background->takeReport());
    // A pipeline stage's step ends when its messages (the tied weights'
    // gradients of @apply too) are taken.
    if (spec.pipeline)
      job.communication->axis("pp")->completeSends({step, "pipeline messages"});

    // Only the last stage has the loss; the others' is 0. Every stage's
    // loss output then holds it.
    double loss = 0;
    for (size_t c = 0; c < plans.size(); ++c)
      loss += readLoss(plans[c], backend, programs[c]);
    if (spec.pipeline) {
      job.communication->axis("pp")->allReduceSum(&loss, 1, DType::F64, {step, "the loss"});
      for (size_t c = 0; c < plans.size(); ++c)
        writeLoss(plans[c], backend, programs[c], loss);
    }
    const StepTimes times = profile.endStep();
    // Every rank has the same loss; rank 0 reports it.
    if (!std::isfinite(loss) && !job.reporting)
      return 1;
    if (!std::isfinite(loss)) {
      progress.endLine();
      return fail("step " + std::to_string(step),
                  "the loss '" + lossName + "' is " +
                      (std::isnan(loss) ? "nan"
                       : loss > 0       ? "inf"
                                        : "-inf"),
                  1, "the run stopped; nothing was written");
    }
    records.push_back({step, loss, lr, times});
    if (const std::optional<TrainingSpec::LossScaling> &scaling = spec.lossScaling) {
      // Every stage keeps the same scale and skips the same steps.
      records.back().lossScale =
          readScalarOutput(plan, backend, programs.front(), scaling->scaleOutput);
      records.back().skipped =
          readScalarOutput(plan, backend, programs.front(), scaling->skippedOutput) != 0;
    }
    // Every stage's @apply has the norm over all of them.
    if (spec.gradNormOutput)
      records.back().gradNorm =
          readScalarOutput(plan, backend, programs.front(), *spec.gradNormOutput);
    progress.step(step, loss, spec.trainingInfo ? std::nullopt : std::optional<double>(lr), batch,
                  start, profile.communicationSeconds());
    // Every rank stops after the same step: when any received a stop signal.
    int32_t stop = stops ? stops->received() : 0;
    if (stops)
      job.communication->world().allReduceSum(&stop, 1, DType::I32, {step, "stop signal"});
    // A checkpoint written behind training is published after the first
    // step at whose end every rank's file is in; the next one, or the run's
    // last, waits for it.
    const bool due = options.checkpointEvery > 0 && step % options.checkpointEvery == 0;
    const bool checkpointing = !options.checkpointDir.empty() && (due || step == steps || stop);
    if (pending && (checkpointing || shardsWritten(*pending, job.communication->world(), step))) {
      progress.endLine();
      if (int code = publishCheckpoint(plan, options, job, *pending, step, profile, checkpoints))
        return code;
      pending.reset();
    }
    if (checkpointing) {
      TrainingPosition position{
          step, spec.trainingInfo ? 0 : lr, batch, data.samples, options.shuffle, seed, totalSteps};
      progress.endLine();
      const auto writing = profile.now();
      const bool background = options.checkpointAsync && step < steps && !stop;
      if (int code = beginCheckpoint(plans, options, job, backend, programs, position, background,
                                     pending))
        return code;
      if (!background) {
        if (int code = publishCheckpoint(plan, options, job, *pending, step, profile, checkpoints))
          return code;
        pending.reset();
      }
      profile.checkpoint("checkpoint", step, writing,
                         job.reporting && !background ? std::optional(checkpoints.back().bytes)
                                                      : std::nullopt);
    }
    if (stop && step < steps) {
      progress.endLine();
      const char *name = sigabbrev_np(stops->received());
      if (job.reporting)
        std::fprintf(stderr, "stopped by %s%s after step %lld of %lld: continue with --resume %s\n",
                     name ? "SIG" : "a stop signal", name ? name : "", static_cast<long long>(step),
                     static_cast<long long>(steps), options.checkpointDir.c_str());
      break;
    }
  }
  const double seconds = elapsed();
  progress.endLine();
  std::vector<StepTimes> mine;
  for (const StepRecord &record : records)
    mine.push_back(record.times);
  RunReport report;
  profile.finish(job.communication->world(), mine, processNames(job), report.ranks, report.trace);
  return writeResults(plans, options, job, backend, programs, records, checkpoints, report,
                      seconds);
}

} // namespace cleave::rt
