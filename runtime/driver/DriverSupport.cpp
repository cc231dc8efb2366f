//===- DriverSupport.cpp - the plan and helpers both driver modes share --===//

#include "runtime/driver/DriverSupport.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <fcntl.h>
#include <unistd.h>
#include <iostream>

namespace cleave::rt {
namespace {

std::optional<DType> dtypeFromName(const std::string &name) {
  for (int i = 0; i <= static_cast<int>(DType::Bool); ++i)
    if (name == dtypeName(static_cast<DType>(i)))
      return static_cast<DType>(i);
  return std::nullopt;
}

int64_t elementCount(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::optional<size_t> indexOf(const std::vector<TensorSpec> &specs, const std::string &name) {
  for (size_t i = 0; i < specs.size(); ++i)
    if (specs[i].name == name)
      return i;
  return std::nullopt;
}

/// Reads plan.json's "mesh" object into `plan.mesh`.
bool readMesh(const nlohmann::json &json, Plan &plan, std::string &error) {
  if (!json.is_object() || !json.contains("axes") || !json["axes"].is_array() ||
      json["axes"].empty()) {
    error = "mesh: is not an object with a non-empty list of axes";
    return false;
  }
  MeshSpec mesh;
  for (const auto &axis : json["axes"]) {
    if (!axis.is_object() || !axis.contains("name") || !axis["name"].is_string() ||
        !axis.contains("size") || !axis["size"].is_number_integer() ||
        axis["size"].get<int64_t>() < 1) {
      error = "mesh.axes: " + axis.dump() + " is not {name, size >= 1}";
      return false;
    }
    mesh.axes.emplace_back(axis["name"].get<std::string>(), axis["size"].get<int>());
  }
  if (json.contains("deterministic")) {
    if (!json["deterministic"].is_boolean()) {
      error = "mesh.deterministic: is not true or false";
      return false;
    }
    mesh.deterministic = json["deterministic"].get<bool>();
  }
  plan.mesh = mesh;
  return true;
}

/// Reads the learning rate, its schedule `schedule` and warmup of plan.json's
/// "training" object into `spec`.
bool readSchedule(const nlohmann::json &json, const std::string &schedule, TrainingSpec &spec,
                  std::string &error) {
  if (!json.contains("lr") || !json["lr"].is_number() || !(json["lr"].get<double>() >= 0)) {
    error = "training.lr: is not a non-negative number";
    return false;
  }
  spec.lr = json["lr"].get<double>();
  if (schedule == "constant")
    spec.schedule = LrSchedule::Constant;
  else if (schedule == "linear")
    spec.schedule = LrSchedule::Linear;
  else if (schedule == "cosine")
    spec.schedule = LrSchedule::Cosine;
  else {
    error = "training.lr_schedule '" + schedule + "': is not constant, linear or cosine";
    return false;
  }
  if (json.contains("warmup")) {
    if (!json["warmup"].is_number_integer() || json["warmup"].get<int64_t>() < 0) {
      error = "training.warmup: is not a non-negative integer";
      return false;
    }
    spec.warmup = json["warmup"].get<int64_t>();
  }
  return true;
}

/// Reads plan.json's "training" object into `plan.training`.
bool readTraining(const nlohmann::json &json, Plan &plan, std::string &error) {
  if (!json.is_object()) {
    error = "training: is not an object";
    return false;
  }
  TrainingSpec spec;
  auto stringField = [&](const char *key, const char *fallback, std::string &out) {
    if (!json.contains(key)) {
      if (!fallback) {
        error = std::string("training.") + key + ": is missing";
        return false;
      }
      out = fallback;
      return true;
    }
    if (!json[key].is_string()) {
      error = std::string("training.") + key + ": is not a string";
      return false;
    }
    out = json[key].get<std::string>();
    return true;
  };
  std::string algorithm, schedule, lrName, stepName, lossName;
  if (!stringField("algorithm", "cleave", algorithm) ||
      !stringField("optimizer", "", spec.optimizer) ||
      !stringField("lr_schedule", "constant", schedule) ||
      !stringField("lr_input", "cleave.lr", lrName) ||
      !stringField("step_input", "cleave.step", stepName) ||
      !stringField("loss", nullptr, lossName))
    return false;
  if (algorithm != "cleave" && algorithm != "training_info") {
    error = "training.algorithm '" + algorithm + "': is not cleave or training_info";
    return false;
  }
  spec.trainingInfo = algorithm == "training_info";

  // A training_info step's learning rate and its schedule live in the graph.
  if (!spec.trainingInfo && !readSchedule(json, schedule, spec, error))
    return false;

  if (json.contains("grad_accum")) {
    if (!json["grad_accum"].is_number_integer() || json["grad_accum"].get<int64_t>() < 1) {
      error = "training.grad_accum: is not a positive integer";
      return false;
    }
    spec.gradAccum = json["grad_accum"].get<int64_t>();
  }
  if (spec.trainingInfo && spec.gradAccum != 1) {
    error = "training.grad_accum: a training_info step is one forward (grad_accum 1)";
    return false;
  }

  if (!json.contains("data_inputs") || !json["data_inputs"].is_array() ||
      json["data_inputs"].empty()) {
    error = "training.data_inputs: is not a non-empty list of input names";
    return false;
  }
  std::vector<bool> claimed(plan.inputs.size(), false);
  for (const auto &entry : json["data_inputs"]) {
    std::optional<size_t> index;
    if (entry.is_string())
      index = indexOf(plan.inputs, entry.get<std::string>());
    if (!index) {
      error = "training.data_inputs: " + entry.dump() + " is not one of the plan's inputs";
      return false;
    }
    if (claimed[*index]) {
      error = "training.data_inputs: '" + plan.inputs[*index].name + "' is listed twice";
      return false;
    }
    const TensorSpec &input = plan.inputs[*index];
    if (input.shape.empty() || input.shape[0] <= 0) {
      error = "training.data_inputs: '" + input.name + "' has no batch dimension (" +
              shapeText(input.shape) + ")";
      return false;
    }
    if (spec.dataInputs.empty())
      spec.microBatch = input.shape[0];
    else if (input.shape[0] != spec.microBatch) {
      error = "training.data_inputs: '" + plan.inputs[spec.dataInputs[0]].name + "' has batch " +
              std::to_string(spec.microBatch) + " but '" + input.name + "' has batch " +
              std::to_string(input.shape[0]);
      return false;
    }
    claimed[*index] = true;
    spec.dataInputs.push_back(*index);
  }
  auto scalarInput = [&](const char *key, const std::string &name, size_t &out) {
    std::optional<size_t> index = indexOf(plan.inputs, name);
    if (!index || claimed[*index] || plan.inputs[*index].dtype != DType::F32 ||
        elementCount(plan.inputs[*index].shape) != 1) {
      error = std::string("training.") + key + " '" + name +
              "': is not an f32 scalar input of its own";
      return false;
    }
    claimed[*index] = true;
    out = *index;
    return true;
  };
  if (!spec.trainingInfo && (!scalarInput("lr_input", lrName, spec.lrInput) ||
                             !scalarInput("step_input", stepName, spec.stepInput)))
    return false;
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    if (!claimed[i]) {
      error = "training: input '" + plan.inputs[i].name +
              (spec.trainingInfo ? "' is not a data input"
                                 : "' is neither a data input nor the learning rate or step");
      return false;
    }
  }
  std::optional<size_t> loss = indexOf(plan.outputs, lossName);
  if (!loss ||
      (plan.outputs[*loss].dtype != DType::F32 && plan.outputs[*loss].dtype != DType::F64) ||
      elementCount(plan.outputs[*loss].shape) != 1) {
    error = "training.loss '" + lossName + "': is not a scalar f32 or f64 output";
    return false;
  }
  spec.lossOutput = *loss;
  spec.batchSize = spec.microBatch * spec.gradAccum;
  plan.training = spec;
  return true;
}

} // namespace

int fail(const std::string &where, const std::string &what, int code, const std::string &note) {
  std::cerr << "cleave: error: " << where << ": " << what << "\n";
  if (!note.empty())
    std::cerr << "note: " << note << "\n";
  return code;
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
  if (json.contains("training") && !readTraining(json["training"], plan, error))
    return false;
  if (json.contains("mesh") && !readMesh(json["mesh"], plan, error))
    return false;
  return true;
}

int loadWeights(const std::string &dir, const Plan &plan, std::vector<char> &weights) {
  weights.assign(static_cast<size_t>(plan.weightsBytes), 0);
  std::ifstream in(dir + "/" + plan.weightsFile, std::ios::binary | std::ios::ate);
  if (!in || in.tellg() != plan.weightsBytes)
    return fail(dir + "/" + plan.weightsFile,
                "missing or not " + std::to_string(plan.weightsBytes) + " bytes", 1,
                "recompile the model with cleave compile");
  in.seekg(0);
  in.read(weights.data(), plan.weightsBytes);
  return 0;
}

StderrSilencer::StderrSilencer(bool silence) {
  if (!silence)
    return;
  std::fflush(stderr);
  saved = dup(STDERR_FILENO);
  int null = open("/dev/null", O_WRONLY);
  if (saved < 0 || null < 0) {
    if (null >= 0)
      close(null);
    return;
  }
  dup2(null, STDERR_FILENO);
  close(null);
}

void StderrSilencer::restore() {
  if (saved < 0)
    return;
  std::fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  saved = -1;
}

bool canCreate(const std::string &path, std::string &error) {
  std::string temporary = path + ".partial";
  std::FILE *file = std::fopen(temporary.c_str(), "wb");
  if (!file) {
    error = "cannot write: " + std::string(std::strerror(errno));
    return false;
  }
  std::fclose(file);
  std::remove(temporary.c_str());
  return true;
}

Tensor tensorAt(void *data, const TensorSpec &spec) {
  Tensor t{data, spec.dtype, {}};
  for (int64_t d : spec.shape)
    t.shape[t.shape.size++] = d;
  return t;
}

} // namespace cleave::rt
