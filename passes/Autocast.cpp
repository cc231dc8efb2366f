//===- Autocast.cpp - products on bf16 or f16 operands --------------------===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

namespace cleave {
#define GEN_PASS_DEF_AUTOCAST
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// Ops that only move their one input's elements: casting before them is
/// casting after them, on the same elements. A gather of ZeRO 3's slices
/// (shard.all_gather) then moves the narrow slices: half the bytes sent.
bool movesElements(Operation *op) {
  return op->getNumOperands() == 1 && op->getNumResults() == 1 &&
         isa<TransposeOp, ReshapeOp, FlattenOp, SqueezeOp, UnsqueezeOp, SliceOp,
             shard::AllGatherOp>(op);
}

/// `type` with `element` elements.
Type narrow(Type type, Type element) { return cast<RankedTensorType>(type).clone(element); }

/// The module's @narrow_weights, made on first need: once a step, before
/// the step's first microbatch, it rounds each parameter a product reads to
/// its low-precision copy, state of the weights blob ("bf16:W" for W) that
/// every microbatch then reads instead of rounding the parameter again. A
/// ZeRO 1/2 master slice's gather (cleave.gather_once) is made there too,
/// on the narrow copy of the slice where products read it ("bf16:W", half
/// the bytes sent), and in f32 where other ops do ("f32:W").
class WeightCopies {
public:
  WeightCopies(ModuleOp module, Type element, StringRef prefix)
      : module(module), element(element), prefix(prefix) {}

  /// The low-precision copy of `whole`, as an argument of its function.
  Value of(Value whole) { return copyOf(whole, element, prefix); }

  /// The f32 copy of a master's gather, where no product reads it.
  Value gathered(Value whole) {
    Type f32 = Float32Type::get(module.getContext());
    return copyOf(whole, f32, "f32");
  }

private:
  /// `whole` (a parameter, or the end of its master's gather) in type
  /// `copyElement`, made once a step and named `copyPrefix`:W.
  Value copyOf(Value whole, Type copyElement, StringRef copyPrefix) {
    SmallVector<Operation *> moves; // innermost first
    Value root = whole;
    for (Operation *move = root.getDefiningOp(); move; move = root.getDefiningOp()) {
      moves.insert(moves.begin(), move);
      root = move->getOperand(0);
    }
    auto param = cast<BlockArgument>(root);
    auto func = cast<func::FuncOp>(param.getOwner()->getParentOp());
    unsigned index = param.getArgNumber();
    StringRef name = func.getArgAttrOfType<StringAttr>(index, kNameAttr).getValue();
    std::string copyName = (copyPrefix + ":" + name).str();
    Type type = narrow(whole.getType(), copyElement);
    if (made.insert(copyName).second) {
      func::FuncOp rounding = narrowWeights();
      Value &source = sources[name];
      if (!source) {
        source = addArgument(rounding, param.getType(), name, "param");
        // The parameter as its function has it (tp split, ZeRO slice or flat
        // buffer member): the same bytes of the weights blob.
        rounding.setArgAttrs(cast<BlockArgument>(source).getArgNumber(),
                             func.getArgAttrDict(index));
      }
      Value target = addCopyArgument(rounding, type, copyName, name, !moves.empty());
      OpBuilder b(rounding.getBody().front().getTerminator());
      Value value = source;
      if (getElementTypeOrSelf(value) != copyElement)
        value = CastOp::create(b, param.getLoc(), value, TypeAttr::get(copyElement));
      for (Operation *move : moves) {
        Operation *copy = b.clone(*move);
        copy->setOperand(0, value);
        copy->getResult(0).setType(narrow(move->getResult(0).getType(), copyElement));
        copy->removeAttr(kGatherOnceAttr);
        value = copy->getResult(0);
      }
      AssignOp::create(b, param.getLoc(), target, value);
    }
    return addCopyArgument(func, type, copyName, name, !moves.empty());
  }

  /// A copy's argument; `gathered`: the whole parameter from its slice.
  static Value addCopyArgument(func::FuncOp func, Type type, StringRef name, StringRef param,
                               bool gathered) {
    Value copy = addArgument(func, type, name, "state", param);
    unsigned index = cast<BlockArgument>(copy).getArgNumber();
    func.setArgAttr(index, kWeightCopyAttr, UnitAttr::get(func.getContext()));
    if (gathered)
      func.setArgAttr(index, kWholeStateAttr, UnitAttr::get(func.getContext()));
    return copy;
  }

  func::FuncOp narrowWeights() {
    if (rounding)
      return rounding;
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    Location loc = module.getLoc();
    rounding = func::FuncOp::create(b, loc, "narrow_weights", b.getFunctionType({}, {}));
    b.setInsertionPointToEnd(rounding.addEntryBlock());
    func::ReturnOp::create(b, loc);
    return rounding;
  }

  ModuleOp module;
  Type element;
  std::string prefix;
  func::FuncOp rounding;
  llvm::StringSet<> made;
  /// @narrow_weights' argument of each parameter it reads.
  llvm::StringMap<Value> sources;
};

/// The low-precision copies of one function's values, each made once,
/// just before the first product that reads it, and shared by the others;
/// a parameter's is its copy in the weights blob.
class LowPrecisionCopies {
public:
  LowPrecisionCopies(Type element, WeightCopies &weights) : element(element), weights(weights) {}

  /// `value` (f32) rounded to the low-precision type and widened back to
  /// f32, for a kernel that multiplies f32 only (convolutions): the same
  /// products of the same low-precision factors, summed in f32.
  Value rounded(Value value, Operation *user) {
    if (Value made = roundedCopies.lookup(value))
      return made;
    Value narrowCopy = of(value, user);
    OpBuilder builder(user);
    Value copy = CastOp::create(builder, value.getLoc(), narrowCopy,
                                TypeAttr::get(getElementTypeOrSelf(value)));
    roundedCopies[value] = copy;
    return copy;
  }

  /// `value` (f32) in the low-precision type, made before `user`.
  Value of(Value value, Operation *user) {
    if (Value made = copies.lookup(value))
      return made;
    OpBuilder builder(user);
    Value copy;
    Operation *def = value.getDefiningOp();
    if ((def && def->hasAttr(kGatherOnceAttr)) || isParameter(value)) {
      copy = weights.of(value);
    } else if (def && movesElements(def)) {
      // Move the narrow copy instead: half the bytes, and the copy of the
      // input is shared with its other readers (a weight and its transpose).
      Value input = of(def->getOperand(0), user);
      builder.setInsertionPoint(user);
      Operation *moved = builder.clone(*def);
      moved->setOperand(0, input);
      moved->getResult(0).setType(narrow(value.getType(), element));
      copy = moved->getResult(0);
    } else {
      copy = CastOp::create(builder, value.getLoc(), value, TypeAttr::get(element));
    }
    copies[value] = copy;
    return copy;
  }

private:
  Type element;
  WeightCopies &weights;
  DenseMap<Value, Value> copies;
  DenseMap<Value, Value> roundedCopies;
};

struct AutocastPass : public cleave::impl::AutocastBase<AutocastPass> {
  using AutocastBase::AutocastBase;

  /// Whether convolution `op` multiplies `element` factors itself: bf16, on
  /// 1 to 3 spatial dims (what oneDNN takes on the CPU; CUDA's kernels too).
  bool takesNarrowFactors(Operation *op, Type element) {
    int64_t rank = cast<RankedTensorType>(op->getOperand(0).getType()).getRank();
    return element.isBF16() && rank >= 3 && rank <= 5;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    Builder builder(module.getContext());
    Type element;
    if (precision == "bf16")
      element = builder.getBF16Type();
    else if (precision == "fp16")
      element = builder.getF16Type();
    else if (precision != "fp32") {
      module.emitError("unknown precision '") << precision << "': use fp32, bf16 or fp16";
      return signalPassFailure();
    }
    if (!element)
      return;
    WeightCopies weights(module, element, precision);
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>())) {
      LowPrecisionCopies copies(element, weights);
      SetVector<Operation *> movers;
      func.walk([&](Operation *op) {
        bool conv = isa<ConvOp, ConvGradInputOp, ConvGradWeightOp>(op);
        if ((!conv && !isa<MatMulOp, GemmOp>(op)) ||
            !getElementTypeOrSelf(op->getOperand(0)).isF32())
          return;
        bool narrow = !conv || takesNarrowFactors(op, element);
        // The two factors; gemm's c and conv's bias (added in f32) stay.
        for (unsigned i = 0; i < 2; ++i) {
          Value factor = op->getOperand(i);
          if (Operation *def = factor.getDefiningOp(); def && movesElements(def))
            movers.insert(def);
          op->setOperand(i, narrow ? copies.of(factor, op) : copies.rounded(factor, op));
        }
      });
      // The f32 data movement the narrow copies replaced, where nothing
      // else reads it (and what only it read).
      while (!movers.empty()) {
        Operation *mover = movers.pop_back_val();
        if (!mover->use_empty())
          continue;
        Operation *input = mover->getOperand(0).getDefiningOp();
        mover->erase();
        if (input && movesElements(input))
          movers.insert(input);
      }
      // The masters' gathers other ops read, made once a step in f32.
      SmallVector<Operation *> gathers;
      func.walk([&](Operation *op) {
        if (op->hasAttr(kGatherOnceAttr))
          gathers.push_back(op);
      });
      for (Operation *gather : llvm::reverse(gathers)) {
        Value whole = gather->getResult(0);
        if (!whole.use_empty() && llvm::none_of(whole.getUsers(), [](Operation *user) {
              return user->hasAttr(kGatherOnceAttr);
            }))
          whole.replaceAllUsesWith(weights.gathered(whole));
        if (gather->use_empty())
          gather->erase();
      }
    }
  }
};

} // namespace
