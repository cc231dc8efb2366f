//===- Driver.cpp - the main of every generated program ------------------===//

#include "runtime/driver/Driver.h"

#include "runtime/Npy.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

namespace cleave::rt {
namespace {

/// The byte pattern the arena holds before a run; what differs afterwards was
/// written by a kernel, which measures the arena actually used.
constexpr unsigned char kSentinel = 0xA5;

struct TensorSpec {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};

struct Plan {
  std::vector<TensorSpec> inputs, outputs;
  int64_t arenaBytes = 0;
  int64_t weightsBytes = 0;
  std::string weightsFile;
};

int fail(const std::string &where, const std::string &what, int code,
         const std::string &note = "") {
  std::cerr << "cleave: error: " << where << ": " << what << "\n";
  if (!note.empty())
    std::cerr << "note: " << note << "\n";
  return code;
}

std::optional<DType> dtypeFromName(const std::string &name) {
  for (int i = 0; i <= static_cast<int>(DType::Bool); ++i)
    if (name == dtypeName(static_cast<DType>(i)))
      return static_cast<DType>(i);
  return std::nullopt;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  if (shape.empty())
    return "scalar";
  std::string text;
  for (int64_t d : shape)
    text += (text.empty() ? "" : "x") + std::to_string(d);
  return text;
}

bool readPlan(const std::string &path, Plan &plan, std::string &error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot open";
    return false;
  }
  nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  auto has = [&](const char *key, nlohmann::json::value_t type) {
    return json.contains(key) && json[key].type() == type;
  };
  using Type = nlohmann::json::value_t;
  if (json.is_discarded() || !json.is_object() || json.value("format_version", 0) != 1 ||
      !has("inputs", Type::array) || !has("outputs", Type::array) ||
      !has("arena", Type::object) || !has("weights", Type::object)) {
    error = "not a format_version 1 plan";
    return false;
  }
  auto specs = [&](const nlohmann::json &list, std::vector<TensorSpec> &out) {
    for (const auto &entry : list) {
      if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
          !entry.contains("dtype") || !entry["dtype"].is_string() ||
          !entry.contains("shape") || !entry["shape"].is_array())
        return false;
      auto dtype = dtypeFromName(entry["dtype"].get<std::string>());
      if (!dtype)
        return false;
      TensorSpec spec{entry["name"].get<std::string>(), *dtype, {}};
      for (const auto &d : entry["shape"]) {
        if (!d.is_number_integer())
          return false;
        spec.shape.push_back(d.get<int64_t>());
      }
      out.push_back(spec);
    }
    return true;
  };
  const auto &arena = json["arena"];
  const auto &weights = json["weights"];
  if (!specs(json["inputs"], plan.inputs) || !specs(json["outputs"], plan.outputs) ||
      !arena.contains("bytes") || !arena["bytes"].is_number_integer() ||
      !weights.contains("bytes") || !weights["bytes"].is_number_integer() ||
      !weights.contains("file") || !weights["file"].is_string()) {
    error = "is malformed (recompile the model with cleave compile)";
    return false;
  }
  plan.arenaBytes = arena["bytes"].get<int64_t>();
  plan.weightsBytes = weights["bytes"].get<int64_t>();
  plan.weightsFile = weights["file"].get<std::string>();
  return true;
}

/// Device memory owned for the length of the run.
class Buffer {
public:
  Buffer(Backend &backend, std::size_t bytes)
      : backend(backend), memory(static_cast<char *>(backend.allocate(bytes))) {}
  ~Buffer() { backend.release(memory); }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  char *get() const { return memory; }

private:
  Backend &backend;
  char *memory;
};

} // namespace

int runDriver(int argc, char **argv, Backend &backend) {
  CLI::App app{"Runs a model compiled by cleave (one forward pass)"};
  std::string dir = ".", outputDir;
  std::vector<std::string> inputFlags;
  int threads = 1, repeat = 1;
  bool stats = false;
  app.add_option("--dir", dir, "The compiled model directory (plan.json, weights.bin)");
  app.add_option("--input", inputFlags, "NAME=FILE.npy for each model input");
  app.add_option("--output-dir", outputDir, "Write each output as NAME.npy here");
  app.add_option("--threads", threads, "Threads for the BLAS kernels")->check(CLI::PositiveNumber);
  app.add_option("--repeat", repeat, "Run the forward this many times (timing)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--stats", stats, "Print measurements as one JSON line on stdout");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    return fail("usage", e.what(), 2, "see --help");
  }

  Plan plan;
  std::string error;
  if (!readPlan(dir + "/plan.json", plan, error))
    return fail(dir + "/plan.json", error, 1);

  std::map<std::string, std::string> inputFiles;
  for (const std::string &flag : inputFlags) {
    size_t eq = flag.find('=');
    if (eq == std::string::npos || eq == 0)
      return fail("--input '" + flag + "'", "expected NAME=FILE.npy", 2);
    std::string name = flag.substr(0, eq);
    bool known = std::any_of(plan.inputs.begin(), plan.inputs.end(),
                             [&](const TensorSpec &s) { return s.name == name; });
    if (!known) {
      std::string names;
      for (const TensorSpec &s : plan.inputs)
        names += (names.empty() ? "" : ", ") + s.name;
      return fail("--input '" + flag + "'", "the model has no input '" + name + "'", 1,
                  "its inputs are: " + names);
    }
    inputFiles[name] = flag.substr(eq + 1);
  }

  std::vector<NpyArray> hostInputs(plan.inputs.size());
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    const TensorSpec &spec = plan.inputs[i];
    auto file = inputFiles.find(spec.name);
    if (file == inputFiles.end())
      return fail("input '" + spec.name + "'", "is missing", 1,
                  "pass --input " + spec.name + "=FILE.npy (" + dtypeName(spec.dtype) + ", " +
                      shapeText(spec.shape) + ")");
    NpyArray &array = hostInputs[i];
    if (!readNpy(file->second, array, error))
      return fail("input '" + spec.name + "' (" + file->second + ")", error, 1);
    if (array.dtype != spec.dtype || array.shape != spec.shape)
      return fail("input '" + spec.name + "' (" + file->second + ")",
                  std::string("is ") + dtypeName(array.dtype) + " " + shapeText(array.shape) +
                      ", the model takes " + dtypeName(spec.dtype) + " " + shapeText(spec.shape),
                  1);
  }

  std::vector<char> hostWeights(static_cast<size_t>(plan.weightsBytes));
  {
    std::ifstream in(dir + "/" + plan.weightsFile, std::ios::binary | std::ios::ate);
    if (!in || in.tellg() != plan.weightsBytes)
      return fail(dir + "/" + plan.weightsFile, "missing or not " +
                                                    std::to_string(plan.weightsBytes) + " bytes",
                  1, "recompile the model with cleave compile");
    in.seekg(0);
    in.read(hostWeights.data(), plan.weightsBytes);
  }

  backend.setThreads(threads);
  Buffer weights(backend, hostWeights.size());
  backend.copyToDevice(weights.get(), hostWeights.data(), hostWeights.size());
  std::vector<std::unique_ptr<Buffer>> inputBuffers;
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    inputBuffers.push_back(std::make_unique<Buffer>(backend, hostInputs[i].data.size()));
    backend.copyToDevice(inputBuffers.back()->get(), hostInputs[i].data.data(),
                         hostInputs[i].data.size());
    Tensor t{inputBuffers.back()->get(), plan.inputs[i].dtype, {}};
    for (int64_t d : plan.inputs[i].shape)
      t.shape[t.shape.size++] = d;
    inputs.push_back(t);
  }

  std::size_t arenaBytes = static_cast<std::size_t>(plan.arenaBytes);
  Buffer arena(backend, arenaBytes);
  std::vector<char> pattern(arenaBytes, static_cast<char>(kSentinel));
  backend.copyToDevice(arena.get(), pattern.data(), arenaBytes);

  std::vector<Tensor> outputs(plan.outputs.size());
  std::vector<double> seconds;
  for (int r = 0; r < repeat; ++r) {
    auto start = std::chrono::steady_clock::now();
    backend.forward(arena.get(), weights.get(), inputs.data(), outputs.data());
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }

  // The highest arena byte any kernel changed.
  std::vector<char> after(arenaBytes);
  backend.copyToHost(after.data(), arena.get(), arenaBytes);
  std::size_t touched = arenaBytes;
  while (touched > 0 && static_cast<unsigned char>(after[touched - 1]) == kSentinel)
    --touched;

  if (!outputDir.empty()) {
    for (size_t i = 0; i < outputs.size(); ++i) {
      std::vector<char> host(outputs[i].bytes());
      backend.copyToHost(host.data(), outputs[i].data, host.size());
      std::string path = outputDir + "/" + npyFileName(plan.outputs[i].name);
      if (!writeNpy(path, outputs[i].dtype, plan.outputs[i].shape, host.data(), error))
        return fail(path, error, 1);
    }
  }
  if (stats) {
    nlohmann::json report = {
        {"format_version", 1},
        {"backend", backend.name()},
        {"arena_bytes_planned", plan.arenaBytes},
        {"arena_bytes_touched", touched},
        {"runs", repeat},
        {"seconds_min", *std::min_element(seconds.begin(), seconds.end())},
        {"seconds_mean", [&] {
           double total = 0;
           for (double s : seconds)
             total += s;
           return total / seconds.size();
         }()}};
    std::cout << report.dump() << std::endl;
  }
  return 0;
}

} // namespace cleave::rt
