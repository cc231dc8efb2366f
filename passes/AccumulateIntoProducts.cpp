//===- AccumulateIntoProducts.cpp - accumulators added by their products --===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"

namespace cleave {
#define GEN_PASS_DEF_ACCUMULATEINTOPRODUCTS
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// The product `value` is, when it is a gemm without c or a matrix matmul
/// that nothing but `reader` reads: what can add an accumulator as it
/// writes.
Operation *soleProduct(Value value, Operation *reader) {
  Operation *product = value.getDefiningOp();
  if (!product || !value.hasOneUse() || *value.getUsers().begin() != reader)
    return nullptr;
  if (auto gemm = dyn_cast<GemmOp>(product))
    return gemm.getC() ? nullptr : product;
  if (auto matmul = dyn_cast<MatMulOp>(product))
    return cast<RankedTensorType>(matmul.getLhs().getType()).getRank() == 2 &&
                   cast<RankedTensorType>(matmul.getRhs().getType()).getRank() == 2
               ? product
               : nullptr;
  return nullptr;
}

/// Whether `value` reads accumulator `slot` for an add: the slot itself,
/// or for a bf16 slot its widened copy that nothing else reads.
bool readsSlot(Value value, Value slot, bool narrow) {
  if (!narrow)
    return value == slot;
  auto widen = value.getDefiningOp<CastOp>();
  return widen && widen.getInput() == slot && value.hasOneUse();
}

/// `func`'s argument named `name` (cleave.name), if it has one.
BlockArgument argumentNamed(func::FuncOp func, StringRef name) {
  for (BlockArgument arg : func.getArguments())
    if (auto own = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr))
      if (own.getValue() == name)
        return arg;
  return {};
}

/// The ops of `func`'s body that use `arg`, as the body's own ops.
SmallVector<Operation *> usersInBody(func::FuncOp func, BlockArgument arg) {
  SmallVector<Operation *> users;
  for (Operation *user : arg.getUsers())
    users.push_back(func.getBody().front().findAncestorOpInBlock(*user));
  return users;
}

/// Whether `gemm`, in a microbatch function, is the first op of a step's
/// microbatch to use its c, the argument `name`: nothing before it in its
/// function uses it, nor anything in a function a microbatch runs earlier.
bool usesFirst(GemmOp gemm, StringRef name, ModuleOp module) {
  auto func = gemm->getParentOfType<func::FuncOp>();
  for (StringRef earlier : kMicrobatchFunctions) {
    auto other = module.lookupSymbol<func::FuncOp>(earlier);
    if (!other)
      continue;
    BlockArgument arg = argumentNamed(other, name);
    if (other == func)
      return llvm::all_of(usersInBody(func, arg), [&](Operation *user) {
        return user == gemm || !user->isBeforeInBlock(gemm);
      });
    if (arg && !arg.use_empty())
      return false;
  }
  return false;
}

/// @apply's zeroing of the argument `name` after the update: an assign of
/// zeros that is its last op on the argument.
AssignOp zeroingAfterUpdate(ModuleOp module, StringRef name) {
  auto apply = module.lookupSymbol<func::FuncOp>("apply");
  BlockArgument arg = apply ? argumentNamed(apply, name) : BlockArgument();
  if (!arg)
    return {};
  SmallVector<Operation *> users = usersInBody(apply, arg);
  Operation *last =
      *llvm::max_element(users, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  auto zeroing = dyn_cast<AssignOp>(last);
  std::optional<double> value = zeroing ? splatValue(zeroing.getValue()) : std::nullopt;
  return zeroing && zeroing.getTarget() == arg && value && *value == 0.0 ? zeroing : AssignOp();
}

/// Marks `gemm`, which adds to its c, cleave.first_call_writes and drops
/// the zeroing of c after the update, when its function's first call in a
/// step is the first to use c and the update zeroes it: c then holds zeros
/// where the first call would add to them.
void writeOnFirstCall(GemmOp gemm, ModuleOp module) {
  auto slot = dyn_cast<BlockArgument>(gemm.getC());
  auto func = gemm->getParentOfType<func::FuncOp>();
  auto name = slot ? func.getArgAttrOfType<StringAttr>(slot.getArgNumber(), kNameAttr) : nullptr;
  if (!name || !usesFirst(gemm, name.getValue(), module))
    return;
  AssignOp zeroing = zeroingAfterUpdate(module, name.getValue());
  if (!zeroing)
    return;
  gemm->setAttr(kFirstCallWritesAttr, UnitAttr::get(gemm.getContext()));
  Operation *zeros = zeroing.getValue().getDefiningOp();
  zeroing->erase();
  if (zeros && zeros->use_empty())
    zeros->erase();
}

struct AccumulateIntoProductsPass
    : public cleave::impl::AccumulateIntoProductsBase<AccumulateIntoProductsPass> {
  void runOnOperation() override {
    SmallVector<GemmOp> accumulating;
    getOperation().walk([&](AssignOp assign) {
      Value slot = assign.getTarget();
      // A bf16 slot (cleave-narrow-gradient-accumulators) is widened, added
      // to in f32 and the sum rounded back as it is stored.
      auto round = assign.getValue().getDefiningOp<CastOp>();
      const bool narrow = round && getElementTypeOrSelf(slot).isBF16();
      auto add = (narrow ? round.getInput() : assign.getValue()).getDefiningOp<AddOp>();
      if (!add || (narrow ? !add->hasOneUse() : add.getType() != slot.getType()))
        return;
      // slot + product, either way round.
      Value read = readsSlot(add.getLhs(), slot, narrow)   ? add.getLhs()
                   : readsSlot(add.getRhs(), slot, narrow) ? add.getRhs()
                                                           : Value();
      Value product = !read ? Value() : read == add.getLhs() ? add.getRhs() : add.getLhs();
      Operation *op = product ? soleProduct(product, add) : nullptr;
      auto gemm = dyn_cast_or_null<GemmOp>(op);
      // A fused activation applies after the sum it would then include; a
      // bf16 slot takes the f32 sum of bf16 factors (GemmOp).
      if (!op || product.getType() != add.getType() || (gemm && gemm.getActivation()) ||
          (narrow && !getElementTypeOrSelf(op->getOperand(0)).isBF16()))
        return;
      Operation *sumOp = narrow ? round.getOperation() : add.getOperation();
      OpBuilder b(sumOp);
      auto sum = GemmOp::create(b, op->getLoc(), op->getOperand(0), op->getOperand(1), slot,
                                b.getF32FloatAttr(gemm ? gemm.getAlpha().convertToFloat() : 1.0f),
                                b.getF32FloatAttr(1.0f), b.getBoolAttr(gemm && gemm.getTransA()),
                                b.getBoolAttr(gemm && gemm.getTransB()), StringAttr());
      accumulating.push_back(sum);
      sumOp->getResult(0).replaceAllUsesWith(sum.getResult());
      sumOp->erase();
      if (narrow)
        add.erase();
      if (read != slot)
        read.getDefiningOp()->erase();
      op->erase();
    });
    for (GemmOp gemm : accumulating)
      if (llvm::is_contained(kMicrobatchFunctions,
                             gemm->getParentOfType<func::FuncOp>().getSymName()))
        writeOnFirstCall(gemm, getOperation());
  }
};

} // namespace
