//===- NarrowGradientSums.cpp - gradients summed over dp in bf16 ----------===//

#include "passes/Passes.h"

#include "passes/Collectives.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace cleave {
#define GEN_PASS_DEF_NARROWGRADIENTSUMS
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// Whether `value` is an accumulator of a parameter's gradient.
bool isGradientAccumulator(Value value) {
  auto arg = dyn_cast<BlockArgument>(value);
  auto func = arg ? dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()) : func::FuncOp();
  if (!func || !func.getArgAttr(arg.getArgNumber(), kAccumulatorAttr))
    return false;
  auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr);
  return name && name.getValue().starts_with("grad:");
}

bool overAxis(ArrayRef<int16_t> axes, int64_t axis) { return axes.size() == 1 && axes[0] == axis; }

bool isF32(Value value) { return cast<RankedTensorType>(value.getType()).getElementType().isF32(); }

struct NarrowGradientSumsPass
    : public cleave::impl::NarrowGradientSumsBase<NarrowGradientSumsPass> {
  using NarrowGradientSumsBase::NarrowGradientSumsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (type != "fp32" && type != "bf16") {
      module.emitError("unknown gradient sum type '") << type << "': use fp32 or bf16";
      return signalPassFailure();
    }
    if (type == "fp32")
      return;
    FailureOr<MeshAxes> layout = getMesh(module);
    if (failed(layout))
      return signalPassFailure();
    if (layout->dpSize == 1)
      return;
    auto bf16 = TypeAttr::get(BFloat16Type::get(module.getContext()));
    module.walk([&](Operation *op) {
      bool gradientSum = false;
      if (auto reduce = dyn_cast<shard::AllReduceOp>(op))
        gradientSum = overAxis(reduce.getGridAxes(), layout->dpAxis) &&
                      isGradientAccumulator(reduce.getInput());
      else if (auto scatter = dyn_cast<shard::ReduceScatterOp>(op))
        gradientSum = overAxis(scatter.getGridAxes(), layout->dpAxis);
      if (gradientSum && isF32(op->getOperand(0)))
        op->setAttr(kSumTypeAttr, bf16);
    });
  }
};

} // namespace
