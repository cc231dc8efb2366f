//===- LowerToEmitC.cpp - runtime kernel calls for a planned @forward ----===//
//
// Every tensor becomes a `cleave::rt::Tensor` view at its planned offset and
// every op one call of the kernel of the same name (runtime/Kernels.def), in
// the order of Kernels.def's parameters: inputs, outputs, attributes.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "passes/Collectives.h"

#include "dialects/Cleave/CleaveOps.h"
#include "runtime/ElementwiseProgram.h"
#include "runtime/ProgramEntry.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

namespace cleave {
#define GEN_PASS_DEF_LOWERTOEMITC
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

std::string dimsLiteral(ArrayRef<int64_t> dims) {
  std::string text = "cleave::rt::Dims{";
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(dims, os);
  os << "}";
  return text;
}

FailureOr<std::string> dtypeLiteral(Type type) {
  const char *name = nullptr;
  if (type.isF32()) name = "F32";
  else if (type.isF64()) name = "F64";
  else if (type.isF16()) name = "F16";
  else if (type.isBF16()) name = "BF16";
  else if (type.isInteger(1)) name = "Bool";
  else if (auto integer = dyn_cast<IntegerType>(type)) {
    static const char *const signedNames[] = {"I8", "I16", "I32", "I64"};
    static const char *const unsignedNames[] = {"U8", "U16", "U32", "U64"};
    int index = llvm::Log2_32(integer.getWidth()) - 3;
    if (index >= 0 && index < 4 && integer.getWidth() == (8u << index))
      name = integer.isUnsigned() ? unsignedNames[index] : signedNames[index];
  }
  if (!name)
    return failure();
  return std::string("cleave::rt::DType::") + name;
}

/// A C++ literal of `value` as a float (or double) that reads back exactly.
std::string floatLiteral(double value, bool isDouble) {
  if (std::isnan(value))
    return isDouble ? "__builtin_nan(\"\")" : "__builtin_nanf(\"\")";
  if (std::isinf(value))
    return std::string(value < 0 ? "-" : "") + (isDouble ? "__builtin_inf()" : "__builtin_inff()");
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::format(isDouble ? "%.17g" : "%.9g", value);
  if (text.find_first_of(".e") == std::string::npos)
    text += ".0";
  return isDouble ? text : text + "f";
}

/// `text` as a C++ string literal.
std::string stringLiteral(StringRef text) {
  std::string literal = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      literal += '\\';
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      literal += llvm::formatv("\\x{0:x-2}\"\"", static_cast<unsigned char>(c)).str();
    else
      literal += c;
  }
  return literal + "\"";
}

} // namespace

void cleave::seedUnseededDropouts(Block &body) {
  uint64_t unseeded = 0;
  for (DropoutOp dropout : body.getOps<DropoutOp>())
    if (!dropout.getSeedAttr())
      dropout.setSeedAttr(IntegerAttr::get(IntegerType::get(dropout.getContext(), 64),
                                           static_cast<int64_t>((uint64_t(1) << 63) + unseeded++)));
}

Operation *cleave::lossSumProducer(func::FuncOp forward) {
  for (BlockArgument arg : forward.getArguments()) {
    auto name = forward.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr);
    if (!name || name.getValue() != "cleave.loss_sum")
      continue;
    for (Operation *user : arg.getUsers())
      if (auto add = dyn_cast<AddOp>(user))
        for (Value operand : add->getOperands())
          if (operand != arg && operand.getDefiningOp())
            return operand.getDefiningOp();
  }
  return nullptr;
}

namespace {

/// Operands and literal arguments of one emitc.call_opaque, in call order.
class CallArgs {
public:
  explicit CallArgs(Builder &b) : b(b) {}
  void value(Value v) {
    args.push_back(b.getIndexAttr(operands.size()));
    operands.push_back(v);
  }
  void literal(StringRef text) { args.push_back(emitc::OpaqueAttr::get(b.getContext(), text)); }

  SmallVector<Value> operands;
  SmallVector<Attribute> args;

private:
  Builder &b;
};

/// How one cleave op calls its kernel: the kernel's name, the first
/// optional operand (it and those after it are passed as pointers), and the
/// attributes after the tensors.
struct KernelCall {
  StringRef kernel;
  int optionalOperand = -1;
  SmallVector<StringRef, 5> attributes;
};

/// `op`'s operands as its kernel takes them, an absent optional one null:
/// by the op's operand segments where it has them (several optional
/// operands), else its operands and then the one optional operand if the op
/// lacks it.
SmallVector<Value> kernelOperands(Operation *op, const KernelCall &kernel) {
  SmallVector<Value> operands;
  std::optional<Attribute> segments = op->getInherentAttr("operandSegmentSizes");
  if (!segments || !*segments) {
    llvm::append_range(operands, op->getOperands());
    if (static_cast<int>(operands.size()) == kernel.optionalOperand)
      operands.push_back(Value());
    return operands;
  }
  unsigned at = 0;
  for (int32_t size : cast<DenseI32ArrayAttr>(*segments).asArrayRef()) {
    if (size == 0)
      operands.push_back(Value());
    for (int32_t i = 0; i < size; ++i)
      operands.push_back(op->getOperand(at++));
  }
  return operands;
}

llvm::StringMap<KernelCall> makeKernelCalls() {
  llvm::StringMap<KernelCall> calls;
  for (StringRef same : {"neg", "sqrt", "reciprocal", "exp", "log", "abs", "tanh", "sigmoid",
                         "relu", "erf", "cast", "add", "sub", "mul", "div", "pow", "equal",
                         "less", "greater", "where", "expand", "global_average_pool", "max",
                         "min", "sign", "fmod"})
    calls[same] = {same};
#define CLEAVE_FLOAT_MATH(name, f32, f64) calls[#name] = {#name};
#include "runtime/FloatMath.def"
#undef CLEAVE_FLOAT_MATH
  calls["not"] = {"logical_not"};
  calls["leaky_relu"] = {"leaky_relu", -1, {"alpha"}};
  calls["gelu"] = {"gelu", -1, {"approximate"}};
  calls["softmax"] = {"softmax", -1, {"axis"}};
  calls["log_softmax"] = {"log_softmax", -1, {"axis"}};
  calls["softmax_grad"] = {"softmax_grad", -1, {"axis"}};
  calls["scaled_masked_softmax"] = {
      "scaled_masked_softmax", 1, {"scale", "divide", "fill", "mask_keeps"}};
  calls["scaled_masked_softmax_grad"] = {
      "scaled_masked_softmax_grad", 2, {"scale", "divide", "mask_keeps"}};
  calls["layer_normalization"] = {"layer_normalization", 2, {"axis", "epsilon"}};
  calls["layer_normalization_grad"] = {"layer_normalization_grad", -1, {"axis"}};
  calls["batch_normalization"] = {"batch_normalization", -1,
                                  {"epsilon", "momentum", "training_mode"}};
  calls["dropout"] = {"dropout", 1, {"ratio", "training_mode", "seed", "split"}};
  calls["matmul"] = {"matmul", -1, {"trans_a", "trans_b", kConstantWeightsAttr}};
  calls["gemm"] = {"gemm",
                   2,
                   {"alpha", "beta", "trans_a", "trans_b", "activation", kConstantWeightsAttr,
                    kFirstCallWritesAttr}};
  calls["transpose"] = {"transpose", -1, {"perm"}};
  calls["concat"] = {"concat", -1, {"axis"}};
  calls["fused_elementwise"] = {"fused_elementwise", -1, {"program"}};
  calls["split"] = {"split", -1, {"axis"}};
  calls["slice"] = {"slice", -1, {"starts", "steps"}};
  calls["gather"] = {"gather", -1, {"axis"}};
  calls["gather_grad"] = {"gather_grad", -1, {"axis"}};
  calls["slice_grad"] = {"slice_grad", -1, {"starts", "steps"}};
  calls["trilu"] = {"trilu", -1, {"upper", "k"}};
  calls["reduce_sum"] = {"reduce_sum", -1, {"axes"}};
  calls["reduce_mean"] = {"reduce_mean", -1, {"axes"}};
  calls["reduce_max"] = {"reduce_max", -1, {"axes"}};
  calls["reduce_prod"] = {"reduce_prod", -1, {"axes"}};
  calls["top_k"] = {"top_k", -1, {"axis", "largest"}};
  calls["conv"] = {
      "conv", 2, {"strides", "pads", "dilations", "group", "activation", kConstantWeightsAttr}};
  calls["max_pool"] = {"max_pool", -1, {"kernel_shape", "strides", "pads", "dilations"}};
  calls["average_pool"] = {"average_pool", -1,
                           {"kernel_shape", "strides", "pads", "dilations",
                            "count_include_pad"}};
  calls["conv_grad_input"] = {"conv_grad_input", -1, {"strides", "pads", "dilations", "group"}};
  calls["conv_grad_weight"] = {"conv_grad_weight", -1, {"strides", "pads", "dilations", "group"}};
  calls["max_pool_grad"] = {"max_pool_grad", -1, {"kernel_shape", "strides", "pads", "dilations"}};
  calls["average_pool_grad"] = {"average_pool_grad", -1,
                                {"kernel_shape", "strides", "pads", "dilations",
                                 "count_include_pad"}};
  calls["softmax_cross_entropy_loss"] = {"softmax_cross_entropy_loss", 2,
                                         {"reduction", "ignore_index"}};
  calls["negative_log_likelihood_loss"] = {"negative_log_likelihood_loss", 2,
                                           {"reduction", "ignore_index"}};
  calls["softmax_cross_entropy_grad"] = {
      "softmax_cross_entropy_grad", -1, {"reduction", "ignore_index"}};
  return calls;
}

class Lowering {
public:
  /// Lowers `func` (or, when null, an empty body) as `<entryPrefix><name>`.
  /// With `phased`, @apply runs in phases split at its sums over pp
  /// (LowerToEmitC's `phased-apply`).
  Lowering(ModuleOp module, func::FuncOp func, StringRef name, StringRef entryPrefix,
           StringRef target, bool phased)
      : module(module), func(func), name(name), entryPrefix(entryPrefix),
        phase(phased && name == "apply" ? 0 : -1), b(module.getContext()),
        loc(func ? func.getLoc() : module.getLoc()),
        kernelPrefix(("cleave::rt::" + target + "::").str()),
        contextType(emitc::OpaqueType::get(module.getContext(), kernelPrefix + "Context&")),
        tensorType(emitc::OpaqueType::get(module.getContext(), "cleave::rt::Tensor")),
        calls(makeKernelCalls()) {}

  LogicalResult run();

private:
  Value call(StringRef callee, Type result, CallArgs &args, ArrayAttr templateArgs = {}) {
    if (!callee.starts_with(kernelPrefix)) {
      auto op = emitc::CallOpaqueOp::create(b, loc, result ? TypeRange(result) : TypeRange(),
                                            callee, args.operands, b.getArrayAttr(args.args));
      return result ? op.getResult(0) : Value();
    }
    // Every kernel call is preceded by its mark (runtime/StepContext.h). A
    // kernel returns nothing: what it computes is in its output tensors.
    inPhase([&] {
      std::string label = callee.drop_front(kernelPrefix.size()).str();
      if (std::string node = current ? onnxNodeName(current->getLoc()) : ""; !node.empty())
        label += " " + node;
      mark("cleave::rt::markOp", stringLiteral(label));
      emitc::CallOpaqueOp::create(b, loc, TypeRange(), callee, args.operands,
                                  b.getArrayAttr(args.args), templateArgs);
    });
    return Value();
  }
  /// Emits `body`'s calls, in a phased @apply only when its phase runs:
  /// `if (cleave::rt::inApplyPhase(ctx, phase)) { ... }`. The tensors' views
  /// are made in every phase; only kernels are skipped.
  void inPhase(function_ref<void()> body) {
    if (phase < 0)
      return body();
    branch("cleave::rt::inApplyPhase", {std::to_string(phase)}, body);
  }
  /// `if (predicate(ctx, literals...)) { then(); } else { otherwise(); }`,
  /// without the else when `otherwise` is null.
  void branch(StringRef predicate, ArrayRef<std::string> literals, function_ref<void()> then,
              function_ref<void()> otherwise = nullptr) {
    CallArgs args(b);
    args.value(context);
    for (const std::string &literal : literals)
      args.literal(literal);
    Value condition = emitc::CallOpaqueOp::create(b, loc, b.getI1Type(), predicate, args.operands,
                                                  b.getArrayAttr(args.args))
                          .getResult(0);
    auto ifOp = emitc::IfOp::create(b, loc, condition, /*addThenBlock=*/true,
                                    /*addElseBlock=*/static_cast<bool>(otherwise));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(&ifOp.getThenRegion().front());
    then();
    emitc::YieldOp::create(b, loc);
    if (!otherwise)
      return;
    b.setInsertionPointToEnd(&ifOp.getElseRegion().front());
    otherwise();
    emitc::YieldOp::create(b, loc);
  }
  /// In a phased @apply, whether `op` is a sum over pp that ends a phase.
  bool endsPhase(Operation *op);
  /// A call of the mark `hook` with the context (and `label`).
  void mark(StringRef hook, StringRef label = "") {
    SmallVector<Attribute> markArgs{b.getIndexAttr(0)};
    if (!label.empty())
      markArgs.push_back(emitc::OpaqueAttr::get(b.getContext(), label));
    emitc::CallOpaqueOp::create(b, loc, TypeRange(), hook, ValueRange{context},
                                b.getArrayAttr(markArgs));
  }
  Value tensorAt(Value base, int64_t offset, Value value);
  LogicalResult lowerFirstCallAdd(Operation *op, CallArgs &args, Value out);
  /// The cleave.first_call_writes add of `op`'s result to its slot when
  /// `op` is a reduce-scatter run where it is and that add alone reads it
  /// (ZeRO 2 and 3's gradients): on its function's first call in a step the
  /// reduce-scatter writes the slot itself. Null otherwise.
  AddOp accumulationOfScatter(Operation *op);
  /// The planned buffer of `op`'s result #index: its arena offset, the
  /// weights slot it is written into in place, or the output slot of the
  /// stash it is returned as (cleave-memory-plan).
  Value resultAt(Operation *op, ArrayRef<int64_t> arenaOffsets, unsigned index);
  FailureOr<std::string> literal(Operation *op, StringRef attribute);
  LogicalResult lowerOp(Operation *op);
  LogicalResult lowerKernel(Operation *op, const KernelCall &kernel);
  /// A fused chain's program as the backends' fused_elementwise templates
  /// take it (runtime/ChainCode.h): the program, how each input is read
  /// and each output written.
  ArrayAttr chainTemplateArgs(FusedElementwiseOp chain);
  LogicalResult lowerAllReduces(ArrayRef<shard::AllReduceOp> reductions);
  /// `kernel`(ctx, the span of the weights blob as one flat tensor, axis,
  /// wire[, `last`]).
  void spanCall(StringRef kernel, const ReductionSpan &span, ArrayRef<std::string> extra = {});
  LogicalResult lowerCollective(Operation *op, ArrayRef<int16_t> axes);
  LogicalResult lowerPipelineMessage(Operation *op);

  ModuleOp module;
  func::FuncOp func;
  std::string name;
  std::string entryPrefix;
  /// The phase of a phased @apply being lowered; -1: not phased.
  int phase;
  /// In a phased @apply, the pp axis whose sums end its phases (-1: none).
  int64_t phaseAxis = -1;
  OpBuilder b;
  Location loc;
  std::string kernelPrefix;
  Type contextType, tensorType;
  llvm::StringMap<KernelCall> calls;
  llvm::DenseMap<Value, Value> tensors;
  /// The op being lowered, whose node name labels its kernels' marks.
  Operation *current = nullptr;
  /// The loss sum is lowered: the next op begins the backward.
  bool marksBackwardAfter = false;
  Value context, arena, weights, inputs, outputs;
};

Value Lowering::tensorAt(Value base, int64_t offset, Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  CallArgs args(b);
  args.value(base);
  args.literal(std::to_string(offset));
  args.literal(*dtypeLiteral(type.getElementType()));
  args.literal(dimsLiteral(type.getShape()));
  return call("cleave::rt::view", tensorType, args);
}

/// The output slot `value` is written into as a stash, or -1.
static int64_t stashSlot(Value value) {
  auto result = dyn_cast<OpResult>(value);
  auto slots = result ? result.getOwner()->getAttrOfType<DenseI64ArrayAttr>(kStashSlotsAttr)
                      : DenseI64ArrayAttr();
  return slots ? slots[result.getResultNumber()] : -1;
}

Value Lowering::resultAt(Operation *op, ArrayRef<int64_t> arenaOffsets, unsigned index) {
  auto inPlace = op->getAttrOfType<DenseI64ArrayAttr>(kInPlaceOffsetsAttr);
  if (inPlace && inPlace[index] >= 0)
    return tensorAt(weights, inPlace[index], op->getResult(index));
  if (int64_t slot = stashSlot(op->getResult(index)); slot >= 0) {
    CallArgs args(b);
    args.value(outputs);
    args.literal(std::to_string(slot));
    return call("cleave::rt::load", tensorType, args);
  }
  return tensorAt(arena, arenaOffsets[index], op->getResult(index));
}

FailureOr<std::string> Lowering::literal(Operation *op, StringRef name) {
  Attribute attr = op->getAttr(name);
  if (name == "ignore_index") // an optional attribute: a flag, then the value
    return attr ? "true, " + std::to_string(cast<IntegerAttr>(attr).getInt())
                : std::string("false, 0");
  // Every dropout is seeded (seedUnseededDropouts) before it is lowered.
  if (name == "seed")
    return std::to_string(static_cast<uint64_t>(cast<IntegerAttr>(attr).getInt())) + "ULL";
  if (isa<DropoutOp>(op) && name == "split") // optional: a whole tensor without it
    return dimsLiteral(attr ? cast<DenseI64ArrayAttr>(attr).asArrayRef() : ArrayRef<int64_t>());
  if (name == "reduction") {
    StringRef value = cast<StringAttr>(attr).getValue();
    return std::string("cleave::rt::Reduction::") +
           (value == "none" ? "None" : value == "sum" ? "Sum" : "Mean");
  }
  if (name == "activation") { // optional: none without it
    StringRef value = attr ? cast<StringAttr>(attr).getValue() : "none";
    return std::string("cleave::rt::Activation::") + (value == "relu"   ? "Relu"
                                                      : value == "gelu" ? "Gelu"
                                                                        : "None");
  }
  if (name == kConstantWeightsAttr || name == kFirstCallWritesAttr || name == "divide" ||
      name == "mask_keeps") // unit: flags
    return std::string(attr ? "true" : "false");
  if (name == "trans_a" || name == "trans_b") // false where absent
    return std::string(attr && cast<BoolAttr>(attr).getValue() ? "true" : "false");
  if (name == "approximate")
    return std::string(cast<StringAttr>(attr).getValue() == "tanh" ? "true" : "false");
  if (name == "program")
    return stringLiteral(cast<StringAttr>(attr).getValue());
  if (auto boolean = dyn_cast_or_null<BoolAttr>(attr))
    return std::string(boolean.getValue() ? "true" : "false");
  if (auto integer = dyn_cast_or_null<IntegerAttr>(attr))
    return std::to_string(integer.getInt());
  if (auto real = dyn_cast_or_null<FloatAttr>(attr))
    return floatLiteral(real.getValueAsDouble(), /*isDouble=*/false);
  if (auto dims = dyn_cast_or_null<DenseI64ArrayAttr>(attr))
    return dimsLiteral(dims.asArrayRef());
  return op->emitError("cannot pass attribute '") << name << "' to a kernel";
}

LogicalResult Lowering::lowerKernel(Operation *op, const KernelCall &kernel) {
  auto offsets = op->getAttrOfType<DenseI64ArrayAttr>(kArenaOffsetsAttr);
  if (!offsets || offsets.size() != static_cast<int64_t>(op->getNumResults()))
    return op->emitError("has no memory plan: run cleave-memory-plan first");
  SmallVector<Value> results;
  for (auto [i, result] : llvm::enumerate(op->getResults())) {
    results.push_back(resultAt(op, offsets.asArrayRef(), i));
    tensors[result] = results.back();
  }

  CallArgs args(b);
  args.value(context);
  auto listOf = [&](ArrayRef<Value> items) {
    CallArgs list(b);
    for (Value item : items)
      list.value(item);
    return call("cleave::rt::list",
                emitc::OpaqueType::get(b.getContext(), "cleave::rt::TensorList"), list);
  };
  // Its parts were made where they lie in it (cleave-memory-plan).
  if (op->hasAttr(kPartsInPlaceAttr))
    return success();
  if (isa<ConcatOp, FusedElementwiseOp>(op)) {
    SmallVector<Value> parts;
    for (Value operand : op->getOperands())
      parts.push_back(tensors.lookup(operand));
    args.value(listOf(parts));
  } else {
    SmallVector<Value> operands = kernelOperands(op, kernel);
    for (auto [i, operand] : llvm::enumerate(operands)) {
      if (kernel.optionalOperand < 0 || static_cast<int>(i) < kernel.optionalOperand) {
        args.value(tensors.lookup(operand));
      } else if (operand) {
        CallArgs pointer(b);
        pointer.value(tensors.lookup(operand));
        args.value(call("cleave::rt::some",
                        emitc::OpaqueType::get(b.getContext(), "const cleave::rt::Tensor*"),
                        pointer));
      } else {
        args.literal("nullptr");
      }
    }
  }
  if (isa<SplitOp, FusedElementwiseOp>(op)) {
    args.value(listOf(results));
  } else {
    for (Value result : results)
      args.value(result);
  }
  for (StringRef name : kernel.attributes) {
    auto text = literal(op, name);
    if (failed(text))
      return failure();
    args.literal(*text);
  }
  auto chain = dyn_cast<FusedElementwiseOp>(op);
  if (isa<AddOp>(op) && op->hasAttr(kFirstCallWritesAttr))
    return lowerFirstCallAdd(op, args, results[0]);
  call(kernelPrefix + kernel.kernel.str(), Type(), args,
       chain ? chainTemplateArgs(chain) : ArrayAttr());
  return success();
}

/// An accumulator's add marked cleave.first_call_writes (its slot the lhs):
/// on its function's first call in a step, a copy of the rhs into `out`
/// (the slot, which holds the last step's sum; none where a reduce-scatter
/// wrote the slot itself), else the add of `args`.
LogicalResult Lowering::lowerFirstCallAdd(Operation *op, CallArgs &args, Value out) {
  Operation *rhs = op->getOperand(1).getDefiningOp();
  const bool scattered = rhs && accumulationOfScatter(rhs) == op;
  branch(
      "cleave::rt::isFirstCall", {},
      [&] {
        if (scattered)
          return;
        CallArgs copy(b);
        copy.value(context);
        copy.value(tensors.lookup(op->getOperand(1)));
        copy.value(out);
        call(kernelPrefix + "copy", Type(), copy);
      },
      [&] { call(kernelPrefix + "add", Type(), args); });
  return success();
}

ArrayAttr Lowering::chainTemplateArgs(FusedElementwiseOp chain) {
  rt::ElementwiseProgram program;
  // The verifier parsed it: the op would not be here otherwise.
  (void)rt::parseElementwiseProgram(chain.getProgram().str().c_str(),
                                    static_cast<int>(chain.getInputs().size()), program);
  SmallVector<int> code{program.inputs, program.instructions, program.outputs};
  auto elementType = [](Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); };
  auto isBF16 = [&](Value v) { return elementType(v).isBF16(); };
  const int64_t n = cast<RankedTensorType>(chain.getOutputs()[0].getType()).getNumElements();
  for (Value input : chain.getInputs()) {
    const bool scalar = cast<RankedTensorType>(input.getType()).getNumElements() == 1 && n != 1;
    rt::ChainInput kind = isBF16(input)
                              ? (scalar ? rt::ChainInput::BF16Scalar : rt::ChainInput::BF16)
                          : elementType(input).isInteger(1)
                              ? (scalar ? rt::ChainInput::BoolScalar : rt::ChainInput::Bool)
                              : (scalar ? rt::ChainInput::F32Scalar : rt::ChainInput::F32);
    code.push_back(static_cast<int>(kind));
  }
  for (int k = 0; k < program.instructions; ++k) {
    const rt::ElementwiseInstruction &instruction = program.code[k];
    code.push_back(static_cast<int>(instruction.op));
    code.append(std::begin(instruction.operands), std::end(instruction.operands));
  }
  for (int o = 0; o < program.outputs; ++o)
    code.append({program.results[o],
                 static_cast<int>(isBF16(chain.getOutputs()[o]) ? rt::ChainOutput::BF16
                                                                : rt::ChainOutput::F32)});
  SmallVector<Attribute> args;
  for (int value : code)
    args.push_back(emitc::OpaqueAttr::get(b.getContext(), std::to_string(value)));
  return b.getArrayAttr(args);
}

/// A collective into an arena buffer (or, a gather's, straight into the
/// stored value it is assigned to: cleave-memory-plan): the kernel of the
/// same name (an all-reduce is a copy, then the in-place kernel; none of a
/// value made for it alone, which it sums where it is), over the op's one
/// mesh axis; a slice, the view of the rank's part. Scatters, gathers and
/// slices split dim 0.
LogicalResult Lowering::lowerCollective(Operation *op, ArrayRef<int16_t> axes) {
  if (axes.size() != 1)
    return op->emitError("only a collective over one mesh axis is lowered");
  auto reduction = op->getAttrOfType<shard::ReductionKindAttr>("reduction");
  if (reduction && reduction.getValue() != shard::ReductionKind::Sum)
    return op->emitError("only sums are lowered");
  for (StringRef dim : {"scatter_axis", "gather_axis", "slice_axis"})
    if (auto attr = op->getAttrOfType<IntegerAttr>(dim); attr && attr.getInt() != 0)
      return op->emitError("only collectives along dim 0 are lowered");
  Value in = tensors.lookup(op->getOperand(0));
  // The rank's part of `in`, the shape of op's result: a view.
  auto part = [&] {
    CallArgs args(b);
    args.value(context);
    args.value(in);
    args.literal(dimsLiteral(cast<RankedTensorType>(op->getResult(0).getType()).getShape()));
    args.literal(std::to_string(axes[0]));
    return call("cleave::rt::rankPart", tensorType, args);
  };
  if (isa<shard::AllSliceOp>(op)) {
    tensors[op->getResult(0)] = part();
    return success();
  }
  auto reduce = dyn_cast<shard::AllReduceOp>(op);
  const bool inPlace = reduce && sumsItsOperandInPlace(reduce);
  auto offsets = op->getAttrOfType<DenseI64ArrayAttr>(kArenaOffsetsAttr);
  if (!offsets && !inPlace)
    return op->emitError("has no memory plan: run cleave-memory-plan first");
  Value out = inPlace ? in : resultAt(op, offsets.asArrayRef(), 0);
  tensors[op->getResult(0)] = out;
  // A sum's kernel also takes the type it moves in, then `last` if given.
  auto kernelCall = [&](StringRef kernel, ArrayRef<Value> tensorArgs,
                        StringRef last = "") -> LogicalResult {
    CallArgs args(b);
    args.value(context);
    for (Value tensor : tensorArgs)
      args.value(tensor);
    args.literal(std::to_string(axes[0]));
    if (isa<shard::AllReduceOp, shard::ReduceScatterOp>(op)) {
      FailureOr<std::string> wire = dtypeLiteral(sumType(op));
      if (failed(wire))
        return op->emitError("sums through ") << sumType(op) << ", which has no runtime type";
      args.literal(*wire);
    }
    if (!last.empty())
      args.literal(last);
    call(kernelPrefix + kernel.str(), Type(), args);
    return success();
  };
  // A sum over tp started early (cleave-overlap-tp-sums) runs in the
  // background, in its operand's buffer, on every call (not only the last
  // microbatch's, as a bucket's).
  if (reduce && reduce->hasAttr(kStartedAttr)) {
    if (!inPlace)
      return op->emitError("is started but cannot sum its operand in place");
    return kernelCall("all_reduce_start", {out}, "false");
  }
  if (reduce) {
    if (inPlace)
      return kernelCall("all_reduce", {out});
    CallArgs copy(b);
    copy.value(context);
    copy.value(in);
    copy.value(out);
    call(kernelPrefix + "copy", Type(), copy);
    return kernelCall("all_reduce", {out});
  }
  // ZeRO's buckets summed each rank's slice of the flat gradients in
  // place: wait for them, then copy the slice (cleave-overlap-gradients
  // marks the reduce-scatter after the memory plan gave it its buffer).
  if (op->hasAttr(kSummedInBucketsAttr)) {
    CallArgs wait(b);
    wait.value(context);
    wait.value(in);
    wait.literal(std::to_string(axes[0]));
    call(kernelPrefix + "reduce_scatter_wait", Type(), wait);
    CallArgs copy(b);
    copy.value(context);
    copy.value(part());
    copy.value(out);
    call(kernelPrefix + "copy", Type(), copy);
    return success();
  }
  // A gather or reduce-scatter started early (cleave-prefetch-gathers,
  // cleave-overlap-reduce-scatters) runs in the background.
  std::string kernel = op->getName().stripDialect().str();
  if (isa<shard::AllGatherOp, shard::ReduceScatterOp>(op) && op->hasAttr(kStartedAttr))
    kernel += "_start";
  AddOp add = accumulationOfScatter(op);
  if (!add)
    return kernelCall(kernel, {in, out});
  // The sum's slot holds the last step's sum until the first call's add
  // would copy this one over it: that call scatters into the slot itself.
  LogicalResult lowered = success();
  branch(
      "cleave::rt::isFirstCall", {},
      [&] {
        lowered = kernelCall(kernel, {in, tensors.lookup(add.getLhs())});
      },
      [&] {
        if (succeeded(lowered))
          lowered = kernelCall(kernel, {in, out});
      });
  return lowered;
}

AddOp Lowering::accumulationOfScatter(Operation *op) {
  if (!isa<shard::ReduceScatterOp>(op) || op->hasAttr(kStartedAttr) ||
      op->hasAttr(kSummedInBucketsAttr) || !op->hasOneUse())
    return {};
  auto add = dyn_cast<AddOp>(*op->user_begin());
  return add && add->hasAttr(kFirstCallWritesAttr) && add.getRhs() == op->getResult(0) &&
                 add.getLhs() != op->getResult(0)
             ? add
             : AddOp();
}

/// A pipeline send or receive: to or from the pp rank of the stage it
/// names, as message 2 x tag (+ 1 for a gradient: it goes back under the
/// same tag).
LogicalResult Lowering::lowerPipelineMessage(Operation *op) {
  FailureOr<MeshAxes> mesh = getMesh(module);
  if (failed(mesh))
    return failure();
  if (mesh->ppAxis < 0)
    return op->emitError("is a pipeline message in a program without a pp axis");
  auto send = dyn_cast<PipelineSendOp>(op);
  auto recv = dyn_cast<PipelineRecvOp>(op);
  MessageEnds ends = pipelineMessageEnds(op, *mesh);
  CallArgs args(b);
  args.value(context);
  if (send) {
    args.value(tensors.lookup(send.getValue()));
  } else {
    auto offsets = op->getAttrOfType<DenseI64ArrayAttr>(kArenaOffsetsAttr);
    if (!offsets)
      return op->emitError("has no memory plan: run cleave-memory-plan first");
    tensors[recv.getOutput()] = tensorAt(arena, offsets[0], recv.getOutput());
    args.value(tensors[recv.getOutput()]);
  }
  for (int64_t literal : {mesh->ppAxis, ends.peer, ends.tag})
    args.literal(std::to_string(literal));
  call(kernelPrefix + (send ? "pipeline_send" : "pipeline_recv"), Type(), args);
  return success();
}

LogicalResult Lowering::lowerOp(Operation *op) {
  for (Value result : op->getResults())
    if (failed(dtypeLiteral(cast<RankedTensorType>(result.getType()).getElementType())))
      return op->emitError("element type ") << result.getType() << " has no runtime kernel";
  if (auto reduce = dyn_cast<shard::AllReduceOp>(op))
    return lowerCollective(op, reduce.getGridAxes());
  if (auto scatter = dyn_cast<shard::ReduceScatterOp>(op))
    return lowerCollective(op, scatter.getGridAxes());
  if (auto gather = dyn_cast<shard::AllGatherOp>(op))
    return lowerCollective(op, gather.getGridAxes());
  if (auto slice = dyn_cast<shard::AllSliceOp>(op))
    return lowerCollective(op, slice.getGridAxes());
  if (isReshapeView(op)) {
    CallArgs args(b);
    args.value(tensors.lookup(op->getOperand(0)));
    args.literal(dimsLiteral(cast<RankedTensorType>(op->getResult(0).getType()).getShape()));
    tensors[op->getResult(0)] = call("cleave::rt::reshaped", tensorType, args);
    return success();
  }
  if (auto chunk = dyn_cast<ElementsOp>(op)) {
    CallArgs args(b);
    args.value(tensors.lookup(chunk.getInput()));
    args.literal(std::to_string(static_cast<int64_t>(chunk.getOffset())));
    args.literal(
        std::to_string(cast<RankedTensorType>(chunk.getOutput().getType()).getNumElements()));
    tensors[chunk.getOutput()] = call("cleave::rt::elements", tensorType, args);
    return success();
  }
  if (auto wait = dyn_cast<CollectiveWaitOp>(op)) {
    Operation *collective = wait.getStarted().getDefiningOp();
    Value buffer = tensors.lookup(wait.getStarted());
    tensors[wait.getOutput()] = buffer;
    CallArgs args(b);
    args.value(context);
    args.value(buffer);
    args.literal(std::to_string(collective->getAttrOfType<DenseI16ArrayAttr>("grid_axes")[0]));
    call(kernelPrefix + collective->getName().stripDialect().str() + "_wait", Type(), args);
    return success();
  }
  if (auto start = dyn_cast<AllReduceStartOp>(op)) {
    FailureOr<ReductionSpan> span = bucketSpan(func, start);
    if (failed(span))
      return failure();
    // On the step's last microbatch alone: the others accumulate into it.
    spanCall("all_reduce_start", *span, {"true"});
    return success();
  }
  if (auto start = dyn_cast<ReduceScatterOwnedStartOp>(op)) {
    FailureOr<ReductionSpan> span = bucketSpan(func, start);
    if (failed(span))
      return failure();
    spanCall("reduce_scatter_owned_start", *span,
             {std::to_string(ownedBucketFirst(func, start)),
              std::to_string(start.getSliceElements()), span->inArena ? "false" : "true"});
    return success();
  }
  if (isa<PipelineSendOp, PipelineRecvOp>(op))
    return lowerPipelineMessage(op);
  if (auto assign = dyn_cast<AssignOp>(op)) {
    // A value written in place of its target is there already.
    Operation *producer = assign.getValue().getDefiningOp();
    auto inPlace = producer ? producer->getAttrOfType<DenseI64ArrayAttr>(kInPlaceOffsetsAttr)
                            : DenseI64ArrayAttr();
    if (inPlace &&
        inPlace[cast<OpResult>(assign.getValue()).getResultNumber()] >= 0)
      return success();
    CallArgs args(b);
    args.value(context);
    args.value(tensors.lookup(assign.getValue()));
    args.value(tensors.lookup(assign.getTarget()));
    call(kernelPrefix + "copy", Type(), args);
    return success();
  }
  if (auto constant = dyn_cast<ConstantOp>(op)) {
    if (auto offset = op->getAttrOfType<IntegerAttr>(kWeightsOffsetAttr)) {
      tensors[constant] = tensorAt(weights, offset.getInt(), constant);
      return success();
    }
  }
  // Generators fill their planned arena space.
  if (isa<ConstantOp, ConstantOfShapeOp, RangeOp>(op)) {
    auto offsets = op->getAttrOfType<DenseI64ArrayAttr>(kArenaOffsetsAttr);
    if (!offsets)
      return op->emitError("has no memory plan: run cleave-memory-plan first");
    Value out = resultAt(op, offsets.asArrayRef(), 0);
    tensors[op->getResult(0)] = out;
    CallArgs args(b);
    args.value(context);
    args.value(out);
    auto number = [](Attribute a) {
      if (auto f = dyn_cast<FloatAttr>(a))
        return f.getValueAsDouble();
      auto integer = cast<IntegerAttr>(a);
      return integer.getType().isUnsignedInteger()
                 ? static_cast<double>(integer.getValue().getZExtValue())
                 : static_cast<double>(integer.getValue().getSExtValue());
    };
    if (auto range = dyn_cast<RangeOp>(op)) {
      args.literal(floatLiteral(number(range.getStart()), true));
      args.literal(floatLiteral(number(range.getDelta()), true));
      call(kernelPrefix + "range", Type(), args);
      return success();
    }
    Attribute scalar = isa<ConstantOp>(op)
                           ? cast<DenseElementsAttr>(cast<ConstantOp>(op).getValue())
                                 .getSplatValue<Attribute>()
                           : cast<ConstantOfShapeOp>(op).getValue();
    if (auto boolean = dyn_cast<IntegerAttr>(scalar); boolean && boolean.getType().isInteger(1))
      args.literal(boolean.getValue().getBoolValue() ? "1.0" : "0.0");
    else
      args.literal(floatLiteral(number(scalar), true));
    call(kernelPrefix + "fill", Type(), args);
    return success();
  }
  auto kernel = calls.find(op->getName().stripDialect());
  if (op->getDialect() != func->getContext()->getLoadedDialect<CleaveDialect>() ||
      kernel == calls.end())
    return op->emitError("has no runtime kernel");
  return lowerKernel(op, kernel->second);
}

/// A run of all-reduces becomes one call per span (passes/Collectives.h);
/// one a cleave.all_reduce_start began (cleave.started) a wait for the
/// bucket that holds its accumulator.
LogicalResult Lowering::lowerAllReduces(ArrayRef<shard::AllReduceOp> reductions) {
  SmallVector<shard::AllReduceOp> inPlace;
  for (shard::AllReduceOp reduce : reductions) {
    tensors[reduce.getResult()] = tensors.lookup(reduce.getInput());
    if (!reduce->hasAttr(kStartedAttr)) {
      inPlace.push_back(reduce);
      continue;
    }
    if (reduce.getGridAxes().size() != 1)
      return reduce.emitError("was started over more than one mesh axis, which is not lowered");
    CallArgs args(b);
    args.value(context);
    args.value(tensors.lookup(reduce.getInput()));
    args.literal(std::to_string(reduce.getGridAxes()[0]));
    call(kernelPrefix + "all_reduce_wait", Type(), args);
  }
  auto spans = reductionSpans(func, inPlace);
  if (failed(spans))
    return failure();
  for (const ReductionSpan &span : *spans)
    spanCall("all_reduce", span);
  return success();
}

void Lowering::spanCall(StringRef kernel, const ReductionSpan &span, ArrayRef<std::string> extra) {
  CallArgs view(b);
  view.value(span.inArena ? arena : weights);
  view.literal(std::to_string(span.offset));
  view.literal(*dtypeLiteral(span.element));
  view.literal(dimsLiteral({span.bytes / (span.element.getIntOrFloatBitWidth() / 8)}));
  CallArgs args(b);
  args.value(context);
  args.value(call("cleave::rt::view", tensorType, view));
  args.literal(std::to_string(span.axis));
  args.literal(*dtypeLiteral(span.wire));
  for (const std::string &literal : extra)
    args.literal(literal);
  call(kernelPrefix + kernel.str(), Type(), args);
}

bool Lowering::endsPhase(Operation *op) {
  auto reduce = dyn_cast<shard::AllReduceOp>(op);
  return phase >= 0 && phaseAxis >= 0 && reduce && !isInPlace(reduce) &&
         llvm::equal(reduce.getGridAxes(), ArrayRef<int16_t>{static_cast<int16_t>(phaseAxis)});
}

LogicalResult Lowering::run() {
  if (phase >= 0)
    if (FailureOr<MeshAxes> mesh = getMesh(module); succeeded(mesh))
      phaseAxis = mesh->ppAxis;
  auto charPointer = emitc::PointerType::get(emitc::OpaqueType::get(b.getContext(), "char"));
  auto inputList =
      emitc::PointerType::get(emitc::OpaqueType::get(b.getContext(), "const cleave::rt::Tensor"));
  auto outputList = emitc::PointerType::get(tensorType);
  if (func)
    b.setInsertionPoint(func);
  else
    b.setInsertionPointToEnd(module.getBody());
  auto lowered = emitc::FuncOp::create(
      b, loc, entryPrefix + name,
      b.getFunctionType({contextType, charPointer, charPointer, inputList, outputList}, {}));
  Block *entry = lowered.addEntryBlock();
  context = entry->getArgument(0);
  arena = entry->getArgument(1);
  weights = entry->getArgument(2);
  inputs = entry->getArgument(3);
  outputs = entry->getArgument(4);
  b.setInsertionPointToEnd(entry);
  if (!func) {
    emitc::ReturnOp::create(b, loc, Value());
    return success();
  }

  auto firstOutput = func->getAttrOfType<IntegerAttr>(kFirstOutputAttr);
  if (!firstOutput)
    return func.emitError("has no memory plan: run cleave-memory-plan first");
  seedUnseededDropouts(func.getBody().front());
  for (auto [i, arg] : llvm::enumerate(func.getArguments())) {
    if (auto offset = func.getArgAttrOfType<IntegerAttr>(i, kWeightsOffsetAttr)) {
      tensors[arg] = tensorAt(weights, offset.getInt(), arg);
      continue;
    }
    auto index = func.getArgAttrOfType<IntegerAttr>(i, kInputIndexAttr);
    if (!index)
      return func.emitError("argument ") << i << " has no memory plan";
    CallArgs args(b);
    args.value(inputs);
    args.literal(std::to_string(index.getInt()));
    tensors[arg] = call("cleave::rt::load", tensorType, args);
  }
  // A run of all-reduces is lowered where it starts.
  llvm::DenseMap<Operation *, SmallVector<shard::AllReduceOp>> runs;
  for (auto &run : allReduceRuns(func))
    runs[run.front()] = run;
  // In a pipeline stage's program the backward is an entry point of its own.
  Operation *loss =
      name == "forward" && !func->hasAttr(kStageAttr) ? lossSumProducer(func) : nullptr;
  for (Operation &op : func.getBody().front()) {
    current = &op;
    if (&op == loss)
      marksBackwardAfter = true;
    else if (marksBackwardAfter) {
      mark("cleave::rt::markBackward");
      marksBackwardAfter = false;
    }
    if (endsPhase(&op)) {
      // The rank's stages add their operands first (the driver), then
      // each sums the rank's total over pp in the next phase.
      inPhase([&] {
        CallArgs args(b);
        args.value(context);
        args.value(tensors.lookup(op.getOperand(0)));
        call("cleave::rt::leaveStagePartial", Type(), args);
      });
      ++phase;
    }
    if (auto reduce = dyn_cast<shard::AllReduceOp>(op); reduce && isInPlace(reduce)) {
      auto run = runs.find(&op);
      if (run != runs.end() && failed(lowerAllReduces(run->second)))
        return failure();
      continue;
    }
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
        // A stash is in the buffer the driver keeps for its microbatch,
        // written there or copied; any other result is a view of where it
        // was computed.
        int64_t slot = firstOutput.getInt() + static_cast<int64_t>(i);
        auto kind = func.getResultAttrOfType<StringAttr>(i, kKindAttr);
        bool stash = kind && kind.getValue() == "stash";
        if (stash && stashSlot(value) == slot)
          continue;
        CallArgs args(b);
        args.value(outputs);
        args.literal(std::to_string(slot));
        if (stash) {
          CallArgs copy(b);
          copy.value(context);
          copy.value(tensors.lookup(value));
          copy.value(call("cleave::rt::load", tensorType, args));
          call(kernelPrefix + "copy", Type(), copy);
          continue;
        }
        args.value(tensors.lookup(value));
        call("cleave::rt::store", Type(), args);
      }
      emitc::ReturnOp::create(b, loc, Value());
      continue;
    }
    if (failed(lowerOp(&op)))
      return failure();
  }
  return success();
}

struct LowerToEmitCPass : public cleave::impl::LowerToEmitCBase<LowerToEmitCPass> {
  using LowerToEmitCBase::LowerToEmitCBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (target != "cpu" && target != "cuda") {
      module.emitError("unknown target '") << target << "': use cpu or cuda";
      return signalPassFailure();
    }
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward) {
      module.emitError("has no @forward function to lower");
      return signalPassFailure();
    }
    auto isEntry = [](StringRef name) {
      return llvm::any_of(rt::kProgramEntryPoints, [&](rt::ProgramEntryPoint entry) {
        return name == rt::entryPointName(entry);
      });
    };
    for (auto func : module.getOps<func::FuncOp>()) {
      if (!isEntry(func.getSymName())) {
        func.emitError("cannot be lowered: a program has only @narrow_weights, @forward, "
                       "@backward, @backward_weight and @apply");
        return signalPassFailure();
      }
    }
    OpBuilder b(module.getBodyRegion());
    // The compiled chains' templates, only where there are chains: the
    // CPU's header doubles a one-kernel program's compile time where it is
    // not precompiled, and CUDA's brings the CUDA headers. First, since a
    // program's first header is the one it may read precompiled
    // (runtime/cpu/CMakeLists.txt).
    if (module.walk([](FusedElementwiseOp) { return WalkResult::interrupt(); }).wasInterrupted())
      emitc::IncludeOp::create(b, module.getLoc(),
                               target == "cpu" ? "runtime/cpu/FusedChain.h"
                                               : "runtime/cuda/FusedChain.cuh");
    emitc::IncludeOp::create(b, module.getLoc(), "runtime/" + target + "/Program.h");
    // The entry points are straight-line kernel calls: optimizing them buys
    // nothing a step and costs most of a program's compile time (a GPT's
    // dp=2 step 4.9 s at -O1, 1.3 s so; docs/performance.md). The headers'
    // inline helpers and the chains' loops above keep their levels.
    if (target == "cpu")
      emitc::VerbatimOp::create(b, module.getLoc(),
                                "#if defined(__GNUC__) && !defined(__clang__)\n"
                                "#pragma GCC optimize(\"O0\")\n"
                                "#endif");
    // Every program defines every entry point; without an @apply (a forward
    // program) cleave_apply does nothing, and so do cleave_backward but in a
    // pipeline stage's program, cleave_backward_weight but in one of zb-h1
    // and cleave_narrow_weights but with --precision bf16 or fp16.
    for (rt::ProgramEntryPoint entry : rt::kProgramEntryPoints) {
      StringRef name = rt::entryPointName(entry);
      auto func = module.lookupSymbol<func::FuncOp>(name);
      if (failed(Lowering(module, func, name, entryPrefix, target, phasedApply).run()))
        return signalPassFailure();
      if (func)
        func.erase();
    }
    // The mesh lives on in plan.json; the program needs no grid.
    for (auto grid : llvm::make_early_inc_range(module.getOps<shard::GridOp>()))
      grid.erase();
  }
};

} // namespace
