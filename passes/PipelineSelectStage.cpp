//===- PipelineSelectStage.cpp - one stage's function as @forward ---------===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

namespace cleave {
#define GEN_PASS_DEF_PIPELINESELECTSTAGE
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

struct PipelineSelectStagePass
    : public cleave::impl::PipelineSelectStageBase<PipelineSelectStagePass> {
  using PipelineSelectStageBase::PipelineSelectStageBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> stages;
    func::FuncOp kept;
    for (auto func : module.getOps<func::FuncOp>())
      if (auto index = func->getAttrOfType<IntegerAttr>(kStageAttr)) {
        stages.push_back(func);
        if (index.getInt() == stage)
          kept = func;
      }
    if (stages.empty()) {
      module.emitError("has no pipeline stage functions: run cleave-pipeline-split first");
      return signalPassFailure();
    }
    if (!kept) {
      module.emitError("has no pipeline stage ")
          << stage.getValue() << ": its stages are 0 to " << stages.size() - 1;
      return signalPassFailure();
    }
    // From the other stages: the data inputs the kept one lacks (every
    // stage's program reads every data input, so that each gathers the same
    // microbatches from the same data; the unread ones cost a copy), and
    // which stages read each parameter.
    llvm::StringSet<> present;
    for (unsigned i = 0; i < kept.getNumArguments(); ++i)
      if (auto name = kept.getArgAttrOfType<StringAttr>(i, kNameAttr))
        present.insert(name.getValue());
    llvm::StringMap<SmallVector<int64_t>> readers;
    for (func::FuncOp func : stages) {
      if (func == kept)
        continue;
      for (unsigned i = 0; i < func.getNumArguments(); ++i) {
        auto kind = func.getArgAttrOfType<StringAttr>(i, kKindAttr);
        auto name = func.getArgAttrOfType<StringAttr>(i, kNameAttr);
        if (!kind || !name)
          continue;
        if (kind.getValue() == "param")
          readers[name.getValue()].push_back(func->getAttrOfType<IntegerAttr>(kStageAttr).getInt());
        if (kind.getValue() == "input" && present.insert(name.getValue()).second &&
            failed(kept.insertArgument(kept.getNumArguments(), func.getArgument(i).getType(),
                                       func.getArgAttrDict(i), func.getLoc())))
          return signalPassFailure();
      }
    }
    // A parameter other stages read too (a tied weight) says which, for
    // cleave-build-train-step and cleave-pipeline-tied-gradients.
    for (unsigned i = 0; i < kept.getNumArguments(); ++i) {
      auto kind = kept.getArgAttrOfType<StringAttr>(i, kKindAttr);
      auto name = kept.getArgAttrOfType<StringAttr>(i, kNameAttr);
      if (kind && kind.getValue() == "param" && name && readers.contains(name.getValue()))
        kept.setArgAttr(i, kOtherStagesAttr,
                        DenseI64ArrayAttr::get(module.getContext(), readers[name.getValue()]));
    }
    for (func::FuncOp func : stages)
      if (func != kept)
        func.erase();
    kept.setSymName("forward");
  }
};

} // namespace
