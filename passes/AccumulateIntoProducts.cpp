//===- AccumulateIntoProducts.cpp - accumulators added by their products --===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/StringSet.h"

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

/// Whether `op`, in a microbatch function, is the first op of a step's
/// microbatch to use the argument `name`: nothing before it in its
/// function uses it, nor anything in a function a microbatch runs earlier.
bool usesFirst(Operation *op, StringRef name, ModuleOp module) {
  auto func = op->getParentOfType<func::FuncOp>();
  for (StringRef earlier : kMicrobatchFunctions) {
    auto other = module.lookupSymbol<func::FuncOp>(earlier);
    if (!other)
      continue;
    BlockArgument arg = argumentNamed(other, name);
    if (other == func)
      return llvm::all_of(usersInBody(func, arg), [&](Operation *user) {
        return user == op || !user->isBeforeInBlock(op);
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
  if (users.empty())
    return {};
  Operation *last =
      *llvm::max_element(users, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  auto zeroing = dyn_cast<AssignOp>(last);
  std::optional<double> value = zeroing ? splatValue(zeroing.getValue()) : std::nullopt;
  return zeroing && zeroing.getTarget() == arg && value && *value == 0.0 ? zeroing : AssignOp();
}

/// The members of each flat buffer (ZeRO 1's gradients) that an op
/// writes on its first call in a step, by the buffer's name.
using FirstWrittenMembers = llvm::StringMap<llvm::StringSet<>>;

/// Marks `op`, which adds to the accumulator `slot`, cleave.first_call_writes
/// when its function's first call in a step is the first to use the slot
/// and the update zeroes it, or zeroes the flat buffer it lies in: the slot
/// then holds zeros where the first call would add to them. Drops the
/// slot's own zeroing; a member's is left for zeroOtherMembers, which
/// `members` tells what to keep. Returns whether it marked `op`.
bool writeOnFirstCall(Operation *op, Value slot, ModuleOp module, FirstWrittenMembers &members) {
  auto arg = dyn_cast<BlockArgument>(slot);
  auto func = op->getParentOfType<func::FuncOp>();
  auto name = arg ? func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr) : nullptr;
  if (!name || !usesFirst(op, name.getValue(), module))
    return false;
  auto flat = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kFlatMemberAttr);
  AssignOp zeroing = zeroingAfterUpdate(module, flat ? flat.getValue() : name.getValue());
  if (!zeroing)
    return false;
  op->setAttr(kFirstCallWritesAttr, UnitAttr::get(op->getContext()));
  if (flat) {
    members[flat.getValue()].insert(name.getValue());
    return true;
  }
  Operation *zeros = zeroing.getValue().getDefiningOp();
  zeroing->erase();
  if (zeros && zeros->use_empty())
    zeros->erase();
  return true;
}

/// The sum `assign` stores, when it adds a value `g` to the accumulator it
/// assigns, `cleave.assign (cleave.add %slot, %g) to %slot` (either operand
/// order, no broadcast), and no elementwise chain would make `g` with it
/// (a column sum, a collective's result: a bias's gradient, ZeRO 2's and
/// 3's reduce-scattered slices): what can copy `g` on its first call.
AddOp accumulationAdd(AssignOp assign) {
  Value slot = assign.getTarget();
  auto add = assign.getValue().getDefiningOp<AddOp>();
  if (!add || add.getLhs().getType() != add.getRhs().getType() || add.getType() != slot.getType() ||
      (add.getLhs() == slot) == (add.getRhs() == slot))
    return {};
  Operation *made = (add.getLhs() == slot ? add.getRhs() : add.getLhs()).getDefiningOp();
  return made && isFusableElementwise(made) ? AddOp() : add;
}

/// Replaces @apply's zeroing of the flat buffer `flat` with zeroings of the
/// members no product writes on its first call (not in `written`), each
/// the `cleave.elements` of the buffer it is. The buffer's padding is never
/// written: it keeps the zeros it starts with.
void zeroOtherMembers(ModuleOp module, StringRef flat, const llvm::StringSet<> &written) {
  AssignOp zeroing = zeroingAfterUpdate(module, flat);
  OpBuilder b(zeroing);
  llvm::StringSet<> zeroed;
  for (StringRef entry : kMicrobatchFunctions) {
    auto func = module.lookupSymbol<func::FuncOp>(entry);
    for (unsigned i = 0; func && i < func.getNumArguments(); ++i) {
      auto group = func.getArgAttrOfType<StringAttr>(i, kFlatMemberAttr);
      auto name = func.getArgAttrOfType<StringAttr>(i, kNameAttr);
      if (!group || group.getValue() != flat || !name || written.contains(name.getValue()) ||
          !zeroed.insert(name.getValue()).second)
        continue;
      auto shape = cast<RankedTensorType>(func.getArgument(i).getType());
      auto type = RankedTensorType::get({shape.getNumElements()}, shape.getElementType());
      Value member =
          ElementsOp::create(b, zeroing.getLoc(), type, zeroing.getTarget(),
                             func.getArgAttrOfType<IntegerAttr>(i, kFlatOffsetAttr).getInt());
      Value zeros =
          ConstantOp::create(b, zeroing.getLoc(), type,
                             DenseElementsAttr::get(type, b.getZeroAttr(type.getElementType())));
      AssignOp::create(b, zeroing.getLoc(), member, zeros);
    }
  }
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
    FirstWrittenMembers members;
    auto inMicrobatch = [](Operation *op) {
      return llvm::is_contained(kMicrobatchFunctions,
                                op->getParentOfType<func::FuncOp>().getSymName());
    };
    for (GemmOp gemm : accumulating)
      if (inMicrobatch(gemm))
        writeOnFirstCall(gemm, gemm.getC(), getOperation(), members);
    // An add marked so copies its rhs on the first call: the slot goes left.
    // (Collected first: marking one erases @apply's zeroings.)
    SmallVector<std::pair<AddOp, AssignOp>> adds;
    getOperation().walk([&](AssignOp assign) {
      if (AddOp add = accumulationAdd(assign); add && inMicrobatch(add))
        adds.push_back({add, assign});
    });
    for (auto [add, assign] : adds) {
      if (writeOnFirstCall(add, assign.getTarget(), getOperation(), members) &&
          add.getRhs() == assign.getTarget())
        add->setOperands({add.getRhs(), add.getLhs()});
    }
    for (const auto &[flat, written] : members)
      zeroOtherMembers(getOperation(), flat, written);
  }
};

} // namespace
