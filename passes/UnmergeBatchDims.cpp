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
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

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
  /// Ops this pass may leave unread, erased at the end if so: the merges it
  /// made or found, and the producers of the operands of the ops it replaced
  /// (a constant of the merged shape).
  llvm::SetVector<Operation *> maybeUnread;

  /// Replaces `op`'s one result by the merge of `result`, its unmerged
  /// equivalent, and erases `op`.
  void replaceByMerge(Operation *op, Value result) {
    OpBuilder b(op);
    CleaveBuilder cb(b, op->getLoc());
    Value merged = cb.reshape(result, shapeOf(op->getResult(0)));
    unmerged[merged] = result;
    maybeUnread.insert(merged.getDefiningOp());
    for (Value operand : op->getOperands())
      if (Operation *producer = operand.getDefiningOp())
        maybeUnread.insert(producer);
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
    if (isElementwise(op) && op->getNumResults() == 1)
      return elementwiseOnUnmerged(b, op);
    if (auto softmax = dyn_cast<SoftmaxOp>(op))
      return overAnotherDim(b, softmax, source(softmax.getInput()));
    if (auto logSoftmax = dyn_cast<LogSoftmaxOp>(op))
      return overAnotherDim(b, logSoftmax, source(logSoftmax.getInput()));
    return Value();
  }

  /// An elementwise `op` one of whose operands is a merge of its result's
  /// shape, on the unmerged dims: the other merges of the same dims read
  /// unmerged, operands of lower rank (broadcast along the dims after the
  /// merged one) as they are, and the rest (a mask or a constant of the
  /// merged shape, or of size 1 there) reshaped to the unmerged dims.
  Value elementwiseOnUnmerged(OpBuilder &b, Operation *op) {
    auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
    ArrayRef<int64_t> merged = resultType.getShape();
    SmallVector<int64_t> leading;
    for (Value operand : op->getOperands())
      if (Value input = unmerged.lookup(operand); input && shapeOf(operand) == merged) {
        leading.assign(shapeOf(input).take_front(2).begin(), shapeOf(input).take_front(2).end());
        break;
      }
    if (leading.empty())
      return Value();
    CleaveBuilder cb(b, op->getLoc(), /*foldConstants=*/true);
    SmallVector<Value> operands;
    for (Value operand : op->getOperands()) {
      Value input = unmerged.lookup(operand);
      ArrayRef<int64_t> shape = shapeOf(operand);
      if (input && shape == merged && shapeOf(input).take_front(2) == ArrayRef(leading)) {
        operands.push_back(input);
      } else if (shape.size() < merged.size()) {
        operands.push_back(operand);
      } else {
        SmallVector<int64_t> wider = shape[0] == 1 ? SmallVector<int64_t>{1, 1} : leading;
        wider.append(shape.begin() + 1, shape.end());
        operands.push_back(cb.reshape(operand, wider));
      }
    }
    SmallVector<int64_t> wide = leading;
    wide.append(merged.begin() + 1, merged.end());
    Operation *wider = b.clone(*op);
    wider->setOperands(operands);
    wider->getResult(0).setType(RankedTensorType::get(wide, resultType.getElementType()));
    return wider->getResult(0);
  }

  void runOnOperation() override {
    unmerged.clear();
    maybeUnread.clear();
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
              maybeUnread.insert(merge);
            }
          } else if (mergesLeadingDims(reshape)) {
            unmerged[reshape.getOutput()] = reshape.getInput();
            maybeUnread.insert(reshape);
          }
          continue;
        }
        if (Value result = unmergedResult(&op))
          replaceByMerge(&op, result);
      }
    }
    for (Operation *op : llvm::reverse(maybeUnread))
      if (op->use_empty() && isPure(op))
        op->erase();
  }
};

} // namespace
