//===- CleaveVjp.cpp - reverse-mode rules of cleave ops ------------------===//
//
// Each differentiable op's VjpOpInterface::buildVjp: operand gradients built
// from cleave ops (and the gradient ops gather_grad, slice_grad,
// conv_grad_input, conv_grad_weight, max_pool_grad and average_pool_grad,
// where no forward op expresses the adjoint; conv_grad_input, which is also
// ONNX's ConvTranspose, has a rule of its own).
//
// Conventions shared by every rule:
// - A rule only differentiates float values: an operand that is not a float
//   tensor (indices, labels, a condition, integer data) gets a null gradient,
//   and so does every operand of an op whose results carry no gradient.
// - A null result gradient means zero (the loss does not depend on it).
// - Broadcasting operands get their gradient summed back to their own shape
//   (CleaveBuilder::reduceToShape).
// - Constants are splat cleave.constant ops of the element type they combine
//   with, rank 0 where they broadcast.
// - Subgradients at kinks: relu, leaky_relu and abs take the x > 0 (x < 0)
//   branch and give 0 (alpha for leaky_relu, 0 for abs) at x = 0, as PyTorch;
//   reduce_max gives every element equal to the maximum the full gradient
//   (an equality mask, as onnxruntime's ReduceMax gradient); max_pool gives
//   each window's gradient to its first maximum (as PyTorch).
//
//===----------------------------------------------------------------------===//

#include "dialects/Cleave/CleaveBuilder.h"
#include "dialects/Cleave/CleaveOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <cmath>
#include <numeric>

using namespace mlir;
using namespace cleave;

#include "dialects/Cleave/CleaveInterfaces.cpp.inc"

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }
ArrayRef<int64_t> shapeOf(Value v) { return typeOf(v).getShape(); }
Type elementOf(Value v) { return typeOf(v).getElementType(); }
bool isFloat(Value v) { return v && isa<FloatType>(elementOf(v)); }

int64_t product(ArrayRef<int64_t> dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t(1), std::multiplies<int64_t>());
}

/// 0, 1, ..., n - 1 except `skip` (or nothing skipped when negative).
SmallVector<int64_t> allAxes(int64_t n, int64_t skip = -1) {
  SmallVector<int64_t> axes;
  for (int64_t i = 0; i < n; ++i)
    if (i != skip)
      axes.push_back(i);
  return axes;
}

/// Appends a null gradient for each operand of `op`.
LogicalResult noGradients(Operation *op, SmallVectorImpl<Value> &grads) {
  grads.append(op->getNumOperands(), Value());
  return success();
}

/// The gradient of the one result of `op`, or null when it has none (no
/// gradient arrives, or the result is not a float tensor).
Value resultGrad(Operation *op, ValueRange resultGrads) {
  Value g = resultGrads.empty() ? Value() : resultGrads[0];
  return g && isFloat(op->getResult(0)) ? g : Value();
}

/// Elementwise one-input ops: grads = {rule(builder, x, y, g)}.
template <typename Rule>
LogicalResult unaryVjp(Operation *op, OpBuilder &builder, ValueRange resultGrads,
                       SmallVectorImpl<Value> &grads, Rule rule) {
  Value g = resultGrad(op, resultGrads);
  if (!g)
    return noGradients(op, grads);
  CleaveBuilder b(builder, op->getLoc());
  grads.push_back(rule(b, op->getOperand(0), op->getResult(0), g));
  return success();
}

/// Broadcasting two-input ops: the rule gives the gradients at the result's
/// shape (null for none); they are summed back to the operands' shapes.
template <typename Rule>
LogicalResult binaryVjp(Operation *op, OpBuilder &builder, ValueRange resultGrads,
                        SmallVectorImpl<Value> &grads, Rule rule) {
  Value g = resultGrad(op, resultGrads);
  if (!g)
    return noGradients(op, grads);
  CleaveBuilder b(builder, op->getLoc());
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  auto [gl, gr] = rule(b, lhs, rhs, op->getResult(0), g);
  grads.push_back(gl && isFloat(lhs) ? b.reduceToShape(b.castTo(gl, elementOf(lhs)), shapeOf(lhs))
                                     : Value());
  grads.push_back(gr && isFloat(rhs) ? b.reduceToShape(b.castTo(gr, elementOf(rhs)), shapeOf(rhs))
                                     : Value());
  return success();
}

/// Ops that only move or copy elements: grads = {rule(builder, g)} for the
/// first operand (when it is a float tensor), null for the others.
template <typename Rule>
LogicalResult movementVjp(Operation *op, OpBuilder &builder, ValueRange resultGrads,
                          SmallVectorImpl<Value> &grads, Rule rule) {
  Value g = resultGrad(op, resultGrads);
  if (!g || !isFloat(op->getOperand(0)))
    return noGradients(op, grads);
  CleaveBuilder b(builder, op->getLoc());
  grads.push_back(rule(b, g));
  grads.append(op->getNumOperands() - 1, Value());
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise, one input
//===----------------------------------------------------------------------===//

LogicalResult NegOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &grads) {
  return unaryVjp(*this, builder, resultGrads, grads,
                  [](CleaveBuilder &b, Value, Value, Value g) { return b.neg(g); });
}

LogicalResult SqrtOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &grads) {
  // d sqrt(x) = 1 / (2 y)
  return unaryVjp(*this, builder, resultGrads, grads,
                  [](CleaveBuilder &b, Value, Value y, Value g) { return b.div(g, b.mul(y, 2.0)); });
}

LogicalResult ReciprocalOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &grads) {
  // d (1 / x) = -y^2
  return unaryVjp(*this, builder, resultGrads, grads, [](CleaveBuilder &b, Value, Value y, Value g) {
    return b.neg(b.mul(g, b.mul(y, y)));
  });
}

LogicalResult ExpOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &grads) {
  return unaryVjp(*this, builder, resultGrads, grads,
                  [](CleaveBuilder &b, Value, Value y, Value g) { return b.mul(g, y); });
}

LogicalResult LogOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &grads) {
  return unaryVjp(*this, builder, resultGrads, grads,
                  [](CleaveBuilder &b, Value x, Value, Value g) { return b.div(g, x); });
}

LogicalResult AbsOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &grads) {
  // g * sign(x), with sign(0) = 0.
  return unaryVjp(*this, builder, resultGrads, grads, [](CleaveBuilder &b, Value x, Value, Value g) {
    Value zero = b.scalarLike(x, 0.0);
    return b.where(b.greater(x, zero), g, b.where(b.less(x, zero), b.neg(g), b.scalarLike(g, 0.0)));
  });
}

LogicalResult TanhOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &grads) {
  // d tanh(x) = 1 - y^2
  return unaryVjp(*this, builder, resultGrads, grads, [](CleaveBuilder &b, Value, Value y, Value g) {
    return b.mul(g, b.rsub(1.0, b.mul(y, y)));
  });
}

LogicalResult SigmoidOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &grads) {
  // d sigmoid(x) = y (1 - y)
  return unaryVjp(*this, builder, resultGrads, grads, [](CleaveBuilder &b, Value, Value y, Value g) {
    return b.mul(b.mul(g, y), b.rsub(1.0, y));
  });
}

LogicalResult ReluOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &grads) {
  // Gated on the result, y > 0 exactly where x > 0: the backward keeps y,
  // which the next op's gradient mostly keeps too, not x, so that the ReLU
  // of a convolution or gemm can be fused into it (cleave-fuse-activations).
  return unaryVjp(*this, builder, resultGrads, grads,
                  [](CleaveBuilder &b, Value, Value y, Value g) {
                    return b.where(b.greater(y, b.scalarLike(y, 0.0)), g, b.scalarLike(g, 0.0));
                  });
}

LogicalResult ErfOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &grads) {
  // d erf(x) = 2 / sqrt(pi) exp(-x^2)
  return unaryVjp(*this, builder, resultGrads, grads, [](CleaveBuilder &b, Value x, Value, Value g) {
    return b.mul(g, b.mul(b.exp(b.neg(b.mul(x, x))), 2.0 / std::sqrt(M_PI)));
  });
}

LogicalResult LeakyReluOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &grads) {
  double alpha = getAlpha().convertToDouble();
  return unaryVjp(*this, builder, resultGrads, grads, [&](CleaveBuilder &b, Value x, Value, Value g) {
    return b.where(b.greater(x, b.scalarLike(x, 0.0)), g, b.mul(g, alpha));
  });
}

LogicalResult GeluOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &grads) {
  bool tanhApproximation = getApproximate() == "tanh";
  return unaryVjp(*this, builder, resultGrads, grads, [&](CleaveBuilder &b, Value x, Value, Value g) {
    Value derivative;
    if (!tanhApproximation) {
      // y = x Phi(x): Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
      Value cdf = b.mul(b.add(b.erf(b.mul(x, M_SQRT1_2)), 1.0), 0.5);
      Value pdf = b.mul(b.exp(b.mul(b.mul(x, x), -0.5)), 1.0 / std::sqrt(2.0 * M_PI));
      derivative = b.add(cdf, b.mul(x, pdf));
    } else {
      // y = x (1 + t) / 2, t = tanh(k (x + c x^3)):
      // (1 + t) / 2 + x (1 - t^2) k (1 + 3 c x^2) / 2.
      const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
      Value x2 = b.mul(x, x);
      Value t = b.tanh(b.mul(b.mul(x, b.add(b.mul(x2, c), 1.0)), k));
      Value inner = b.mul(b.add(b.mul(x2, 3.0 * c), 1.0), 0.5 * k);
      derivative =
          b.add(b.mul(b.add(t, 1.0), 0.5), b.mul(b.mul(x, b.rsub(1.0, b.mul(t, t))), inner));
    }
    return b.mul(g, derivative);
  });
}

// The trigonometric family: each rule is g times the derivative in x and y.

LogicalResult SinOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &grads) {
  return unaryVjp(*this, builder, resultGrads, grads,
                  [](CleaveBuilder &b, Value x, Value, Value g) { return b.mul(g, b.cos(x)); });
}

LogicalResult CosOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &grads) {
  return unaryVjp(
      *this, builder, resultGrads, grads,
      [](CleaveBuilder &b, Value x, Value, Value g) { return b.neg(b.mul(g, b.sin(x))); });
}

LogicalResult TanOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &grads) {
  // d tan(x) = 1 + y^2
  return unaryVjp(
      *this, builder, resultGrads, grads,
      [](CleaveBuilder &b, Value, Value y, Value g) { return b.mul(g, b.add(b.mul(y, y), 1.0)); });
}

LogicalResult AsinOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &grads) {
  // d asin(x) = 1 / sqrt(1 - x^2)
  return unaryVjp(*this, builder, resultGrads, grads,
                  [](CleaveBuilder &b, Value x, Value, Value g) {
                    return b.div(g, b.sqrt(b.rsub(1.0, b.mul(x, x))));
                  });
}

LogicalResult AcosOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &grads) {
  // d acos(x) = -1 / sqrt(1 - x^2)
  return unaryVjp(*this, builder, resultGrads, grads,
                  [](CleaveBuilder &b, Value x, Value, Value g) {
                    return b.neg(b.div(g, b.sqrt(b.rsub(1.0, b.mul(x, x)))));
                  });
}

LogicalResult AtanOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &grads) {
  // d atan(x) = 1 / (1 + x^2)
  return unaryVjp(
      *this, builder, resultGrads, grads,
      [](CleaveBuilder &b, Value x, Value, Value g) { return b.div(g, b.add(b.mul(x, x), 1.0)); });
}

LogicalResult SinhOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &grads) {
  return unaryVjp(*this, builder, resultGrads, grads,
                  [](CleaveBuilder &b, Value x, Value, Value g) { return b.mul(g, b.cosh(x)); });
}

LogicalResult CoshOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &grads) {
  return unaryVjp(*this, builder, resultGrads, grads,
                  [](CleaveBuilder &b, Value x, Value, Value g) { return b.mul(g, b.sinh(x)); });
}

LogicalResult AsinhOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                SmallVectorImpl<Value> &grads) {
  // d asinh(x) = 1 / sqrt(x^2 + 1)
  return unaryVjp(*this, builder, resultGrads, grads,
                  [](CleaveBuilder &b, Value x, Value, Value g) {
                    return b.div(g, b.sqrt(b.add(b.mul(x, x), 1.0)));
                  });
}

LogicalResult AcoshOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                SmallVectorImpl<Value> &grads) {
  // d acosh(x) = 1 / sqrt(x^2 - 1)
  return unaryVjp(*this, builder, resultGrads, grads,
                  [](CleaveBuilder &b, Value x, Value, Value g) {
                    return b.div(g, b.sqrt(b.add(b.mul(x, x), -1.0)));
                  });
}

LogicalResult AtanhOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                SmallVectorImpl<Value> &grads) {
  // d atanh(x) = 1 / (1 - x^2)
  return unaryVjp(
      *this, builder, resultGrads, grads,
      [](CleaveBuilder &b, Value x, Value, Value g) { return b.div(g, b.rsub(1.0, b.mul(x, x))); });
}

LogicalResult DetachOp::buildVjp(OpBuilder &, ValueRange, SmallVectorImpl<Value> &grads) {
  grads.push_back(Value());
  return success();
}

LogicalResult AllReduceGradOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                       SmallVectorImpl<Value> &grads) {
  Value grad = resultGrads[0];
  if (grad)
    grad = shard::AllReduceOp::create(builder, getLoc(), grad, getGrid(), getGridAxes(),
                                      shard::ReductionKind::Sum);
  grads.push_back(grad);
  return success();
}

namespace {

/// The forward all-reduce of a partial sum differentiates to the identity
/// (see AllReduceGradOp).
struct AllReduceVjp : VjpOpInterface::ExternalModel<AllReduceVjp, shard::AllReduceOp> {
  LogicalResult buildVjp(Operation *op, OpBuilder &, ValueRange resultGrads,
                         SmallVectorImpl<Value> &grads) const {
    auto reduce = cast<shard::AllReduceOp>(op);
    if (reduce.getReduction() != shard::ReductionKind::Sum)
      return op->emitError("only a sum all-reduce has a gradient rule");
    grads.push_back(resultGrads[0]);
    return success();
  }
};

/// The dim a move between a value's parts and its whole cuts or joins.
llvm::APInt movedDim(shard::AllSliceOp slice) { return slice.getSliceAxis(); }
llvm::APInt movedDim(shard::AllGatherOp gather) { return gather.getGatherAxis(); }

/// A move between a value's parts and its whole, whose gradient makes the
/// opposite move along the same dim: a slice of a value every rank holds
/// whole (each rank keeps its part) gathers the parts' gradients; a gather
/// of the parts into the whole, which every rank then reads alike (a
/// cross-entropy's scores under --deterministic: gatherWhole), so that the
/// whole's gradient is the same on every rank, gives each part its slice.
template <typename Move, typename Opposite>
struct MoveVjp : VjpOpInterface::ExternalModel<MoveVjp<Move, Opposite>, Move> {
  LogicalResult buildVjp(Operation *op, OpBuilder &builder, ValueRange resultGrads,
                         SmallVectorImpl<Value> &grads) const {
    auto move = cast<Move>(op);
    Value grad = resultGrads[0];
    if (grad)
      grad = Opposite::create(builder, move.getLoc(), move.getInput().getType(), move.getGrid(),
                              move.getGridAxes(), grad, movedDim(move));
    grads.push_back(grad);
    return success();
  }
};

} // namespace

LogicalResult IdentityOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &grads) {
  return unaryVjp(*this, builder, resultGrads, grads,
                  [](CleaveBuilder &, Value, Value, Value g) { return g; });
}

//===----------------------------------------------------------------------===//
// Elementwise, broadcasting
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &grads) {
  return binaryVjp(*this, builder, resultGrads, grads,
                   [](CleaveBuilder &, Value, Value, Value, Value g) { return std::pair(g, g); });
}

LogicalResult SubOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &grads) {
  return binaryVjp(
      *this, builder, resultGrads, grads,
      [](CleaveBuilder &b, Value, Value, Value, Value g) { return std::pair(g, b.neg(g)); });
}

LogicalResult MulOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &grads) {
  return binaryVjp(*this, builder, resultGrads, grads,
                   [](CleaveBuilder &b, Value x, Value y, Value, Value g) {
                     return std::pair(b.mul(g, y), b.mul(g, x));
                   });
}

LogicalResult DivOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &grads) {
  // z = x / y: dx = g / y, dy = -g z / y.
  return binaryVjp(*this, builder, resultGrads, grads,
                   [](CleaveBuilder &b, Value, Value y, Value z, Value g) {
                     Value gx = b.div(g, y);
                     return std::pair(gx, b.neg(b.mul(gx, z)));
                   });
}

/// max and min, as PyTorch's maximum and minimum: an operand gets no gradient
/// where it loses (less than the other for max, greater for min), half of g
/// on a tie, g elsewhere (so both get g where either is NaN).
LogicalResult extremumVjp(Operation *op, OpBuilder &builder, ValueRange resultGrads,
                          SmallVectorImpl<Value> &grads, bool isMax) {
  return binaryVjp(
      op, builder, resultGrads, grads, [isMax](CleaveBuilder &b, Value x, Value y, Value, Value g) {
        auto loses = [&](Value u, Value v) { return isMax ? b.less(u, v) : b.greater(u, v); };
        Value share = b.where(b.equal(x, y), b.mul(g, 0.5), g);
        Value zero = b.scalarLike(g, 0.0);
        return std::pair(b.where(loses(x, y), zero, share), b.where(loses(y, x), zero, share));
      });
}

LogicalResult MaxOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &grads) {
  return extremumVjp(*this, builder, resultGrads, grads, /*isMax=*/true);
}

LogicalResult MinOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &grads) {
  return extremumVjp(*this, builder, resultGrads, grads, /*isMax=*/false);
}

LogicalResult FmodOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &grads) {
  // z = x - trunc(x / y) y, the quotient piecewise constant: dx = g,
  // dy = -g trunc(x / y).
  return binaryVjp(*this, builder, resultGrads, grads,
                   [](CleaveBuilder &b, Value x, Value y, Value, Value g) {
                     Value q = b.div(x, y);
                     Value truncated = b.where(b.less(q, b.scalarLike(q, 0.0)), b.ceil(q), b.floor(q));
                     return std::pair(g, b.neg(b.mul(g, truncated)));
                   });
}

LogicalResult PowOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &grads) {
  // z = x^y: dx = g y x^(y - 1); dy = g z log(x), taken as 0 where x = 0 (as
  // PyTorch). The exponent may be an integer tensor (no gradient of its own).
  return binaryVjp(
      *this, builder, resultGrads, grads, [](CleaveBuilder &b, Value x, Value y, Value z, Value g) {
        Value yx = b.castTo(y, elementOf(x));
        Value gx = b.mul(b.mul(g, yx), b.pow(x, b.add(yx, -1.0)));
        Value gy;
        if (isFloat(y)) {
          Value zero = b.scalarLike(x, 0.0);
          gy = b.where(b.equal(x, zero), b.scalarLike(g, 0.0), b.mul(b.mul(g, z), b.log(x)));
        }
        return std::pair(gx, gy);
      });
}

LogicalResult WhereOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                SmallVectorImpl<Value> &grads) {
  Value g = resultGrad(*this, resultGrads);
  if (!g)
    return noGradients(*this, grads);
  CleaveBuilder b(builder, getLoc());
  Value zero = b.scalarLike(g, 0.0);
  grads.push_back(Value()); // the condition
  grads.push_back(b.reduceToShape(b.where(getCondition(), g, zero), shapeOf(getX())));
  grads.push_back(b.reduceToShape(b.where(getCondition(), zero, g), shapeOf(getY())));
  return success();
}

LogicalResult CastOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &grads) {
  // Only float to float carries a gradient (cast back); rounding to an
  // integer or a bool is flat.
  return movementVjp(*this, builder, resultGrads, grads,
                     [&](CleaveBuilder &b, Value g) { return b.castTo(g, elementOf(getInput())); });
}

//===----------------------------------------------------------------------===//
// Softmax and normalisation
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &grads) {
  // dx = y (g - sum(g y, axis)), one softmax_grad.
  return unaryVjp(
      *this, builder, resultGrads, grads, [&](CleaveBuilder &b, Value, Value y, Value g) {
        return SoftmaxGradOp::create(b.getBuilder(), b.getLoc(), y, g, getAxisAttr()).getResult();
      });
}

LogicalResult LogSoftmaxOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &grads) {
  // dx = g - exp(y) sum(g, axis)
  int64_t axis = getAxis();
  return unaryVjp(*this, builder, resultGrads, grads, [&](CleaveBuilder &b, Value, Value y, Value g) {
    return b.sub(g, b.mul(b.exp(y), b.sum(g, {axis}, true)));
  });
}

namespace {

/// Mean and inverse standard deviation of x over `axes` (kept as size 1),
/// and x - mean: the statistics normalisations divide by.
struct Moments {
  Value mean, invStd, centered;
};

Moments momentsOf(CleaveBuilder &b, Value x, ArrayRef<int64_t> axes, double epsilon) {
  Moments m;
  m.mean = b.mean(x, axes);
  m.centered = b.sub(x, m.mean);
  Value var = b.mean(b.mul(m.centered, m.centered), axes);
  m.invStd = b.reciprocal(b.sqrt(b.add(var, epsilon)));
  return m;
}

/// The gradient of x through xhat = (x - mean) * invStd with the statistics
/// over `axes` of x itself, given gxhat (the gradient at xhat):
/// invStd (gxhat - mean(gxhat) - xhat mean(gxhat xhat)).
Value normalizedGrad(CleaveBuilder &b, Value gxhat, Value xhat, Value invStd,
                     ArrayRef<int64_t> axes) {
  Value centered = b.sub(gxhat, b.mean(gxhat, axes));
  return b.mul(invStd, b.sub(centered, b.mul(xhat, b.mean(b.mul(gxhat, xhat), axes))));
}

} // namespace

LogicalResult LayerNormalizationOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                             SmallVectorImpl<Value> &grads) {
  Value gy = resultGrads[0], gMean = resultGrads[1], gInvStd = resultGrads[2];
  if (!gy && !gMean && !gInvStd)
    return noGradients(*this, grads);
  CleaveBuilder b(builder, getLoc());
  Value x = getX();
  Type element = elementOf(x);
  ArrayRef<int64_t> shape = shapeOf(x);
  int64_t axis = getAxis();
  SmallVector<int64_t> axes;
  for (int64_t i = axis; i < static_cast<int64_t>(shape.size()); ++i)
    axes.push_back(i);
  double count = static_cast<double>(product(shape.drop_front(axis)));

  // The op's own statistics are f32 (ONNX's default stash type): use them
  // for f32 data, recompute them at the data's precision otherwise.
  Value mean = getMean(), invStd = getInvStdDev(), centered;
  if (elementOf(mean) == element) {
    centered = b.sub(x, mean);
  } else {
    Moments m = momentsOf(b, x, axes, getEpsilon().convertToDouble());
    mean = m.mean;
    invStd = m.invStd;
    centered = m.centered;
  }

  Value gx, gScale, gBias;
  if (gy) {
    Value xhat = b.mul(centered, invStd);
    gx = LayerNormalizationGradOp::create(builder, getLoc(), x, getScale(), mean, invStd, gy,
                                          getAxisAttr());
    gScale = b.reduceToShape(b.mul(gy, xhat), shapeOf(getScale()));
    if (getBias())
      gBias = b.reduceToShape(gy, shapeOf(getBias()));
  }
  // mean = sum(x) / n: each x gets gMean / n.
  if (gMean)
    gx = b.accumulate(gx, b.expand(b.mul(b.castTo(gMean, element), 1.0 / count), shape));
  // invStd = (var + eps)^(-1/2), var = sum((x - mean)^2) / n:
  // d invStd / dx = -invStd^3 (x - mean) / n.
  if (gInvStd) {
    Value cube = b.mul(b.mul(invStd, invStd), invStd);
    Value factor = b.mul(b.mul(b.castTo(gInvStd, element), cube), -1.0 / count);
    gx = b.accumulate(gx, b.mul(factor, centered));
  }
  grads.append({gx, gScale});
  if (getBias())
    grads.push_back(gBias);
  return success();
}

LogicalResult BatchNormalizationOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                             SmallVectorImpl<Value> &grads) {
  // Every float operand gets its exact gradient. Training mode normalises
  // with the batch statistics (y does not depend on the mean and var
  // operands) and running = momentum * operand + (1 - momentum) * batch
  // statistic; inference mode normalises with the mean and var operands and
  // returns them as the running statistics.
  Value gy = resultGrads[0], gRunMean = resultGrads[1], gRunVar = resultGrads[2];
  if (!gy && !gRunMean && !gRunVar)
    return noGradients(*this, grads);
  CleaveBuilder b(builder, getLoc());
  Value x = getX(), scale = getScale();
  ArrayRef<int64_t> shape = shapeOf(x);
  int64_t rank = shape.size();
  SmallVector<int64_t> axes = allAxes(rank, /*skip=*/1);
  double count = static_cast<double>(product(shape) / shape[1]);
  double epsilon = getEpsilon().convertToDouble();
  double momentum = getMomentum().convertToDouble();
  // A per-channel vector (C) as C x 1 x ...: broadcasts against x.
  SmallVector<int64_t> channelShape(rank - 1, 1);
  channelShape[0] = shape[1];
  auto perChannel = [&](Value v) { return b.reshape(v, channelShape); };

  Value gx, gScale, gBias, gMean, gVar;
  if (getTrainingMode()) {
    Moments m = momentsOf(b, x, axes, epsilon);
    Value xhat = b.mul(m.centered, m.invStd);
    if (gy) {
      gx = normalizedGrad(b, b.mul(gy, perChannel(scale)), xhat, m.invStd, axes);
      gScale = b.sum(b.mul(gy, xhat), axes, false);
      gBias = b.sum(gy, axes, false);
    }
    if (gRunMean) {
      gMean = b.mul(gRunMean, momentum);
      gx = b.accumulate(gx, b.expand(b.mul(perChannel(gRunMean), (1.0 - momentum) / count), shape));
    }
    if (gRunVar) {
      gVar = b.mul(gRunVar, momentum);
      gx = b.accumulate(
          gx, b.mul(b.mul(perChannel(gRunVar), 2.0 * (1.0 - momentum) / count), m.centered));
    }
  } else {
    // y = scale (x - mean) invStd + bias, invStd = (var + eps)^(-1/2).
    Value invStd = b.reciprocal(b.sqrt(b.add(getVar(), epsilon))); // C
    if (gy) {
      gBias = b.sum(gy, axes, false);
      Value centered = b.sub(x, perChannel(getMean()));
      gScale = b.mul(b.sum(b.mul(gy, centered), axes, false), invStd);
      Value a = b.mul(scale, invStd); // dy/dx per channel
      gx = b.mul(gy, perChannel(a));
      gMean = b.neg(b.mul(gBias, a));
      // d invStd / d var = -invStd^3 / 2, and gScale = sum(gy (x - mean)) invStd.
      gVar = b.mul(b.mul(b.mul(gScale, a), invStd), -0.5);
    }
    gMean = b.accumulate(gMean, gRunMean);
    gVar = b.accumulate(gVar, gRunVar);
  }
  grads.append({gx, gScale, gBias, gMean, gVar});
  return success();
}

LogicalResult DropoutOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &grads) {
  // output = data * mask / (1 - ratio) in training mode, data otherwise.
  Value g = resultGrad(*this, resultGrads);
  if (!g)
    return noGradients(*this, grads);
  CleaveBuilder b(builder, getLoc());
  double ratio = getRatio().convertToDouble();
  if (!getTrainingMode() || ratio <= 0.0) {
    grads.push_back(g);
    return success();
  }
  grads.push_back(b.where(getMask(), b.mul(g, 1.0 / (1.0 - ratio)), b.scalarLike(g, 0.0)));
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

LogicalResult MatMulOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &grads) {
  Value g = resultGrad(*this, resultGrads);
  if (!g)
    return noGradients(*this, grads);
  if (getTransA() || getTransB())
    return emitOpError("with a transposed operand has no gradient rule: fold transposes after "
                       "autodiff");
  CleaveBuilder b(builder, getLoc());
  Value lhs = getLhs(), rhs = getRhs();
  ArrayRef<int64_t> lhsShape = shapeOf(lhs);
  if (lhsShape.size() >= 3 && shapeOf(rhs).size() == 2) {
    // A matrix (a Linear layer's weight) under a batch of lhs matrices (a
    // sequence's rows): both gradients as one product over every row, the
    // batch folded into the rows, so the weight's gradient sums over the
    // batch inside its product (as PyTorch computes it) and no operand is
    // transposed in memory.
    int64_t rows = 1;
    for (int64_t d : lhsShape.drop_back())
      rows *= d;
    int64_t k = lhsShape.back(), n = shapeOf(rhs).back();
    Value a2 = b.reshape(lhs, {rows, k}), g2 = b.reshape(g, {rows, n});
    FloatAttr one = builder.getF32FloatAttr(1.0f);
    auto gemm = [&](Value x, Value y, bool tx, bool ty) -> Value {
      return GemmOp::create(builder, getLoc(), x, y, Value(), one, one, builder.getBoolAttr(tx),
                            builder.getBoolAttr(ty), StringAttr());
    };
    grads.push_back(b.reshape(gemm(g2, rhs, false, true), lhsShape));
    grads.push_back(gemm(a2, g2, true, false));
    return success();
  }
  // numpy: a 1-D lhs is a 1 x K row, a 1-D rhs a K x 1 column, and the
  // result drops that unit dim. Work on the matrices, with g reshaped to
  // batch x M x N; the batch dims broadcast, so each gradient is summed back
  // to its operand's (matrix) shape, then reshaped to the operand's.
  int64_t k = shapeOf(lhs).back();
  Value a = shapeOf(lhs).size() == 1 ? b.reshape(lhs, {1, k}) : lhs;
  Value c = shapeOf(rhs).size() == 1 ? b.reshape(rhs, {k, 1}) : rhs;
  ArrayRef<int64_t> sa = shapeOf(a), sc = shapeOf(c);
  SmallVector<int64_t> gShape = *broadcastShapes(sa.drop_back(2), sc.drop_back(2));
  gShape.append({sa[sa.size() - 2], sc.back()});
  Value g2 = b.reshape(g, gShape);
  Value ga = MatMulOp::create(builder, getLoc(), g2, b.transposeLast2(c));
  Value gc = MatMulOp::create(builder, getLoc(), b.transposeLast2(a), g2);
  grads.push_back(b.reshape(b.reduceToShape(ga, sa), shapeOf(lhs)));
  grads.push_back(b.reshape(b.reduceToShape(gc, sc), shapeOf(rhs)));
  return success();
}

LogicalResult GemmOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &grads) {
  // Y = alpha op(A) op(B) + beta C, G = dY:
  //   d op(A) = alpha G op(B)^T, d op(B) = alpha op(A)^T G, dC = beta G
  // (summed over C's broadcast dims); each product is one gemm with
  // transposes chosen so that dA and dB come out in A's and B's layout.
  Value g = resultGrad(*this, resultGrads);
  if (!g)
    return noGradients(*this, grads);
  if (getActivation())
    return emitOpError("with a fused activation has no gradient rule: fuse after autodiff");
  CleaveBuilder b(builder, getLoc());
  bool ta = getTransA(), tb = getTransB();
  FloatAttr alpha = builder.getF32FloatAttr(getAlpha().convertToFloat());
  FloatAttr one = builder.getF32FloatAttr(1.0f);
  auto gemm = [&](Value x, Value y, bool tx, bool ty) -> Value {
    return GemmOp::create(builder, getLoc(), x, y, Value(), alpha, one, builder.getBoolAttr(tx),
                          builder.getBoolAttr(ty), StringAttr());
  };
  Value ga = ta ? gemm(getB(), g, tb, true) : gemm(g, getB(), false, !tb);
  Value gb = tb ? gemm(g, getA(), true, ta) : gemm(getA(), g, !ta, false);
  grads.append({ga, gb});
  if (getC())
    grads.push_back(b.reduceToShape(b.scale(getBeta().convertToDouble(), g), shapeOf(getC())));
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

namespace {

/// Ops that only change the shape: the gradient is g in the input's shape.
LogicalResult reshapeVjp(Operation *op, OpBuilder &builder, ValueRange resultGrads,
                         SmallVectorImpl<Value> &grads) {
  return movementVjp(op, builder, resultGrads, grads, [&](CleaveBuilder &b, Value g) {
    return b.reshape(g, shapeOf(op->getOperand(0)));
  });
}

} // namespace

LogicalResult ReshapeOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &grads) {
  return reshapeVjp(*this, builder, resultGrads, grads);
}

LogicalResult FlattenOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &grads) {
  return reshapeVjp(*this, builder, resultGrads, grads);
}

LogicalResult SqueezeOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &grads) {
  return reshapeVjp(*this, builder, resultGrads, grads);
}

LogicalResult UnsqueezeOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &grads) {
  return reshapeVjp(*this, builder, resultGrads, grads);
}

LogicalResult TransposeOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &grads) {
  // The inverse permutation: input dim perm[i] is output dim i.
  return movementVjp(*this, builder, resultGrads, grads, [&](CleaveBuilder &b, Value g) {
    ArrayRef<int64_t> perm = getPerm();
    SmallVector<int64_t> inverse(perm.size());
    for (auto [i, p] : llvm::enumerate(perm))
      inverse[p] = static_cast<int64_t>(i);
    return b.transpose(g, inverse);
  });
}

LogicalResult ConcatOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &grads) {
  Value g = resultGrad(*this, resultGrads);
  if (!g)
    return noGradients(*this, grads);
  if (getNumOperands() == 1) {
    grads.push_back(g);
    return success();
  }
  int64_t axis = getAxis();
  SmallVector<int64_t> sizes;
  for (Value input : getInputs())
    sizes.push_back(shapeOf(input)[axis]);
  auto split = SplitOp::create(builder, getLoc(), g, builder.getI64IntegerAttr(axis),
                               builder.getDenseI64ArrayAttr(sizes));
  llvm::append_range(grads, split.getResults());
  return success();
}

LogicalResult SplitOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                SmallVectorImpl<Value> &grads) {
  if (!isFloat(getInput()) || llvm::all_of(resultGrads, [](Value g) { return !g; }))
    return noGradients(*this, grads);
  CleaveBuilder b(builder, getLoc());
  // The pieces side by side again, zeros for pieces without a gradient.
  SmallVector<Value> pieces;
  for (auto [result, g] : llvm::zip(getResults(), resultGrads))
    pieces.push_back(g ? g : b.zerosLike(result));
  if (pieces.size() == 1) {
    grads.push_back(pieces[0]);
    return success();
  }
  grads.push_back(
      ConcatOp::create(builder, getLoc(), pieces, builder.getI64IntegerAttr(getAxis())));
  return success();
}

LogicalResult SliceOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                SmallVectorImpl<Value> &grads) {
  return movementVjp(*this, builder, resultGrads, grads, [&](CleaveBuilder &b, Value g) -> Value {
    return SliceGradOp::create(b.getBuilder(), b.getLoc(), g, getStartsAttr(), getStepsAttr(),
                               b.getBuilder().getDenseI64ArrayAttr(shapeOf(getInput())));
  });
}

LogicalResult GatherOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &grads) {
  // data gets the scatter-add of g at the indices; the indices none.
  return movementVjp(*this, builder, resultGrads, grads, [&](CleaveBuilder &b, Value g) -> Value {
    return GatherGradOp::create(b.getBuilder(), b.getLoc(), g, getIndices(), getAxisAttr(),
                                b.getBuilder().getDenseI64ArrayAttr(shapeOf(getData())));
  });
}

LogicalResult ExpandOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &grads) {
  return movementVjp(*this, builder, resultGrads, grads, [&](CleaveBuilder &b, Value g) {
    return b.reduceToShape(g, shapeOf(getInput()));
  });
}

LogicalResult TriluOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                SmallVectorImpl<Value> &grads) {
  // Trilu is a fixed mask: the gradient is g through the same mask.
  return movementVjp(*this, builder, resultGrads, grads, [&](CleaveBuilder &b, Value g) -> Value {
    return TriluOp::create(b.getBuilder(), b.getLoc(), g, getUpperAttr(), getKAttr());
  });
}

LogicalResult GatherGradOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &grads) {
  // The adjoint of a scatter-add is the gather at the same indices.
  return movementVjp(*this, builder, resultGrads, grads, [&](CleaveBuilder &b, Value g) -> Value {
    return GatherOp::create(b.getBuilder(), b.getLoc(), g, getIndices(), getAxisAttr());
  });
}

LogicalResult SliceGradOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &grads) {
  // The adjoint of placing a slice is taking it: ends one step past the last
  // position (-1 past index 0 for a negative step, as cleave.slice allows).
  return movementVjp(*this, builder, resultGrads, grads, [&](CleaveBuilder &b, Value g) -> Value {
    ArrayRef<int64_t> count = shapeOf(getGrad()), starts = getStarts(), steps = getSteps();
    SmallVector<int64_t> sliceStarts, ends;
    for (size_t d = 0; d < count.size(); ++d) {
      int64_t start = count[d] == 0 ? 0 : starts[d];
      sliceStarts.push_back(start);
      ends.push_back(count[d] == 0 ? start
                                   : start + (count[d] - 1) * steps[d] + (steps[d] > 0 ? 1 : -1));
    }
    return SliceOp::create(b.getBuilder(), b.getLoc(), g, sliceStarts, ends, steps);
  });
}

//===----------------------------------------------------------------------===//
// Reductions and pooling
//===----------------------------------------------------------------------===//

LogicalResult ReduceSumOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &grads) {
  return movementVjp(*this, builder, resultGrads, grads, [&](CleaveBuilder &b, Value g) {
    ArrayRef<int64_t> shape = shapeOf(getInput());
    return b.expand(b.reshape(g, CleaveBuilder::keptShape(shape, getAxes())), shape);
  });
}

LogicalResult ReduceMeanOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &grads) {
  return movementVjp(*this, builder, resultGrads, grads, [&](CleaveBuilder &b, Value g) {
    ArrayRef<int64_t> shape = shapeOf(getInput());
    double count = 1;
    for (int64_t axis : getAxes())
      count *= static_cast<double>(shape[axis]);
    Value kept = b.reshape(g, CleaveBuilder::keptShape(shape, getAxes()));
    return b.expand(b.mul(kept, 1.0 / count), shape);
  });
}

LogicalResult ReduceMaxOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &grads) {
  // Every element equal to its maximum gets the full gradient (ties are
  // not split).
  return movementVjp(*this, builder, resultGrads, grads, [&](CleaveBuilder &b, Value g) {
    Value x = getInput();
    SmallVector<int64_t> kept = CleaveBuilder::keptShape(shapeOf(x), getAxes());
    Value isMax = b.equal(x, b.reshape(getOutput(), kept));
    return b.expand(b.where(isMax, b.reshape(g, kept), b.scalarLike(g, 0.0)), shapeOf(x));
  });
}

LogicalResult ReduceProdOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &grads) {
  // Each element gets g times the product of the others in its slice: p / x
  // where x is not 0 (p is 0 when another element is); where x is 0, the
  // product of the slice's non-zero elements if x is its only zero, else 0.
  return movementVjp(*this, builder, resultGrads, grads, [&](CleaveBuilder &b, Value g) {
    Value x = getInput();
    SmallVector<int64_t> kept = CleaveBuilder::keptShape(shapeOf(x), getAxes());
    Value isZero = b.equal(x, b.scalarLike(x, 0.0));
    Value nonZero = b.where(isZero, b.scalarLike(x, 1.0), x);
    Value zeros = b.sum(b.castTo(isZero, elementOf(x)), getAxes(), /*keepdims=*/true);
    Value nonZeroProduct = ReduceProdOp::create(b.getBuilder(), b.getLoc(), nonZero, getAxesAttr(),
                                                b.getBuilder().getBoolAttr(true));
    Value onlyZero = b.where(b.equal(zeros, b.scalarLike(zeros, 1.0)), nonZeroProduct,
                             b.scalarLike(x, 0.0));
    Value others = b.where(isZero, onlyZero, b.div(b.reshape(getOutput(), kept), nonZero));
    return b.mul(b.reshape(g, kept), others);
  });
}

LogicalResult GlobalAveragePoolOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                            SmallVectorImpl<Value> &grads) {
  return movementVjp(*this, builder, resultGrads, grads, [&](CleaveBuilder &b, Value g) {
    ArrayRef<int64_t> shape = shapeOf(getX());
    double count = static_cast<double>(product(shape.drop_front(2)));
    return b.expand(b.mul(g, 1.0 / count), shape);
  });
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

LogicalResult ConvOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &grads) {
  // y = conv(x, w) + b: dx = conv_grad_input(g, w), dw = conv_grad_weight(g,
  // x), db = g summed over every dim but the channels.
  Value g = resultGrad(*this, resultGrads);
  if (!g)
    return noGradients(*this, grads);
  if (getActivation())
    return emitOpError("with a fused activation has no gradient rule: fuse after autodiff");
  CleaveBuilder b(builder, getLoc());
  Value x = getX(), w = getW();
  grads.push_back(ConvGradInputOp::create(builder, getLoc(), g, w, getStridesAttr(), getPadsAttr(),
                                          getDilationsAttr(), getGroupAttr(),
                                          builder.getDenseI64ArrayAttr(shapeOf(x))));
  grads.push_back(ConvGradWeightOp::create(builder, getLoc(), g, x, getStridesAttr(),
                                           getPadsAttr(), getDilationsAttr(), getGroupAttr(),
                                           builder.getDenseI64ArrayAttr(shapeOf(w))));
  if (getB())
    grads.push_back(b.sum(g, allAxes(shapeOf(g).size(), /*skip=*/1), /*keepdims=*/false));
  return success();
}

LogicalResult ConvGradInputOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                        SmallVectorImpl<Value> &grads) {
  // y = conv_grad_input(grad, w), the adjoint of x -> conv(x, w), is linear
  // in both: <y, u> = <grad, conv(u, w)>, so d grad = conv(u, w) and
  // d w = conv_grad_weight(grad, u), with u the gradient of y.
  Value u = resultGrad(*this, resultGrads);
  if (!u)
    return noGradients(*this, grads);
  Value w = getW(), grad = getGrad();
  grads.push_back(ConvOp::create(builder, getLoc(), u, w, Value(), getStridesAttr(), getPadsAttr(),
                                 getDilationsAttr(), getGroupAttr(), StringAttr()));
  grads.push_back(ConvGradWeightOp::create(builder, getLoc(), grad, u, getStridesAttr(),
                                           getPadsAttr(), getDilationsAttr(), getGroupAttr(),
                                           builder.getDenseI64ArrayAttr(shapeOf(w))));
  return success();
}

LogicalResult MaxPoolOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &grads) {
  // Each window's gradient goes to its arg-max (the first maximum on ties).
  return movementVjp(*this, builder, resultGrads, grads, [&](CleaveBuilder &b, Value g) -> Value {
    return MaxPoolGradOp::create(b.getBuilder(), b.getLoc(), g, getX(), getKernelShapeAttr(), getStridesAttr(),
                                 getPadsAttr(), getDilationsAttr());
  });
}

LogicalResult AveragePoolOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                      SmallVectorImpl<Value> &grads) {
  // Each window's gradient is spread over it, divided as the forward divides.
  return movementVjp(*this, builder, resultGrads, grads, [&](CleaveBuilder &b, Value g) -> Value {
    return AveragePoolGradOp::create(b.getBuilder(), b.getLoc(), g, getKernelShapeAttr(), getStridesAttr(),
                                     getPadsAttr(), getDilationsAttr(), getCountIncludePadAttr(),
                                     b.getBuilder().getDenseI64ArrayAttr(shapeOf(getX())));
  });
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

namespace {

/// What both class losses share, over scores N x C x d... and targets
/// N x d...: per target i, loss_i = -w_i * input[i, t_i] with w_i the
/// target's class weight (1 without weights, 0 when ignored); "sum" adds them
/// and "mean" divides the sum by W = sum_i w_i (ONNX).
struct ClassLoss {
  Value oneHot;      // N x C x d...: 1 at [i, t_i] for counted targets, else 0
  Value coefficient; // N x 1 x d...: w_i times dL/dloss_i
  Value scaled;      // N x 1 x d...: dL/dloss_i (g, or g / W for mean)
};

/// `input` is the log-probabilities (N x C x d...), `targets` the class
/// indices, `weights` the optional class weights, `loss` the op's loss
/// result, `g` its gradient.
ClassLoss classLoss(CleaveBuilder &b, Value input, Value targets, Value weights, StringRef reduction,
                    std::optional<int64_t> ignoreIndex, Value g) {
  ArrayRef<int64_t> shape = shapeOf(input);
  int64_t rank = shape.size(), classes = shape[1];
  Type element = elementOf(input), index = elementOf(targets);
  ClassLoss l;
  // Ignored targets become -1, which matches no class: their row is zero.
  Value t = targets;
  if (ignoreIndex)
    t = b.where(b.equal(t, b.scalar(index, static_cast<double>(*ignoreIndex))),
                b.scalar(index, -1.0), t);
  SmallVector<int64_t> kept(shape);
  kept[1] = 1;
  SmallVector<int64_t> classShape(rank - 1, 1);
  classShape[0] = classes;
  Value classIds = RangeOp::create(b.getBuilder(), b.getLoc(), IntegerAttr::get(index, 0),
                                   IntegerAttr::get(index, classes), IntegerAttr::get(index, 1));
  l.oneHot = b.castTo(b.equal(b.reshape(t, kept), b.reshape(classIds, classShape)), element);
  Value selected = weights ? b.mul(l.oneHot, b.reshape(weights, classShape)) : l.oneHot;
  Value w = b.sum(selected, {1}, /*keepdims=*/true); // N x 1 x d...
  l.scaled = reduction == "none" ? b.reshape(g, kept) : g;
  if (reduction == "mean") {
    Value total = b.sum(w, allAxes(rank), /*keepdims=*/false);
    l.scaled = b.div(l.scaled, total);
  }
  l.coefficient = b.mul(w, l.scaled);
  return l;
}

/// The gradient of the class weights: loss_i / w_i (= -input[i, t_i]) per
/// counted target, minus the mean loss for "mean" (W depends on the weights
/// too), times dL/dloss_i, added up per class.
Value classWeightGrad(CleaveBuilder &b, const ClassLoss &l, Value input, Value loss,
                      StringRef reduction) {
  int64_t rank = shapeOf(input).size();
  Value perTarget = b.neg(b.sum(b.mul(l.oneHot, input), {1}, true)); // N x 1 x d...
  if (reduction == "mean")
    perTarget = b.sub(perTarget, loss);
  return b.sum(b.mul(l.oneHot, b.mul(perTarget, l.scaled)), allAxes(rank, 1), false);
}

} // namespace

LogicalResult SoftmaxCrossEntropyLossOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                                  SmallVectorImpl<Value> &grads) {
  Value gLoss = resultGrads[0], gLogProb = resultGrads[1];
  if (!gLoss && !gLogProb)
    return noGradients(*this, grads);
  CleaveBuilder b(builder, getLoc());
  Value logProb = getLogProb();
  Value gScores, gWeights, prob;
  auto probabilities = [&] { return prob ? prob : prob = b.exp(logProb); };
  // d loss_i / d scores[i] = w_i (softmax(scores)[i] - onehot(t_i)): one
  // op without class weights; with them the weights' gradient shares the
  // one-hot labels.
  if (gLoss && !getWeights()) {
    gScores = SoftmaxCrossEntropyGradOp::create(builder, getLoc(), logProb, getLabels(), gLoss,
                                                getReductionAttr(), getIgnoreIndexAttr());
  } else if (gLoss) {
    ClassLoss l =
        classLoss(b, logProb, getLabels(), getWeights(), getReduction(), getIgnoreIndex(), gLoss);
    gScores = b.mul(b.sub(probabilities(), l.oneHot), l.coefficient);
    gWeights = classWeightGrad(b, l, logProb, getLoss(), getReduction());
  }
  // log_prob = log_softmax(scores, 1).
  if (gLogProb)
    gScores =
        b.accumulate(gScores, b.sub(gLogProb, b.mul(probabilities(), b.sum(gLogProb, {1}, true))));
  grads.append({gScores, Value()});
  if (getWeights())
    grads.push_back(gWeights);
  return success();
}

LogicalResult NegativeLogLikelihoodLossOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                                    SmallVectorImpl<Value> &grads) {
  Value g = resultGrad(*this, resultGrads);
  if (!g)
    return noGradients(*this, grads);
  CleaveBuilder b(builder, getLoc());
  ClassLoss l =
      classLoss(b, getInput(), getTarget(), getWeight(), getReduction(), getIgnoreIndex(), g);
  // d loss_i / d input[i] = -w_i onehot(t_i).
  grads.append({b.neg(b.mul(l.oneHot, l.coefficient)), Value()});
  if (getWeight())
    grads.push_back(classWeightGrad(b, l, getInput(), getLoss(), getReduction()));
  return success();
}

void cleave::registerExternalModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, shard::ShardDialect *) {
    shard::AllReduceOp::attachInterface<AllReduceVjp>(*ctx);
    shard::AllSliceOp::attachInterface<MoveVjp<shard::AllSliceOp, shard::AllGatherOp>>(*ctx);
    shard::AllGatherOp::attachInterface<MoveVjp<shard::AllGatherOp, shard::AllSliceOp>>(*ctx);
  });
  registerShardingModels(registry);
}
