//===- PlanWriter.cpp - plan.json and weights.bin ------------------------===//

#include "compiler/PlanWriter.h"

#include "dialects/Cleave/CleaveOps.h"
#include "passes/Collectives.h"
#include "passes/CostModel.h"
#include "passes/Passes.h"
#include "passes/PipelineSimulator.h"
#include "runtime/ConvScratch.h"
#include "runtime/Cores.h"
#include "runtime/Plan.h"
#include "runtime/cpu/ConvPrimitives.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/ProductPrimitives.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>

using namespace mlir;

namespace cleave {
namespace {

/// The runtime's type of an element type of the IR (every one the importer
/// admits has a runtime name).
rt::DType runtimeDType(Type element) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << element;
  rt::DType dtype = rt::DType::F32;
  (void)rt::dtypeFromName(text, dtype);
  return dtype;
}

/// The runtime's description of a tensor of the IR.
rt::TensorSpec tensorSpec(StringRef name, Type type) {
  auto tensor = cast<RankedTensorType>(type);
  rt::TensorSpec spec{name.str(), runtimeDType(tensor.getElementType()), {}};
  spec.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
  return spec;
}

/// A constant's bytes in host layout (bools one byte each).
/// cleave-index-ranges' record of an input.
rt::IndexRange indexRange(DictionaryAttr attr) {
  auto integer = [&](StringRef key) { return attr.getAs<IntegerAttr>(key).getInt(); };
  rt::IndexRange range{integer("low"), integer("high"), std::nullopt,
                       attr.getAs<StringAttr>("reader").str()};
  if (attr.get("ignored"))
    range.ignored = integer("ignored");
  return range;
}

std::vector<char> constantBytes(ConstantOp op) {
  auto dense = cast<DenseElementsAttr>(op.getValue());
  auto type = cast<RankedTensorType>(dense.getType());
  std::vector<char> bytes;
  if (type.getElementType().isInteger(1)) {
    for (bool v : dense.getValues<bool>())
      bytes.push_back(v ? 1 : 0);
    return bytes;
  }
  int64_t size = tensorBytes(type);
  ArrayRef<char> raw = dense.getRawData();
  for (int64_t i = 0; i < size; ++i)
    bytes.push_back(raw[dense.isSplat() ? i % raw.size() : i]);
  return bytes;
}

std::string absolutePath(StringRef path) {
  llvm::SmallString<256> absolute(path);
  llvm::sys::fs::make_absolute(absolute);
  return absolute.str().str();
}

int64_t elements(Value v) { return cast<RankedTensorType>(v.getType()).getNumElements(); }

/// The part of `data` (of `globalShape`) that rank `rank` of `ranks` holds
/// under `split`.
std::vector<char> rankPart(const TensorData &data, const std::vector<int64_t> &globalShape,
                           const rt::DimSplit &split, int64_t ranks, int64_t rank) {
  int64_t element = static_cast<int64_t>(data.bytes.size()) / data.type.getNumElements();
  std::vector<char> out(data.bytes.size() / ranks);
  rt::forEachSplitRun(globalShape, split, ranks, rank,
                      [&](int64_t global, int64_t local, int64_t count) {
                        std::memcpy(out.data() + local * element,
                                    data.bytes.data() + global * element, count * element);
                      });
  return out;
}

/// The module's device mesh, if it has one.
shard::GridOp getGrid(ModuleOp module) {
  auto grids = module.getOps<shard::GridOp>();
  return grids.empty() ? shard::GridOp() : *grids.begin();
}

/// `values` as the runtime's Dims.
rt::Dims dimsOf(ArrayRef<int64_t> values) {
  rt::Dims dims;
  for (int64_t v : values)
    dims.values[dims.size++] = v;
  return dims;
}

/// The scratch a product of bf16 or f16 factors allocates on the CPU for one
/// call: their f32 copies, and a bf16 result's f32 sum, where they are
/// widened (ProductPrimitives.h; bf16 ones unless `bf16Primitives`).
int64_t productScratchBytes(Operation *op, bool bf16Primitives) {
  auto a = cast<RankedTensorType>(op->getOperand(0).getType());
  auto b = cast<RankedTensorType>(op->getOperand(1).getType());
  auto result = cast<RankedTensorType>(op->getResult(0).getType());
  Type element = a.getElementType();
  if (!element.isBF16() && !element.isF16())
    return 0;
  const rt::DType factors = runtimeDType(element);
  if (rt::cpu::productOperands(factors, bf16Primitives) == factors)
    return 0;
  return rt::cpu::widenedProductScratchBytes(a.getNumElements(), b.getNumElements(),
                                             runtimeDType(result.getElementType()),
                                             result.getNumElements());
}

/// The activation fused into `op` (cleave-fuse-activations; none: None).
rt::Activation activationOf(Operation *op) {
  auto activation = op->getAttrOfType<StringAttr>("activation");
  if (!activation)
    return rt::Activation::None;
  return activation.getValue() == "relu"   ? rt::Activation::Relu
         : activation.getValue() == "gelu" ? rt::Activation::Gelu
                                           : rt::Activation::None;
}

/// The product a matmul or gemm `op` runs on the CPU as its kernel poses it
/// to oneDNN (runtime/cpu/ProductPrimitives.h), with its in-place
/// accumulation where the memory plan writes the result over c (but on a
/// `firstCall` of a gemm marked cleave.first_call_writes, which writes it);
/// none for products with nothing to compute, f64 and integer ones
/// (OpenBLAS and loops) and other ops. bf16 factors run as bf16 primitives
/// where `bf16Primitives`, else widened (ProductPrimitives.h).
std::optional<rt::cpu::ProductProblem> productProblemOf(Operation *op, bool bf16Primitives,
                                                        bool firstCall = false) {
  if (!isa<MatMulOp, GemmOp>(op))
    return std::nullopt;
  Type element = getElementTypeOrSelf(op->getOperand(0));
  if (!element.isF32() && !element.isBF16() && !element.isF16())
    return std::nullopt;
  const rt::DType type = rt::cpu::productOperands(runtimeDType(element), bf16Primitives);
  auto shape = [](Value v) { return dimsOf(cast<RankedTensorType>(v.getType()).getShape()); };
  const bool constant = op->hasAttr(kConstantWeightsAttr);
  rt::cpu::ProductProblem problem;
  if (auto matmul = dyn_cast<MatMulOp>(op)) {
    problem = rt::cpu::matmulProblem(type, shape(matmul.getLhs()), shape(matmul.getRhs()),
                                     shape(matmul.getOutput()), matmul.getTransA(),
                                     matmul.getTransB(), constant);
  } else {
    auto gemm = cast<GemmOp>(op);
    const float beta =
        firstCall && op->hasAttr(kFirstCallWritesAttr) ? 0.0f : gemm.getBeta().convertToFloat();
    const bool added = gemm.getC() && beta != 0.0f;
    auto inPlace = op->getAttrOfType<DenseI64ArrayAttr>(kInPlaceOffsetsAttr);
    const rt::Dims c = added ? shape(gemm.getC()) : rt::Dims{};
    problem = rt::cpu::gemmProblem(
        type, runtimeDType(gemm.getType().getElementType()), shape(gemm.getA()), shape(gemm.getB()),
        added ? &c : nullptr, added && inPlace && inPlace[0] >= 0, gemm.getAlpha().convertToFloat(),
        beta, gemm.getTransA(), gemm.getTransB(), activationOf(op), constant);
  }
  if (problem.m == 0 || problem.n == 0 || problem.k == 0)
    return std::nullopt;
  return problem;
}

/// The convolution (or adjoint) `op` computes, as the CPU kernel poses it to
/// oneDNN (runtime/cpu/ConvPrimitives.h): its pass, shapes, attributes and
/// factors (x's type, or y's gradient's: bf16 with --precision bf16), and
/// whether its weights are kept (cleave-constant-weights); none for other
/// ops.
std::optional<rt::cpu::ConvProblem> convProblemOf(Operation *op) {
  // The shapes of the convolution's input, weights and output.
  Value x, w, y;
  rt::cpu::ConvPass pass = rt::cpu::ConvPass::Forward;
  bool bias = false;
  if (auto conv = dyn_cast<ConvOp>(op)) {
    std::tie(x, w, y) = std::make_tuple(conv.getX(), conv.getW(), conv.getY());
    bias = static_cast<bool>(conv.getB());
  } else if (auto input = dyn_cast<ConvGradInputOp>(op)) {
    std::tie(x, w, y) = std::make_tuple(input.getOutput(), input.getW(), input.getGrad());
    pass = rt::cpu::ConvPass::GradInput;
  } else if (auto weight = dyn_cast<ConvGradWeightOp>(op)) {
    std::tie(x, w, y) = std::make_tuple(weight.getX(), weight.getOutput(), weight.getGrad());
    pass = rt::cpu::ConvPass::GradWeight;
  } else {
    return std::nullopt;
  }
  auto shape = [](Value v) { return dimsOf(cast<RankedTensorType>(v.getType()).getShape()); };
  auto dims = [&](StringRef name) {
    return dimsOf(op->getAttrOfType<DenseI64ArrayAttr>(name).asArrayRef());
  };
  const rt::DType factorType = runtimeDType(getElementTypeOrSelf(op->getOperand(0)));
  // A fused ReLU (cleave-fuse-activations) is part of the primitive too.
  return rt::cpu::convProblem(pass, shape(x), shape(w), shape(y), dims("strides"), dims("pads"),
                              dims("dilations"), op->getAttrOfType<IntegerAttr>("group").getInt(),
                              bias, factorType, activationOf(op),
                              op->hasAttr(kConstantWeightsAttr));
}

/// The oneDNN primitive a convolution `problem` runs as on the CPU on
/// `threads` threads, or null where oneDNN does not take it. Its scratch
/// holds oneDNN's scratchpad, sized for the threads (ConvPrimitives.h).
std::unique_ptr<rt::cpu::ConvPrimitive> convPrimitiveOf(const rt::cpu::ConvProblem &problem,
                                                        int threads) {
  if (problem.factors != rt::DType::F32 && problem.factors != rt::DType::BF16)
    return nullptr;
  return rt::cpu::ConvPrimitive::create(problem, threads);
}

/// What a kernel allocates on `target` outside the arena: the scratch of one
/// call, oneDNN's scratchpad of a product (which the products share), and
/// the copy in oneDNN's layout of constant weights
/// (cleave-constant-weights), which the kernel keeps for the run, one per
/// weights and `keptKey` (ProductPrimitives.h: a product's B by its
/// orientation; ConvPrimitives.h: a convolution's weights by its problem).
struct KernelMemory {
  int64_t scratchBytes = 0, productScratchpadBytes = 0, keptWeightBytes = 0;
  std::vector<int64_t> keptKey;
};

/// A convolution's scratch outside oneDNN: the im2col columns
/// (runtime/ConvScratch.h) of `problem` on `target`, of `element`s (on
/// CUDA, conv_grad_input's columns are its f32 products).
int64_t im2colScratchBytes(const rt::cpu::ConvProblem &problem, Type element, StringRef target) {
  const rt::ConvColumns columns = rt::cpu::im2colColumns(problem);
  const int64_t elementBytes = element.getIntOrFloatBitWidth() / 8;
  if (target == "cuda")
    return rt::cudaScratchBytes(columns, problem.pass == rt::cpu::ConvPass::GradInput
                                             ? static_cast<int64_t>(sizeof(float))
                                             : elementBytes);
  return rt::cpuScratchElements(columns) * elementBytes;
}

/// `op`'s KernelMemory on `target` with `threads` threads a rank: a
/// convolution's scratch on the CPU the operands in oneDNN's layouts where
/// oneDNN takes it (kept weights not among them) and its scratchpad, else
/// the im2col columns, and on the CPU an f32 one's products' largest
/// scratchpad (im2colProducts); a product's on the CPU its widened factors
/// (productScratchBytes) and its scratchpad, asked of `products`;
/// constant weights' copies on the CPU only; nothing for other ops. bf16
/// factors, of products and convolutions, are widened unless
/// `bf16Primitives`.
KernelMemory kernelMemory(Operation *op, StringRef target, int threads, bool bf16Primitives,
                          rt::cpu::ProductPrimitives &products) {
  KernelMemory memory;
  const bool cpu = target != "cuda";
  const bool constant = cpu && op->hasAttr(kConstantWeightsAttr);
  if (cpu && isa<MatMulOp, GemmOp>(op)) {
    memory.scratchBytes = productScratchBytes(op, bf16Primitives);
    // A gemm that writes its accumulator on the first call poses another
    // product then.
    SmallVector<bool, 2> firstCalls = {false};
    if (op->hasAttr(kFirstCallWritesAttr))
      firstCalls.push_back(true);
    for (bool firstCall : firstCalls)
      if (std::optional<rt::cpu::ProductProblem> problem =
              productProblemOf(op, bf16Primitives, firstCall))
        memory.productScratchpadBytes = std::max<int64_t>(
            memory.productScratchpadBytes, products.scratchpadBytes(*problem, threads));
    if (constant) {
      ArrayRef<int64_t> shape = cast<RankedTensorType>(op->getOperand(1).getType()).getShape();
      auto transB = op->getAttrOfType<BoolAttr>("trans_b");
      bool transposed = transB && transB.getValue();
      memory.keptWeightBytes = transposed ? rt::cpu::packedWeightsBytes(shape[1], shape[0])
                                          : rt::cpu::packedWeightsBytes(shape[0], shape[1]);
      memory.keptKey = {transposed};
    }
    return memory;
  }
  std::optional<rt::cpu::ConvProblem> problem = convProblemOf(op);
  if (!problem)
    return memory;
  const rt::cpu::ConvProblem runs = rt::cpu::primitiveProblem(*problem, bf16Primitives);
  if (auto primitive = cpu ? convPrimitiveOf(runs, threads) : nullptr) {
    memory.scratchBytes = rt::cpu::widenedFactors(*problem, runs).bytes + primitive->scratchBytes();
    if (constant) {
      memory.keptWeightBytes = primitive->packedWeightBytes();
      memory.keptKey = rt::cpu::convProblemKey(*problem);
    }
    return memory;
  }
  memory.scratchBytes =
      im2colScratchBytes(*problem, getElementTypeOrSelf(op->getOperand(0)), target);
  if (cpu && problem->factors == rt::DType::F32)
    for (const rt::cpu::ProductProblem &product : rt::cpu::im2colProducts(*problem))
      memory.productScratchpadBytes = std::max<int64_t>(memory.productScratchpadBytes,
                                                        products.scratchpadBytes(product, threads));
  return memory;
}

/// plan.json and the weights blobs of a memory-planned module, built in
/// named steps: the stored tensors of every function, the constants and
/// FLOPs, the collectives, the outputs, the training settings; then the
/// blobs, one per rank coordinate they differ along.
class PlanBuilder {
public:
  PlanBuilder(ModuleOp module, const ImportedModel &model, const CompileOptions &options)
      : module(module), model(model), options(options), grid(getGrid(module)) {
    for (const std::vector<Parameter> *list : {&model.parameters, &model.state})
      for (const Parameter &p : *list)
        initialValues[p.name] = &p;
  }

  LogicalResult build(UserError &error);
  LogicalResult writeFiles(StringRef dir, UserError &error);
  /// The plan's build id, and what the program is generated for.
  void setBuildId(const std::string &id) { plan.buildId = id; }
  std::string programInterface() const { return rt::programInterface(plan); }

private:
  /// A parameter whose initial bytes differ by rank: split over tp and/or
  /// sliced over dp by ZeRO 3 (this rank's elements of the flattened,
  /// padded parameter).
  struct RankedParameter {
    const Parameter *parameter;
    int64_t offset;
    rt::Sharding sharding;
  };
  /// Collectives per step of one kind on one mesh axis.
  struct Traffic {
    int64_t calls = 0, bufferBytes = 0, payloadBytes = 0, sentBytes = 0;
  };

  void setMesh();
  void setFlatParameters();
  void addStoredArguments(func::FuncOp func);
  void addStored(func::FuncOp func, unsigned index);
  void addConstantsAndCosts(func::FuncOp func);
  /// How often a step calls `func`: a forward or a pipeline stage's backward
  /// once per microbatch, a @narrow_weights run once a run never, the rest
  /// once.
  int64_t callsPerStep(func::FuncOp func) const {
    if (func->hasAttr(kRunOnceAttr))
      return 0;
    return llvm::is_contained(kMicrobatchFunctions, func.getSymName()) ? options.training.gradAccum
                                                                       : 1;
  }
  LogicalResult countCollectives(func::FuncOp func, UserError &error);
  void count(StringRef kind, int64_t axis, int64_t calls, int64_t buffer, int64_t payload);
  void setCollectives();
  void setMemory();
  void setTraining();
  /// The buckets cleave-overlap-gradients starts in @forward, in order.
  std::optional<rt::TrainingSpec::StartedCollectives> gradientBuckets();
  /// The gathers, reduce-scatters or tp sums (`Collective`) marked
  /// cleave.started, in module order: their mesh axis and whole buffers'
  /// bytes.
  template <typename Collective>
  std::optional<rt::TrainingSpec::StartedCollectives> startedInPrograms();
  /// A pipeline stage's actions and stash, from the module's schedule.
  std::optional<rt::PipelineSpec> pipelineStage();
  /// The blob of the rank at `coordinates`.
  std::vector<char> blob(const std::vector<int> &coordinates) const;

  ModuleOp module;
  const ImportedModel &model;
  const CompileOptions &options;
  shard::GridOp grid;
  rt::Plan plan;
  /// The blob's bytes every rank shares.
  /// The blob's bytes before any rank's parts; empty with --emit plan,
  /// which writes no weights (and imports no parameter values).
  std::vector<char> weights;
  bool withWeights() const { return options.emit != "plan"; }
  std::vector<RankedParameter> rankedParameters;
  /// Parameters and state with an initial value, by name.
  llvm::StringMap<const Parameter *> initialValues;
  /// Where each tp rank's blob holds its tp coordinate (an i64).
  std::vector<int64_t> tpCoordinates;
  /// Inputs by index, as functions share them by name (cleave-memory-plan).
  std::map<int64_t, rt::TensorSpec> inputsByIndex;
  llvm::StringSet<> seen;
  llvm::StringMap<rt::Sharding> parameterShardings;
  std::map<std::pair<std::string, int64_t>, Traffic> traffic;
  /// The flat parameter buffer's unpadded bytes (ZeRO 1/2): what its
  /// collectives must move at least.
  int64_t flatPayload = 0;
  /// The constant weights the CPU keeps in oneDNN's layout, counted once
  /// each as the kernels keep them: a product's B by its orientation
  /// (ProductPrimitives.h), a convolution's weights by its problem
  /// (ConvPrimitives.h).
  std::set<std::pair<const void *, std::vector<int64_t>>> keptWeights;
  /// The products' oneDNN primitives, asked for their scratchpads.
  rt::cpu::ProductPrimitives products;
  /// How this CPU's kernels run products and convolutions of bf16 factors
  /// (cpu::Context's default), read once for the plan.
  const bool bf16Primitives = rt::cpu::bf16PrimitivesByDefault();
};

void PlanBuilder::setMesh() {
  if (!grid)
    return;
  rt::Mesh mesh;
  auto names = grid->getAttrOfType<ArrayAttr>(kAxesAttr);
  for (auto [name, size] : llvm::zip(names.getAsValueRange<StringAttr>(), grid.getShape())) {
    mesh.axisNames.push_back(name.str());
    mesh.shape.push_back(static_cast<int>(size));
  }
  plan.mesh = mesh;
  plan.deterministic = options.training.deterministic;
}

void PlanBuilder::setFlatParameters() {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  rt::FlatBuffer flat;
  flat.name = flatBufferName("flat:params", forward);
  for (auto [i, arg] : llvm::enumerate(forward.getArguments())) {
    auto group = forward.getArgAttrOfType<StringAttr>(i, kFlatMemberAttr);
    if (!group || group.getValue() != flat.name)
      continue;
    flatPayload += tensorBytes(cast<RankedTensorType>(arg.getType()));
    flat.members.push_back({forward.getArgAttrOfType<StringAttr>(i, kNameAttr).str(),
                            forward.getArgAttrOfType<IntegerAttr>(i, kFlatOffsetAttr).getInt(),
                            cast<RankedTensorType>(arg.getType()).getNumElements()});
  }
  if (flat.members.empty())
    return;
  for (auto func : module.getOps<func::FuncOp>())
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (auto size = func.getArgAttrOfType<IntegerAttr>(i, kFlatSizeAttr);
          size && func.getArgAttrOfType<StringAttr>(i, kNameAttr).getValue() == flat.name)
        flat.slices.elements = size.getInt();
  flat.slices.axis = "dp";
  flat.slices.slice = flat.slices.elements / plan.mesh->shape[plan.mesh->axisIndex("dp")];
  plan.flatBuffers = {flat};
}

void PlanBuilder::addStored(func::FuncOp func, unsigned i) {
  Value arg = func.getArgument(i);
  StringRef name = func.getArgAttrOfType<StringAttr>(i, kNameAttr).getValue();
  rt::StoredTensor stored;
  stored.tensor = tensorSpec(name, arg.getType());
  stored.offset = func.getArgAttrOfType<IntegerAttr>(i, kWeightsOffsetAttr).getInt();
  stored.bytes = tensorBytes(cast<RankedTensorType>(arg.getType()));
  if (func.getArgAttrOfType<StringAttr>(i, kKindAttr).getValue() == "state") {
    stored.role = func.getArgAttr(i, kTpCoordinateAttr)  ? rt::StoredRole::Coordinate
                  : func.getArgAttr(i, kAccumulatorAttr) ? rt::StoredRole::Accumulator
                  : func.getArgAttr(i, kModelStateAttr)  ? rt::StoredRole::ModelState
                  : func.getArgAttr(i, kWeightCopyAttr)  ? rt::StoredRole::WeightCopy
                                                         : rt::StoredRole::OptimizerState;
    if (stored.role == rt::StoredRole::Coordinate)
      tpCoordinates.push_back(stored.offset);
    if (auto of = func.getArgAttrOfType<StringAttr>(i, kStateOfAttr)) {
      stored.stateOf = of.str();
      if (auto sharding = parameterShardings.find(of.getValue());
          sharding != parameterShardings.end()) {
        stored.sharding = sharding->second;
        if (func.getArgAttr(i, kWholeStateAttr))
          stored.sharding->slices.reset();
      }
    }
    // Optimizer state and accumulators start at zero (the blob's initial
    // bytes); model state and the state a training_info step updates at
    // their initializers' values, a scalar with an initial value (the loss
    // scale) at that.
    const Parameter *initial = initialValues.lookup(name);
    if (initial && withWeights())
      llvm::copy(initial->value.bytes, weights.begin() + stored.offset);
    if (auto value = func.getArgAttrOfType<FloatAttr>(i, kInitialValueAttr);
        value && withWeights()) {
      const float start = static_cast<float>(value.getValueAsDouble());
      std::memcpy(weights.data() + stored.offset, &start, sizeof start);
    }
    plan.state.push_back(std::move(stored));
    return;
  }
  const Parameter *parameter = initialValues.lookup(name);
  auto dim = func.getArgAttrOfType<IntegerAttr>(i, kSplitDimAttr);
  auto zero3 = func.getArgAttrOfType<IntegerAttr>(i, kZero3ElementsAttr);
  if (dim || zero3) {
    rt::Sharding sharding;
    ArrayRef<int64_t> global = parameter->value.type.getShape();
    sharding.globalShape.assign(global.begin(), global.end());
    if (dim)
      sharding.split = rt::DimSplit{
          dim.getInt(), "tp", func.getArgAttrOfType<IntegerAttr>(i, kSplitBlocksAttr).getInt()};
    if (zero3)
      sharding.slices = rt::FlatSlices{"dp", zero3.getInt(),
                                       cast<RankedTensorType>(arg.getType()).getNumElements()};
    // Each rank's blob gets its own part (blob()).
    rankedParameters.push_back({parameter, stored.offset, sharding});
    parameterShardings[name] = sharding;
    stored.sharding = sharding;
  } else if (withWeights()) {
    llvm::copy(parameter->value.bytes, weights.begin() + stored.offset);
  }
  plan.parameters.push_back(std::move(stored));
}

void PlanBuilder::addStoredArguments(func::FuncOp func) {
  // Parameters first, so that state can take the layout of its parameter.
  for (bool parameters : {true, false}) {
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      StringRef name = func.getArgAttrOfType<StringAttr>(i, kNameAttr).getValue();
      if (!func.getArgAttr(i, kWeightsOffsetAttr)) {
        if (parameters) {
          int64_t index = func.getArgAttrOfType<IntegerAttr>(i, kInputIndexAttr).getInt();
          rt::TensorSpec &input = inputsByIndex[index] =
              tensorSpec(name, func.getArgument(i).getType());
          if (auto range = func.getArgAttrOfType<DictionaryAttr>(i, kIndexRangeAttr))
            input.indexRange = indexRange(range);
        }
        continue;
      }
      bool isParameter = func.getArgAttrOfType<StringAttr>(i, kKindAttr).getValue() == "param";
      // A flat buffer is its members' bytes again (they are listed).
      if (isParameter != parameters || func.getArgAttr(i, kFlatSizeAttr) ||
          !seen.insert(name).second)
        continue;
      addStored(func, i);
    }
  }
}

/// Whether a product's factors are bf16 or f16 (--precision).
bool multipliesLowPrecision(Operation *product) {
  Type factor = getElementTypeOrSelf(product->getOperand(0));
  return factor.isBF16() || factor.isF16();
}

/// Counts one call of `op`'s matrix product, as the CPU kernel poses it, in
/// `products` (merged with the same product's earlier calls); nothing for an
/// op that is no such product. With `everyCallFirst` (a function called
/// once a step) a gemm that writes its accumulator on its first call always
/// does; otherwise it is counted as adding on every call.
static void countProductCall(Operation *op, bool bf16Primitives, bool everyCallFirst,
                             std::vector<rt::ProductCall> &products) {
  std::optional<rt::cpu::ProductProblem> problem =
      productProblemOf(op, bf16Primitives, everyCallFirst);
  if (!problem)
    return;
  rt::ProductCall call;
  call.operands = problem->operands;
  call.result = problem->result;
  call.transA = problem->transA;
  call.transB = problem->transB;
  call.m = problem->m;
  call.n = problem->n;
  call.k = problem->k;
  call.batch = problem->batch;
  call.beta = problem->beta;
  call.bias = problem->hasBias();
  call.lowPrecision = multipliesLowPrecision(op);
  // A matmul of batched factors runs its problem once a matrix (or batch)
  // of the result.
  const int64_t results = cast<RankedTensorType>(op->getResult(0).getType()).getNumElements();
  call.calls = results / (problem->m * problem->n * problem->batch);
  // The same product is every field but the calls.
  auto product = [](const rt::ProductCall &c) {
    return std::tie(c.operands, c.result, c.transA, c.transB, c.m, c.n, c.k, c.batch, c.beta,
                    c.bias, c.lowPrecision);
  };
  auto known = llvm::find_if(products,
                             [&](const rt::ProductCall &c) { return product(c) == product(call); });
  if (known == products.end())
    products.push_back(call);
  else
    known->calls += call.calls;
}

void PlanBuilder::addConstantsAndCosts(func::FuncOp func) {
  rt::FunctionCost &cost = plan.costs.emplace_back();
  cost.function = func.getSymName().str();
  cost.callsPerStep = callsPerStep(func);
  func.walk([&](Operation *op) {
    if (op->getDialect() && isa<CleaveDialect>(op->getDialect())) {
      plan.flops += estimateFlops(op);
      if (options.target == "cpu")
        countProductCall(op, bf16Primitives, cost.callsPerStep == 1, cost.products);
      if (isa<PipelineSendOp, PipelineRecvOp>(op)) {
        Value message = isa<PipelineSendOp>(op) ? op->getOperand(0) : op->getResult(0);
        ++cost.messages;
        cost.messageBytes += tensorBytes(cast<RankedTensorType>(message.getType()));
      }
      if (isProduct(op))
        (multipliesLowPrecision(op) ? cost.lowPrecisionProductFlops : cost.productFlops) +=
            estimateFlops(op);
      else if (!isView(op)) {
        int64_t bytes = estimateBytesMoved(op);
        cost.otherBytes += bytes;
        if (bytes > rt::kStreamedKernelBytes)
          cost.streamedBytes += bytes;
      }
      cost.kernelCalls += !isView(op);
    }
    // Kernels run one at a time: the largest scratch is the one that adds,
    // and the products' largest scratchpad.
    KernelMemory kernel =
        kernelMemory(op, options.target, plan.memory.threads, bf16Primitives, products);
    plan.memory.scratchBytes = std::max(plan.memory.scratchBytes, kernel.scratchBytes);
    plan.memory.productScratchpadBytes =
        std::max(plan.memory.productScratchpadBytes, kernel.productScratchpadBytes);
    if (kernel.keptWeightBytes > 0 &&
        keptWeights.insert({op->getOperand(1).getAsOpaquePointer(), kernel.keptKey}).second)
      plan.memory.packedWeightBytes += kernel.keptWeightBytes;
    auto constant = dyn_cast<ConstantOp>(op);
    auto offset = op->getAttrOfType<IntegerAttr>(kWeightsOffsetAttr);
    if (!constant || !offset)
      return;
    std::vector<char> bytes = constantBytes(constant);
    if (withWeights())
      llvm::copy(bytes, weights.begin() + offset.getInt());
    ++plan.constantCount;
    plan.constantBytes += static_cast<int64_t>(bytes.size());
  });
}

void PlanBuilder::count(StringRef kind, int64_t axis, int64_t calls, int64_t buffer,
                        int64_t payload) {
  // What one rank sends for one call by the ring algorithm (as the runtime
  // counts it): an all-reduce 2(n-1)/n of its buffer, a reduce-scatter or
  // all-gather (n-1)/n of the whole buffer.
  int64_t n = grid.getShape()[axis], factor = kind == "all_reduce" ? 2 : 1;
  Traffic &t = traffic[{kind.str(), axis}];
  t.calls += calls;
  t.bufferBytes += calls * buffer;
  t.payloadBytes += calls * payload;
  t.sentBytes += calls * (factor * (n - 1) * buffer / n);
}

LogicalResult PlanBuilder::countCollectives(func::FuncOp func, UserError &error) {
  // @forward runs once per microbatch.
  int64_t repeats = callsPerStep(func);
  auto cannotLower = [&] {
    error = UserError{options.model, "a collective cannot be lowered (a cleave bug)", "",
                      kExitInternal};
    return failure();
  };
  // Sums begun by cleave.all_reduce_start run once a step, a call a bucket;
  // @apply's all-reduces of them only wait.
  for (auto &run : allReduceRuns(func)) {
    llvm::erase_if(run, [](shard::AllReduceOp reduce) { return reduce->hasAttr(kStartedAttr); });
    auto spans = reductionSpans(func, run);
    if (failed(spans))
      return cannotLower();
    for (const ReductionSpan &span : *spans)
      count("all_reduce", span.axis, repeats, span.wireBytes(), span.wirePayload());
  }
  // ZeRO's buckets are reduce-scatters of their spans (uneven, in place:
  // the ring's bytes of the span; ZeRO 1's once a step, ZeRO 2's packed
  // gradients' every microbatch), and the reduce-scatter of their flat
  // buffer only waits for them.
  for (Operation &op : func.getBody().front()) {
    if (!isa<AllReduceStartOp, ReduceScatterOwnedStartOp>(op))
      continue;
    FailureOr<ReductionSpan> span = bucketSpan(func, &op);
    if (failed(span))
      return cannotLower();
    count(isa<AllReduceStartOp>(op) ? "all_reduce" : "reduce_scatter", span->axis,
          span->inArena ? repeats : 1, span->wireBytes(), span->wirePayload());
  }
  func.walk([&](Operation *op) {
    auto reduce = dyn_cast<shard::AllReduceOp>(op);
    if (isa<shard::AllSliceOp>(op) || (reduce && isInPlace(reduce)) ||
        op->hasAttr(kSummedInBucketsAttr) ||
        !isa<shard::AllReduceOp, shard::ReduceScatterOp, shard::AllGatherOp>(op))
      return;
    // The whole buffer: a reduce-scatter's input, an all-gather's output.
    Value whole = isa<shard::ReduceScatterOp>(op) ? op->getOperand(0) : op->getResult(0);
    auto type = cast<RankedTensorType>(whole.getType());
    auto axes = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
    // Without padding: the gradients a packed buffer concatenates, a ZeRO 3
    // parameter's own elements, the flat parameter buffer's parameters.
    int64_t payload = tensorBytes(type);
    auto slice = dyn_cast<BlockArgument>(op->getOperand(0));
    auto elements =
        slice ? func.getArgAttrOfType<IntegerAttr>(slice.getArgNumber(), kZero3ElementsAttr)
              : IntegerAttr();
    if (auto concat = whole.getDefiningOp<ConcatOp>()) {
      payload = 0;
      for (Value part : concat.getOperands())
        if (!part.getDefiningOp<ConstantOp>())
          payload += tensorBytes(cast<RankedTensorType>(part.getType()));
    } else if (elements) {
      payload = elements.getInt() * tensorBytes(type) / type.getNumElements();
    } else if (flatPayload > 0 && type.getRank() == 1 && tensorBytes(type) >= flatPayload) {
      payload = flatPayload;
    }
    // A sum moves in its sum type (bf16 gradients: half the bytes).
    Type element = type.getElementType();
    Type wire = isa<shard::AllReduceOp, shard::ReduceScatterOp>(op) ? sumType(op) : element;
    count(op->getName().stripDialect(), axes[0], repeats,
          inWireType(tensorBytes(type), element, wire), inWireType(payload, element, wire));
  });
  return success();
}

void PlanBuilder::setCollectives() {
  // Per rank and step, next to the analytic minimum: the same ring amounts
  // of the buffers without the blob's alignment padding.
  for (const auto &[key, t] : traffic) {
    int64_t n = grid.getShape()[key.second];
    int64_t factor = key.first == "all_reduce" ? 2 : 1;
    plan.collectives.push_back({key.first, plan.mesh->axisNames[key.second], t.calls, t.bufferBytes,
                                t.sentBytes, factor * (n - 1) * t.payloadBytes / n});
  }
}

void PlanBuilder::setMemory() {
  rt::MemoryFigures &m = plan.memory;
  for (const rt::StoredTensor &p : plan.parameters)
    m.parameterBytes += p.bytes;
  for (const rt::StoredTensor &s : plan.state) {
    if (s.role == rt::StoredRole::ModelState)
      m.parameterBytes += s.bytes;
    if (s.role == rt::StoredRole::Accumulator)
      m.gradientBytes += s.bytes;
    if (s.role == rt::StoredRole::OptimizerState)
      m.optimizerStateBytes += s.bytes;
    if (s.role == rt::StoredRole::WeightCopy)
      m.weightCopyBytes += s.bytes;
  }
  auto bytesOf = [](const rt::TensorSpec &input) {
    return static_cast<int64_t>(rt::dtypeSize(input.dtype)) *
           std::accumulate(input.shape.begin(), input.shape.end(), int64_t(1),
                           std::multiplies<int64_t>());
  };
  // A stash input is read from the driver's stash sets, one per microbatch
  // in flight.
  const std::optional<rt::PipelineSpec> &pipeline =
      plan.training ? plan.training->pipeline : std::nullopt;
  for (size_t i = 0; i < plan.inputs.size(); ++i)
    (pipeline && pipeline->isStashInput(i) ? m.stashBytes : m.inputBytes) +=
        bytesOf(plan.inputs[i]);
  if (pipeline)
    m.stashBytes *= pipeline->inFlight;
  // A CPU training program reads its data inputs in the input thread's two
  // buffer sets (runtime/driver/InputPrefetch.h) instead of buffers of its
  // own; on CUDA those are pinned host memory, beside the device's.
  if (plan.training && plan.target == "cpu")
    for (size_t index : plan.training->dataInputs)
      m.inputBytes += bytesOf(plan.inputs[index]);
  m.activationBytes = plan.arenaBytes;
  m.predictedPeakBytes = plan.weightsBytes + plan.arenaBytes + m.inputBytes + m.stashBytes +
                         m.scratchBytes + m.packedWeightBytes + m.productScratchpadBytes;
}

void PlanBuilder::setTraining() {
  if (!options.train)
    return;
  rt::TrainingSpec spec;
  if (model.trainingAlgorithm) {
    // The model's training_info is the whole step: every input is data, the
    // learning rate and step live in the graph.
    spec.trainingInfo = true;
    spec.updateBinding = model.trainingAlgorithm->updates;
    for (size_t i = 0; i < plan.outputs.size(); ++i)
      if (plan.outputs[i].name == model.trainingAlgorithm->loss)
        spec.lossOutput = i;
  } else {
    const TrainOptions &t = options.training;
    spec.optimizer = t.optimizer;
    spec.lr = t.lr;
    spec.schedule = t.lrSchedule == "linear"   ? rt::LrSchedule::Linear
                    : t.lrSchedule == "cosine" ? rt::LrSchedule::Cosine
                                               : rt::LrSchedule::Constant;
    spec.warmup = t.warmup;
    spec.hyperparameters = {t.beta1,    t.beta2,    t.epsilon,     t.weightDecay,
                            t.momentum, t.nesterov, t.clipGradNorm};
    spec.gradAccum = t.gradAccum;
    // @apply's first result; with fp16, then the loss scale and whether the
    // step was skipped; with clipping, last, the gradients' norm.
    if (auto apply = module.lookupSymbol<func::FuncOp>("apply"))
      spec.lossOutput = apply->getAttrOfType<IntegerAttr>(kFirstOutputAttr).getInt();
    if (t.precision == "fp16")
      spec.lossScaling = rt::TrainingSpec::LossScaling{
          t.initialLossScale(),       t.lossScaleGrowthInterval(), t.lossScaleGrowthFactor(),
          t.lossScaleBackoffFactor(), spec.lossOutput + 1,         spec.lossOutput + 2};
    if (t.clipGradNorm > 0)
      spec.gradNormOutput = spec.lossOutput + (spec.lossScaling ? 3 : 1);
  }
  spec.pipeline = pipelineStage();
  spec.gradientBuckets = gradientBuckets();
  spec.prefetchedGathers = startedInPrograms<shard::AllGatherOp>();
  spec.overlappedReduceScatters = startedInPrograms<shard::ReduceScatterOp>();
  spec.overlappedTpSums = startedInPrograms<shard::AllReduceOp>();
  auto narrow = module.lookupSymbol<func::FuncOp>("narrow_weights");
  spec.narrowWeightsOnce = narrow && narrow->hasAttr(kRunOnceAttr);
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    if (!spec.trainingInfo && plan.inputs[i].name == "cleave.lr")
      spec.lrInput = i;
    else if (!spec.trainingInfo && plan.inputs[i].name == "cleave.step")
      spec.stepInput = i;
    else if (!spec.pipeline || !spec.pipeline->isStashInput(i))
      spec.dataInputs.push_back(i);
  }
  plan.training = spec;
}

template <typename Collective>
std::optional<rt::TrainingSpec::StartedCollectives> PlanBuilder::startedInPrograms() {
  std::optional<rt::TrainingSpec::StartedCollectives> started;
  module.walk([&](Collective op) {
    // @apply's started sums of accumulators wait for the gradient buckets.
    auto reduce = dyn_cast<shard::AllReduceOp>(op.getOperation());
    if (!op->hasAttr(kStartedAttr) || (reduce && isInPlace(reduce)))
      return;
    if (!started)
      started.emplace().axis = plan.mesh->axisNames[op.getGridAxes()[0]];
    // The whole buffer: a gather's result, a reduce-scatter's operand.
    Value whole = isa<shard::AllGatherOp>(op) ? op->getResult(0) : op->getOperand(0);
    started->bytes.push_back(tensorBytes(cast<RankedTensorType>(whole.getType())));
  });
  return started;
}

std::optional<rt::TrainingSpec::StartedCollectives> PlanBuilder::gradientBuckets() {
  std::optional<rt::TrainingSpec::StartedCollectives> buckets;
  for (StringRef name : kMicrobatchFunctions) {
    auto func = module.lookupSymbol<func::FuncOp>(name);
    if (!func)
      continue;
    for (Operation &start : func.getBody().front()) {
      if (!isa<AllReduceStartOp, ReduceScatterOwnedStartOp>(start))
        continue;
      FailureOr<ReductionSpan> span = bucketSpan(func, &start);
      if (!buckets)
        buckets.emplace().axis = plan.mesh->axisNames[span->axis];
      buckets->bytes.push_back(span->bytes);
    }
  }
  return buckets;
}

std::optional<rt::PipelineSpec> PlanBuilder::pipelineStage() {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  auto schedule = module->getAttrOfType<DictionaryAttr>(kPipelineScheduleAttr);
  auto stage = forward ? forward->getAttrOfType<IntegerAttr>(kStageAttr) : IntegerAttr();
  if (!schedule || !stage)
    return std::nullopt;
  rt::PipelineSpec p;
  auto ranks = schedule.getAs<ArrayAttr>("ranks");
  p.stage = stage.getInt();
  p.schedule = schedule.getAs<StringAttr>("kind").getValue().str();
  // "F3@1": the forward of microbatch 3 through stage 1. Stage s runs on
  // rank s mod P; the pipeline's stages are the ones its ranks run.
  for (auto [rank, list] : llvm::enumerate(ranks.getAsRange<ArrayAttr>()))
    for (Attribute text : list) {
      std::optional<PipelineAction> action =
          PipelineAction::parse(cast<StringAttr>(text).getValue());
      p.stages = std::max(p.stages, action->stage + 1);
      if (static_cast<int64_t>(rank) == p.stage % static_cast<int64_t>(ranks.size()))
        p.actions.push_back({action->str().front(), action->microbatch, action->stage});
    }
  p.inFlight = p.mostInFlight();
  // What each entry point an action runs receives, in the order it does.
  FailureOr<MeshAxes> mesh = getMesh(module);
  for (StringRef name : {"forward", "backward", "backward_weight"}) {
    auto func = module.lookupSymbol<func::FuncOp>(name);
    if (func && succeeded(mesh))
      func.walk([&](PipelineRecvOp recv) {
        MessageEnds ends = pipelineMessageEnds(recv, *mesh);
        auto type = cast<RankedTensorType>(recv.getOutput().getType());
        p.receives[name.str()].push_back(
            {ends.peer, ends.tag, runtimeDType(type.getElementType()), type.getNumElements()});
      });
  }
  // The forward's stash, and with zb-h1 the backward's.
  for (StringRef name : {"forward", "backward"}) {
    auto func = module.lookupSymbol<func::FuncOp>(name);
    if (!func)
      continue;
    int64_t first = func->getAttrOfType<IntegerAttr>(kFirstOutputAttr).getInt();
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      auto kind = func.getResultAttrOfType<StringAttr>(i, kKindAttr);
      if (!kind || kind.getValue() != "stash")
        continue;
      StringRef stash = func.getResultAttrOfType<StringAttr>(i, kNameAttr).getValue();
      for (size_t input = 0; input < plan.inputs.size(); ++input)
        if (plan.inputs[input].name == stash)
          p.stash.emplace_back(static_cast<size_t>(first + i), input);
    }
  }
  return p;
}

LogicalResult PlanBuilder::build(UserError &error) {
  plan.model = absolutePath(options.model);
  plan.target = options.target;
  plan.weightsBytes = module->getAttrOfType<IntegerAttr>(kWeightsBytesAttr).getInt();
  plan.arenaBytes = module->getAttrOfType<IntegerAttr>(kArenaBytesAttr).getInt();
  if (withWeights())
    weights.assign(plan.weightsBytes, 0);
  setMesh();
  plan.memory.threads =
      options.threads > 0 ? options.threads : rt::threadsPerRank(plan.mesh ? plan.mesh->size() : 1);
  if (plan.mesh)
    setFlatParameters();
  for (auto func : module.getOps<func::FuncOp>()) {
    addStoredArguments(func);
    addConstantsAndCosts(func);
    if (failed(countCollectives(func, error)))
      return failure();
    for (auto [i, type] : llvm::enumerate(func.getResultTypes()))
      plan.outputs.push_back(
          tensorSpec(func.getResultAttrOfType<StringAttr>(i, kNameAttr).getValue(), type));
  }
  for (auto &[index, input] : inputsByIndex)
    plan.inputs.push_back(input);
  if (plan.mesh)
    setCollectives();
  setTraining();
  setMemory();
  // Parameters split over tp make one blob per tp rank, ZeRO 3 one per dp
  // rank too.
  bool byTp = !tpCoordinates.empty() || llvm::any_of(rankedParameters, [](const auto &p) {
    return p.sharding.split.has_value();
  });
  bool byDp =
      llvm::any_of(rankedParameters, [](const auto &p) { return p.sharding.slices.has_value(); });
  if (byDp)
    plan.weightsByAxes.push_back("dp");
  if (byTp)
    plan.weightsByAxes.push_back("tp");
  return success();
}

std::vector<char> PlanBuilder::blob(const std::vector<int> &coordinates) const {
  std::vector<char> bytes = weights;
  int tpAxis = plan.mesh ? plan.mesh->axisIndex("tp") : -1;
  int dpAxis = plan.mesh ? plan.mesh->axisIndex("dp") : -1;
  int64_t tp = tpAxis < 0 ? 0 : coordinates[tpAxis], dp = dpAxis < 0 ? 0 : coordinates[dpAxis];
  for (const RankedParameter &ranked : rankedParameters) {
    const TensorData &value = ranked.parameter->value;
    std::vector<char> part = value.bytes;
    if (const auto &split = ranked.sharding.split)
      part = rankPart(value, ranked.sharding.globalShape, *split, plan.mesh->shape[tpAxis], tp);
    if (const auto &slices = ranked.sharding.slices) {
      // This dp rank's elements of the flattened part, zero past its end.
      size_t element = value.bytes.size() / value.type.getNumElements();
      size_t sliceBytes = slices->slice * element, first = dp * sliceBytes;
      std::vector<char> slice(sliceBytes, 0);
      if (first < part.size())
        std::copy(part.begin() + first, part.begin() + std::min(part.size(), first + sliceBytes),
                  slice.begin());
      part = std::move(slice);
    }
    llvm::copy(part, bytes.begin() + ranked.offset);
  }
  for (int64_t offset : tpCoordinates)
    std::memcpy(bytes.data() + offset, &tp, sizeof tp);
  return bytes;
}

LogicalResult PlanBuilder::writeFiles(StringRef dir, UserError &error) {
  auto writeFile = [&](StringRef name, StringRef bytes) {
    std::string path = (dir + "/" + name).str();
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (!ec)
      os << bytes;
    if (!ec)
      os.close();
    if (ec || os.has_error()) {
      error = UserError{path, "cannot write", "", kExitBadUsage};
      return failure();
    }
    return success();
  };
  if (failed(writeFile("plan.json", rt::planJson(plan))))
    return failure();
  if (!withWeights())
    return success();
  // One blob per coordinate of the axes it differs along (the others 0).
  const rt::Mesh mesh = plan.mesh ? *plan.mesh : rt::Mesh{};
  for (int rank = 0; rank < mesh.size(); ++rank) {
    std::vector<int> coordinates = mesh.coordinates(rank);
    bool writes = true;
    for (size_t a = 0; a < coordinates.size(); ++a)
      writes &= coordinates[a] == 0 || llvm::is_contained(plan.weightsByAxes, mesh.axisNames[a]);
    if (!writes)
      continue;
    std::vector<char> bytes = blob(coordinates);
    if (failed(writeFile(rt::weightsBlobName(plan, coordinates),
                         StringRef(bytes.data(), bytes.size()))))
      return failure();
  }
  return success();
}

} // namespace

LogicalResult writePlan(ModuleOp module, const ImportedModel &model, const CompileOptions &options,
                        StringRef dir, const std::string &buildId, std::string &programInterface,
                        UserError &error) {
  PlanBuilder builder(module, model, options);
  if (failed(builder.build(error)))
    return failure();
  builder.setBuildId(buildId);
  programInterface = builder.programInterface();
  return builder.writeFiles(dir, error);
}

} // namespace cleave
