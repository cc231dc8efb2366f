//===- PipelineTiedGradients.cpp - sum a tied weight's gradients over stages ===//

#include "passes/Passes.h"

#include "passes/Collectives.h"

#include "dialects/Cleave/CleaveBuilder.h"
#include "dialects/Cleave/CleaveOps.h"

#include "mlir/IR/Builders.h"

#include <map>
#include <set>

namespace cleave {
#define GEN_PASS_DEF_PIPELINETIEDGRADIENTS
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

struct PipelineTiedGradientsPass
    : public cleave::impl::PipelineTiedGradientsBase<PipelineTiedGradientsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    auto apply = module.lookupSymbol<func::FuncOp>("apply");
    auto stageAttr = forward ? forward->getAttrOfType<IntegerAttr>(kStageAttr) : IntegerAttr();
    if (!stageAttr || !apply) {
      module.emitError("has no pipeline stage's @forward and @apply: run "
                       "cleave-pipeline-select-stage and cleave-build-train-step first");
      return signalPassFailure();
    }
    const int64_t stage = stageAttr.getInt();
    FailureOr<MeshAxes> mesh = getMesh(module);
    if (failed(mesh))
      return signalPassFailure();
    // The stages that read each of this stage's tied parameters.
    llvm::StringMap<std::set<int64_t>> readers;
    for (unsigned i = 0; i < forward.getNumArguments(); ++i)
      if (auto others = forward.getArgAttrOfType<DenseI64ArrayAttr>(i, kOtherStagesAttr)) {
        std::set<int64_t> &set =
            readers[forward.getArgAttrOfType<StringAttr>(i, kNameAttr).getValue()];
        set.insert(others.asArrayRef().begin(), others.asArrayRef().end());
        set.insert(stage);
      }
    // One message per parameter and pair of stages, numbered alike on both:
    // the parameters in name order.
    SmallVector<StringRef> names(readers.keys());
    llvm::sort(names);

    OpBuilder b = OpBuilder::atBlockBegin(&apply.getBody().front());
    for (auto [index, name] : llvm::enumerate(names)) {
      BlockArgument acc;
      for (BlockArgument arg : apply.getArguments()) {
        auto argName = apply.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr);
        if (argName && argName.getValue() == ("grad:" + name).str())
          acc = arg;
      }
      if (!acc)
        continue; // not trained (frozen, or no gradient reaches it)
      // Stages of one rank (the interleaved schedule) have their copies
      // summed by the driver before @apply runs (runtime/driver/Training.cpp),
      // so each rank's first stage that trains it speaks for the rank: it
      // sends the rank's sum to every stage of the other ranks that trains
      // it, and every stage adds the ranks' sums in the order of those
      // first stages, so that the copies stay equal bit for bit.
      auto rankOf = [&](int64_t s) { return s % mesh->ppSize; };
      std::map<int64_t, int64_t> firstOfRank; // pp rank -> its first stage
      for (int64_t s : readers[name])
        firstOfRank.emplace(rankOf(s), s);
      if (firstOfRank.size() == 1)
        continue;
      const int64_t tag = kTiedGradientTagBase + static_cast<int64_t>(index);
      Location loc = acc.getLoc();
      if (firstOfRank[rankOf(stage)] == stage)
        for (int64_t other : readers[name])
          if (rankOf(other) != rankOf(stage))
            PipelineSendOp::create(b, loc, acc, other, tag, /*gradient=*/true);
      SmallVector<int64_t> speakers = llvm::to_vector(llvm::make_second_range(firstOfRank));
      llvm::sort(speakers);
      CleaveBuilder u(b, loc);
      Value sum;
      for (int64_t from : speakers) {
        Value part = rankOf(from) == rankOf(stage)
                         ? Value(acc)
                         : PipelineRecvOp::create(b, loc, acc.getType(), from, tag,
                                                  /*gradient=*/true);
        sum = u.accumulate(sum, part);
      }
      // Every read after the sum takes it; the final zeroing still assigns
      // to the argument itself.
      Operation *sumOp = sum.getDefiningOp();
      acc.replaceUsesWithIf(sum, [&](OpOperand &use) {
        auto assign = dyn_cast<AssignOp>(use.getOwner());
        return sumOp->isBeforeInBlock(use.getOwner()) && !(assign && use.getOperandNumber() == 0);
      });
    }
  }
};

} // namespace
