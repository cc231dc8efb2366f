//===- FuseElementwise.cpp - chains of elementwise ops in one pass --------===//
//
// Each elementwise op is a kernel of its own, one pass over memory: an
// optimizer's update is a dozen passes per parameter, GELU five. This pass
// groups chains of f32 elementwise ops of one shape (their operands of that
// shape or of one element) into `cleave.fused_elementwise` ops, whose kernel
// reads each input once and writes each output once, computing what the
// chain computed, bit for bit (runtime/ElementwiseProgram.h). A cast from
// bf16 at a chain's start and one to bf16 at its end join it too: the
// kernel widens that input as it reads it and rounds that output as it
// writes it (a bf16 gradient accumulator's widen, add and round is one
// pass; an activation a product reads in bf16 is rounded as its chain
// writes it). Ops are taken
// in block order: an op joins the groups of the producers of its operands
// when the values those groups compute are read by no op between them and
// it, so the fused op, placed at its last member, computes every value
// before its first reader outside the group. A value cheaper to make again
// than to write and read back (x times or over one element, where x is read
// there anyway) is made again in a later chain first
// (rematerializeScalings).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"
#include "passes/CostModel.h"
#include "runtime/ElementwiseProgram.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

namespace cleave {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// Whether `v` is a one-element f32 constant 0 (+0 alone with `positive`).
bool isZero(Value v, bool positive) {
  auto constant = v.getDefiningOp<ConstantOp>();
  auto value = constant ? dyn_cast<DenseElementsAttr>(constant.getValue()) : nullptr;
  if (!value || value.getNumElements() != 1 || !value.getElementType().isF32())
    return false;
  APFloat element = *value.value_begin<APFloat>();
  return element.isZero() && !(positive && element.isNegative());
}

/// A ReLU's gradient, where(greater(x, 0), g, +0) whose greater nothing
/// else reads: its x and g, the operands of one Gate instruction.
std::optional<std::pair<Value, Value>> gateOperands(Operation *op) {
  auto where = dyn_cast<WhereOp>(op);
  auto greater = where ? where.getCondition().getDefiningOp<GreaterOp>() : GreaterOp();
  if (!greater || !greater->hasOneUse() || !isZero(greater.getRhs(), false) ||
      !isZero(where.getY(), true))
    return std::nullopt;
  return std::pair{greater.getLhs(), where.getX()};
}

/// The values an op's program instruction reads: its operands, or a
/// Gate's x and g.
SmallVector<Value, 2> operandsOf(Operation *op) {
  if (auto gate = gateOperands(op))
    return {gate->first, gate->second};
  return SmallVector<Value, 2>(op->getOperands());
}

/// The program opcode of an elementwise op the kernel runs, if any.
std::optional<rt::ElementwiseOpcode> opcodeOf(Operation *op) {
  using rt::ElementwiseOpcode;
  return llvm::TypeSwitch<Operation *, std::optional<ElementwiseOpcode>>(op)
      .Case([](AddOp) { return ElementwiseOpcode::Add; })
      .Case([](SubOp) { return ElementwiseOpcode::Sub; })
      .Case([](MulOp) { return ElementwiseOpcode::Mul; })
      .Case([](DivOp) { return ElementwiseOpcode::Div; })
      .Case([](WhereOp where) {
        return gateOperands(where) ? ElementwiseOpcode::Gate : ElementwiseOpcode::Select;
      })
      .Case([](NegOp) { return ElementwiseOpcode::Neg; })
      .Case([](SqrtOp) { return ElementwiseOpcode::Sqrt; })
      .Case([](ExpOp) { return ElementwiseOpcode::Exp; })
      .Case([](TanhOp) { return ElementwiseOpcode::Tanh; })
      .Case([](ErfOp) { return ElementwiseOpcode::Erf; })
      .Default([](Operation *) { return std::nullopt; });
}

RankedTensorType typeOf(Value v) { return dyn_cast<RankedTensorType>(v.getType()); }

/// Whether `op` casts from bf16 to f32 (`fromBF16`) or from f32 to bf16.
bool castsBetween(Operation *op, bool fromBF16) {
  auto cast = dyn_cast<CastOp>(op);
  if (!cast)
    return false;
  Type from = typeOf(cast.getInput()).getElementType(),
       to = typeOf(cast.getResult()).getElementType();
  return fromBF16 ? from.isBF16() && to.isF32() : from.isF32() && to.isBF16();
}

/// A cast from bf16 to f32: the kernel widens its input as it reads it.
bool widens(Operation *op) { return castsBetween(op, true); }

/// A cast from f32 to bf16: the kernel rounds its output as it writes it.
bool narrows(Operation *op) { return castsBetween(op, false); }

/// Ops fused into one, in block order.
using Group = SmallVector<Operation *>;

/// The values `group` reads from outside it, in order of first use.
SmallVector<Value> inputsOf(const Group &group) {
  llvm::SmallPtrSet<Operation *, 16> members(group.begin(), group.end());
  SmallVector<Value> inputs;
  for (Operation *op : group)
    for (Value operand : operandsOf(op))
      if (!members.contains(operand.getDefiningOp()) && !llvm::is_contained(inputs, operand))
        inputs.push_back(operand);
  return inputs;
}

/// The values `group` computes that an op outside it reads.
SmallVector<Value> outputsOf(const Group &group) {
  llvm::SmallPtrSet<Operation *, 16> members(group.begin(), group.end());
  SmallVector<Value> outputs;
  for (Operation *op : group)
    if (llvm::any_of(op->getUsers(), [&](Operation *user) { return !members.contains(user); }))
      outputs.push_back(op->getResult(0));
  return outputs;
}

/// Whether a cast from bf16 in `group` reads a value the group computes:
/// one it rounded, where the registers keep f32.
bool widensOwnValue(const Group &group) {
  llvm::SmallPtrSet<Operation *, 16> members(group.begin(), group.end());
  return llvm::any_of(group, [&](Operation *op) {
    return widens(op) && members.contains(op->getOperand(0).getDefiningOp());
  });
}

/// Whether the group fits the kernel's registers and outputs.
bool fits(const Group &group) {
  return static_cast<int>(inputsOf(group).size() + group.size()) <= rt::kMaxElementwiseRegisters &&
         static_cast<int>(outputsOf(group).size()) <= rt::kMaxElementwiseOutputs;
}

/// Replaces `group` by one fused op at its last member.
void fuse(const Group &group) {
  SmallVector<Value> inputs = inputsOf(group), outputs = outputsOf(group);
  llvm::DenseMap<Value, int> registers;
  for (auto [i, input] : llvm::enumerate(inputs))
    registers[input] = static_cast<int>(i);
  int next = static_cast<int>(inputs.size()); // the next instruction's register
  std::string program;
  SmallVector<Location> locations;
  for (Operation *op : group) {
    if (widens(op) || narrows(op)) {
      // The same register: the kernel converts it as it reads or writes.
      registers[op->getResult(0)] = registers.lookup(op->getOperand(0));
      locations.push_back(op->getLoc());
      continue;
    }
    if (!program.empty())
      program += ';';
    program += rt::kElementwiseOpcodeNames[static_cast<int>(*opcodeOf(op))];
    for (Value operand : operandsOf(op))
      program += ' ' + std::to_string(registers.lookup(operand));
    registers[op->getResult(0)] = next++;
    locations.push_back(op->getLoc());
  }
  program += '>';
  SmallVector<Type> types;
  for (auto [i, output] : llvm::enumerate(outputs)) {
    program += (i ? "," : "") + std::to_string(registers.lookup(output));
    types.push_back(output.getType());
  }
  OpBuilder b(group.back());
  auto fused = FusedElementwiseOp::create(b, FusedLoc::get(b.getContext(), locations), types,
                                          inputs, b.getStringAttr(program));
  for (auto [output, result] : llvm::zip(outputs, fused.getResults()))
    output.replaceAllUsesWith(result);
  // A Gate's condition goes with it, and its zeros once nothing reads them.
  SmallVector<Operation *> conditions;
  llvm::SetVector<Operation *> zeros;
  for (Operation *op : llvm::reverse(group)) {
    if (gateOperands(op)) {
      auto where = cast<WhereOp>(op);
      auto greater = where.getCondition().getDefiningOp<GreaterOp>();
      conditions.push_back(greater);
      zeros.insert(greater.getRhs().getDefiningOp());
      zeros.insert(where.getY().getDefiningOp());
    }
    op->erase();
  }
  for (Operation *op : conditions)
    op->erase();
  for (Operation *op : zeros)
    if (op->use_empty())
      op->erase();
}

struct FuseElementwisePass : public cleave::impl::FuseElementwiseBase<FuseElementwisePass> {
  using FuseElementwiseBase::FuseElementwiseBase;

  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal())
        fuseBlock(func.getBody().front());
  }

  static void fuseBlock(Block &block) {
    rematerializeScalings(block);
    std::vector<Group> groups;
    llvm::DenseMap<Operation *, size_t> groupOf;
    for (Operation &op : block) {
      // An accumulator's add that copies on its first call stays a kernel.
      if (!isFusableElementwise(&op) || op.hasAttr(kFirstCallWritesAttr))
        continue;
      size_t mine = groups.size();
      groups.push_back({&op});
      groupOf[&op] = mine;
      ArrayRef<int64_t> shape = typeOf(op.getResult(0)).getShape();
      // A widened input starts a chain (widensOwnValue).
      if (widens(&op))
        continue;
      for (Value operand : operandsOf(&op)) {
        auto found = groupOf.find(operand.getDefiningOp());
        if (found == groupOf.end() || found->second == mine ||
            typeOf(operand).getShape() != shape)
          continue;
        size_t theirs = found->second;
        Group merged = groups[theirs];
        merged.append(groups[mine]);
        llvm::sort(merged, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
        if (readBetween(merged, &op) || !fits(merged) || widensOwnValue(merged))
          continue;
        for (Operation *member : groups[theirs])
          groupOf[member] = mine;
        groups[theirs].clear();
        groups[mine] = std::move(merged);
      }
    }
    // A lone Gate is fused too: one pass instead of its greater's and its
    // where's; a group of casts alone is not (it computes nothing).
    for (const Group &group : groups)
      if ((group.size() > 1 || (group.size() == 1 && gateOperands(group.front()))) &&
          llvm::any_of(group, [](Operation *op) { return opcodeOf(op).has_value(); }))
        fuse(group);
  }

  /// An add, sub, mul or div of a value x and one element (GELU's x / sqrt 2)
  /// read by an elementwise op after a kernel that is not one (the
  /// backward's, after the products between) is made again beside that
  /// reader, from x, where x is read after that kernel anyway (by the
  /// elementwise ops around the reader, whose chain then reads it): that
  /// chain computes it in registers instead of reading what the first chain
  /// wrote, so x / sqrt 2 is not written and read back, and x lives no
  /// longer than before but within those elementwise ops. The same
  /// operation on the same operands: the same value.
  static void rematerializeScalings(Block &block) {
    // Each op's readers after a kernel, by that kernel, in block order:
    // the readers after one kernel share one copy, before the first of them.
    SmallVector<std::pair<Operation *, llvm::MapVector<Operation *, SmallVector<Operation *>>>>
        copies;
    for (Operation &op : block) {
      if (!isa<AddOp, SubOp, MulOp, DivOp>(op) || !isFusableElementwise(&op))
        continue;
      Value x = scaledValue(&op);
      if (!x)
        continue;
      llvm::MapVector<Operation *, SmallVector<Operation *>> readersAfter;
      for (Operation *reader : llvm::SetVector<Operation *>(llvm::from_range, op.getUsers())) {
        Operation *kernel = reader->getBlock() == &block && isFusableElementwise(reader)
                                ? lastKernelBefore(reader)
                                : nullptr;
        if (kernel && op.isBeforeInBlock(kernel) && readAfter(x, kernel))
          readersAfter[kernel].push_back(reader);
      }
      if (!readersAfter.empty())
        copies.push_back({&op, std::move(readersAfter)});
    }
    for (auto &[op, readersAfter] : copies) {
      for (auto &[kernel, readers] : readersAfter) {
        Operation *first = *llvm::min_element(
            readers, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
        OpBuilder b(first);
        Value copy = b.clone(*op)->getResult(0);
        for (Operation *reader : readers)
          reader->replaceUsesOfWith(op->getResult(0), copy);
      }
      // Every reader has its copy: the op has moved.
      if (op->use_empty())
        op->erase();
    }
  }

  /// The value of `op`'s shape of the two operands when the other has one
  /// element, or null.
  static Value scaledValue(Operation *op) {
    Value lhs = op->getOperand(0), rhs = op->getOperand(1);
    ArrayRef<int64_t> shape = typeOf(op->getResult(0)).getShape();
    if (typeOf(lhs).getShape() == shape && typeOf(rhs).getNumElements() == 1)
      return lhs;
    if (typeOf(rhs).getShape() == shape && typeOf(lhs).getNumElements() == 1)
      return rhs;
    return Value();
  }

  /// The last op before `op` in its block that computes and is not
  /// elementwise (a product, a reduction): a kernel a chain cannot span;
  /// null if none. Views, constants and assignments compute nothing.
  static Operation *lastKernelBefore(Operation *op) {
    for (Operation *before = op->getPrevNode(); before; before = before->getPrevNode())
      if (!isFusableElementwise(before) && !isView(before) && !isa<ConstantOp, AssignOp>(before))
        return before;
    return nullptr;
  }

  /// Whether `value` is an argument or read after `op` in its block.
  static bool readAfter(Value value, Operation *op) {
    return isa<BlockArgument>(value) || llvm::any_of(value.getUsers(), [&](Operation *user) {
             return user->getBlock() == op->getBlock() && op->isBeforeInBlock(user);
           });
  }

  /// Whether an op outside `group` reads one of its values before `last`,
  /// its last member, where the fused op would compute it.
  static bool readBetween(const Group &group, Operation *last) {
    llvm::SmallPtrSet<Operation *, 16> members(group.begin(), group.end());
    for (Operation *op : group)
      for (Operation *user : op->getUsers())
        if (!members.contains(user) && user->isBeforeInBlock(last))
          return true;
    return false;
  }
};

} // namespace

bool cleave::isFusableElementwise(Operation *op) {
  bool widening = widens(op), narrowing = narrows(op);
  std::optional<rt::ElementwiseOpcode> opcode = opcodeOf(op);
  if ((!opcode && !widening && !narrowing) || op->getNumResults() != 1)
    return false;
  RankedTensorType result = typeOf(op->getResult(0));
  if (!result || result.getNumElements() <= 1 ||
      !(narrowing ? result.getElementType().isBF16() : result.getElementType().isF32()))
    return false;
  return llvm::all_of(llvm::enumerate(operandsOf(op)), [&](auto indexed) {
    auto [index, operand] = indexed;
    RankedTensorType type = typeOf(operand);
    // A select reads its condition as i1.
    bool condition = opcode == rt::ElementwiseOpcode::Select && index == 0;
    Type element = type ? type.getElementType() : Type();
    return type &&
           (widening    ? element.isBF16()
            : condition ? element.isInteger(1)
                        : element.isF32()) &&
           (type.getShape() == result.getShape() || type.getNumElements() == 1);
  });
}
