//===- OnnxImporter.cpp - ONNX ModelProto to the cleave dialect ----------===//
//
// The importer's core: reads the model, builds @forward's signature, and
// makes one pass over the graph in node order. Each node becomes cleave ops
// built by the handler of its op type (compiler/onnx/*Ops.cpp) through their
// type inference (so shape errors are diagnostics at the node), and ops whose
// operands are all constant fold at once: that is how shape subgraphs
// disappear and shape-deciding inputs become attributes. A training_info
// step's algorithms follow (compiler/onnx/TrainingInfo.cpp).
//
//===----------------------------------------------------------------------===//

#include "compiler/OnnxImporter.h"
#include "compiler/onnx/Importer.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace mlir;

namespace cleave {
namespace {

/// The directory external data paths are relative to.
std::string directoryOf(StringRef path) {
  StringRef dir = llvm::sys::path::parent_path(path);
  return dir.empty() ? "." : dir.str();
}

/// A declared shape as diagnostics show it, "?" for a dim it leaves open.
std::string declaredShape(const onnx::TypeProto_Tensor &type) {
  SmallVector<std::string> dims;
  for (const auto &dim : type.shape().dim())
    dims.push_back(dim.has_dim_value() ? std::to_string(dim.dim_value()) : "?");
  return dims.empty() ? "scalar" : llvm::join(dims, "x");
}

} // namespace

Importer::Importer(MLIRContext &context, StringRef path, const ImportOptions &options,
                   UserError &error)
    : context(context), path(path.str()), options(options), error(error), builder(&context),
      modelDir(directoryOf(path)) {
  populateMathImporters(opImporters);
  populateShapeImporters(opImporters);
  populateNNImporters(opImporters);
  populateReductionImporters(opImporters);
  populateConstantImporters(opImporters, modelDir);
  populateTrainingImporters(trainingOpImporters, values, assignedEarlier);
}

/// The steps of an import, in order; each fails with the model's first
/// problem in `error`.
FailureOr<ImportedModel> Importer::run() {
  if (failed(readModel()) || failed(readOpsets()))
    return failure();
  stepFromTrainingInfo = options.trainingInfo && model.training_info_size() > 0;
  for (const auto &initializer : model.graph().initializer())
    initializerNames.insert(initializer.name());
  if (failed(checkSingleAssignment()) || failed(checkInitializerInputs()) ||
      failed(checkInputShapes()) || (stepFromTrainingInfo && failed(checkTrainingInfo())))
    return failure();

  ImportedModel imported;
  Signature signature;
  Reads reads = scanReads();
  if (failed(readInitializers(reads, imported, signature)) || failed(addInputs(reads, signature)))
    return failure();
  func::FuncOp forward = createForward(imported, signature);
  if (failed(importNodes(model.graph())))
    return failure();

  Outputs outputs;
  if (failed(collectOutputs(outputs)) ||
      (stepFromTrainingInfo && failed(importTrainingAlgorithms(imported, outputs))))
    return failure();
  finishForward(forward, outputs);
  annotateModule(*imported.module);
  imported.trainingWarnings = std::move(warnings);
  if (failed(mlir::verify(*imported.module)))
    return fail("the imported module does not verify (a cleave bug)",
                "rerun with --mlir-print-op-on-diagnostic to see the IR", kExitInternal);
  return imported;
}

LogicalResult Importer::readModel() {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return fail("cannot open: " + buffer.getError().message());
  if ((*buffer)->getBufferSize() == 0)
    return fail("not an ONNX model (empty file)");
  if ((*buffer)->getBufferSize() > static_cast<size_t>(INT32_MAX))
    return fail("not an ONNX model (over 2 GiB: keep large weights in external data)");
  if (!model.ParseFromArray((*buffer)->getBufferStart(),
                            static_cast<int>((*buffer)->getBufferSize())))
    return fail("not an ONNX model (protobuf parse failed)");
  if (!model.has_graph() || model.ir_version() <= 0)
    return fail("not an ONNX model (no graph or IR version)");
  if (model.ir_version() < kMinIrVersion)
    return fail("IR version " + Twine(model.ir_version()) + " is older than " +
                    Twine(kMinIrVersion) + ", the oldest cleave supports",
                "convert the model with onnx.version_converter to opset 13 or newer");
  if (model.ir_version() > kMaxIrVersion)
    return fail("IR version " + Twine(model.ir_version()) + " is newer than " +
                Twine(kMaxIrVersion) + ", the newest cleave knows (ONNX 1.19)");
  return success();
}

LogicalResult Importer::readOpsets() {
  for (const auto &entry : model.opset_import())
    opsets[isDefaultDomain(entry.domain()) ? "" : entry.domain()] = entry.version();
  auto found = opsets.find("");
  if (found == opsets.end()) {
    // A graph of training-domain nodes alone (ONNX's optimizer node tests)
    // needs no ai.onnx opset.
    const auto &nodes = model.graph().node();
    if (nodes.empty() || !llvm::all_of(nodes, [](const onnx::NodeProto &node) {
          return node.domain() == kTrainingDomain;
        }))
      return fail("the model imports no opset of domain 'ai.onnx'");
    return success();
  }
  if (found->second < kMinOpset)
    return fail("opset " + Twine(found->second) + " of domain 'ai.onnx' is older than " +
                    Twine(kMinOpset) + ", the oldest cleave supports",
                "convert the model with onnx.version_converter.convert_version(model, 17)");
  if (found->second > kMaxOpset)
    return fail("opset " + Twine(found->second) + " of domain 'ai.onnx' is newer than " +
                Twine(kMaxOpset) + ", the newest cleave knows (ONNX 1.19)");
  return success();
}

/// ONNX graphs are in static single assignment form: each name is defined
/// once, by a graph input or an initializer (both at once is how a model
/// declares an overridable initializer) or by one node's output. A training
/// algorithm sees the main graph's names, so its nodes may not define those
/// either.
LogicalResult Importer::checkSingleAssignment() {
  auto check = [&](const onnx::GraphProto &graph, StringRef scope,
                   llvm::StringMap<std::string> &definers) -> LogicalResult {
    std::string prefix = scope.empty() ? "" : scope.str() + ": ";
    llvm::StringSet<> declared;
    auto declare = [&](const std::string &name, StringRef kind) -> LogicalResult {
      if (!declared.insert(kind.str() + "\n" + name).second)
        return fail(prefix + kind + " '" + name + "' is declared twice");
      definers.try_emplace(name, kind.str());
      return success();
    };
    for (const auto &input : graph.input())
      if (failed(declare(input.name(), "the graph input")))
        return failure();
    for (const auto &initializer : graph.initializer())
      if (failed(declare(initializer.name(), "the initializer")))
        return failure();
    for (auto [index, node] : llvm::enumerate(graph.node())) {
      std::string definer = "node " + (node.name().empty() ? "#" + std::to_string(index)
                                                           : "'" + node.name() + "'");
      for (const std::string &output : node.output()) {
        if (output.empty())
          continue;
        auto [existing, added] = definers.try_emplace(output, definer);
        if (!added)
          return fail(prefix + definer + " (" + node.op_type() + "): output '" + output +
                      "' is already defined by " + existing->second);
      }
    }
    return success();
  };
  llvm::StringMap<std::string> mainDefiners;
  if (failed(check(model.graph(), "", mainDefiners)))
    return failure();
  for (int i = 0; stepFromTrainingInfo && i < model.training_info_size(); ++i) {
    llvm::StringMap<std::string> definers = mainDefiners;
    if (failed(check(model.training_info(i).algorithm(),
                     "training_info[" + std::to_string(i) + "].algorithm", definers)))
      return failure();
  }
  return success();
}

/// An initializer that is also a graph input is its default value: the
/// input's declared type must be the initializer's.
LogicalResult Importer::checkInitializerInputs() {
  llvm::StringMap<const onnx::TensorProto *> initializers;
  for (const auto &initializer : model.graph().initializer())
    initializers[initializer.name()] = &initializer;
  for (const auto &input : model.graph().input()) {
    const onnx::TensorProto *initializer = initializers.lookup(input.name());
    if (!initializer || !input.type().has_tensor_type())
      continue;
    const auto &declared = input.type().tensor_type();
    bool mismatch = declared.elem_type() != 0 && declared.elem_type() != initializer->data_type();
    if (declared.has_shape()) {
      mismatch = mismatch || declared.shape().dim_size() != initializer->dims_size();
      for (int d = 0; !mismatch && d < declared.shape().dim_size(); ++d) {
        const auto &dim = declared.shape().dim(d);
        mismatch = dim.has_dim_value() && dim.dim_value() != initializer->dims(d);
      }
    }
    if (mismatch)
      return fail("graph input '" + input.name() + "' is declared " +
                  onnxTypeName(declared.elem_type()) + " " + declaredShape(declared) +
                  ", but its initializer is " + onnxTypeName(initializer->data_type()) + " " +
                  shapeString(SmallVector<int64_t>(initializer->dims().begin(),
                                                   initializer->dims().end())));
  }
  return success();
}

/// Every --input-shape names an input of the graph (or of an algorithm of
/// the training_info step).
LogicalResult Importer::checkInputShapes() {
  for (const auto &entry : options.inputShapes) {
    const std::string &name = entry.first;
    auto isNamed = [&](const auto &in) { return in.name() == name; };
    bool known = llvm::any_of(model.graph().input(), isNamed);
    for (int i = 0; stepFromTrainingInfo && !known && i < model.training_info_size(); ++i)
      known = llvm::any_of(model.training_info(i).algorithm().input(), isNamed);
    if (!known)
      return fail("--input-shape names '" + name + "', which is not an input of the graph", "",
                  kExitBadUsage);
  }
  return success();
}

/// Which tensors the nodes read as constants and which as tensors: the main
/// graph's, and with a training_info step the algorithms' too.
Importer::Reads Importer::scanReads() {
  Reads reads;
  auto scan = [&](const auto &nodes) {
    for (const auto &node : nodes) {
      const OpImporter *found = opImporters.lookup(node.op_type());
      for (auto [i, name] : llvm::enumerate(node.input())) {
        bool constant = isDefaultDomain(node.domain()) && found &&
                        llvm::is_contained(found->constantInputs, i);
        (constant ? reads.asConstant : reads.asTensor).insert(name);
      }
    }
  };
  const onnx::GraphProto &graph = model.graph();
  scan(graph.node());
  reads.byGraph = reads.asTensor;
  for (const auto &output : graph.output())
    reads.asTensor.insert(output.name());
  for (int i = 0; stepFromTrainingInfo && i < model.training_info_size(); ++i) {
    scan(model.training_info(i).algorithm().node());
    for (const auto &output : model.training_info(i).algorithm().output())
      reads.asTensor.insert(output.name());
  }
  return reads;
}

/// Parameters are the float initializers; the rest become constants, and so
/// do float initializers read only where an op needs a constant (a ratio).
/// With a training_info step, a bound initializer is a parameter when it is
/// a float that the main graph reads (a weight), else state (moments,
/// iteration counters); an algorithm's initializer is state when that
/// algorithm binds it, else a constant of that algorithm.
LogicalResult Importer::readInitializers(const Reads &reads, ImportedModel &imported,
                                         Signature &signature) {
  for (const auto &initializer : model.graph().initializer()) {
    TensorData data;
    std::string message;
    if (!readTensorType(&context, initializer, data, message))
      return fail("initializer '" + initializer.name() + "': " + message);
    bool isFloat = isa<FloatType>(data.type.getElementType());
    const bool isBound = bound.contains(initializer.name());
    const bool isParameter = isBound ? isFloat && reads.byGraph.contains(initializer.name())
                                     : isFloat && !reads.onlyAsConstant(initializer.name());
    if ((!isParameter || options.parameterValues) &&
        !readTensorValues(initializer, modelDir, data, message))
      return fail("initializer '" + initializer.name() + "': " + message);
    if (isParameter)
      imported.parameters.push_back(Parameter{initializer.name(), std::move(data)});
    else if (isBound)
      imported.state.push_back(Parameter{initializer.name(), std::move(data)});
    else
      signature.constants.emplace_back(initializer.name(), std::move(data));
  }
  if (!stepFromTrainingInfo)
    return success();
  algorithmConstants.resize(model.training_info_size());
  for (int i = 0; i < model.training_info_size(); ++i) {
    for (const auto &initializer : model.training_info(i).algorithm().initializer()) {
      TensorData data;
      std::string message;
      if (!readTensor(&context, initializer, modelDir, data, message))
        return fail("training_info[" + Twine(i) + "].algorithm: initializer '" +
                    initializer.name() + "': " + message);
      auto key = bound.find(initializer.name());
      if (key != bound.end() && key->second == static_cast<unsigned>(i))
        imported.state.push_back(Parameter{initializer.name(), std::move(data)});
      else
        algorithmConstants[i].emplace_back(initializer.name(), std::move(data));
    }
  }
  return success();
}

/// The graph's inputs that are not initializers (one that has a value in
/// ImportOptions::inputValues and that only ops needing a constant read
/// becomes a constant), then, with a training_info step, the algorithms' own
/// inputs (labels a loss in an algorithm reads).
LogicalResult Importer::addInputs(const Reads &reads, Signature &signature) {
  auto addInput = [&](const onnx::ValueInfoProto &input) -> LogicalResult {
    auto type = inputType(input);
    if (failed(type))
      return failure();
    signature.types.push_back(*type);
    signature.names.push_back(input.name());
    signature.kinds.push_back("input");
    return success();
  };
  for (const auto &input : model.graph().input()) {
    if (initializerNames.contains(input.name()))
      continue;
    auto value = options.inputValues.find(input.name());
    if (value != options.inputValues.end() && reads.onlyAsConstant(input.name())) {
      signature.constants.emplace_back(input.name(), value->second);
      continue;
    }
    if (failed(addInput(input)))
      return failure();
  }
  for (int i = 0; stepFromTrainingInfo && i < model.training_info_size(); ++i) {
    const onnx::GraphProto &algorithm = model.training_info(i).algorithm();
    for (const auto &input : algorithm.input()) {
      bool initializer = initializerNames.contains(input.name()) ||
                         llvm::any_of(algorithm.initializer(), [&](const auto &init) {
                           return init.name() == input.name();
                         });
      if (initializer || llvm::is_contained(signature.names, input.name()))
        continue;
      if (failed(addInput(input)))
        return failure();
    }
  }
  return success();
}

/// The module with an empty @forward: its arguments (the inputs, then the
/// parameters, then the state) and constants, each known by its name.
func::FuncOp Importer::createForward(ImportedModel &imported, const Signature &signature) {
  SmallVector<Type> argTypes(signature.types);
  SmallVector<std::string> argNames(signature.names), argKinds(signature.kinds);
  for (const Parameter &parameter : imported.parameters) {
    argTypes.push_back(parameter.value.type);
    argNames.push_back(parameter.name);
    argKinds.push_back("param");
  }
  for (const Parameter &state : imported.state) {
    argTypes.push_back(state.value.type);
    argNames.push_back(state.name);
    argKinds.push_back("state");
  }

  Location fileLoc = FileLineColLoc::get(&context, path, 0, 0);
  imported.module = ModuleOp::create(fileLoc);
  builder.setInsertionPointToEnd(imported.module->getBody());
  auto forward = func::FuncOp::create(builder, fileLoc, "forward",
                                      builder.getFunctionType(argTypes, {}));
  Block *body = forward.addEntryBlock();
  for (auto [i, arg] : llvm::enumerate(body->getArguments())) {
    forward.setArgAttr(i, kNameAttr, builder.getStringAttr(argNames[i]));
    forward.setArgAttr(i, kKindAttr, builder.getStringAttr(argKinds[i]));
    values[argNames[i]] = arg;
  }
  builder.setInsertionPointToEnd(body);
  addConstants(signature.constants);
  graphBase = values;
  return forward;
}

void Importer::addConstants(const NamedTensors &tensors) {
  Location fileLoc = FileLineColLoc::get(&context, path, 0, 0);
  for (const auto &[name, data] : tensors) {
    Location loc = NameLoc::get(builder.getStringAttr(name), fileLoc);
    values[name] = ConstantOp::create(builder, loc, data.type, toElementsAttr(data));
  }
}

LogicalResult Importer::importNodes(const onnx::GraphProto &graph, StringRef scope) {
  for (auto [index, node] : llvm::enumerate(graph.node()))
    if (failed(importNode(node, index, scope)))
      return failure();
  return success();
}

LogicalResult Importer::collectOutputs(Outputs &outputs) {
  for (const auto &output : model.graph().output()) {
    auto found = values.find(output.name());
    if (found == values.end())
      return fail("output '" + output.name() +
                  "' is not produced by any node, graph input or initializer");
    if (failed(checkOutput(output, found->second)))
      return failure();
    outputs.values.push_back(found->second);
    outputs.names.push_back(output.name());
  }
  return success();
}

/// Returns the outputs and drops what nothing reads any more (shape
/// subgraphs fold into constants that only they read).
void Importer::finishForward(func::FuncOp forward, const Outputs &outputs) {
  Location fileLoc = FileLineColLoc::get(&context, path, 0, 0);
  func::ReturnOp::create(builder, fileLoc, outputs.values);
  Block &body = forward.getBody().front();
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isOpTriviallyDead(&op))
      op.erase();
  forward.setType(builder.getFunctionType(forward.getArgumentTypes(),
                                          ValueRange(outputs.values).getTypes()));
  for (auto [i, name] : llvm::enumerate(outputs.names))
    forward.setResultAttr(i, kNameAttr, builder.getStringAttr(name));
}

/// Where the module came from, and the annotations it keeps for later passes.
void Importer::annotateModule(ModuleOp module) {
  module->setAttr(kSourceAttr, builder.getStringAttr(path));
  module->setAttr(kIrVersionAttr, builder.getI64IntegerAttr(model.ir_version()));
  if (opsets.count(""))
    module->setAttr(kOpsetAttr, builder.getI64IntegerAttr(opsets.lookup("")));
  std::string producer = model.producer_name();
  if (!model.producer_version().empty())
    producer += (producer.empty() ? "" : " ") + model.producer_version();
  if (!producer.empty())
    module->setAttr(kProducerAttr, builder.getStringAttr(producer));
  // A training_info the step was built from is not kept a second time.
  if (ArrayAttr info = stepFromTrainingInfo ? ArrayAttr() : trainingInfoAttr(builder, model))
    module->setAttr(kTrainingInfoAttr, info);
  if (ArrayAttr configs = configurationsAttr(builder, model))
    module->setAttr(kConfigurationsAttr, configs);
}

FailureOr<RankedTensorType> Importer::inputType(const onnx::ValueInfoProto &input) {
  const std::string &name = input.name();
  if (!input.type().has_tensor_type())
    return fail("input '" + name + "' is not a tensor");
  const auto &tensorType = input.type().tensor_type();
  Type element = elementTypeFromOnnx(&context, tensorType.elem_type());
  if (!element)
    return fail("input '" + name + "' has unsupported element type " +
                onnxTypeName(tensorType.elem_type()));
  auto typeOf = [&](ArrayRef<int64_t> dims) -> FailureOr<RankedTensorType> {
    if (std::optional<std::string> why = tensorShapeError(dims))
      return fail("input '" + name + "': " + *why);
    return RankedTensorType::get(dims, element);
  };
  auto bound = options.inputShapes.find(name);
  if (bound != options.inputShapes.end()) {
    const std::vector<int64_t> &dims = bound->second;
    if (tensorType.has_shape() && tensorType.shape().dim_size() != static_cast<int>(dims.size()))
      return fail("--input-shape " + name + "=" + shapeString(dims) + " has rank " +
                      Twine(dims.size()) + ", but the input has rank " +
                      Twine(tensorType.shape().dim_size()),
                  "", kExitBadUsage);
    for (int i = 0; tensorType.has_shape() && i < tensorType.shape().dim_size(); ++i) {
      const auto &dim = tensorType.shape().dim(i);
      if (dim.has_dim_value() && dim.dim_value() != dims[i])
        return fail("--input-shape " + name + "=" + shapeString(dims) + " contradicts dim " +
                        Twine(i) + " = " + Twine(dim.dim_value()) + " in the model",
                    "", kExitBadUsage);
    }
    return typeOf(dims);
  }
  if (!tensorType.has_shape())
    return fail("input '" + name + "' has no shape",
                "bind it with --input-shape " + name + "=<d0>x<d1>...");
  // --batch-size: dim 0 of every input is the micro-batch.
  if (options.batchSize > 0 && tensorType.shape().dim_size() > 0) {
    const auto &first = tensorType.shape().dim(0);
    if (first.has_dim_value() && first.dim_value() != options.batchSize)
      return fail("--batch-size gives input '" + name + "' a micro-batch of " +
                      Twine(options.batchSize) + ", but the model fixes its dim 0 at " +
                      Twine(first.dim_value()),
                  "export the model with a dynamic batch dim, or choose a batch size (per "
                  "accumulation step) of " + Twine(first.dim_value()),
                  kExitBadUsage);
  }
  // The note spells out the flag to write: known dims as they are, dynamic
  // ones by their symbol.
  SmallVector<int64_t> dims;
  SmallVector<std::string> hint;
  std::optional<std::string> dynamic;
  for (int i = 0; i < tensorType.shape().dim_size(); ++i) {
    const auto &dim = tensorType.shape().dim(i);
    bool batch = i == 0 && options.batchSize > 0;
    bool known = batch || (dim.has_dim_value() && dim.dim_value() >= 0);
    int64_t value = batch ? options.batchSize : dim.dim_value();
    std::string symbol = dim.has_dim_param() && !dim.dim_param().empty() ? dim.dim_param()
                                                                         : "d" + std::to_string(i);
    hint.push_back(known ? std::to_string(value) : "<" + symbol + ">");
    if (!known && !dynamic)
      dynamic = "input '" + name + "' dim " + std::to_string(i) + " is dynamic" +
                (dim.has_dim_param() ? " ('" + dim.dim_param() + "')" : "");
    dims.push_back(known ? value : 0);
  }
  if (dynamic)
    return fail(*dynamic, "bind it with --input-shape " + name + "=" + llvm::join(hint, "x"));
  return typeOf(dims);
}

/// The handlers of `domain`, or null for a domain cleave does not import.
const OpImporterTable *Importer::tableFor(StringRef domain) const {
  if (isDefaultDomain(domain))
    return &opImporters;
  return domain == kTrainingDomain ? &trainingOpImporters : nullptr;
}

/// Every operator of the model cleave does not import, each with its count
/// and first node, so that one import tells a user all that is missing.
std::string Importer::unsupportedOperators() const {
  struct Missing {
    int count = 0;
    std::string first;
  };
  llvm::MapVector<std::string, Missing, std::map<std::string, unsigned>> missing;
  auto scan = [&](const onnx::GraphProto &graph) {
    for (auto [index, node] : llvm::enumerate(graph.node())) {
      StringRef domain = node.domain();
      const OpImporterTable *table = tableFor(domain);
      if (table && table->lookup(node.op_type()))
        continue;
      std::string op = isDefaultDomain(domain) ? node.op_type()
                                               : node.op_type() + " of " + domain.str();
      Missing &entry = missing[op];
      if (entry.count++ == 0)
        entry.first = node.name().empty() ? "#" + std::to_string(index) : "'" + node.name() + "'";
    }
  };
  scan(model.graph());
  for (int i = 0; stepFromTrainingInfo && i < model.training_info_size(); ++i)
    scan(model.training_info(i).algorithm());
  SmallVector<std::string> listed;
  for (const auto &[op, entry] : missing)
    listed.push_back(op + " (" + std::to_string(entry.count) +
                     (entry.count == 1 ? " node, " : " nodes, first ") + entry.first + ")");
  return "the model's unsupported operators: " + llvm::join(listed, ", ") +
         "; docs/ops.md lists those cleave imports";
}

LogicalResult Importer::importNode(const onnx::NodeProto &node, int index, StringRef scope) {
  StringRef domain = node.domain();
  std::string nodeName = node.name().empty() ? "#" + std::to_string(index)
                                             : "'" + node.name() + "'";
  auto opsetIt = opsets.find(isDefaultDomain(domain) ? "" : domain);
  int64_t opset = opsetIt == opsets.end() ? 0 : opsetIt->second;
  std::string where = (scope.empty() ? "" : scope.str() + ": ") + "node " + nodeName + " (" +
                      node.op_type() + ", domain '" + displayDomain(domain).str() +
                      "', opset " + std::to_string(opset) + ")";
  const OpImporterTable *table = tableFor(domain);
  if (!table)
    return fail(where + ": unsupported operator domain '" + domain + "'", unsupportedOperators());
  if (table == &trainingOpImporters && opset != 1)
    return fail(where + ": cleave imports version 1 of domain '" + kTrainingDomain + "'");
  const OpImporter *found = table->lookup(node.op_type());
  if (!found)
    return fail(where + ": unsupported operator", unsupportedOperators());
  const OpImporter &opImporter = *found;
  unsigned numInputs = node.input_size();
  if (numInputs < opImporter.minInputs || numInputs > opImporter.maxInputs)
    return fail(where + ": takes " +
                (opImporter.minInputs == opImporter.maxInputs
                     ? Twine(opImporter.minInputs)
                     : opImporter.maxInputs == kVariadic
                           ? Twine(opImporter.minInputs) + " or more"
                           : Twine(opImporter.minInputs) + " to " + Twine(opImporter.maxInputs)) +
                " inputs, got " + Twine(numInputs));
  for (unsigned i = 0; i < opImporter.minInputs; ++i)
    if (node.input(i).empty())
      return fail(where + ": input " + Twine(i) + " is required but has no name");

  SmallVector<Value> inputs;
  for (const std::string &name : node.input()) {
    if (name.empty()) {
      inputs.push_back(Value());
      continue;
    }
    auto value = values.find(name);
    if (value == values.end())
      return fail(where + ": input '" + name +
                  "' is not produced by any node, graph input or initializer");
    inputs.push_back(value->second);
  }

  noteTrainingHazards(node, where, inputs);

  std::string message;
  ScopedDiagnosticHandler capture(&context, [&](Diagnostic &diagnostic) {
    if (message.empty() && diagnostic.getSeverity() == DiagnosticSeverity::Error)
      message = diagnostic.str();
    return success();
  });
  Location loc = NameLoc::get(builder.getStringAttr(node.name().empty() ? nodeName : node.name()),
                              FileLineColLoc::get(&context, path, 0, 0));
  NodeContext nodeContext(node, opset, builder, loc, std::move(inputs));
  Results results = opImporter.handler(nodeContext);
  if (failed(results))
    return fail(where + ": " + (message.empty() ? "could not be imported" : message));

  if (static_cast<size_t>(node.output_size()) > results->size())
    return fail(where + ": has " + Twine(node.output_size()) + " outputs, cleave produces " +
                Twine(results->size()));
  ArrayAttr deviceConfig = deviceConfigAttr(builder, node);
  for (auto [name, value] : llvm::zip_first(node.output(), *results)) {
    if (name.empty())
      continue;
    values[name] = value;
    if (Operation *producer = value.getDefiningOp(); producer && deviceConfig)
      producer->setAttr(kDeviceConfigAttr, deviceConfig);
  }
  return success();
}

/// The ONNX name of `value` when it is a parameter of @forward.
static std::optional<std::string> parameterName(Value value) {
  StringAttr kind = argumentKind(value);
  if (!kind || kind.getValue() != "param")
    return std::nullopt;
  auto arg = cast<BlockArgument>(value);
  return cast<func::FuncOp>(arg.getOwner()->getParentOp())
      .getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr)
      .str();
}

void Importer::noteTrainingHazards(const onnx::NodeProto &node, StringRef where,
                                   ArrayRef<Value> inputs) {
  // Once each, though a training_info step imports the main graph again.
  auto warn = [&](Warning warning) {
    if (llvm::none_of(warnings, [&](const Warning &w) { return w.what == warning.what; }))
      warnings.push_back(std::move(warning));
  };
  // torch's eval-mode export merges equal initializers (every zero bias) and
  // reads the others through Identity: trained, they become one parameter.
  if (node.op_type() == "Identity" && node.output_size() == 1 && !inputs.empty())
    if (std::optional<std::string> shared = parameterName(inputs[0]))
      warn(
          {path, where.str() + ": '" + node.output(0) + "' is parameter '" + *shared +
                     "' read again, so both train as one parameter",
           "torch's eval-mode export merges equal initializers this way; export with "
           "torch.onnx.export(..., training=torch.onnx.TrainingMode.TRAINING, "
           "do_constant_folding=False) to keep them apart",
           {*shared}});
  // An inference-mode BatchNorm's running statistics are float initializers,
  // so parameters, which the optimizer would move.
  bool inferenceBatchNorm =
      node.op_type() == "BatchNormalization" && inputs.size() == 5 &&
      llvm::none_of(node.attribute(), [](const onnx::AttributeProto &a) {
        return a.name() == "training_mode" && a.i() != 0;
      });
  if (!inferenceBatchNorm)
    return;
  std::optional<std::string> mean = parameterName(inputs[3]), var = parameterName(inputs[4]);
  if (!mean || !var)
    return;
  warn({path,
                      where.str() + ": the running statistics '" + *mean + "' and '" + *var +
                          "' of an inference-mode BatchNorm train as parameters",
                      "freeze them (--freeze '" + *mean + "' --freeze '" + *var +
                          "'), or export the model in training mode",
                      {*mean, *var}});
}

LogicalResult Importer::checkOutput(const onnx::ValueInfoProto &output, Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  if (!output.type().has_tensor_type())
    return success();
  const auto &declared = output.type().tensor_type();
  Type element = elementTypeFromOnnx(&context, declared.elem_type());
  if (declared.elem_type() != 0 && element != type.getElementType())
    return fail("output '" + output.name() + "' is declared " +
                onnxTypeName(declared.elem_type()) + " but computes to another element type");
  if (!declared.has_shape())
    return success();
  bool mismatch = declared.shape().dim_size() != type.getRank();
  for (int i = 0; !mismatch && i < declared.shape().dim_size(); ++i) {
    const auto &dim = declared.shape().dim(i);
    mismatch = dim.has_dim_value() && dim.dim_value() != type.getDimSize(i);
  }
  if (!mismatch)
    return success();
  return fail("output '" + output.name() + "' is declared " + declaredShape(declared) +
              " but computes to " + shapeString(type.getShape()));
}

FailureOr<ImportedModel> importOnnxModel(MLIRContext &context, StringRef path,
                                         const ImportOptions &options, UserError &error) {
  context.loadDialect<CleaveDialect, func::FuncDialect>();
  Importer importer(context, path, options, error);
  return importer.run();
}

LogicalResult parseInputShape(StringRef flag, ImportOptions &options, UserError &error) {
  SmallVector<StringRef> bindings;
  flag.split(bindings, ',');
  for (StringRef binding : bindings) {
    auto [name, dimsText] = binding.split('=');
    auto bad = [&](const Twine &why) {
      error = UserError{"--input-shape '" + flag.str() + "'", why.str(),
                        "write it as NAME=8x32 (NAME= for a scalar), several joined by ','",
                        kExitBadUsage};
      return failure();
    };
    if (name.empty() || !binding.contains('='))
      return bad("expected NAME=DIMS");
    std::vector<int64_t> dims;
    if (!dimsText.empty()) {
      SmallVector<StringRef> parts;
      dimsText.split(parts, 'x');
      for (StringRef part : parts) {
        int64_t d;
        if (part.getAsInteger(10, d) || d < 0)
          return bad("'" + part + "' is not a dim size");
        dims.push_back(d);
      }
    }
    if (!options.inputShapes.emplace(name.str(), dims).second)
      return bad("binds '" + name + "' twice");
  }
  return success();
}

} // namespace cleave
