//===- FoldTransposes.cpp - matrix transposes as the products' flags -------===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveBuilder.h"
#include "dialects/Cleave/CleaveOps.h"

#include "mlir/IR/Builders.h"

namespace cleave {
#define GEN_PASS_DEF_FOLDTRANSPOSES
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// The batch of matrices `value` is the transpose of, when it is one: a
/// transpose that swaps the last two dims and keeps the others.
Value transposedMatrices(Value value) {
  auto transpose = value.getDefiningOp<TransposeOp>();
  if (!transpose)
    return Value();
  ArrayRef<int64_t> perm = transpose.getPerm();
  const int64_t rank = perm.size();
  if (rank < 2 || perm[rank - 2] != rank - 1 || perm[rank - 1] != rank - 2)
    return Value();
  for (int64_t d = 0; d + 2 < rank; ++d)
    if (perm[d] != d)
      return Value();
  return transpose.getInput();
}

/// The matrix `value` is the transpose of, when it is one (a 2-D transpose).
Value transposedMatrix(Value value) {
  return cast<RankedTensorType>(value.getType()).getRank() == 2 ? transposedMatrices(value)
                                                                : Value();
}

int64_t rankOf(Value value) { return cast<RankedTensorType>(value.getType()).getRank(); }

/// A gemm of `a` and `b` as `like`'s (alpha, beta, c), with these flags.
Value gemmLike(OpBuilder &b, GemmOp like, Value x, Value y, bool tx, bool ty) {
  return GemmOp::create(b, like.getLoc(), x, y, like.getC(), like.getAlphaAttr(),
                        like.getBetaAttr(), b.getBoolAttr(tx), b.getBoolAttr(ty),
                        like.getActivationAttr());
}

/// A matmul whose rhs is a transposed matrix, as a gemm over its lhs's rows
/// (a batch of lhs matrices folded into them): the transpose is the gemm's
/// flag. Returns the gemm, or null when `matmul` is not one.
GemmOp gemmOfMatMul(MatMulOp matmul) {
  Value lhs = matmul.getLhs(), rhs = matmul.getRhs();
  Value lhsMatrix = rankOf(lhs) == 2 ? transposedMatrix(lhs) : Value();
  Value rhsMatrix = rankOf(rhs) == 2 ? transposedMatrix(rhs) : Value();
  if (rankOf(lhs) < 2 || rankOf(rhs) != 2 || (!rhsMatrix && !lhsMatrix))
    return GemmOp();
  OpBuilder builder(matmul);
  CleaveBuilder b(builder, matmul.getLoc());
  ArrayRef<int64_t> shape = cast<RankedTensorType>(lhs.getType()).getShape();
  int64_t rows = 1;
  for (int64_t d : shape.drop_back())
    rows *= d;
  Value rows2 = lhsMatrix          ? lhsMatrix
                : rankOf(lhs) == 2 ? lhs
                                   : b.reshape(lhs, {rows, shape.back()});
  FloatAttr one = builder.getF32FloatAttr(1.0f);
  auto gemm = GemmOp::create(builder, matmul.getLoc(), rows2, rhsMatrix ? rhsMatrix : rhs, Value(),
                             one, one, builder.getBoolAttr(static_cast<bool>(lhsMatrix)),
                             builder.getBoolAttr(static_cast<bool>(rhsMatrix)), StringAttr());
  Value result = gemm.getResult();
  if (rankOf(lhs) > 2)
    result = b.reshape(result, cast<RankedTensorType>(matmul.getType()).getShape());
  matmul.replaceAllUsesWith(result);
  matmul.erase();
  return gemm;
}

/// A matmul whose operand is a batch of transposed matrices (the
/// gradients of an attention's batched products) reads the batch with its
/// flag flipped.
void foldOperands(MatMulOp matmul) {
  Value lhs = transposedMatrices(matmul.getLhs()), rhs = transposedMatrices(matmul.getRhs());
  if (!lhs && !rhs)
    return;
  OpBuilder builder(matmul);
  auto folded = MatMulOp::create(
      builder, matmul.getLoc(), lhs ? lhs : matmul.getLhs(), rhs ? rhs : matmul.getRhs(),
      matmul.getTransA() != static_cast<bool>(lhs), matmul.getTransB() != static_cast<bool>(rhs));
  matmul.replaceAllUsesWith(folded.getResult());
  matmul.erase();
}

/// A gemm whose factor is a transposed matrix reads the matrix with its
/// flag flipped.
void foldFactors(GemmOp gemm) {
  Value a = transposedMatrix(gemm.getA()), b = transposedMatrix(gemm.getB());
  if (!a && !b)
    return;
  OpBuilder builder(gemm);
  Value folded =
      gemmLike(builder, gemm, a ? a : gemm.getA(), b ? b : gemm.getB(),
               gemm.getTransA() != static_cast<bool>(a), gemm.getTransB() != static_cast<bool>(b));
  gemm.replaceAllUsesWith(folded);
  gemm.erase();
}

/// The transpose of a gemm without c that nothing else reads is the gemm of
/// its factors swapped, each flag flipped: (op(A) op(B))^T = op(B)^T op(A)^T.
void foldTransposedProduct(TransposeOp transpose) {
  Value input = transposedMatrix(transpose.getResult()) ? transpose.getInput() : Value();
  auto gemm = input ? input.getDefiningOp<GemmOp>() : GemmOp();
  if (!gemm || gemm.getC() || !input.hasOneUse())
    return;
  OpBuilder builder(transpose);
  Value swapped =
      gemmLike(builder, gemm, gemm.getB(), gemm.getA(), !gemm.getTransB(), !gemm.getTransA());
  transpose.replaceAllUsesWith(swapped);
  transpose.erase();
  gemm.erase();
}

struct FoldTransposesPass : public cleave::impl::FoldTransposesBase<FoldTransposesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<MatMulOp> matmuls;
    module.walk([&](MatMulOp matmul) { matmuls.push_back(matmul); });
    for (MatMulOp matmul : matmuls)
      if (!gemmOfMatMul(matmul))
        foldOperands(matmul);
    SmallVector<TransposeOp> transposes;
    module.walk([&](TransposeOp transpose) { transposes.push_back(transpose); });
    for (TransposeOp transpose : transposes)
      foldTransposedProduct(transpose);
    SmallVector<GemmOp> gemms;
    module.walk([&](GemmOp gemm) { gemms.push_back(gemm); });
    for (GemmOp gemm : gemms)
      foldFactors(gemm);
    // The transposes nothing reads any more.
    module.walk([](TransposeOp transpose) {
      if (transpose->use_empty())
        transpose.erase();
    });
  }
};

} // namespace
