//===- FuseConvRelu.cpp - a convolution's ReLU as it writes ---------------===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/IR/Builders.h"

namespace cleave {
#define GEN_PASS_DEF_FUSECONVRELU
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

struct FuseConvReluPass : public cleave::impl::FuseConvReluBase<FuseConvReluPass> {
  using FuseConvReluBase::FuseConvReluBase;

  void runOnOperation() override {
    SmallVector<ReluOp> fused;
    getOperation().walk([&](ReluOp relu) {
      auto conv = relu.getInput().getDefiningOp<ConvOp>();
      if (!conv || conv.getRelu() || !conv->hasOneUse() ||
          conv.getType() != relu.getType())
        return;
      conv.setRelu(true);
      fused.push_back(relu);
    });
    for (ReluOp relu : fused) {
      relu.replaceAllUsesWith(relu.getInput());
      relu.erase();
    }
  }
};

} // namespace
