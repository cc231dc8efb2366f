//===- TrainingInfo.cpp - a model's training_info, kept or as the step ---===//
//
// Without ImportOptions::trainingInfo, training_info is kept as the module
// attribute `cleave.training_info`. With it, training_info is the step:
// after the main graph come each algorithm's nodes, through the same op
// tables, and @forward ends with one cleave.assign per update_binding.
//
//===----------------------------------------------------------------------===//

#include "compiler/onnx/Importer.h"

#include "passes/Autodiff.h"

#include "mlir/Support/DebugStringHelper.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace cleave {
namespace {

Attribute convertAttribute(Builder &builder, const onnx::AttributeProto &a) {
  switch (a.type()) {
  case onnx::AttributeProto::INT: return builder.getI64IntegerAttr(a.i());
  case onnx::AttributeProto::FLOAT: return builder.getF32FloatAttr(a.f());
  case onnx::AttributeProto::STRING: return builder.getStringAttr(a.s());
  case onnx::AttributeProto::INTS:
    return builder.getI64ArrayAttr(SmallVector<int64_t>(a.ints().begin(), a.ints().end()));
  case onnx::AttributeProto::FLOATS:
    return builder.getF32ArrayAttr(SmallVector<float>(a.floats().begin(), a.floats().end()));
  case onnx::AttributeProto::STRINGS:
    return builder.getStrArrayAttr(SmallVector<StringRef>(a.strings().begin(), a.strings().end()));
  default: return builder.getStringAttr("<" + onnx::AttributeProto::AttributeType_Name(a.type()) + ">");
  }
}

DictionaryAttr convertNode(Builder &builder, const onnx::NodeProto &node) {
  SmallVector<NamedAttribute> attributes;
  for (const auto &a : node.attribute())
    attributes.push_back(builder.getNamedAttr(a.name(), convertAttribute(builder, a)));
  auto names = [&](const auto &list) {
    return builder.getStrArrayAttr(SmallVector<StringRef>(list.begin(), list.end()));
  };
  return builder.getDictionaryAttr(
      {builder.getNamedAttr("op", builder.getStringAttr(node.op_type())),
       builder.getNamedAttr("domain", builder.getStringAttr(displayDomain(node.domain()))),
       builder.getNamedAttr("name", builder.getStringAttr(node.name())),
       builder.getNamedAttr("inputs", names(node.input())),
       builder.getNamedAttr("outputs", names(node.output())),
       builder.getNamedAttr("attributes", builder.getDictionaryAttr(attributes))});
}

} // namespace

/// Each algorithm node and the bindings that say which initializers are
/// state carried between steps.
ArrayAttr trainingInfoAttr(Builder &builder, const onnx::ModelProto &model) {
  SmallVector<Attribute> infos;
  auto bindings = [&](const auto &list) {
    SmallVector<NamedAttribute> entries;
    for (const auto &entry : list)
      entries.push_back(builder.getNamedAttr(entry.key(), builder.getStringAttr(entry.value())));
    return builder.getDictionaryAttr(entries);
  };
  for (const auto &info : model.training_info()) {
    SmallVector<Attribute> nodes, initializers;
    for (const auto &node : info.algorithm().node())
      nodes.push_back(convertNode(builder, node));
    for (const auto &init : info.algorithm().initializer())
      initializers.push_back(builder.getStringAttr(init.name()));
    infos.push_back(builder.getDictionaryAttr(
        {builder.getNamedAttr("algorithm", builder.getArrayAttr(nodes)),
         builder.getNamedAttr("algorithm_initializers", builder.getArrayAttr(initializers)),
         builder.getNamedAttr("initialization_binding", bindings(info.initialization_binding())),
         builder.getNamedAttr("update_binding", bindings(info.update_binding()))}));
  }
  return infos.empty() ? ArrayAttr() : builder.getArrayAttr(infos);
}

/// The checks on a training_info that defines the step, before anything is
/// imported: no flags of cleave's own step builder, no bound initialization,
/// and update_bindings that name initializers and outputs, each key once.
LogicalResult Importer::checkTrainingInfo() {
  if (!options.stepFlags.empty())
    return fail(options.stepFlags.front() + ": the model's training_info defines the step",
                "drop the flag, or pass --ignore-training-info to train with cleave's own "
                "optimizers",
                kExitBadUsage);
  for (auto [i, info] : llvm::enumerate(model.training_info())) {
    std::string scope = "training_info[" + std::to_string(i) + "]";
    if (info.initialization_binding_size() > 0)
      return fail(scope + ": an initialization with initialization_binding is not supported: "
                          "training starts from the initializers' values",
                  "run the initialization once and store its outputs as the initializers");
    llvm::StringSet<> own, outputs;
    for (const auto &initializer : info.algorithm().initializer())
      own.insert(initializer.name());
    for (const auto &output : info.algorithm().output())
      outputs.insert(output.name());
    for (const auto &output : model.graph().output())
      outputs.insert(output.name());
    for (const auto &binding : info.update_binding()) {
      std::string where = scope + ".update_binding '" + binding.key() + "' <- '" +
                          binding.value() + "'";
      if (!initializerNames.contains(binding.key()) && !own.contains(binding.key()))
        return fail(where + ": '" + binding.key() +
                    "' is not an initializer of the graph or of this algorithm");
      if (!outputs.contains(binding.value()))
        return fail(where + ": '" + binding.value() +
                    "' is not an output of this algorithm or of the graph");
      auto [entry, added] = bound.try_emplace(binding.key(), i);
      if (!added)
        return fail(where + ": '" + binding.key() +
                    "' is already bound: an initializer is updated at most once a step");
    }
  }
  if (bound.empty())
    return fail("training_info binds no initializer (its update_binding is empty), so a step "
                "would change nothing",
                "pass --ignore-training-info to train with cleave's own optimizers");
  return success();
}

/// Imports each algorithm of training_info after the main graph: the i-th
/// algorithm runs on the main graph evaluated with the values the algorithms
/// before it assigned (ONNX: executing the algorithms in order and applying
/// each one's update_binding is one step). So from the second on, the main
/// graph is imported again on the updated values; in SSA the assignments
/// become values, and @forward ends with one cleave.assign per bound
/// initializer, after every read. Adds the loss to `outputs` when it is an
/// algorithm's output.
LogicalResult Importer::importTrainingAlgorithms(ImportedModel &imported, Outputs &outputs) {
  TrainingAlgorithm algorithm;
  llvm::StringMap<Value> current; // bound initializer -> its value after the updates so far
  llvm::StringMap<Value> algorithmOutputs; // first of each name
  for (auto [i, info] : llvm::enumerate(model.training_info())) {
    std::string scope = "training_info[" + std::to_string(i) + "].algorithm";
    if (i > 0) {
      values = graphBase;
      for (const auto &entry : current) {
        values[entry.getKey()] = entry.getValue();
        assignedEarlier.insert(entry.getValue());
      }
      if (failed(importNodes(model.graph())))
        return failure();
    }
    addConstants(algorithmConstants[i]);
    if (failed(importNodes(info.algorithm(), scope)))
      return failure();
    for (const auto &output : info.algorithm().output()) {
      auto found = values.find(output.name());
      if (found == values.end())
        return fail(scope + ": output '" + output.name() +
                    "' is not produced by any node, input or initializer");
      if (failed(checkOutput(output, found->second)))
        return failure();
      algorithmOutputs.try_emplace(output.name(), found->second);
    }
    for (const auto &binding : info.update_binding()) {
      Value target = graphBase.lookup(binding.key());
      Value value = values.lookup(binding.value());
      if (target.getType() != value.getType())
        return fail("training_info[" + Twine(i) + "].update_binding '" + binding.key() +
                    "' <- '" + binding.value() + "': '" + binding.key() + "' is " +
                    debugString(target.getType()) + " but '" + binding.value() + "' is " +
                    debugString(value.getType()));
      current[binding.key()] = value;
      algorithm.updates.emplace_back(binding.key(), binding.value());
    }
  }
  auto loss = addTrainingLoss(outputs, algorithmOutputs);
  if (failed(loss))
    return failure();
  algorithm.loss = *loss;
  assignUpdates(algorithm, current);
  imported.trainingAlgorithm = std::move(algorithm);
  return success();
}

/// The loss the step logs: --loss NAME, else the main graph's only scalar
/// float output, else the first algorithm's only one. Added to `outputs`
/// when it is an algorithm's output.
FailureOr<std::string>
Importer::addTrainingLoss(Outputs &outputs, const llvm::StringMap<Value> &algorithmOutputs) {
  auto ambiguous = [&](ArrayRef<StringRef> names, ArrayRef<unsigned> scalars) {
    SmallVector<StringRef> candidates;
    for (unsigned i : scalars)
      candidates.push_back(names[i]);
    return fail("cannot tell which output is the loss the training step logs: " +
                    (candidates.empty() ? std::string("no output is a float scalar")
                                        : "the float scalars are " + llvm::join(candidates, ", ")),
                "name it with --loss NAME", kExitBadUsage);
  };
  auto notScalar = [&](StringRef name, Value value) {
    return fail("--loss '" + name + "': is " + debugString(value.getType()) +
                    ", not a float scalar",
                "", kExitBadUsage);
  };
  std::string name = options.trainingLoss;
  SmallVector<StringRef> resultNames(outputs.names.begin(), outputs.names.end());
  LossSearch inResults = findLoss(resultNames, ValueRange(outputs.values).getTypes(), name);
  switch (inResults.outcome) {
  case LossSearch::Found:
    return outputs.names[inResults.index];
  case LossSearch::NotScalar:
    return notScalar(name, outputs.values[inResults.index]);
  case LossSearch::SeveralScalars:
    return ambiguous(resultNames, inResults.scalars);
  case LossSearch::NoSuchName:
  case LossSearch::NoScalar:
    break;
  }
  if (name.empty()) {
    SmallVector<StringRef> names;
    SmallVector<Type> types;
    for (const auto &output : model.training_info(0).algorithm().output())
      if (Value value = algorithmOutputs.lookup(output.name())) {
        names.push_back(output.name());
        types.push_back(value.getType());
      }
    LossSearch inFirst = findLoss(names, types, "");
    if (inFirst.outcome != LossSearch::Found)
      return ambiguous(names, inFirst.scalars);
    name = names[inFirst.index].str();
  }
  Value loss = algorithmOutputs.lookup(name);
  if (!loss)
    return fail("--loss '" + name +
                    "': is not an output of the graph or of its training_info algorithms",
                "", kExitBadUsage);
  if (!isScalarLoss(loss.getType()))
    return notScalar(name, loss);
  outputs.values.push_back(loss);
  outputs.names.push_back(name);
  return name;
}

/// One cleave.assign per update, after every read. A new value that is (a
/// view of) another bound initializer is copied first: that one may be
/// overwritten before it is read. A value that is the initializer itself
/// needs no assignment.
void Importer::assignUpdates(const TrainingAlgorithm &algorithm,
                             const llvm::StringMap<Value> &current) {
  SmallVector<std::pair<Value, Value>> assignments;
  llvm::DenseSet<Value> targets;
  for (const auto &[key, value] : algorithm.updates)
    targets.insert(graphBase.lookup(key));
  for (const auto &[key, name] : algorithm.updates) {
    Value target = graphBase.lookup(key), value = current.lookup(key);
    Value root = value;
    while (Operation *op = root.getDefiningOp()) {
      if (!isa<ReshapeOp, FlattenOp, SqueezeOp, UnsqueezeOp, IdentityOp>(op))
        break;
      root = op->getOperand(0);
    }
    if (root == target)
      continue;
    if (targets.contains(root))
      value = CastOp::create(builder, value.getLoc(), value,
                             cast<RankedTensorType>(value.getType()).getElementType());
    assignments.push_back({target, value});
  }
  Location fileLoc = FileLineColLoc::get(&context, path, 0, 0);
  for (auto [target, value] : assignments)
    AssignOp::create(builder, fileLoc, target, value);
}
} // namespace cleave
