//===- Recompute.cpp - activations made again in the backward -------------===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace cleave {
#define GEN_PASS_DEF_RECOMPUTE
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// Ops whose every output element costs a few operations on a few input
/// elements (elementwise, per-row softmax and dropout, data movement):
/// what --recompute selective makes again rather than keeps, as Megatron's
/// selective recomputation does for attention. Products, convolutions,
/// normalizations, reductions, gathers and collectives are kept.
bool cheapToRecompute(Operation *op) {
  return op->hasTrait<OpTrait::SameOperandsAndResultType>() ||
         isa<AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp, FmodOp, EqualOp, LessOp, GreaterOp,
             WhereOp, CastOp, SoftmaxOp, LogSoftmaxOp, DropoutOp, ReshapeOp, FlattenOp, SqueezeOp,
             UnsqueezeOp, TransposeOp, ExpandOp, SliceOp, ConcatOp, SplitOp, TriluOp>(op);
}

/// The block of the model an op belongs to, from its ONNX node name: the
/// first part of "/blocks.0/attn/MatMul" ("blocks.0"); "" for a node at the
/// top of the graph or without a name.
std::string blockOf(Operation *op) {
  const std::string node = onnxNodeName(op->getLoc());
  StringRef name = node;
  if (!name.consume_front("/"))
    return "";
  auto [first, rest] = name.split('/');
  return rest.empty() ? "" : first.str();
}

struct RecomputePass : public cleave::impl::RecomputeBase<RecomputePass> {
  using RecomputeBase::RecomputeBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (mode == "none")
      return;
    if (mode != "selective" && mode != "full") {
      module.emitError("unknown recompute mode '") << mode << "': use none, selective or full";
      return signalPassFailure();
    }
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward)
      return;
    Block &body = forward.getBody().front();
    forwardOps.clear();
    saved.clear();
    decided.clear();
    copies.clear();
    // The forward: in a pipeline stage, what it sends on and its loss need
    // (what cleave-split-backward keeps in @forward); else every op up to
    // the one whose result the loss sum adds.
    if (forward->hasAttr(kStageAttr)) {
      FailureOr<llvm::SetVector<Operation *>> ops = stageForwardOps(forward);
      if (failed(ops))
        return signalPassFailure();
      forwardOps.insert(ops->begin(), ops->end());
    } else if (Operation *lastForward = lossSumProducer(forward)) {
      for (Operation &op : body) {
        forwardOps.insert(&op);
        if (&op == lastForward)
          break;
      }
    } else {
      forward.emitError("has no loss sum: recomputation needs a training step (run "
                        "cleave-build-train-step first)");
      return signalPassFailure();
    }
    // Copies of a dropout draw its masks from its seed.
    seedUnseededDropouts(body);
    SmallVector<Operation *> backwardOps;
    for (Operation &op : body)
      if (!forwardOps.contains(&op))
        backwardOps.push_back(&op);
    // What the backward reads of the forward.
    for (Operation *op : backwardOps)
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp(); def && forwardOps.contains(def))
          saved.insert(operand);

    // Each backward read of a value made again reads the copy made before
    // the first reader.
    OpBuilder b(module.getContext());
    for (Operation *op : backwardOps)
      for (OpOperand &use : op->getOpOperands())
        if (recomputes(use.get())) {
          b.setInsertionPoint(op);
          use.set(copyOf(use.get(), b));
        }
  }

  /// Whether the forward's `value` is made again in the backward: its op
  /// may be (selective: a cheap one; full: one whose results stay inside
  /// its block), and each operand is a function argument, kept for the
  /// backward anyway, or made again itself. So no value that the backward
  /// did not read before is kept for it now.
  bool recomputes(Value value) {
    Operation *def = value.getDefiningOp();
    if (!def || !forwardOps.contains(def))
      return false;
    // A splat is filled in the arena (cleave-memory-plan): filled again. A
    // constant with values lies in the weights blob, there throughout.
    if (auto constant = dyn_cast<ConstantOp>(def)) {
      auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
      return dense && dense.isSplat() && dense.getNumElements() > 1;
    }
    auto known = decided.find(def);
    if (known != decided.end())
      return known->second;
    // A dropout draws its masks from its seed and the microbatch's stream:
    // a copy draws the same.
    bool again = (isMemoryEffectFree(def) || isa<DropoutOp>(def)) &&
                 (mode == "selective" ? cheapToRecompute(def) : staysInBlock(def)) &&
                 llvm::all_of(def->getOperands(), [&](Value operand) {
                   return !operand.getDefiningOp() || isa<ConstantOp>(operand.getDefiningOp()) ||
                          saved.contains(operand) || recomputes(operand);
                 });
    decided[def] = again;
    return again;
  }

  /// Whether every forward reader of `op`'s results is in its block.
  bool staysInBlock(Operation *op) {
    std::string block = blockOf(op);
    return llvm::all_of(op->getUsers(), [&](Operation *user) {
      return !forwardOps.contains(user) || blockOf(user) == block;
    });
  }

  /// `value` made again at `b`'s insertion point, or its copy made before.
  Value copyOf(Value value, OpBuilder &b) {
    if (!recomputes(value))
      return value;
    if (Value made = copies.lookupOrNull(value))
      return made;
    // Operands made again are mapped to their copies; the others are read
    // as they are.
    Operation *def = value.getDefiningOp();
    for (Value operand : def->getOperands())
      copyOf(operand, b);
    Operation *copy = b.clone(*def, copies);
    copies.map(def->getResults(), copy->getResults());
    return copies.lookup(value);
  }

  llvm::DenseSet<Operation *> forwardOps;
  llvm::DenseSet<Value> saved;
  llvm::DenseMap<Operation *, bool> decided;
  IRMapping copies;
};

} // namespace
