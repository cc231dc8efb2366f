//===- CleaveBuilder.h - cleave ops one call at a time ----------*- C++ -*-===//
//
// The one helper that builds arithmetic from cleave ops: the reverse-mode
// rules (CleaveVjp.cpp), the training step's updates (BuildTrainStep.cpp) and
// the importer's decomposition of ONNX's optimizers. Each call creates one op
// at the builder's insertion point and the helper's location, result types
// inferred, so the IR comes out in the order of the calls.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECTS_CLEAVE_CLEAVEBUILDER_H
#define CLEAVE_DIALECTS_CLEAVE_CLEAVEBUILDER_H

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/IR/Builders.h"

#include <cmath>

namespace cleave {

class CleaveBuilder {
public:
  /// With `foldConstants`, an op whose operands are all constants is folded
  /// at once, as the importer folds every op it builds.
  CleaveBuilder(mlir::OpBuilder &builder, mlir::Location loc, bool foldConstants = false)
      : builder(builder), loc(loc), foldConstants(foldConstants) {}

  mlir::OpBuilder &getBuilder() const { return builder; }
  mlir::Location getLoc() const { return loc; }

  //===--- constants -------------------------------------------------------===//

  /// A cleave.constant of `type` with every element `value`.
  mlir::Value splat(mlir::RankedTensorType type, double value) {
    return splatConstant(builder, loc, type, value);
  }
  /// A rank-0 constant of `element`: broadcasts against anything.
  mlir::Value scalar(mlir::Type element, double value) {
    return scalarConstant(builder, loc, element, value);
  }
  /// A rank-0 constant of v's element type.
  mlir::Value scalarLike(mlir::Value v, double value) { return scalar(elementOf(v), value); }
  mlir::Value zerosLike(mlir::Value v) { return splat(typeOf(v), 0.0); }

  //===--- elementwise -----------------------------------------------------===//

  mlir::Value add(mlir::Value x, mlir::Value y) { return create<AddOp>(x, y); }
  mlir::Value sub(mlir::Value x, mlir::Value y) { return create<SubOp>(x, y); }
  mlir::Value mul(mlir::Value x, mlir::Value y) { return create<MulOp>(x, y); }
  mlir::Value div(mlir::Value x, mlir::Value y) { return create<DivOp>(x, y); }
  mlir::Value pow(mlir::Value x, mlir::Value y) { return create<PowOp>(x, y); }
  mlir::Value mul(mlir::Value x, double c) { return mul(x, scalarLike(x, c)); }
  mlir::Value add(mlir::Value x, double c) { return add(x, scalarLike(x, c)); }
  /// c - x.
  mlir::Value rsub(double c, mlir::Value x) { return sub(scalarLike(x, c), x); }
  /// c * v, with c rounded to v's element type first (numpy's scalar rule);
  /// v itself when c is 1.
  mlir::Value scale(double c, mlir::Value v) { return c == 1.0 ? v : mul(scalarLike(v, c), v); }
  /// a * x + c * y, the constants first.
  mlir::Value blend(double a, mlir::Value x, double c, mlir::Value y) {
    return add(mul(scalarLike(x, a), x), mul(scalarLike(y, c), y));
  }
  mlir::Value neg(mlir::Value x) { return create<NegOp>(x); }
  mlir::Value exp(mlir::Value x) { return create<ExpOp>(x); }
  mlir::Value log(mlir::Value x) { return create<LogOp>(x); }
  mlir::Value erf(mlir::Value x) { return create<ErfOp>(x); }
  mlir::Value tanh(mlir::Value x) { return create<TanhOp>(x); }
  mlir::Value sigmoid(mlir::Value x) { return create<SigmoidOp>(x); }
  mlir::Value sin(mlir::Value x) { return create<SinOp>(x); }
  mlir::Value cos(mlir::Value x) { return create<CosOp>(x); }
  mlir::Value sinh(mlir::Value x) { return create<SinhOp>(x); }
  mlir::Value cosh(mlir::Value x) { return create<CoshOp>(x); }
  mlir::Value sqrt(mlir::Value x) { return create<SqrtOp>(x); }
  mlir::Value floor(mlir::Value x) { return create<FloorOp>(x); }
  mlir::Value ceil(mlir::Value x) { return create<CeilOp>(x); }
  mlir::Value reciprocal(mlir::Value x) { return create<ReciprocalOp>(x); }
  mlir::Value abs(mlir::Value x) { return create<AbsOp>(x); }
  mlir::Value relu(mlir::Value x) { return create<ReluOp>(x); }
  mlir::Value logicalNot(mlir::Value x) { return create<NotOp>(x); }
  /// x, through which no gradient flows.
  mlir::Value detach(mlir::Value x) { return create<DetachOp>(x); }
  /// m where finite, else 0, detached: the shift a log-sum-exp subtracts
  /// before exp so that exp cannot overflow. The result does not depend on
  /// it, so no gradient flows through it; an infinite m would make x - m NaN
  /// (inf - inf), where shifting by 0 gives the infinite result exactly.
  mlir::Value logSumExpShift(mlir::Value m) {
    mlir::Value infinite = equal(abs(m), scalarLike(m, INFINITY));
    return detach(where(infinite, scalarLike(m, 0.0), m));
  }
  mlir::Value equal(mlir::Value x, mlir::Value y) { return create<EqualOp>(x, y); }
  mlir::Value greater(mlir::Value x, mlir::Value y) { return create<GreaterOp>(x, y); }
  mlir::Value less(mlir::Value x, mlir::Value y) { return create<LessOp>(x, y); }
  mlir::Value where(mlir::Value c, mlir::Value x, mlir::Value y) {
    return create<WhereOp>(c, x, y);
  }
  /// v in `element` (v itself when it already is).
  mlir::Value castTo(mlir::Value v, mlir::Type element) {
    return elementOf(v) == element ? v : create<CastOp>(v, element);
  }
  /// `sum` + `term`, with null for zero.
  mlir::Value accumulate(mlir::Value sum, mlir::Value term) {
    if (!sum || !term)
      return sum ? sum : term;
    return add(sum, term);
  }

  //===--- shapes ----------------------------------------------------------===//

  mlir::Value reshape(mlir::Value v, llvm::ArrayRef<int64_t> shape) {
    return typeOf(v).getShape() == shape ? v : create<ReshapeOp>(v, shape);
  }
  mlir::Value expand(mlir::Value v, llvm::ArrayRef<int64_t> shape) {
    return typeOf(v).getShape() == shape ? v : create<ExpandOp>(v, shape);
  }
  mlir::Value transpose(mlir::Value v, llvm::ArrayRef<int64_t> perm) {
    return create<TransposeOp>(v, perm);
  }
  /// Swaps the last two dims.
  mlir::Value transposeLast2(mlir::Value v);
  mlir::Value sum(mlir::Value v, llvm::ArrayRef<int64_t> axes, bool keepdims) {
    return create<ReduceSumOp>(v, builder.getDenseI64ArrayAttr(axes),
                               builder.getBoolAttr(keepdims));
  }
  /// The sum of every element, as a scalar (v itself when it is one).
  mlir::Value sumAll(mlir::Value v) {
    int64_t rank = typeOf(v).getRank();
    return rank == 0 ? v : sum(v, llvm::to_vector(llvm::seq<int64_t>(0, rank)), false);
  }
  mlir::Value mean(mlir::Value v, llvm::ArrayRef<int64_t> axes, bool keepdims = true) {
    return create<ReduceMeanOp>(v, builder.getDenseI64ArrayAttr(axes),
                                builder.getBoolAttr(keepdims));
  }

  /// The gradient of an operand of `shape` that broadcast (numpy rules) to
  /// grad's shape: grad summed over the leading dims the operand lacks and
  /// the dims where it has size 1, then reshaped to `shape`.
  mlir::Value reduceToShape(mlir::Value grad, llvm::ArrayRef<int64_t> shape);

  /// `shape` with `axes` set to 1: what a reduction with keepdims gives.
  static llvm::SmallVector<int64_t> keptShape(llvm::ArrayRef<int64_t> shape,
                                              llvm::ArrayRef<int64_t> axes);

private:
  static mlir::RankedTensorType typeOf(mlir::Value v) {
    return mlir::cast<mlir::RankedTensorType>(v.getType());
  }
  static mlir::Type elementOf(mlir::Value v) { return typeOf(v).getElementType(); }

  template <typename OpTy, typename... Args> mlir::Value create(Args &&...args) {
    if (foldConstants)
      return builder.createOrFold<OpTy>(loc, std::forward<Args>(args)...);
    return OpTy::create(builder, loc, std::forward<Args>(args)...);
  }

  mlir::OpBuilder &builder;
  mlir::Location loc;
  bool foldConstants;
};

} // namespace cleave

#endif
