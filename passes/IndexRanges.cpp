//===- IndexRanges.cpp - the values data inputs may hold as indices -------===//
//
// Follows each input to the ops that index with its values and records, on
// the argument, what they take (see Passes.td). A value another op computes
// from an input (an offset added, a cast) is not followed: the kernels still
// check what reaches them.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/IR/Builders.h"

#include <algorithm>

namespace cleave {
#define GEN_PASS_DEF_INDEXRANGES
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// What one op takes of the values that reach it.
struct Range {
  int64_t low, high;
  std::optional<int64_t> ignored;
  std::string reader;

  bool holds(int64_t v) const { return (v >= low && v < high) || v == ignored; }
};

/// "the targets of softmax_cross_entropy_loss (10 classes)": the op's kind,
/// not its node's name, which a location carries and printed IR drops (a
/// compile replayed from `cleave import`'s output must record the same).
std::string readerText(Operation *op, StringRef what, StringRef size) {
  return ("the " + what + " of " + op->getName().stripDialect() + " (" + size + ")").str();
}

/// The range `op` takes at `operand`, if it indexes with it.
std::optional<Range> rangeAt(OpOperand &operand) {
  Operation *op = operand.getOwner();
  auto dimOf = [](Value v, int64_t d) { return cast<RankedTensorType>(v.getType()).getDimSize(d); };
  auto classes = [&](Value scores, std::optional<int64_t> ignored) -> std::optional<Range> {
    int64_t count = dimOf(scores, 1);
    return Range{0, count, ignored,
                 readerText(op, "targets", std::to_string(count) + " classes")};
  };
  if (auto gather = dyn_cast<GatherOp>(op); gather && &operand == &gather.getIndicesMutable()) {
    int64_t rows = dimOf(gather.getData(), gather.getAxis());
    return Range{-rows, rows, std::nullopt,
                 readerText(op, "indices", "a table of " + std::to_string(rows) + " rows")};
  }
  if (auto sce = dyn_cast<SoftmaxCrossEntropyLossOp>(op);
      sce && &operand == &sce.getLabelsMutable())
    return classes(sce.getScores(), sce.getIgnoreIndex());
  if (auto grad = dyn_cast<SoftmaxCrossEntropyGradOp>(op);
      grad && &operand == &grad.getLabelsMutable())
    return classes(grad.getLogProb(), grad.getIgnoreIndex());
  if (auto nll = dyn_cast<NegativeLogLikelihoodLossOp>(op);
      nll && &operand == &nll.getTargetMutable())
    return classes(nll.getInput(), nll.getIgnoreIndex());
  return std::nullopt;
}

/// `a` and `b` together: the values both take.
Range intersect(const Range &a, const Range &b) {
  Range both{std::max(a.low, b.low), std::min(a.high, b.high), std::nullopt,
             a.reader + " and " + b.reader};
  if (a.ignored && b.holds(*a.ignored))
    both.ignored = a.ignored;
  else if (b.ignored && a.holds(*b.ignored))
    both.ignored = b.ignored;
  return both;
}

struct IndexRangesPass : public cleave::impl::IndexRangesBase<IndexRangesPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    for (BlockArgument arg : func.getArguments()) {
      auto kind = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kKindAttr);
      if (!kind || kind.getValue() != "input")
        continue;
      if (std::optional<Range> range = rangeOf(arg))
        func.setArgAttr(arg.getArgNumber(), kIndexRangeAttr, toAttr(func.getContext(), *range));
    }
  }

  /// What every op indexing with `value`'s values takes, following the ops
  /// that keep them; the readers named in the order they run.
  std::optional<Range> rangeOf(Value value) {
    SmallVector<std::pair<Operation *, Range>> readers;
    SmallVector<Value> pending{value};
    while (!pending.empty()) {
      Value v = pending.pop_back_val();
      for (OpOperand &use : v.getUses()) {
        Operation *user = use.getOwner();
        if (isa<ReshapeOp, FlattenOp, SqueezeOp, UnsqueezeOp, IdentityOp, TransposeOp, ExpandOp>(
                user)) {
          pending.push_back(user->getResult(0));
        } else if (std::optional<Range> range = rangeAt(use)) {
          readers.push_back({user, *range});
        }
      }
    }
    llvm::sort(readers, [](auto &a, auto &b) { return a.first->isBeforeInBlock(b.first); });
    std::optional<Range> all;
    for (auto &[op, range] : readers)
      all = all ? intersect(*all, range) : range;
    return all;
  }

  static DictionaryAttr toAttr(MLIRContext *ctx, const Range &range) {
    Builder b(ctx);
    SmallVector<NamedAttribute> fields{b.getNamedAttr("low", b.getI64IntegerAttr(range.low)),
                                       b.getNamedAttr("high", b.getI64IntegerAttr(range.high)),
                                       b.getNamedAttr("reader", b.getStringAttr(range.reader))};
    if (range.ignored)
      fields.push_back(b.getNamedAttr("ignored", b.getI64IntegerAttr(*range.ignored)));
    return b.getDictionaryAttr(fields);
  }
};

} // namespace
