//===- AppendLoss.cpp - a loss for models exported without one -----------===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/IR/Builders.h"

namespace cleave {
#define GEN_PASS_DEF_APPENDLOSS
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

struct AppendLossPass : public cleave::impl::AppendLossBase<AppendLossPass> {
  using AppendLossBase::AppendLossBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    MLIRContext *ctx = func.getContext();
    if (kind != "cross_entropy" && kind != "mse") {
      func.emitError("unknown loss '") << kind << "': use cross_entropy or mse";
      return signalPassFailure();
    }
    Value predicted;
    for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
      auto name = func.getResultAttrOfType<StringAttr>(i, kNameAttr);
      if (name && name.getValue() == output)
        predicted = value;
    }
    if (!predicted) {
      func.emitError("has no output named '") << output << "' to put a loss on";
      return signalPassFailure();
    }
    auto type = cast<RankedTensorType>(predicted.getType());
    if (!isa<FloatType>(type.getElementType()) || type.getRank() < (kind == "mse" ? 0 : 2)) {
      func.emitError("output '") << output << "' is " << type << ", which a " << kind
                                 << " loss cannot read";
      return signalPassFailure();
    }
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      auto name = func.getArgAttrOfType<StringAttr>(i, kNameAttr);
      if (name && name.getValue() == target) {
        func.emitError("already has an input named '") << target << "'";
        return signalPassFailure();
      }
    }

    ArrayRef<int64_t> shape = type.getShape();
    Type targetType = kind == "mse" ? Type(type)
                                    : RankedTensorType::get(shape.drop_back(),
                                                            IntegerType::get(ctx, 64));
    // Inputs come before parameters, so the new one goes after the last input.
    unsigned position = 0;
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      auto argKind = func.getArgAttrOfType<StringAttr>(i, kKindAttr);
      if (argKind && argKind.getValue() == "input")
        position = i + 1;
    }
    if (failed(func.insertArgument(position, targetType, {}, func.getLoc())))
      return signalPassFailure();
    func.setArgAttr(position, kNameAttr, StringAttr::get(ctx, target));
    func.setArgAttr(position, kKindAttr, StringAttr::get(ctx, "input"));
    Value targetValue = func.getArgument(position);

    OpBuilder b(ret);
    Location loc = ret.getLoc();
    Value loss;
    if (kind == "mse") {
      Value difference = SubOp::create(b, loc, predicted, targetValue);
      Value squared = MulOp::create(b, loc, difference, difference);
      SmallVector<int64_t> all;
      for (int64_t d = 0; d < type.getRank(); ++d)
        all.push_back(d);
      loss = type.getRank() == 0 ? squared
                                 : ReduceMeanOp::create(b, loc, squared,
                                                        b.getDenseI64ArrayAttr(all), false)
                                       .getResult();
    } else {
      // Classes last (N x ... x C): flatten to (count x C) for ONNX's N x C form.
      int64_t classes = shape.back();
      int64_t count = type.getNumElements() / classes;
      Value scores = ReshapeOp::create(b, loc, predicted,
                                       b.getDenseI64ArrayAttr({count, classes}));
      Value labels = ReshapeOp::create(b, loc, targetValue, b.getDenseI64ArrayAttr({count}));
      loss = SoftmaxCrossEntropyLossOp::create(b, loc, scores, labels, Value(),
                                               b.getStringAttr("mean"),
                                               b.getI64IntegerAttr(-100))
                 .getLoss();
    }
    SmallVector<Value> results(ret.getOperands());
    results.push_back(loss);
    ret->setOperands(results);
    func.setType(FunctionType::get(ctx, func.getArgumentTypes(), ValueRange(results).getTypes()));
    func.setResultAttr(results.size() - 1, kNameAttr, StringAttr::get(ctx, "loss"));
  }
};

} // namespace
