//===- Plan.cpp - plan.json written and read -----------------------------===//

#include "runtime/Plan.h"

#include "runtime/Files.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <tuple>

namespace cleave::rt {
namespace {

using Json = nlohmann::json;

const char *roleName(StoredRole role) {
  switch (role) {
  case StoredRole::Parameter:
    return "parameter";
  case StoredRole::Accumulator:
    return "accumulator";
  case StoredRole::OptimizerState:
    return "optimizer_state";
  case StoredRole::Coordinate:
    return "coordinate";
  case StoredRole::ModelState:
    return "model_state";
  case StoredRole::WeightCopy:
    return "weight_copy";
  }
  return "parameter";
}

const char *scheduleName(LrSchedule schedule) {
  switch (schedule) {
  case LrSchedule::Constant:
    return "constant";
  case LrSchedule::Linear:
    return "linear";
  case LrSchedule::Cosine:
    return "cosine";
  }
  return "constant";
}

/// The product of `shape`, or nullopt past INT64_MAX / 16 (no real tensor
/// is that large, and byte counts stay representable).
std::optional<int64_t> elementCount(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && n > std::numeric_limits<int64_t>::max() / 16 / d))
      return std::nullopt;
    n *= d;
  }
  return n;
}

std::optional<size_t> indexOf(const std::vector<TensorSpec> &specs, const std::string &name) {
  for (size_t i = 0; i < specs.size(); ++i)
    if (specs[i].name == name)
      return i;
  return std::nullopt;
}

/// Whether `local` has as many elements as one rank's share of `sharding`.
bool holdsItsShare(const Sharding &sharding, const TensorSpec &local, const Mesh &mesh) {
  int64_t elements = *elementCount(sharding.globalShape);
  if (sharding.split)
    elements /= mesh.shape[mesh.axisIndex(sharding.split->axis)];
  if (sharding.slices)
    return sharding.slices->elements == elements &&
           local.shape == std::vector<int64_t>{sharding.slices->slice} &&
           sharding.slices->slice * mesh.shape[mesh.axisIndex(sharding.slices->axis)] >= elements;
  return *elementCount(local.shape) == elements;
}

//===--- writing ----------------------------------------------------------===//

Json tensorJson(const TensorSpec &spec) {
  Json json = {{"name", spec.name}, {"dtype", dtypeName(spec.dtype)}, {"shape", spec.shape}};
  if (const std::optional<IndexRange> &range = spec.indexRange) {
    json["index_range"] = {{"low", range->low}, {"high", range->high}, {"reader", range->reader}};
    if (range->ignored)
      json["index_range"]["ignored"] = *range->ignored;
  }
  return json;
}

Json boxJson(const Box &box) { return {{"offset", box.offset}, {"shape", box.shape}}; }

Json storedJson(const StoredTensor &stored, const Plan &plan) {
  Json entry = tensorJson(stored.tensor);
  entry["offset"] = stored.offset;
  entry["bytes"] = stored.bytes;
  entry["role"] = roleName(stored.role);
  if (!stored.stateOf.empty())
    entry["state_of"] = stored.stateOf;
  if (!stored.sharding)
    return entry;
  const Sharding &sharding = *stored.sharding;
  entry["global_shape"] = sharding.globalShape;
  if (const auto &split = sharding.split) {
    entry["split"] = {{"dim", split->dim}, {"blocks", split->blocks}, {"axis", split->axis}};
    // What each rank of the axis holds, in global offsets (derived: for
    // readers other than cleave).
    int64_t ranks = plan.mesh ? plan.mesh->shape[plan.mesh->axisIndex(split->axis)] : 1;
    Json shards = Json::array();
    for (int64_t r = 0; r < ranks; ++r) {
      Json boxes = Json::array();
      for (const Box &box : splitBoxes(sharding.globalShape, *split, ranks, r))
        boxes.push_back(boxJson(box));
      shards.push_back({{split->axis, r}, {"boxes", boxes}});
    }
    entry["shards"] = shards;
  }
  if (const auto &slices = sharding.slices)
    entry["zero3"] = {
        {"axis", slices->axis}, {"elements", slices->elements}, {"slice", slices->slice}};
  return entry;
}

Json trainingJson(const TrainingSpec &t, const Plan &plan) {
  Json dataInputs = Json::array();
  for (size_t index : t.dataInputs)
    dataInputs.push_back(plan.inputs[index].name);
  Json training = {{"data_inputs", dataInputs},
                   {"grad_accum", t.gradAccum},
                   {"loss", plan.outputs[t.lossOutput].name}};
  if (t.trainingInfo) {
    Json updates = Json::array();
    for (const auto &[initializer, value] : t.updateBinding)
      updates.push_back({{"initializer", initializer}, {"value", value}});
    training["algorithm"] = "training_info";
    training["update_binding"] = updates;
    return training;
  }
  const Hyperparameters &h = t.hyperparameters;
  training["algorithm"] = "cleave";
  training["optimizer"] = t.optimizer;
  training["lr"] = t.lr;
  training["lr_schedule"] = scheduleName(t.schedule);
  training["warmup"] = t.warmup;
  training["hyperparameters"] = {{"beta1", h.beta1},
                                 {"beta2", h.beta2},
                                 {"eps", h.eps},
                                 {"weight_decay", h.weightDecay},
                                 {"momentum", h.momentum},
                                 {"nesterov", h.nesterov},
                                 {"clip_grad_norm", h.clipGradNorm}};
  training["lr_input"] = plan.inputs[t.lrInput].name;
  training["step_input"] = plan.inputs[t.stepInput].name;
  if (t.gradNormOutput)
    training["grad_norm_output"] = plan.outputs[*t.gradNormOutput].name;
  if (const auto &p = t.pipeline) {
    Json actions = Json::array(), stash = Json::array();
    // "F3", or on a rank that runs several stages "F3@5": the stage too.
    const bool stagesNamed = p->rankStages().size() > 1;
    for (const PipelineSpec::Action &action : p->actions)
      actions.push_back(action.kind + std::to_string(action.microbatch) +
                        (stagesNamed ? "@" + std::to_string(action.stage) : ""));
    for (auto [output, input] : p->stash)
      stash.push_back(plan.outputs[output].name);
    Json receives = Json::object();
    for (const auto &[function, list] : p->receives)
      for (const PipelineSpec::Receive &r : list)
        receives[function].push_back({{"peer", r.peer},
                                      {"tag", r.tag},
                                      {"dtype", dtypeName(r.dtype)},
                                      {"elements", r.elements}});
    training["pipeline"] = {{"stage", p->stage},        {"stages", p->stages},
                            {"schedule", p->schedule},  {"actions", actions},
                            {"in_flight", p->inFlight}, {"stash", stash},
                            {"receives", receives}};
  }
  for (auto [key, started] : TrainingSpec::startedByKey(t))
    if (*started)
      training[key] = {{"axis", (*started)->axis}, {"bytes", (*started)->bytes}};
  if (t.narrowWeightsOnce)
    training["narrow_weights_once"] = true;
  if (const auto &scaling = t.lossScaling)
    training["loss_scaling"] = {{"initial_scale", scaling->initialScale},
                                {"growth_interval", scaling->growthInterval},
                                {"growth_factor", scaling->growthFactor},
                                {"backoff_factor", scaling->backoffFactor},
                                {"scale_output", plan.outputs[scaling->scaleOutput].name},
                                {"skipped_output", plan.outputs[scaling->skippedOutput].name}};
  return training;
}

//===--- reading ----------------------------------------------------------===//

/// Reads the fields of plan.json, recording the first one that is missing
/// or malformed as "PATH: is not WHAT".
class Reader {
public:
  explicit Reader(std::string &error) : error(error) {}

  bool fail(const std::string &path, const std::string &what) {
    if (error.empty())
      error = path + ": " + what;
    return false;
  }
  const Json *field(const Json &object, const std::string &path, const char *key,
                    bool optional = false) {
    if (object.is_object() && object.contains(key))
      return &object[key];
    if (!optional)
      fail(path + key, "is missing");
    return nullptr;
  }
  /// Reads `key` of `object` into `out` if it `holds` a value of the kind
  /// `what` names.
  template <typename T, typename Holds>
  bool value(const Json &object, const std::string &path, const char *key, T &out, Holds holds,
             const std::string &what, bool optional) {
    const Json *found = field(object, path, key, optional);
    if (!found)
      return optional;
    if (!holds(*found))
      return fail(path + key, "is not " + what);
    out = found->get<T>();
    return true;
  }
  bool integer(const Json &object, const std::string &path, const char *key, int64_t &out,
               int64_t min = 0, bool optional = false) {
    auto holds = [&](const Json &v) { return v.is_number_integer() && v.get<int64_t>() >= min; };
    return value(object, path, key, out, holds, "an integer >= " + std::to_string(min), optional);
  }
  bool number(const Json &object, const std::string &path, const char *key, double &out,
              bool optional = false) {
    auto holds = [](const Json &v) { return v.is_number(); };
    return value(object, path, key, out, holds, "a number", optional);
  }
  bool boolean(const Json &object, const std::string &path, const char *key, bool &out,
               bool optional = false) {
    auto holds = [](const Json &v) { return v.is_boolean(); };
    return value(object, path, key, out, holds, "true or false", optional);
  }
  bool string(const Json &object, const std::string &path, const char *key, std::string &out,
              bool optional = false) {
    auto holds = [](const Json &v) { return v.is_string(); };
    return value(object, path, key, out, holds, "a string", optional);
  }
  bool shape(const Json &object, const std::string &path, const char *key,
             std::vector<int64_t> &out) {
    const Json *value = field(object, path, key);
    if (!value)
      return false;
    if (!value->is_array())
      return fail(path + key, "is not a list of dims");
    out.clear();
    for (const Json &d : *value) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        return fail(path + key, "is not a list of dims >= 0");
      out.push_back(d.get<int64_t>());
    }
    if (!elementCount(out))
      return fail(path + key, "is too large");
    return true;
  }
  const Json *list(const Json &object, const std::string &path, const char *key,
                   bool optional = false) {
    const Json *value = field(object, path, key, optional);
    if (value && !value->is_array()) {
      fail(path + key, "is not a list");
      return nullptr;
    }
    return value;
  }
  bool tensor(const Json &entry, const std::string &path, TensorSpec &spec) {
    std::string dtype;
    if (!string(entry, path, "name", spec.name) || !string(entry, path, "dtype", dtype) ||
        !shape(entry, path, "shape", spec.shape))
      return false;
    if (!dtypeFromName(dtype, spec.dtype))
      return fail(path + "dtype", "'" + dtype + "' is not an element type");
    const Json *range = field(entry, path, "index_range", /*optional=*/true);
    if (!range)
      return true;
    IndexRange &r = spec.indexRange.emplace();
    const std::string at = path + "index_range.";
    constexpr int64_t anything = std::numeric_limits<int64_t>::min();
    int64_t ignored = 0;
    if (!integer(*range, at, "low", r.low, anything) ||
        !integer(*range, at, "high", r.high, anything) || !string(*range, at, "reader", r.reader))
      return false;
    if (range->contains("ignored")) {
      if (!integer(*range, at, "ignored", ignored, anything))
        return false;
      r.ignored = ignored;
    }
    if (r.low > r.high)
      return fail(at + "high", "is below low");
    return true;
  }
  bool tensors(const Json &plan, const char *key, std::vector<TensorSpec> &out) {
    const Json *entries = list(plan, "", key);
    if (!entries)
      return false;
    for (size_t i = 0; i < entries->size(); ++i) {
      TensorSpec spec;
      if (!tensor((*entries)[i], std::string(key) + "[" + std::to_string(i) + "].", spec))
        return false;
      out.push_back(spec);
    }
    return true;
  }

  bool mesh(const Json &json, Plan &plan);
  bool sharding(const Json &entry, const std::string &path, const Plan &plan,
                std::optional<Sharding> &out);
  bool stored(const Json &plan, const char *key, Plan &into, std::vector<StoredTensor> &out);
  /// One stored tensor; `placed`: with its offset and bytes in the blob.
  bool storedEntry(const Json &entry, const std::string &path, const Plan &plan, bool placed,
                   StoredTensor &stored);
  bool flatBuffer(const Json &json, Plan &plan);
  bool schedule(const Json &json, TrainingSpec &spec);
  bool training(const Json &json, Plan &plan);
  /// training.gradient_buckets, prefetched_gathers or
  /// overlapped_reduce_scatters (`key`).
  bool startedCollectives(const Json &json, const std::string &key, const Plan &plan,
                          std::optional<TrainingSpec::StartedCollectives> &started);
  bool lossScaling(const Json &json, const Plan &plan, TrainingSpec &spec);
  /// training.pipeline, with the inputs it claims (the stash).
  bool pipeline(const Json &json, const Plan &plan, TrainingSpec &spec,
                std::vector<bool> &claimed);

private:
  std::string &error;
};

bool Reader::mesh(const Json &json, Plan &plan) {
  const Json *axes = list(json, "mesh.", "axes");
  if (!axes)
    return false;
  if (axes->empty())
    return fail("mesh.axes", "is empty");
  Mesh mesh;
  for (size_t i = 0; i < axes->size(); ++i) {
    std::string path = "mesh.axes[" + std::to_string(i) + "].", name;
    int64_t size = 0;
    if (!string((*axes)[i], path, "name", name) || !integer((*axes)[i], path, "size", size, 1))
      return false;
    if (size > std::numeric_limits<int>::max() || mesh.axisIndex(name) >= 0)
      return fail(path + "name", "'" + name + "' is named twice or too large");
    mesh.axisNames.push_back(name);
    mesh.shape.push_back(static_cast<int>(size));
  }
  plan.mesh = mesh;
  return boolean(json, "mesh.", "deterministic", plan.deterministic, /*optional=*/true);
}

bool Reader::sharding(const Json &entry, const std::string &path, const Plan &plan,
                      std::optional<Sharding> &out) {
  if (!entry.contains("global_shape"))
    return true;
  Sharding sharding;
  if (!shape(entry, path, "global_shape", sharding.globalShape))
    return false;
  auto axisOf = [&](const Json &object, const std::string &at, std::string &axis) {
    if (!string(object, at, "axis", axis))
      return false;
    if (!plan.mesh || plan.mesh->axisIndex(axis) < 0)
      return fail(at + "axis", "'" + axis + "' is not an axis of the plan's mesh");
    return true;
  };
  if (const Json *split = field(entry, path, "split", /*optional=*/true)) {
    DimSplit dims;
    std::string at = path + "split.";
    if (!integer(*split, at, "dim", dims.dim) || !integer(*split, at, "blocks", dims.blocks, 1) ||
        !axisOf(*split, at, dims.axis))
      return false;
    int64_t rank = static_cast<int64_t>(sharding.globalShape.size());
    int64_t ranks = plan.mesh->shape[plan.mesh->axisIndex(dims.axis)];
    if (dims.dim >= rank || sharding.globalShape[dims.dim] % (dims.blocks * ranks) != 0)
      return fail(at + "dim", "does not split global_shape into blocks x ranks equal parts");
    sharding.split = dims;
  }
  if (const Json *zero3 = field(entry, path, "zero3", /*optional=*/true)) {
    FlatSlices slices;
    std::string at = path + "zero3.";
    if (!integer(*zero3, at, "elements", slices.elements) ||
        !integer(*zero3, at, "slice", slices.slice, 1) || !axisOf(*zero3, at, slices.axis))
      return false;
    sharding.slices = slices;
  }
  out = sharding;
  return true;
}

bool Reader::stored(const Json &json, const char *key, Plan &plan, std::vector<StoredTensor> &out) {
  const Json *entries = list(json, "", key, /*optional=*/true);
  if (!entries)
    return error.empty();
  for (size_t i = 0; i < entries->size(); ++i) {
    StoredTensor stored;
    if (!storedEntry((*entries)[i], std::string(key) + "[" + std::to_string(i) + "].", plan,
                     /*placed=*/true, stored))
      return false;
    out.push_back(std::move(stored));
  }
  return true;
}

bool Reader::storedEntry(const Json &entry, const std::string &path, const Plan &plan, bool placed,
                         StoredTensor &stored) {
  std::string role = "parameter";
  if (!tensor(entry, path, stored.tensor) ||
      !string(entry, path, "role", role, /*optional=*/true) ||
      !string(entry, path, "state_of", stored.stateOf, /*optional=*/true) ||
      !sharding(entry, path, plan, stored.sharding))
    return false;
  const int64_t bytes =
      *elementCount(stored.tensor.shape) * static_cast<int64_t>(dtypeSize(stored.tensor.dtype));
  if (placed) {
    if (!integer(entry, path, "offset", stored.offset) ||
        !integer(entry, path, "bytes", stored.bytes))
      return false;
    if (stored.bytes != bytes)
      return fail(path + "bytes", "does not match its shape and dtype");
    if (stored.offset > plan.weightsBytes || stored.bytes > plan.weightsBytes - stored.offset)
      return fail(path + "offset", "lies outside the weights blob");
  } else {
    stored.bytes = bytes;
  }
  if (stored.sharding && !holdsItsShare(*stored.sharding, stored.tensor, *plan.mesh))
    return fail(path + "shape", "is not this rank's share of global_shape");
  for (StoredRole r : {StoredRole::Parameter, StoredRole::Accumulator, StoredRole::OptimizerState,
                       StoredRole::Coordinate, StoredRole::ModelState, StoredRole::WeightCopy})
    if (role == roleName(r)) {
      stored.role = r;
      return true;
    }
  return fail(path + "role", "'" + role + "' is not a role of a stored tensor");
}

bool Reader::flatBuffer(const Json &json, Plan &plan) {
  FlatBuffer flat;
  const Json *members = list(json, "flat_parameters.", "members");
  if (!string(json, "flat_parameters.", "name", flat.name) || !members)
    return false;
  const Json *slices = field(json, "flat_parameters.", "slices");
  if (!slices || !string(*slices, "flat_parameters.slices.", "axis", flat.slices.axis) ||
      !integer(*slices, "flat_parameters.slices.", "elements", flat.slices.elements) ||
      !integer(*slices, "flat_parameters.slices.", "slice", flat.slices.slice, 1))
    return false;
  for (size_t i = 0; i < members->size(); ++i) {
    std::string path = "flat_parameters.members[" + std::to_string(i) + "].";
    FlatBuffer::Member member;
    if (!string((*members)[i], path, "name", member.name) ||
        !integer((*members)[i], path, "offset", member.offset) ||
        !integer((*members)[i], path, "elements", member.elements))
      return false;
    flat.members.push_back(member);
  }
  plan.flatBuffers.push_back(flat);
  return true;
}

bool Reader::schedule(const Json &json, TrainingSpec &spec) {
  std::string schedule = "constant";
  if (!number(json, "training.", "lr", spec.lr) ||
      !string(json, "training.", "lr_schedule", schedule, /*optional=*/true) ||
      !integer(json, "training.", "warmup", spec.warmup, 0, /*optional=*/true))
    return false;
  if (!(spec.lr >= 0))
    return fail("training.lr", "is not a non-negative number");
  if (schedule == "constant")
    spec.schedule = LrSchedule::Constant;
  else if (schedule == "linear")
    spec.schedule = LrSchedule::Linear;
  else if (schedule == "cosine")
    spec.schedule = LrSchedule::Cosine;
  else
    return fail("training.lr_schedule '" + schedule + "'", "is not constant, linear or cosine");
  const Json *h = field(json, "training.", "hyperparameters", /*optional=*/true);
  if (!h)
    return true;
  Hyperparameters &p = spec.hyperparameters;
  const std::string at = "training.hyperparameters.";
  return number(*h, at, "beta1", p.beta1, true) && number(*h, at, "beta2", p.beta2, true) &&
         number(*h, at, "eps", p.eps, true) &&
         number(*h, at, "weight_decay", p.weightDecay, true) &&
         number(*h, at, "momentum", p.momentum, true) &&
         boolean(*h, at, "nesterov", p.nesterov, true) &&
         number(*h, at, "clip_grad_norm", p.clipGradNorm, true);
}

bool Reader::training(const Json &json, Plan &plan) {
  if (!json.is_object())
    return fail("training", "is not an object");
  TrainingSpec spec;
  std::string algorithm = "cleave", lrName = "cleave.lr", stepName = "cleave.step", lossName;
  if (!string(json, "training.", "algorithm", algorithm, true) ||
      !string(json, "training.", "optimizer", spec.optimizer, true) ||
      !string(json, "training.", "lr_input", lrName, true) ||
      !string(json, "training.", "step_input", stepName, true) ||
      !string(json, "training.", "loss", lossName) ||
      !integer(json, "training.", "grad_accum", spec.gradAccum, 1, true))
    return false;
  if (algorithm != "cleave" && algorithm != "training_info")
    return fail("training.algorithm '" + algorithm + "'", "is not cleave or training_info");
  spec.trainingInfo = algorithm == "training_info";
  // A training_info step's learning rate and its schedule live in the graph.
  if (!spec.trainingInfo && !schedule(json, spec))
    return false;
  if (spec.trainingInfo && spec.gradAccum != 1)
    return fail("training.grad_accum", "a training_info step is one forward (grad_accum 1)");
  if (const Json *updates = list(json, "training.", "update_binding", true)) {
    for (size_t i = 0; i < updates->size(); ++i) {
      std::string path = "training.update_binding[" + std::to_string(i) + "].", key, value;
      if (!string((*updates)[i], path, "initializer", key) ||
          !string((*updates)[i], path, "value", value))
        return false;
      spec.updateBinding.emplace_back(key, value);
    }
  } else if (!error.empty()) {
    return false;
  }

  const Json *data = list(json, "training.", "data_inputs");
  if (!data)
    return false;
  if (data->empty())
    return fail("training.data_inputs", "is not a non-empty list of input names");
  std::vector<bool> claimed(plan.inputs.size(), false);
  for (const Json &entry : *data) {
    std::optional<size_t> index;
    if (entry.is_string())
      index = indexOf(plan.inputs, entry.get<std::string>());
    if (!index)
      return fail("training.data_inputs", entry.dump() + " is not one of the plan's inputs");
    if (claimed[*index])
      return fail("training.data_inputs", "'" + plan.inputs[*index].name + "' is listed twice");
    const TensorSpec &input = plan.inputs[*index];
    if (input.shape.empty() || input.shape[0] <= 0)
      return fail("training.data_inputs",
                  "'" + input.name + "' has no batch dimension (" + shapeText(input.shape) + ")");
    if (spec.dataInputs.empty())
      spec.microBatch = input.shape[0];
    else if (input.shape[0] != spec.microBatch)
      return fail("training.data_inputs", "'" + plan.inputs[spec.dataInputs[0]].name +
                                              "' has batch " + std::to_string(spec.microBatch) +
                                              " but '" + input.name + "' has batch " +
                                              std::to_string(input.shape[0]));
    claimed[*index] = true;
    spec.dataInputs.push_back(*index);
  }
  auto scalarInput = [&](const char *key, const std::string &name, size_t &out) {
    std::optional<size_t> index = indexOf(plan.inputs, name);
    if (!index || claimed[*index] || plan.inputs[*index].dtype != DType::F32 ||
        *elementCount(plan.inputs[*index].shape) != 1)
      return fail(std::string("training.") + key + " '" + name + "'",
                  "is not an f32 scalar input of its own");
    claimed[*index] = true;
    out = *index;
    return true;
  };
  if (!spec.trainingInfo && (!scalarInput("lr_input", lrName, spec.lrInput) ||
                             !scalarInput("step_input", stepName, spec.stepInput)))
    return false;
  if (json.contains("pipeline") && !pipeline(json["pipeline"], plan, spec, claimed))
    return false;
  for (auto [key, started] : TrainingSpec::startedByKey(spec))
    if (json.contains(key) && !startedCollectives(json[key], key, plan, *started))
      return false;
  if (json.contains("loss_scaling") && !lossScaling(json["loss_scaling"], plan, spec))
    return false;
  if (!boolean(json, "training.", "narrow_weights_once", spec.narrowWeightsOnce, true))
    return false;
  for (size_t i = 0; i < plan.inputs.size(); ++i)
    if (!claimed[i])
      return fail("training",
                  "input '" + plan.inputs[i].name +
                      (spec.trainingInfo
                           ? "' is not a data input"
                           : "' is neither a data input nor the learning rate or step"));
  std::optional<size_t> loss = indexOf(plan.outputs, lossName);
  if (!loss ||
      (plan.outputs[*loss].dtype != DType::F32 && plan.outputs[*loss].dtype != DType::F64) ||
      *elementCount(plan.outputs[*loss].shape) != 1)
    return fail("training.loss '" + lossName + "'", "is not a scalar f32 or f64 output");
  spec.lossOutput = *loss;
  if (json.contains("grad_norm_output")) {
    std::string name;
    if (!string(json, "training.", "grad_norm_output", name))
      return false;
    std::optional<size_t> norm = indexOf(plan.outputs, name);
    if (!norm || plan.outputs[*norm].dtype != DType::F32 ||
        *elementCount(plan.outputs[*norm].shape) != 1)
      return fail("training.grad_norm_output '" + name + "'", "is not a scalar f32 output");
    spec.gradNormOutput = *norm;
  }
  spec.batchSize = spec.microBatch * spec.gradAccum;
  plan.training = spec;
  return true;
}

bool Reader::lossScaling(const Json &json, const Plan &plan, TrainingSpec &spec) {
  const std::string at = "training.loss_scaling.";
  if (!json.is_object())
    return fail("training.loss_scaling", "is not an object");
  TrainingSpec::LossScaling scaling;
  std::string scaleName, skippedName;
  if (!number(json, at, "initial_scale", scaling.initialScale) ||
      !integer(json, at, "growth_interval", scaling.growthInterval, 1) ||
      !number(json, at, "growth_factor", scaling.growthFactor) ||
      !number(json, at, "backoff_factor", scaling.backoffFactor) ||
      !string(json, at, "scale_output", scaleName) ||
      !string(json, at, "skipped_output", skippedName))
    return false;
  if (!(scaling.initialScale > 0))
    return fail(at + "initial_scale", "is not positive");
  if (!(scaling.growthFactor > 1))
    return fail(at + "growth_factor", "is not above 1");
  if (!(scaling.backoffFactor > 0 && scaling.backoffFactor < 1))
    return fail(at + "backoff_factor", "is not between 0 and 1");
  for (auto [key, name, index] :
       {std::tuple("scale_output", &scaleName, &scaling.scaleOutput),
        std::tuple("skipped_output", &skippedName, &scaling.skippedOutput)}) {
    std::optional<size_t> found = indexOf(plan.outputs, *name);
    if (!found || plan.outputs[*found].dtype != DType::F32 ||
        *elementCount(plan.outputs[*found].shape) != 1)
      return fail(at + key + " '" + *name + "'", "is not a scalar f32 output");
    *index = *found;
  }
  spec.lossScaling = scaling;
  return true;
}

bool Reader::startedCollectives(const Json &json, const std::string &key, const Plan &plan,
                                std::optional<TrainingSpec::StartedCollectives> &started) {
  const std::string at = "training." + key + ".";
  TrainingSpec::StartedCollectives parsed;
  if (!json.is_object())
    return fail("training." + key, "is not an object");
  const Json *bytes = list(json, at, "bytes");
  if (!bytes || !string(json, at, "axis", parsed.axis))
    return false;
  if (!plan.mesh || plan.mesh->axisIndex(parsed.axis) < 0)
    return fail(at + "axis", "'" + parsed.axis + "' is not an axis of the plan's mesh");
  if (bytes->empty())
    return fail(at + "bytes", "is empty");
  for (const Json &entry : *bytes) {
    if (!entry.is_number_integer() || entry.get<int64_t>() <= 0)
      return fail(at + "bytes", "is not a list of byte counts above 0");
    parsed.bytes.push_back(entry.get<int64_t>());
  }
  started = std::move(parsed);
  return true;
}

bool Reader::pipeline(const Json &json, const Plan &plan, TrainingSpec &spec,
                      std::vector<bool> &claimed) {
  const std::string at = "training.pipeline.";
  PipelineSpec p;
  const Json *actions = list(json, at, "actions");
  const Json *stash = list(json, at, "stash");
  if (!actions || !stash || !integer(json, at, "stage", p.stage, 0) ||
      !integer(json, at, "stages", p.stages, 2) || !integer(json, at, "in_flight", p.inFlight, 0) ||
      !string(json, at, "schedule", p.schedule))
    return false;
  if (p.stage >= p.stages)
    return fail(at + "stage", "is not below training.pipeline.stages");
  // Each microbatch's forward through each of the rank's stages once, then
  // its backward once: B, or I then W.
  if (static_cast<uint64_t>(spec.gradAccum) > actions->size() / 2)
    return fail(at + "actions", "do not run every microbatch's forward and backward");
  enum Progress { None, Forward, Inputs, Done };
  std::map<int64_t, std::vector<Progress>> seen; // per stage, per microbatch
  for (const Json &entry : *actions) {
    const std::string text = entry.is_string() ? entry.get<std::string>() : "";
    PipelineSpec::Action action;
    action.stage = p.stage;
    char *end = nullptr;
    if (text.size() >= 2 && std::strchr("FBIW", text[0]) && std::isdigit(text[1])) {
      action.kind = text[0];
      action.microbatch = std::strtoll(text.c_str() + 1, &end, 10);
      if (*end == '@' && std::isdigit(end[1]))
        action.stage = std::strtoll(end + 1, &end, 10);
    }
    std::vector<Progress> &progress = seen[action.stage];
    progress.resize(static_cast<size_t>(spec.gradAccum), None);
    const Progress from = action.kind == 'F' ? None : action.kind == 'W' ? Inputs : Forward;
    const Progress to = action.kind == 'F' ? Forward : action.kind == 'I' ? Inputs : Done;
    if (!end || *end || action.microbatch >= spec.gradAccum || action.stage >= p.stages ||
        progress[static_cast<size_t>(action.microbatch)] != from)
      return fail(at + "actions",
                  entry.dump() + " is not F<m>, B<m>, I<m> or W<m> (@<stage>) of a microbatch "
                                 "below training.grad_accum and a stage below "
                                 "training.pipeline.stages, in the order F, then B or I and W");
    progress[static_cast<size_t>(action.microbatch)] = to;
    p.actions.push_back(action);
  }
  const bool whole =
      seen.count(p.stage) && std::all_of(seen.begin(), seen.end(), [&](auto &entry) {
        return std::count(entry.second.begin(), entry.second.end(), Done) == spec.gradAccum;
      });
  if (!whole)
    return fail(at + "actions", "do not run every microbatch's forward and backward");
  if (const int64_t most = p.mostInFlight(); p.inFlight != most)
    return fail(at + "in_flight", "is not the most microbatches its actions hold (" +
                                      std::to_string(most) + ")");
  for (const Json &entry : *stash) {
    std::string name = entry.is_string() ? entry.get<std::string>() : "";
    std::optional<size_t> output = indexOf(plan.outputs, name), input = indexOf(plan.inputs, name);
    if (!output || !input || claimed[*input] || plan.inputs[*input].dtype != plan.outputs[*output].dtype ||
        plan.inputs[*input].shape != plan.outputs[*output].shape)
      return fail(at + "stash", entry.dump() + " is not an output and an input of the same type");
    claimed[*input] = true;
    p.stash.emplace_back(*output, *input);
  }
  const Json *receives = field(json, at, "receives");
  if (!receives)
    return false;
  if (!receives->is_object())
    return fail(at + "receives", "is not an object of the entry points' receives");
  for (const auto &[function, list] : receives->items()) {
    const std::string path = at + "receives." + function;
    if (function != "forward" && function != "backward" && function != "backward_weight")
      return fail(path, "is not forward, backward or backward_weight");
    if (!list.is_array())
      return fail(path, "is not a list");
    for (const Json &entry : list) {
      PipelineSpec::Receive r;
      std::string dtype;
      if (!integer(entry, path + ".", "peer", r.peer) ||
          !integer(entry, path + ".", "tag", r.tag) || !string(entry, path + ".", "dtype", dtype) ||
          !integer(entry, path + ".", "elements", r.elements))
        return false;
      if (!dtypeFromName(dtype, r.dtype))
        return fail(path + ".dtype", "'" + dtype + "' is not an element type");
      p.receives[function].push_back(r);
    }
  }
  spec.pipeline = std::move(p);
  return true;
}

} // namespace

std::vector<Box> splitBoxes(const std::vector<int64_t> &globalShape, const DimSplit &split,
                            int64_t axisSize, int64_t coordinate) {
  int64_t block = globalShape[split.dim] / split.blocks, part = block / axisSize;
  std::vector<Box> boxes;
  for (int64_t k = 0; k < split.blocks; ++k) {
    Box box{std::vector<int64_t>(globalShape.size(), 0), globalShape};
    box.offset[split.dim] = k * block + coordinate * part;
    box.shape[split.dim] = part;
    boxes.push_back(box);
  }
  return boxes;
}

std::string weightsBlobPattern(const std::vector<std::string> &byAxes) {
  std::string name = "weights";
  for (const std::string &axis : byAxes)
    name += "." + axis + "{" + axis + "}";
  return name + ".bin";
}

std::string weightsBlobName(const Plan &plan, const std::vector<int> &coordinates) {
  std::string name = "weights";
  for (const std::string &axis : plan.weightsByAxes)
    name += "." + axis + std::to_string(coordinates[plan.mesh->axisIndex(axis)]);
  return name + ".bin";
}

bool hasWeightCopies(const Plan &plan) {
  return std::any_of(plan.state.begin(), plan.state.end(), [](const StoredTensor &stored) {
    return stored.role == StoredRole::WeightCopy;
  });
}

std::string IndexRange::text() const {
  std::string text = "[" + std::to_string(low) + ", " + std::to_string(high) + ")";
  return ignored ? text + " or " + std::to_string(*ignored) : text;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  if (shape.empty())
    return "scalar";
  std::string text;
  for (int64_t d : shape)
    text += (text.empty() ? "" : "x") + std::to_string(d);
  return text;
}

std::string programInterface(const Plan &plan) {
  std::string text;
  auto tensors = [&](const char *key, const std::vector<TensorSpec> &specs) {
    text += std::string(key) + " " + std::to_string(specs.size()) + " tensors\n";
    for (size_t i = 0; i < specs.size(); ++i)
      text += std::string(key) + "[" + std::to_string(i) + "] '" + specs[i].name + "' " +
              dtypeName(specs[i].dtype) + " " + shapeText(specs[i].shape) + "\n";
  };
  tensors("inputs", plan.inputs);
  tensors("outputs", plan.outputs);
  text += "arena.bytes " + std::to_string(plan.arenaBytes) + "\n";
  text += "weights.bytes " + std::to_string(plan.weightsBytes) + "\n";
  return text;
}

std::string storedLayoutJson(const Plan &plan, const StoredTensor &stored) {
  Json entry = storedJson(stored, plan);
  entry.erase("offset");
  entry.erase("bytes");
  return entry.dump();
}

std::string flatBufferJson(const FlatBuffer &flat) {
  Json members = Json::array();
  for (const FlatBuffer::Member &member : flat.members)
    members.push_back(
        {{"name", member.name}, {"offset", member.offset}, {"elements", member.elements}});
  return Json{{"name", flat.name},
              {"members", members},
              {"slices",
               {{"axis", flat.slices.axis},
                {"elements", flat.slices.elements},
                {"slice", flat.slices.slice}}}}
      .dump();
}

bool parseLayouts(const std::optional<Mesh> &mesh, const std::vector<std::string> &stored,
                  const std::vector<std::string> &flatBuffers, Plan &layouts, std::string &error) {
  layouts = Plan{};
  layouts.mesh = mesh;
  error.clear();
  Reader read(error);
  for (size_t i = 0; i < stored.size(); ++i) {
    Json entry = Json::parse(stored[i], nullptr, /*allow_exceptions=*/false);
    StoredTensor tensor;
    const std::string path = "tensors[" + std::to_string(i) + "].layout.";
    if (!entry.is_object())
      return read.fail(path, "is not an object");
    if (!read.storedEntry(entry, path, layouts, /*placed=*/false, tensor))
      return false;
    (tensor.role == StoredRole::Parameter ? layouts.parameters : layouts.state)
        .push_back(std::move(tensor));
  }
  for (const std::string &text : flatBuffers) {
    Json flat = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!read.flatBuffer(flat, layouts))
      return false;
    if (!mesh || mesh->axisIndex(layouts.flatBuffers.back().slices.axis) < 0)
      return read.fail("flat_parameters.slices.axis", "is not an axis of the mesh");
  }
  return true;
}

std::string planJson(const Plan &plan) {
  Json inputs = Json::array(), outputs = Json::array(), parameters = Json::array(),
       state = Json::array();
  for (const TensorSpec &input : plan.inputs)
    inputs.push_back(tensorJson(input));
  for (const TensorSpec &output : plan.outputs)
    outputs.push_back(tensorJson(output));
  for (const StoredTensor &p : plan.parameters)
    parameters.push_back(storedJson(p, plan));
  for (const StoredTensor &s : plan.state)
    state.push_back(storedJson(s, plan));
  Json costs = Json::array();
  for (const FunctionCost &c : plan.costs) {
    Json products = Json::array();
    for (const ProductCall &p : c.products)
      products.push_back({{"operands", dtypeName(p.operands)},
                          {"result", dtypeName(p.result)},
                          {"trans_a", p.transA},
                          {"trans_b", p.transB},
                          {"m", p.m},
                          {"n", p.n},
                          {"k", p.k},
                          {"batch", p.batch},
                          {"beta", p.beta},
                          {"bias", p.bias},
                          {"low_precision", p.lowPrecision},
                          {"calls", p.calls}});
    costs.push_back({{"function", c.function},
                     {"calls_per_step", c.callsPerStep},
                     {"product_flops", c.productFlops},
                     {"low_precision_product_flops", c.lowPrecisionProductFlops},
                     {"other_bytes", c.otherBytes},
                     {"streamed_bytes", c.streamedBytes},
                     {"kernel_calls", c.kernelCalls},
                     {"messages", c.messages},
                     {"message_bytes", c.messageBytes},
                     {"products", products}});
  }
  const MemoryFigures &m = plan.memory;
  Json json = {
      {"format_version", kPlanFormatVersion},
      {"build_id", plan.buildId},
      {"model", plan.model},
      {"target", plan.target},
      {"inputs", inputs},
      {"outputs", outputs},
      {"parameters", parameters},
      {"constants", {{"count", plan.constantCount}, {"bytes", plan.constantBytes}}},
      {"weights",
       {{"file", weightsBlobPattern(plan.weightsByAxes)},
        {"by_axes", plan.weightsByAxes},
        {"bytes", plan.weightsBytes}}},
      {"arena", {{"bytes", plan.arenaBytes}}},
      {"flops", plan.flops},
      {"cost", costs},
      {"memory",
       {{"parameter_bytes", m.parameterBytes},
        {"gradient_bytes", m.gradientBytes},
        {"optimizer_state_bytes", m.optimizerStateBytes},
        {"weight_copy_bytes", m.weightCopyBytes},
        {"activation_bytes", m.activationBytes},
        {"input_bytes", m.inputBytes},
        {"scratch_bytes", m.scratchBytes},
        {"packed_weight_bytes", m.packedWeightBytes},
        {"product_scratchpad_bytes", m.productScratchpadBytes},
        {"threads", m.threads},
        {"stash_bytes", m.stashBytes},
        {"predicted_peak_bytes", m.predictedPeakBytes}}},
  };
  if (plan.training)
    json["state"] = state;
  // A program has one flat buffer at most.
  if (!plan.flatBuffers.empty())
    json["flat_parameters"] = Json::parse(flatBufferJson(plan.flatBuffers.front()));
  if (const auto &mesh = plan.mesh) {
    Json axes = Json::array();
    for (size_t a = 0; a < mesh->shape.size(); ++a)
      axes.push_back({{"name", mesh->axisNames[a]}, {"size", mesh->shape[a]}});
    json["mesh"] = {{"axes", axes}, {"ranks", mesh->size()}, {"deterministic", plan.deterministic}};
    Json collectives = Json::array();
    for (const CollectiveTraffic &c : plan.collectives)
      collectives.push_back({{"kind", c.kind},
                             {"axis", c.axis},
                             {"calls_per_step", c.callsPerStep},
                             {"buffer_bytes", c.bufferBytes},
                             {"bytes_sent_per_rank", c.bytesSentPerRank},
                             {"analytic_min_bytes_sent", c.analyticMinBytesSent}});
    json["collectives"] = collectives;
  }
  if (plan.training)
    json["training"] = trainingJson(*plan.training, plan);
  return json.dump(2) + "\n";
}

bool readPlan(const std::string &path, Plan &plan, std::string &error) {
  std::string text;
  return readFile(path, kMaxPlanBytes, text, error) && parsePlan(text, plan, error);
}

bool readCompiledPlans(const std::string &dir, std::vector<Plan> &plans,
                       std::vector<std::string> &dirs, std::string &where, std::string &error) {
  plans.clear();
  dirs.clear();
  const bool pipeline = !std::filesystem::exists(dir + "/plan.json") &&
                        std::filesystem::exists(dir + "/stage0/plan.json");
  for (int64_t s = 0; s == 0 || (pipeline && s < plans.front().training->pipeline->stages); ++s) {
    dirs.push_back(pipeline ? dir + "/stage" + std::to_string(s) : dir);
    where = dirs.back() + "/plan.json";
    if (!readPlan(where, plans.emplace_back(), error))
      return false;
    if (pipeline && !(plans.back().training && plans.back().training->pipeline &&
                      plans.back().training->pipeline->stage == s)) {
      error = "is not the plan of pipeline stage " + std::to_string(s);
      return false;
    }
  }
  return true;
}

bool parsePlan(const std::string &text, Plan &plan, std::string &error) {
  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object() || !json.contains("format_version") ||
      json["format_version"] != kPlanFormatVersion) {
    error = "not a format_version " + std::to_string(kPlanFormatVersion) +
            " plan (recompile the model with this cleave)";
    return false;
  }
  plan = Plan{};
  error.clear();
  Reader read(error);
  const Json *weights = read.field(json, "", "weights");
  const Json *arena = read.field(json, "", "arena");
  if (!weights || !arena || !read.string(json, "", "build_id", plan.buildId) ||
      !read.string(json, "", "model", plan.model) ||
      !read.string(json, "", "target", plan.target) || !read.tensors(json, "inputs", plan.inputs) ||
      !read.tensors(json, "outputs", plan.outputs) ||
      !read.integer(*arena, "arena.", "bytes", plan.arenaBytes) ||
      !read.integer(*weights, "weights.", "bytes", plan.weightsBytes) ||
      (json.contains("mesh") && !read.mesh(json["mesh"], plan)))
    return false;
  if (const Json *byAxes = read.list(*weights, "weights.", "by_axes")) {
    for (const Json &axis : *byAxes) {
      if (!axis.is_string() || !plan.mesh || plan.mesh->axisIndex(axis.get<std::string>()) < 0)
        return read.fail("weights.by_axes", axis.dump() + " is not an axis of the plan's mesh");
      plan.weightsByAxes.push_back(axis.get<std::string>());
    }
  } else {
    return false;
  }
  if (!read.stored(json, "parameters", plan, plan.parameters) ||
      !read.stored(json, "state", plan, plan.state) ||
      (json.contains("flat_parameters") && !read.flatBuffer(json["flat_parameters"], plan)) ||
      (json.contains("training") && !read.training(json["training"], plan)))
    return false;
  return true;
}

} // namespace cleave::rt
