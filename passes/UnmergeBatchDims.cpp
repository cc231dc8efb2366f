//===- UnmergeBatchDims.cpp - batched ops on the dims a reshape merged ----===//
//
// Older Hugging Face attentions (OPT, BART, Marian, Whisper) reshape their
// [batch, heads, seq, dim] tensors to [batch * heads, seq, dim] around the
// scores' products and softmax, and back after. Split over tp, the heads are
// dim 1, and a reshape merging it with the batch has no sharding upstream's
// partition can express (each rank holds every batch's part of the merged
// dim, not one block of it). The batched ops between read the two dims alike,
// so this pass runs them on the unmerged dims instead: the merge moves past
// them, meets the reshape back, and both go. The same products and softmax
// of the same numbers.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveBuilder.h"
#include "dialects/Cleave/CleaveOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace cleave {
#define GEN_PASS_DEF_UNMERGEBATCHDIMS
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }

/// Whether `reshape` merges its input's first two dims into one and keeps
/// the rest: [B, H, ...] -> [B * H, ...], with at least one dim after them,
/// so that the merged dim is a batch dim of what reads it.
bool mergesLeadingDims(ReshapeOp reshape) {
  ArrayRef<int64_t> in = shapeOf(reshape.getInput()), out = shapeOf(reshape.getOutput());
  return in.size() >= 3 && out.size() + 1 == in.size() && out[0] == in[0] * in[1] &&
         out.drop_front() == in.drop_front(2);
}

/// A softmax or log-softmax `op` over a dim other than the merged one, on
/// `input`, the unmerged operand (null when there is none).
template <typename AxisOpTy> Value overAnotherDim(OpBuilder &b, AxisOpTy op, Value input) {
  const int64_t axis = static_cast<int64_t>(op.getAxis());
  if (!input || axis == 0)
    return Value();
  return AxisOpTy::create(b, op.getLoc(), input, axis + 1);
}

struct UnmergeBatchDimsPass : public cleave::impl::UnmergeBatchDimsBase<UnmergeBatchDimsPass> {
  /// Each merged value and the unmerged one it is a reshape of.
  llvm::DenseMap<Value, Value> unmerged;
  /// The merges this pass made or found, to erase those nothing reads.
  SmallVector<Operation *> merges;

  /// Replaces `op`'s one result by the merge of `result`, its unmerged
  /// equivalent, and erases `op`.
  void replaceByMerge(Operation *op, Value result) {
    OpBuilder b(op);
    CleaveBuilder cb(b, op->getLoc());
    Value merged = cb.reshape(result, shapeOf(op->getResult(0)));
    unmerged[merged] = result;
    merges.push_back(merged.getDefiningOp());
    op->getResult(0).replaceAllUsesWith(merged);
    op->erase();
  }

  /// The op's result on the unmerged dims, or null where it reads its
  /// operands' dims differently from a batch.
  Value unmergedResult(Operation *op) {
    OpBuilder b(op);
    CleaveBuilder cb(b, op->getLoc());
    auto source = [&](Value v) { return unmerged.lookup(v); };
    if (auto transpose = dyn_cast<TransposeOp>(op)) {
      Value input = source(transpose.getInput());
      ArrayRef<int64_t> perm = transpose.getPerm();
      if (!input || perm[0] != 0)
        return Value();
      SmallVector<int64_t> wider = {0, 1};
      for (int64_t d : perm.drop_front())
        wider.push_back(d + 1);
      return cb.transpose(input, wider);
    }
    if (auto matmul = dyn_cast<MatMulOp>(op)) {
      // The merged dim is a batch dim of the product only in a batch of
      // matrices; in a matrix it is a row or the contracted dim.
      Value lhs = source(matmul.getLhs()), rhs = source(matmul.getRhs());
      if (!lhs || !rhs || shapeOf(matmul.getLhs()).size() < 3 ||
          shapeOf(lhs).size() != shapeOf(rhs).size() ||
          shapeOf(lhs).take_front(2) != shapeOf(rhs).take_front(2))
        return Value();
      return MatMulOp::create(b, op->getLoc(), lhs, rhs, matmul.getTransAAttr(),
                              matmul.getTransBAttr());
    }
    if (auto softmax = dyn_cast<SoftmaxOp>(op))
      return overAnotherDim(b, softmax, source(softmax.getInput()));
    if (auto logSoftmax = dyn_cast<LogSoftmaxOp>(op))
      return overAnotherDim(b, logSoftmax, source(logSoftmax.getInput()));
    return Value();
  }

  void runOnOperation() override {
    unmerged.clear();
    merges.clear();
    for (Block &block : getOperation().getBody()) {
      for (Operation &op : llvm::make_early_inc_range(block)) {
        if (auto reshape = dyn_cast<ReshapeOp>(op)) {
          if (Value input = unmerged.lookup(reshape.getInput())) {
            // A reshape of a merge is a reshape of what was merged.
            OpBuilder b(&op);
            CleaveBuilder cb(b, op.getLoc());
            Value direct = cb.reshape(input, reshape.getOutput().getType().getShape());
            reshape.getOutput().replaceAllUsesWith(direct);
            op.erase();
            if (auto merge = direct.getDefiningOp<ReshapeOp>(); merge && mergesLeadingDims(merge)) {
              unmerged[merge.getOutput()] = input;
              merges.push_back(merge);
            }
          } else if (mergesLeadingDims(reshape)) {
            unmerged[reshape.getOutput()] = reshape.getInput();
            merges.push_back(reshape);
          }
          continue;
        }
        if (Value result = unmergedResult(&op))
          replaceByMerge(&op, result);
      }
    }
    for (Operation *merge : llvm::reverse(merges))
      if (merge->use_empty())
        merge->erase();
  }
};

} // namespace
