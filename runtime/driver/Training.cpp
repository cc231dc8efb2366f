//===- Training.cpp - the driver's training loop -------------------------===//

#include "runtime/driver/Training.h"

#include "runtime/Npy.h"
#include "runtime/Random.h"
#include "runtime/comm/Start.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <unistd.h>

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
/// (ring-algorithm counts, runtime/comm): [{kind, axis, bytes}].
nlohmann::ordered_json bytesSentJson(const comm::Mesh &mesh,
                                     const std::vector<comm::Communicator *> &axes) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (size_t a = 0; a < axes.size(); ++a) {
    for (int kind = 0; kind < comm::kCollectiveKinds; ++kind) {
      uint64_t bytes = axes[a]->bytesSent()[static_cast<comm::CollectiveKind>(kind)];
      if (bytes > 0)
        list.push_back({{"kind", comm::collectiveName(static_cast<comm::CollectiveKind>(kind))},
                        {"axis", mesh.axisNames[a]},
                        {"bytes", bytes}});
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

int runTraining(const std::string &dir, const Plan &plan, const TrainingOptions &options,
                Backend &backend) {
  const TrainingSpec &spec = *plan.training;
  // Ranks other than 0 check the same things; rank 0 reports them.
  StderrSilencer quiet(comm::launchedRank() != 0);

  if (options.steps.has_value() == options.epochs.has_value())
    return fail("usage", "a training program takes one of --steps N and --epochs E", 2,
                "see --help");
  if (!options.shuffle && options.seed)
    return fail("--seed", "has no effect with --no-shuffle", 2);
  if (spec.trainingInfo && options.totalSteps)
    return fail("--total-steps", "the model's training_info defines the step: it has no "
                                 "learning-rate schedule", 2);
  if (options.totalSteps && options.steps && *options.totalSteps < *options.steps)
    return fail("--total-steps " + std::to_string(*options.totalSteps),
                "is fewer than the " + std::to_string(*options.steps) + " steps of this run",
                2);

  // The mesh's communicators; one local rank without a mesh.
  comm::Mesh mesh = comm::Mesh::line("dp", 1);
  comm::CommOptions commOptions;
  commOptions.timeoutSeconds = options.collectiveTimeout;
  if (plan.mesh) {
    mesh = {};
    for (const auto &[name, size] : plan.mesh->axes) {
      mesh.axisNames.push_back(name);
      mesh.shape.push_back(size);
    }
    commOptions.deterministic = plan.mesh->deterministic;
  }
  if (int launched = comm::launchedRanks(); !plan.mesh && launched > 1)
    return fail("program",
                "is compiled without --mesh, for one rank, but was started on " +
                    std::to_string(launched) + ": compile it with --mesh dp=" +
                    std::to_string(launched) + " to train on that many",
                2);
  std::string startError;
  std::unique_ptr<comm::Communication> communication =
      comm::startCommunication(mesh, commOptions, startError);
  if (!communication)
    return fail("mesh " + mesh.text(), startError, 2);
  std::vector<comm::Communicator *> axes;
  for (const std::string &name : mesh.axisNames)
    axes.push_back(communication->axis(name));
  backend.setCommunicators(axes);
  // Rank r of dp takes slots r*K .. r*K+K-1 of every step's batch
  // (docs/training.md), so every layout with the same global batch sees the
  // same samples.
  const int dpAxis = mesh.axisIndex("dp");
  const int64_t dpSize = dpAxis < 0 ? 1 : mesh.shape[dpAxis];
  const int64_t dpRank = dpAxis < 0 ? 0 : mesh.coordinates(communication->rank())[dpAxis];
  const int tpAxis = mesh.axisIndex("tp");
  const int64_t tpRank = tpAxis < 0 ? 0 : mesh.coordinates(communication->rank())[tpAxis];
  const bool reporting = communication->rank() == 0;
  const int64_t micro = spec.microBatch, batch = spec.batchSize * dpSize;

  // Which file feeds which data input.
  std::map<std::string, std::string> files;
  for (const std::string &entry : splitDataFlags(options.data)) {
    size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size())
      return fail("--data '" + entry + "'", "expected NAME=FILE.npy", 2);
    std::string name = entry.substr(0, eq);
    bool known = false;
    for (size_t index : spec.dataInputs)
      known |= plan.inputs[index].name == name;
    if (!known) {
      std::string names;
      for (size_t index : spec.dataInputs)
        names += (names.empty() ? "" : ", ") + plan.inputs[index].name;
      return fail("--data '" + entry + "'", "the model has no data input '" + name + "'", 1,
                  "its data inputs are: " + names);
    }
    if (files.count(name))
      return fail("--data '" + entry + "'", "'" + name + "' is given twice", 2);
    files[name] = entry.substr(eq + 1);
  }
  for (size_t index : spec.dataInputs) {
    const TensorSpec &input = plan.inputs[index];
    if (!files.count(input.name))
      return fail("data '" + input.name + "'", "is missing", 1,
                  "pass --data " + input.name + "=FILE.npy holding " + dtypeName(input.dtype) +
                      " " + dataShapeText(input.shape) + " (N samples)");
  }

  // The data sets, whole, in host memory.
  std::vector<NpyArray> data(spec.dataInputs.size());
  std::vector<size_t> sampleBytes(spec.dataInputs.size());
  int64_t samples = 0;
  for (size_t k = 0; k < spec.dataInputs.size(); ++k) {
    const TensorSpec &input = plan.inputs[spec.dataInputs[k]];
    const std::string &file = files[input.name];
    const std::string where = "data '" + input.name + "' (" + file + ")";
    std::string error;
    if (!readNpy(file, data[k], error))
      return fail(where, error, 1);
    const NpyArray &array = data[k];
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
      samples = count;
    else if (count != samples) {
      const std::string &firstName = plan.inputs[spec.dataInputs[0]].name;
      return fail(where,
                  "holds " + std::to_string(count) + " samples, but '" + firstName + "' (" +
                      files[firstName] + ") holds " + std::to_string(samples),
                  1);
    }
    sampleBytes[k] = array.data.size() / static_cast<size_t>(std::max<int64_t>(count, 1));
  }
  if (samples < batch) {
    const std::string &firstName = plan.inputs[spec.dataInputs[0]].name;
    return fail("data '" + firstName + "' (" + files[firstName] + ")",
                "holds " + std::to_string(samples) + " samples, fewer than the batch size " +
                    std::to_string(batch),
                1);
  }

  int64_t steps = 0;
  if (options.steps) {
    steps = *options.steps;
  } else {
    double epochs = *options.epochs;
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
  const int64_t totalSteps = options.totalSteps ? *options.totalSteps : steps;
  if (totalSteps < steps)
    return fail("--total-steps " + std::to_string(totalSteps),
                "is fewer than the " + std::to_string(steps) + " steps of this run", 2);

  // Find out now, not after the run, that the results cannot be written.
  std::string error;
  if (!options.outputDir.empty() && !std::filesystem::is_directory(options.outputDir))
    return fail(options.outputDir, "is not a directory", 2);
  if (!options.outputDir.empty() && !canCreate(options.outputDir + "/weights.bin", error))
    return fail(options.outputDir + "/weights.bin", error, 2);
  if (!options.logJson.empty() && !canCreate(options.logJson, error))
    return fail(options.logJson, error, 2);

  std::vector<char> hostWeights;
  // A plan that splits parameters over tp has one blob per tp rank, ZeRO 3
  // one per dp rank too: the file name says which with {tp} and {dp}.
  Plan rankPlan = plan;
  const bool blobPerDpRank = plan.weightsFile.find("{dp}") != std::string::npos;
  const bool blobPerTpRank = plan.weightsFile.find("{tp}") != std::string::npos;
  for (auto [placeholder, coordinate] : {std::pair<std::string, int64_t>("{tp}", tpRank),
                                         std::pair<std::string, int64_t>("{dp}", dpRank)}) {
    size_t at = rankPlan.weightsFile.find(placeholder);
    if (at != std::string::npos)
      rankPlan.weightsFile.replace(at, placeholder.size(), std::to_string(coordinate));
  }
  if (int code = loadWeights(dir, rankPlan, hostWeights))
    return code;
  Buffer weights(backend, hostWeights.size());
  backend.copyToDevice(weights.get(), hostWeights.data(), hostWeights.size());
  Buffer arena(backend, static_cast<size_t>(plan.arenaBytes));

  std::vector<std::unique_ptr<Buffer>> inputBuffers;
  std::vector<Tensor> inputs;
  for (const TensorSpec &input : plan.inputs) {
    Tensor view = tensorAt(nullptr, input);
    inputBuffers.push_back(std::make_unique<Buffer>(backend, view.bytes()));
    view.data = inputBuffers.back()->get();
    inputs.push_back(view);
  }
  std::vector<std::vector<char>> staging(spec.dataInputs.size());
  for (size_t k = 0; k < staging.size(); ++k)
    staging[k].resize(sampleBytes[k] * static_cast<size_t>(micro));
  std::vector<Tensor> outputs(plan.outputs.size());
  const TensorSpec &lossSpec = plan.outputs[spec.lossOutput];

  SampleOrder order(samples, options.shuffle, options.seed.value_or(0));
  const bool terminal = isatty(fileno(stderr));
  const int64_t every = std::max<int64_t>(1, steps / 10);
  struct Record {
    int64_t step;
    double loss, lr;
  };
  std::vector<Record> records;
  records.reserve(static_cast<size_t>(std::min<int64_t>(steps, 1 << 20)));
  // From here on every rank speaks for itself: a collective that times out
  // names the rank that waited.
  quiet.restore();
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  for (int64_t step = 1; step <= steps; ++step) {
    const double lr = learningRate(spec, step, totalSteps);
    const float lrValue = static_cast<float>(lr);
    const float stepValue = static_cast<float>(step);
    if (!spec.trainingInfo) { // else the learning rate and step live in the graph
      backend.copyToDevice(inputs[spec.lrInput].data, &lrValue, sizeof lrValue);
      backend.copyToDevice(inputs[spec.stepInput].data, &stepValue, sizeof stepValue);
    }
    // Batch `step` is positions [(step-1)B, step B) of the epochs one after
    // another; this rank's microbatch k of it the (dpRank K + k)-th run of
    // `micro` positions.
    for (int64_t k = 0; k < spec.gradAccum; ++k) {
      const uint64_t first = static_cast<uint64_t>(step - 1) * static_cast<uint64_t>(batch) +
                             static_cast<uint64_t>((dpRank * spec.gradAccum + k) * micro);
      for (int64_t row = 0; row < micro; ++row) {
        size_t sample = static_cast<size_t>(order.at(first + static_cast<uint64_t>(row)));
        for (size_t d = 0; d < data.size(); ++d)
          std::memcpy(staging[d].data() + static_cast<size_t>(row) * sampleBytes[d],
                      data[d].data.data() + sample * sampleBytes[d], sampleBytes[d]);
      }
      for (size_t d = 0; d < data.size(); ++d)
        backend.copyToDevice(inputs[spec.dataInputs[d]].data, staging[d].data(),
                             staging[d].size());
      backend.setStep(step, trainingStream(step, k));
      backend.forward(arena.get(), weights.get(), inputs.data(), outputs.data());
    }
    backend.apply(arena.get(), weights.get(), inputs.data(), outputs.data());

    double loss = 0;
    if (lossSpec.dtype == DType::F64) {
      backend.copyToHost(&loss, outputs[spec.lossOutput].data, sizeof loss);
    } else {
      float value = 0;
      backend.copyToHost(&value, outputs[spec.lossOutput].data, sizeof value);
      loss = value;
    }
    // Every rank has the same loss; rank 0 reports it.
    if (!std::isfinite(loss) && !reporting)
      return 1;
    if (!std::isfinite(loss))
      return fail("step " + std::to_string(step),
                  std::string("the loss '") + lossSpec.name + "' is " +
                      (std::isnan(loss) ? "nan" : loss > 0 ? "inf" : "-inf"),
                  1, "the run stopped; nothing was written");
    records.push_back({step, loss, lr});
    if (reporting && (terminal || step % every == 0 || step == steps)) {
      double seconds = elapsed();
      double rate = seconds > 0 ? static_cast<double>(step * batch) / seconds : 0;
      std::string lrText = spec.trainingInfo ? "" : "  lr " + formatDouble("%g", lr);
      std::fprintf(stderr, "step %lld/%lld  loss %.6f%s  %.0f samples/s\n",
                   static_cast<long long>(step), static_cast<long long>(steps), loss,
                   lrText.c_str(), rate);
    }
  }
  const double seconds = elapsed();
  const double rate = seconds > 0 ? static_cast<double>(steps * batch) / seconds : 0;

  // The parameters are the same on every dp rank (but for ZeRO 3's slices)
  // and, unless the plan splits some, on every tp rank: one rank per blob
  // the plan names writes it (dp rank 0, or every one with ZeRO 3; tp rank
  // 0, or every one when parameters are split); rank 0 the rest.
  if ((dpRank != 0 && !blobPerDpRank) || (tpRank != 0 && !blobPerTpRank))
    return 0;
  if (!options.outputDir.empty()) {
    backend.copyToHost(hostWeights.data(), weights.get(), hostWeights.size());
    std::string path = options.outputDir + "/" + rankPlan.weightsFile;
    if (!writeFileAtomically(path, {{hostWeights.data(), hostWeights.size()}}, error))
      return fail(path, error, 1);
  }
  if (!reporting)
    return 0;
  if (!options.outputDir.empty()) {
    for (size_t i = 0; i < outputs.size(); ++i) {
      std::vector<char> host(outputs[i].bytes());
      backend.copyToHost(host.data(), outputs[i].data, host.size());
      std::string path = options.outputDir + "/" + npyFileName(plan.outputs[i].name);
      if (!writeNpy(path, outputs[i].dtype, plan.outputs[i].shape, host.data(), error))
        return fail(path, error, 1);
    }
  }
  if (!options.logJson.empty()) {
    // One step a line, so long logs stay readable and diffable.
    std::string text = "{\n  \"format_version\": 1,\n  \"backend\": " +
                       nlohmann::json(backend.name()).dump() +
                       ",\n  \"batch_size\": " + std::to_string(batch) +
                       ",\n  \"grad_accum\": " + std::to_string(spec.gradAccum) +
                       ",\n  \"samples_per_second\": " + nlohmann::json(rate).dump() +
                       ",\n  \"seconds\": " + nlohmann::json(seconds).dump() +
                       ",\n  \"ranks\": " + std::to_string(communication->size()) +
                       ",\n  \"bytes_sent\": " + bytesSentJson(mesh, axes).dump() +
                       ",\n  \"steps\": [";
    for (size_t i = 0; i < records.size(); ++i) {
      nlohmann::ordered_json entry = {{"step", records[i].step}, {"loss", records[i].loss}};
      if (!spec.trainingInfo)
        entry["lr"] = records[i].lr;
      text += (i == 0 ? "\n    " : ",\n    ") + entry.dump();
    }
    text += "\n  ]\n}\n";
    if (!writeFileAtomically(options.logJson, {{text.data(), text.size()}}, error))
      return fail(options.logJson, error, 1);
  }
  return 0;
}

} // namespace cleave::rt
