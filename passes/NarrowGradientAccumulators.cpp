//===- NarrowGradientAccumulators.cpp - gradients kept in bf16 -----------===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"
#include "passes/Collectives.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace cleave {
#define GEN_PASS_DEF_NARROWGRADIENTACCUMULATORS
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// Whether argument `index` of `func` is a gradient accumulator ("grad:P"
/// state: @forward's slot, or the one @apply reads).
bool isGradientAccumulator(func::FuncOp func, unsigned index) {
  auto kind = func.getArgAttrOfType<StringAttr>(index, kKindAttr);
  auto name = func.getArgAttrOfType<StringAttr>(index, kNameAttr);
  return kind && kind.getValue() == "state" && name && name.getValue().starts_with("grad:");
}

/// The sum over dp that `use` reads, through reshapes nothing else reads
/// (ZeRO's reduce-scatters read a flattened gradient), that can read a bf16
/// accumulator itself: one that moves in bf16 (cleave-narrow-gradient-sums,
/// which rounds each rank's part to bf16 first), or a reduce-scatter in f32
/// (whose parts are widened to its result's type first). The reshapes, then
/// the sum; empty when it reads no such sum.
SmallVector<Operation *> sumReading(OpOperand &use) {
  SmallVector<Operation *> chain;
  OpOperand *read = &use;
  while (isa<ReshapeOp, FlattenOp>(read->getOwner()) &&
         read->getOwner()->getResult(0).hasOneUse()) {
    chain.push_back(read->getOwner());
    read = &*read->getOwner()->getResult(0).getUses().begin();
  }
  Operation *op = read->getOwner();
  const bool bf16Sum = op->hasAttr(kSumTypeAttr) && sumType(op).isBF16();
  if (!isa<shard::AllReduceOp, shard::ReduceScatterOp>(op) || read->getOperandNumber() != 0 ||
      !(bf16Sum || (isa<shard::ReduceScatterOp>(op) && !op->hasAttr(kSumTypeAttr))))
    return {};
  chain.push_back(op);
  return chain;
}

struct NarrowGradientAccumulatorsPass
    : public cleave::impl::NarrowGradientAccumulatorsBase<NarrowGradientAccumulatorsPass> {
  using NarrowGradientAccumulatorsBase::NarrowGradientAccumulatorsBase;

  /// `arg` (f32) kept in `element`: every read takes one widened copy made
  /// before the first reader, and every assignment to it is rounded (a
  /// splat constant, the zeroing, made in `element` directly). A sum that
  /// moves in bf16 reads the bf16 accumulator itself (rounding it to bf16
  /// again would change nothing), as a bf16 sum in place, and its result is
  /// widened instead: no f32 copy of the accumulator before the sum, and
  /// the sum may start during the backward (cleave-overlap-gradients). A
  /// reduce-scatter in f32 reads it too, widening the parts it sums.
  static void narrow(func::FuncOp func, BlockArgument arg, Type element) {
    auto wide = cast<RankedTensorType>(arg.getType());
    auto narrowType = wide.clone(element);
    arg.setType(narrowType);
    SmallVector<OpOperand *> reads;
    for (OpOperand &use : llvm::make_early_inc_range(arg.getUses())) {
      SmallVector<Operation *> sumChain =
          element.isBF16() ? sumReading(use) : SmallVector<Operation *>();
      if (!sumChain.empty()) {
        auto retype = [&](Value value) {
          value.setType(cast<RankedTensorType>(value.getType()).clone(element));
        };
        for (Operation *reshape : ArrayRef(sumChain).drop_back())
          retype(reshape->getResult(0));
        Operation *sum = sumChain.back();
        if (!sum->hasAttr(kSumTypeAttr))
          continue;
        sum->removeAttr(kSumTypeAttr);
        Value result = sum->getResult(0);
        retype(result);
        OpBuilder b(sum->getContext());
        b.setInsertionPointAfter(sum);
        Value widened =
            CastOp::create(b, sum->getLoc(), result, TypeAttr::get(wide.getElementType()));
        result.replaceAllUsesExcept(widened, widened.getDefiningOp());
        continue;
      }
      auto assign = dyn_cast<AssignOp>(use.getOwner());
      if (!assign || use.get() != assign.getTarget()) {
        reads.push_back(&use);
        continue;
      }
      OpBuilder b(assign);
      Value value = assign.getValue();
      std::optional<double> splat = splatValue(value);
      assign.getValueMutable().assign(
          splat ? splatConstant(b, assign.getLoc(), narrowType, *splat)
                : CastOp::create(b, assign.getLoc(), value, TypeAttr::get(element)).getResult());
      // The f32 splat it replaces would still be filled, in the arena.
      if (splat && value.use_empty())
        value.getDefiningOp()->erase();
    }
    if (!reads.empty()) {
      Operation *first = reads.front()->getOwner();
      for (OpOperand *read : reads)
        if (read->getOwner()->isBeforeInBlock(first))
          first = read->getOwner();
      OpBuilder b(first);
      Value widened = CastOp::create(b, arg.getLoc(), arg, TypeAttr::get(wide.getElementType()));
      for (OpOperand *read : reads)
        read->set(widened);
    }
    func.setType(FunctionType::get(func.getContext(), func.getBody().front().getArgumentTypes(),
                                   func.getResultTypes()));
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (type != "fp32" && type != "bf16") {
      module.emitError("unknown gradient accumulator type '") << type << "': use fp32 or bf16";
      return signalPassFailure();
    }
    if (type == "fp32")
      return;
    Type bf16 = BFloat16Type::get(module.getContext());
    for (auto func : module.getOps<func::FuncOp>()) {
      for (BlockArgument arg : func.getArguments()) {
        if (!isGradientAccumulator(func, arg.getArgNumber()))
          continue;
        if (func.getArgAttr(arg.getArgNumber(), kFlatMemberAttr)) {
          emitError(arg.getLoc(), "gradient accumulator '")
              << func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr).getValue()
              << "' is a member of ZeRO's flat f32 buffer: build the step with sliced masters";
          return signalPassFailure();
        }
        if (!cast<RankedTensorType>(arg.getType()).getElementType().isF32())
          continue;
        narrow(func, arg, bf16);
      }
    }
  }
};

} // namespace
