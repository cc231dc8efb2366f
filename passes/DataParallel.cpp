//===- DataParallel.cpp - all-reduce the accumulators over dp --------------===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace cleave {
#define GEN_PASS_DEF_DATAPARALLEL
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

struct DataParallelPass : public cleave::impl::DataParallelBase<DataParallelPass> {
  using DataParallelBase::DataParallelBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    SmallVector<StringRef> names;
    SmallVector<int64_t> sizes;
    for (StringRef entry : mesh) {
      auto [name, size] = entry.split('=');
      int64_t value = 0;
      if (name.empty() || size.getAsInteger(10, value) || value < 1) {
        module.emitError("mesh entry '") << entry << "' is not NAME=SIZE with SIZE >= 1";
        return signalPassFailure();
      }
      if (llvm::is_contained(names, name)) {
        module.emitError("mesh axis '") << name << "' is named twice";
        return signalPassFailure();
      }
      names.push_back(name);
      sizes.push_back(value);
    }
    auto dp = llvm::find(names, StringRef("dp"));
    if (dp == names.end()) {
      module.emitError("the mesh has no 'dp' axis");
      return signalPassFailure();
    }
    auto apply = module.lookupSymbol<func::FuncOp>("apply");
    if (!apply || apply.isExternal()) {
      module.emitError("has no @apply: run cleave-build-train-step first");
      return signalPassFailure();
    }

    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    auto grid = shard::GridOp::create(b, module.getLoc(), "mesh", sizes);
    grid->setAttr("cleave.axes", b.getStrArrayAttr(names));
    int64_t dpSize = sizes[dp - names.begin()];
    if (dpSize == 1)
      return;
    shard::GridAxis dpAxis = static_cast<shard::GridAxis>(dp - names.begin());

    b.setInsertionPointToStart(&apply.getBody().front());
    for (BlockArgument arg : apply.getArguments()) {
      if (!apply.getArgAttr(arg.getArgNumber(), "cleave.accumulator"))
        continue;
      auto reduced = shard::AllReduceOp::create(b, arg.getLoc(), arg, "mesh", {dpAxis},
                                                shard::ReductionKind::Sum);
      // The final zeroing still assigns to the argument itself.
      arg.replaceUsesWithIf(reduced.getResult(), [&](OpOperand &use) {
        auto assign = dyn_cast<AssignOp>(use.getOwner());
        return use.getOwner() != reduced && !(assign && use.getOperandNumber() == 0);
      });
    }
  }
};

} // namespace
