//===- BuildTrainStep.cpp - one optimizer step from a differentiated function ===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/IR/Builders.h"

namespace cleave {
#define GEN_PASS_DEF_BUILDTRAINSTEP
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// Builds the update arithmetic: one op per call, types inferred.
class Updates {
public:
  Updates(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  /// A scalar constant, f32 unless `type` says otherwise.
  Value scalar(double value, FloatType type = nullptr) {
    type = type ? type : b.getF32Type();
    auto tensor = RankedTensorType::get({}, type);
    return ConstantOp::create(b, loc, tensor,
                              DenseElementsAttr::get(tensor, b.getFloatAttr(type, value)));
  }
  Value cast(Value x, FloatType type) { return CastOp::create(b, loc, x, type); }
  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
  Value sqrt(Value x) { return SqrtOp::create(b, loc, x); }
  Value pow(Value x, Value y) { return PowOp::create(b, loc, x, y); }
  /// a * x + c * y
  Value blend(double a, Value x, double c, Value y) {
    return add(mul(scalar(a), x), mul(scalar(c), y));
  }

private:
  OpBuilder &b;
  Location loc;
};

struct BuildTrainStepPass : public cleave::impl::BuildTrainStepBase<BuildTrainStepPass> {
  using BuildTrainStepBase::BuildTrainStepBase;

  /// Scales every gradient by min(1, clipGradNorm / (norm + 1e-6)), norm the
  /// 2-norm of all gradients together: each parameter element counts once.
  void clipGlobalNorm(Updates &u, OpBuilder &b, llvm::StringMap<Value> &gradOf) {
    Value sumOfSquares;
    for (auto &entry : gradOf) {
      Value grad = entry.getValue();
      auto type = cast<RankedTensorType>(grad.getType());
      SmallVector<int64_t> all;
      for (int64_t d = 0; d < type.getRank(); ++d)
        all.push_back(d);
      Value squares = u.mul(grad, grad);
      Value sum = all.empty() ? squares
                              : ReduceSumOp::create(b, grad.getLoc(), squares,
                                                    b.getDenseI64ArrayAttr(all), false)
                                    .getResult();
      sumOfSquares = sumOfSquares ? u.add(sumOfSquares, sum) : sum;
    }
    Value coefficient =
        u.div(u.scalar(clipGradNorm), u.add(u.sqrt(sumOfSquares), u.scalar(1e-6)));
    Value one = u.scalar(1.0);
    Value clamped = WhereOp::create(b, coefficient.getLoc(),
                                    LessOp::create(b, coefficient.getLoc(), coefficient, one),
                                    coefficient, one);
    for (auto &entry : gradOf)
      entry.getValue() = u.mul(entry.getValue(), clamped);
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    static const char *const known[] = {"sgd", "momentum", "adagrad", "adam", "adamw"};
    if (!llvm::is_contained(known, optimizer)) {
      func.emitError("unknown optimizer '")
          << optimizer << "': use sgd, momentum, adagrad, adam or adamw";
      return signalPassFailure();
    }
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    MLIRContext *ctx = func.getContext();
    auto f32Scalar = RankedTensorType::get({}, Float32Type::get(ctx));

    // Split the results: gradients (by parameter name) and the rest.
    llvm::StringMap<Value> gradOf;
    SmallVector<Value> kept;
    SmallVector<DictionaryAttr> keptAttrs;
    for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
      if (auto param = func.getResultAttrOfType<StringAttr>(i, "cleave.grad_of")) {
        gradOf[param.getValue()] = value;
        continue;
      }
      kept.push_back(value);
      keptAttrs.push_back(func.getResultAttrDict(i));
    }
    if (gradOf.empty()) {
      func.emitError("has no gradients: run cleave-autodiff first, and make the loss depend "
                     "on a parameter");
      return signalPassFailure();
    }

    auto addArgument = [&](Type type, StringRef name, StringRef kind) {
      unsigned index = func.getNumArguments();
      if (failed(func.insertArgument(index, type, {}, func.getLoc())))
        return Value();
      func.setArgAttr(index, "cleave.name", StringAttr::get(ctx, name));
      func.setArgAttr(index, "cleave.kind", StringAttr::get(ctx, kind));
      return static_cast<Value>(func.getArgument(index));
    };
    Value lr = addArgument(f32Scalar, "cleave.lr", "input");
    Value step = addArgument(f32Scalar, "cleave.step", "input");

    OpBuilder b(ret);
    Updates u(b, ret.getLoc());
    SmallVector<std::pair<Value, Value>> assignments; // target, new value
    unsigned numOriginal = func.getNumArguments() - 2;
    if (clipGradNorm > 0.0)
      clipGlobalNorm(u, b, gradOf);
    for (unsigned i = 0; i < numOriginal; ++i) {
      auto name = func.getArgAttrOfType<StringAttr>(i, "cleave.name");
      Value grad = name ? gradOf.lookup(name.getValue()) : Value();
      if (!grad)
        continue;
      Value param = func.getArgument(i);
      if (!cast<RankedTensorType>(param.getType()).getElementType().isF32()) {
        emitError(param.getLoc(), "parameter '")
            << name.getValue() << "' is " << param.getType()
            << ": training supports f32 parameters";
        return signalPassFailure();
      }
      auto state = [&](StringRef slot) {
        return addArgument(param.getType(), (slot + ":" + name.getValue()).str(), "state");
      };
      // L2 weight decay joins the gradient, except in adamw (decoupled).
      if (weightDecay != 0.0 && optimizer != "adamw")
        grad = u.add(grad, u.mul(u.scalar(weightDecay), param));
      Value update; // sgd and momentum: p -= lr * update
      if (optimizer == "sgd") {
        update = grad;
      } else if (optimizer == "momentum") {
        Value velocity = state("momentum.velocity");
        Value next = u.add(u.mul(u.scalar(momentum), velocity), grad);
        assignments.push_back({velocity, next});
        update = nesterov ? u.add(grad, u.mul(u.scalar(momentum), next)) : next;
      } else if (optimizer == "adagrad") {
        // PyTorch's order: sum += g * g; p -= (lr * g) / (sqrt(sum) + eps).
        Value sum = state("adagrad.sum");
        Value nextSum = u.add(sum, u.mul(grad, grad));
        assignments.push_back({sum, nextSum});
        Value denominator = u.add(u.sqrt(nextSum), u.scalar(epsilon));
        assignments.push_back({param, u.sub(param, u.div(u.mul(lr, grad), denominator))});
        continue;
      } else {
        // PyTorch's order of operations, with the scalar factors (bias
        // corrections, step size, decoupled decay) computed in f64 and
        // rounded once: Adam amplifies rounding where sqrt(v) is near eps.
        Value m = state("adam.m"), v = state("adam.v");
        Value nextM = u.blend(beta1, m, 1.0 - beta1, grad);
        Value nextV = u.add(u.mul(u.scalar(beta2), v),
                            u.mul(u.mul(u.scalar(1.0 - beta2), grad), grad));
        assignments.push_back({m, nextM});
        assignments.push_back({v, nextV});
        FloatType f64 = b.getF64Type(), f32 = b.getF32Type();
        Value t = u.cast(step, f64), lr64 = u.cast(lr, f64);
        Value correction1 = u.sub(u.scalar(1.0, f64), u.pow(u.scalar(beta1, f64), t));
        Value correction2 = u.sub(u.scalar(1.0, f64), u.pow(u.scalar(beta2, f64), t));
        Value stepSize = u.cast(u.div(lr64, correction1), f32);
        Value denominator =
            u.add(u.div(u.sqrt(nextV), u.cast(u.sqrt(correction2), f32)), u.scalar(epsilon));
        Value decayed = param;
        if (optimizer == "adamw" && weightDecay != 0.0)
          decayed = u.mul(param, u.cast(u.sub(u.scalar(1.0, f64),
                                              u.mul(lr64, u.scalar(weightDecay, f64))),
                                        f32));
        assignments.push_back({param, u.sub(decayed, u.div(u.mul(stepSize, nextM), denominator))});
        continue;
      }
      assignments.push_back({param, u.sub(param, u.mul(lr, update))});
    }
    for (auto [target, value] : assignments)
      AssignOp::create(b, ret.getLoc(), target, value);

    ret->setOperands(kept);
    func.setType(FunctionType::get(ctx, func.getArgumentTypes(), ValueRange(kept).getTypes()));
    func.setAllResultAttrs(keptAttrs);
  }
};

} // namespace
