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
#include "llvm/ADT/StringSet.h"

namespace cleave {
#define GEN_PASS_DEF_UPDATEWEIGHTCOPIES
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// The assignment of each parameter that @apply's body writes once, by the
/// parameter's name (not one written in parts, chunk views, or twice).
llvm::StringMap<AssignOp> updatesByName(func::FuncOp apply) {
  Block &body = apply.getBody().front();
  llvm::StringMap<AssignOp> updates;
  llvm::StringSet<> others;
  apply.walk([&](AssignOp assign) {
    auto target = dyn_cast<BlockArgument>(assign.getTarget());
    if (!target || !isParameter(target))
      return;
    StringRef name =
        apply.getArgAttrOfType<StringAttr>(target.getArgNumber(), kNameAttr).getValue();
    if (assign->getBlock() != &body || !updates.try_emplace(name, assign).second)
      others.insert(name);
  });
  for (const auto &other : others)
    updates.erase(other.getKey());
  return updates;
}

/// A copy @narrow_weights makes: its cast of the parameter, the argument
/// it assigns, and the parameter's update in @apply.
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
    auto apply = module.lookupSymbol<func::FuncOp>("apply");
    if (!narrow || !apply)
      return;
    llvm::StringMap<AssignOp> updates = updatesByName(apply);
    SmallVector<Copy> kept;
    for (auto assign : narrow.getBody().getOps<AssignOp>()) {
      auto rounding = assign.getValue().getDefiningOp<CastOp>();
      auto parameter = rounding ? dyn_cast<BlockArgument>(rounding.getInput()) : BlockArgument();
      auto name = parameter
                      ? narrow.getArgAttrOfType<StringAttr>(parameter.getArgNumber(), kNameAttr)
                      : StringAttr();
      AssignOp update = name ? updates.lookup(name.getValue()) : AssignOp();
      // A copy the update cannot make (a gathered one) leaves every copy to
      // @narrow_weights before each step.
      if (!update)
        return;
      kept.push_back({rounding, cast<BlockArgument>(assign.getTarget()), update});
    }
    if (kept.empty())
      return;
    Operation *end = apply.getBody().front().getTerminator();
    for (Copy &copy : kept) {
      Value updated = copy.update.getValue();
      OpBuilder b(apply.getContext());
      b.setInsertionPointAfterValue(updated);
      Location loc = copy.rounding.getLoc();
      Value rounded = CastOp::create(b, loc, updated, copy.rounding.getToAttr());
      Value target = addArgument(apply, copy.target.getType(), "", "state");
      apply.setArgAttrs(cast<BlockArgument>(target).getArgNumber(),
                        narrow.getArgAttrDict(copy.target.getArgNumber()));
      b.setInsertionPoint(end);
      AssignOp::create(b, loc, target, rounded);
    }
    narrow->setAttr(kRunOnceAttr, UnitAttr::get(module.getContext()));
  }
};

} // namespace
