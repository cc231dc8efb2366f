//===- ConstantWeights.cpp - weights the program never changes ------------===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"

namespace cleave {
#define GEN_PASS_DEF_CONSTANTWEIGHTS
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

struct ConstantWeightsPass : public cleave::impl::ConstantWeightsBase<ConstantWeightsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // A program that assigns anything (a training step) may change its
    // parameters between calls.
    if (module.walk([](AssignOp) { return WalkResult::interrupt(); }).wasInterrupted())
      return;
    module.walk([](Operation *op) {
      // A product's matrix, or a convolution's kernels.
      if (!isa<MatMulOp, GemmOp, ConvOp>(op))
        return;
      Value weights = op->getOperand(1);
      auto type = cast<RankedTensorType>(weights.getType());
      bool shaped = isa<ConvOp>(op) || type.getRank() == 2;
      if (type.getElementType().isF32() && shaped && isParameter(weights))
        op->setAttr(kConstantWeightsAttr, UnitAttr::get(op->getContext()));
    });
  }
};

} // namespace
