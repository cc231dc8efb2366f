//===- UpdateWeightCopies.cpp - @apply keeps the weights' copies ----------===//
//
// With --precision bf16 or fp16 a step's products read each parameter's
// low-precision copy, which @narrow_weights rounds before every step: a
// read of every parameter that the update, which writes them all, can
// spare by rounding each new value as it writes it.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/IR/Builders.h"

namespace cleave {
#define GEN_PASS_DEF_UPDATEWEIGHTCOPIES
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// How the step writes each parameter, by name: the one assignment of the
/// whole parameter in @apply's body that alone writes it, or null where
/// another does (in parts, `cleave.elements` views, twice, or in another
/// function). A parameter nothing writes (frozen) is not listed.
llvm::StringMap<AssignOp> writesByName(ModuleOp module) {
  llvm::StringMap<AssignOp> writes;
  module.walk([&](AssignOp assign) {
    Value target = assign.getTarget();
    while (auto view = target.getDefiningOp<ElementsOp>())
      target = view.getInput();
    auto parameter = dyn_cast<BlockArgument>(target);
    if (!parameter || !isParameter(parameter))
      return;
    auto func = cast<func::FuncOp>(parameter.getOwner()->getParentOp());
    StringRef name =
        func.getArgAttrOfType<StringAttr>(parameter.getArgNumber(), kNameAttr).getValue();
    const bool whole = func.getSymName() == "apply" && parameter == assign.getTarget() &&
                       assign->getBlock() == &func.getBody().front();
    auto [at, first] = writes.try_emplace(name, whole ? assign : AssignOp());
    if (!first)
      at->second = AssignOp();
  });
  return writes;
}

/// A copy @narrow_weights makes: its cast of the parameter, the argument
/// it assigns, and the parameter's one write, in @apply.
struct Copy {
  CastOp rounding;
  BlockArgument target;
  AssignOp update;
};

struct UpdateWeightCopiesPass
    : public cleave::impl::UpdateWeightCopiesBase<UpdateWeightCopiesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto narrow = module.lookupSymbol<func::FuncOp>("narrow_weights");
    if (!narrow)
      return;
    llvm::StringMap<AssignOp> writes = writesByName(module);
    SmallVector<Copy> kept;
    for (auto assign : narrow.getBody().getOps<AssignOp>()) {
      auto rounding = assign.getValue().getDefiningOp<CastOp>();
      auto parameter = rounding ? dyn_cast<BlockArgument>(rounding.getInput()) : BlockArgument();
      // A copy the update cannot make (a gathered one, one of a parameter
      // written in parts) leaves every copy to @narrow_weights before each
      // step; a frozen parameter's, made once, stays right.
      if (!parameter)
        return;
      auto written = writes.find(
          narrow.getArgAttrOfType<StringAttr>(parameter.getArgNumber(), kNameAttr).getValue());
      if (written == writes.end())
        continue;
      if (!written->second)
        return;
      kept.push_back({rounding, cast<BlockArgument>(assign.getTarget()), written->second});
    }
    narrow->setAttr(kRunOnceAttr, UnitAttr::get(module.getContext()));
    if (kept.empty())
      return;
    auto apply = module.lookupSymbol<func::FuncOp>("apply");
    Operation *end = apply.getBody().front().getTerminator();
    for (Copy &copy : kept) {
      Value updated = copy.update.getValue();
      OpBuilder b(apply.getContext());
      b.setInsertionPointAfterValue(updated);
      Location loc = copy.rounding.getLoc();
      Value rounded = CastOp::create(b, loc, updated, copy.rounding.getToAttr());
      // The copy's state argument, as @narrow_weights has it.
      const unsigned index = apply.getNumArguments();
      if (failed(apply.insertArgument(index, copy.target.getType(),
                                      narrow.getArgAttrDict(copy.target.getArgNumber()), loc)))
        return signalPassFailure();
      b.setInsertionPoint(end);
      AssignOp::create(b, loc, apply.getArgument(index), rounded);
    }
  }
};

} // namespace
