//===- Autocast.cpp - products on bf16 or f16 operands --------------------===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

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

/// The low-precision copies of one function's values, each made once,
/// just before the first product that reads it, and shared by the others.
class LowPrecisionCopies {
public:
  explicit LowPrecisionCopies(Type element) : element(element) {}

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
    if (def && movesElements(def)) {
      // Move the narrow copy instead: half the bytes, and the copy of the
      // input is shared with its other readers (a weight and its transpose).
      Value input = of(def->getOperand(0), user);
      builder.setInsertionPoint(user);
      Operation *moved = builder.clone(*def);
      moved->setOperand(0, input);
      moved->getResult(0).setType(narrow(value.getType()));
      copy = moved->getResult(0);
    } else {
      copy = CastOp::create(builder, value.getLoc(), value, TypeAttr::get(element));
    }
    copies[value] = copy;
    return copy;
  }

private:
  Type narrow(Type type) { return cast<RankedTensorType>(type).clone(element); }

  Type element;
  DenseMap<Value, Value> copies;
  DenseMap<Value, Value> roundedCopies;
};

struct AutocastPass : public cleave::impl::AutocastBase<AutocastPass> {
  using AutocastBase::AutocastBase;

  /// Whether convolution `op` multiplies `element` factors itself: bf16 with
  /// `narrow-convolutions`, on 1 to 3 spatial dims (what oneDNN takes).
  bool takesNarrowFactors(Operation *op, Type element) {
    int64_t rank = cast<RankedTensorType>(op->getOperand(0).getType()).getRank();
    return narrowConvolutions && element.isBF16() && rank >= 3 && rank <= 5;
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
    for (auto func : module.getOps<func::FuncOp>()) {
      LowPrecisionCopies copies(element);
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
    }
  }
};

} // namespace
