//===- NarrowGradientAccumulators.cpp - gradients kept in bf16 -----------===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"

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

struct NarrowGradientAccumulatorsPass
    : public cleave::impl::NarrowGradientAccumulatorsBase<NarrowGradientAccumulatorsPass> {
  using NarrowGradientAccumulatorsBase::NarrowGradientAccumulatorsBase;

  /// `arg` (f32) kept in `element`: every read takes one widened copy made
  /// before the first reader, and every assignment to it is rounded (a
  /// splat constant, the zeroing, made in `element` directly).
  static void narrow(func::FuncOp func, BlockArgument arg, Type element) {
    auto wide = cast<RankedTensorType>(arg.getType());
    auto narrowType = wide.clone(element);
    arg.setType(narrowType);
    SmallVector<OpOperand *> reads;
    for (OpOperand &use : arg.getUses()) {
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
