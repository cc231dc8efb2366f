//===- Autodiff.cpp - reverse-mode gradients of a scalar loss ------------===//

#include "passes/Passes.h"
#include "passes/Autodiff.h"

#include "dialects/Cleave/CleaveBuilder.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/GlobPattern.h"

namespace cleave {
#define GEN_PASS_DEF_AUTODIFF
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

bool isFloatTensor(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && isa<FloatType>(type.getElementType());
}

/// For a pipeline stage before the last: each float value it sends, with
/// the gradient that comes back for it (received here) as its seed.
SmallVector<std::pair<Value, Value>> seedsFromSends(OpBuilder &builder, func::FuncOp func) {
  SmallVector<PipelineSendOp> sends;
  func.walk([&](PipelineSendOp send) {
    if (!send.getGradient() && isFloatTensor(send.getValue()))
      sends.push_back(send);
  });
  SmallVector<std::pair<Value, Value>> seeds;
  for (PipelineSendOp send : sends) {
    Value value = send.getValue();
    Value back = PipelineRecvOp::create(builder, send.getLoc(), value.getType(), send.getPeer(),
                                        send.getTag(), /*gradient=*/true);
    seeds.push_back({value, back});
  }
  return seeds;
}

struct AutodiffPass : public cleave::impl::AutodiffBase<AutodiffPass> {
  using AutodiffBase::AutodiffBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || !func.getBody().hasOneBlock())
      return;
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    // A pipeline stage before the last (one that sends values on) has no
    // loss: what it differentiates is what it sends, against the gradients
    // that come back.
    bool innerStage = false;
    if (func->hasAttr(kStageAttr))
      func.walk([&](PipelineSendOp send) { innerStage |= !send.getGradient(); });
    FailureOr<unsigned> index = 0;
    if (!innerStage && failed(index = findLossResult(func, loss, "to differentiate")))
      return signalPassFailure();

    SmallVector<llvm::GlobPattern> frozen;
    for (const std::string &glob : freeze) {
      auto pattern = llvm::GlobPattern::create(glob);
      if (!pattern) {
        func.emitError("freeze pattern '") << glob << "' is not a valid glob";
        llvm::consumeError(pattern.takeError());
        return signalPassFailure();
      }
      frozen.push_back(std::move(*pattern));
    }
    SmallVector<Value> params;
    for (auto [i, arg] : llvm::enumerate(func.getArguments())) {
      auto kind = func.getArgAttrOfType<StringAttr>(i, kKindAttr);
      auto name = func.getArgAttrOfType<StringAttr>(i, kNameAttr);
      bool isFrozen = name && llvm::any_of(frozen, [&](const llvm::GlobPattern &p) {
                        return p.match(name.getValue());
                      });
      if (kind && kind.getValue() == "param" && isFloatTensor(arg) && !isFrozen)
        params.push_back(arg);
    }

    OpBuilder builder(ret);
    // A stage's received values get gradients too, sent back to where they
    // came from.
    SmallVector<PipelineRecvOp> received;
    func.walk([&](PipelineRecvOp recv) {
      if (!recv.getGradient() && isFloatTensor(recv.getOutput()))
        received.push_back(recv);
    });
    SmallVector<Value> xs(params);
    for (PipelineRecvOp recv : received)
      xs.push_back(recv.getOutput());
    FailureOr<SmallVector<Value>> grads;
    if (innerStage) {
      SmallVector<std::pair<Value, Value>> seeds = seedsFromSends(builder, func);
      if (seeds.empty()) {
        func.emitError("is a pipeline stage that sends no float value: nothing to differentiate");
        return signalPassFailure();
      }
      grads = buildGradients(builder, seeds, xs);
    } else {
      // Dynamic loss scaling differentiates the loss times the scale; an
      // inner pipeline stage receives gradients scaled already.
      Value y = ret.getOperand(*index);
      if (lossScale > 0.0) {
        CleaveBuilder u(builder, y.getLoc());
        y = u.mul(y, addLossScaleArgument(func, lossScale));
      }
      grads = buildGradients(builder, y, xs);
    }
    if (failed(grads))
      return signalPassFailure();
    for (auto [recv, grad] : llvm::zip(received, ArrayRef(*grads).drop_front(params.size()))) {
      CleaveBuilder u(builder, recv.getLoc());
      PipelineSendOp::create(builder, recv.getLoc(), grad ? grad : u.zerosLike(recv.getOutput()),
                             recv.getPeer(), recv.getTag(), /*gradient=*/true);
    }
    grads->truncate(params.size());

    SmallVector<Value> results(ret.getOperands());
    SmallVector<StringAttr> names;
    for (auto [param, grad] : llvm::zip(params, *grads)) {
      if (!grad)
        continue;
      results.push_back(grad);
      names.push_back(func.getArgAttrOfType<StringAttr>(
          cast<BlockArgument>(param).getArgNumber(), kNameAttr));
    }
    unsigned firstGrad = ret.getNumOperands();
    ret->setOperands(results);
    // Rules give every float operand a gradient; those of inputs and
    // constants are never read.
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (isOpTriviallyDead(&op))
        op.erase();
    func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(),
                                   ValueRange(results).getTypes()));
    for (auto [i, name] : llvm::enumerate(names)) {
      func.setResultAttr(firstGrad + i, kNameAttr,
                         StringAttr::get(func.getContext(), "grad:" + name.getValue()));
      func.setResultAttr(firstGrad + i, kGradOfAttr, name);
    }
  }
};

} // namespace

bool cleave::isScalarLoss(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.getRank() == 0 && isa<FloatType>(tensor.getElementType());
}

LossSearch cleave::findLoss(ArrayRef<StringRef> names, TypeRange types, StringRef name) {
  LossSearch search{LossSearch::NoSuchName};
  for (auto [i, entry] : llvm::enumerate(llvm::zip(names, types))) {
    auto [valueName, type] = entry;
    if (!name.empty() && valueName == name) {
      search.outcome = isScalarLoss(type) ? LossSearch::Found : LossSearch::NotScalar;
      search.index = i;
      return search;
    }
    if (name.empty() && isScalarLoss(type))
      search.scalars.push_back(i);
  }
  if (name.empty()) {
    search.outcome = search.scalars.empty()       ? LossSearch::NoScalar
                     : search.scalars.size() == 1 ? LossSearch::Found
                                                  : LossSearch::SeveralScalars;
    search.index = search.scalars.empty() ? 0 : search.scalars.front();
  }
  return search;
}

FailureOr<unsigned> cleave::findLossResult(func::FuncOp func, StringRef name, StringRef purpose) {
  SmallVector<StringRef> names;
  for (unsigned i = 0; i < func.getNumResults(); ++i) {
    auto resultName = func.getResultAttrOfType<StringAttr>(i, kNameAttr);
    names.push_back(resultName ? resultName.getValue() : StringRef());
  }
  LossSearch search = findLoss(names, func.getResultTypes(), name);
  switch (search.outcome) {
  case LossSearch::Found:
    return search.index;
  case LossSearch::NoSuchName:
    return func.emitError("no result named '") << name << "'";
  case LossSearch::NotScalar:
    return func.emitError("the loss '")
           << name << "' is " << func.getResultTypes()[search.index] << ", not a float scalar";
  case LossSearch::NoScalar:
    return func.emitError("no scalar float result ") << purpose;
  case LossSearch::SeveralScalars:
    return func.emitError("more than one scalar float result: name the loss with loss=NAME");
  }
  llvm_unreachable("every outcome is handled");
}

FailureOr<SmallVector<Value>> cleave::buildGradients(OpBuilder &builder, Value y,
                                                    ArrayRef<Value> xs,
                                                    const llvm::DenseSet<Value> &constants) {
  Value ones = splatConstant(builder, y.getLoc(), cast<RankedTensorType>(y.getType()), 1.0);
  return buildGradients(builder, {{y, ones}}, xs, constants);
}

FailureOr<SmallVector<Value>> cleave::buildGradients(OpBuilder &builder,
                                                     ArrayRef<std::pair<Value, Value>> seeds,
                                                     ArrayRef<Value> xs,
                                                     const llvm::DenseSet<Value> &constants) {
  // The seeds' last op in the block: gradients flow back from it.
  Block *block = Value(seeds.front().first).getParentBlock();
  Operation *last = nullptr;
  for (auto [value, seed] : seeds)
    if (Operation *def = value.getDefiningOp(); def && (!last || last->isBeforeInBlock(def)))
      last = def;
  // Float values that depend on an x (through any op: an op without a rule
  // on such a path is an error below, not a silent zero).
  llvm::DenseSet<Value> fromXs(xs.begin(), xs.end());
  if (last) {
    for (Operation &op : *block) {
      if (llvm::any_of(op.getOperands(), [&](Value v) { return fromXs.contains(v); }))
        for (Value result : op.getResults())
          if (isFloatTensor(result) && !constants.contains(result))
            fromXs.insert(result);
      if (&op == last)
        break;
    }
  }

  llvm::DenseMap<Value, Value> grads;
  for (auto [value, seed] : seeds) {
    Value &sum = grads[value];
    sum = sum ? AddOp::create(builder, seed.getLoc(), sum, seed).getResult() : seed;
  }

  for (Operation *op = last; op; op = op->getPrevNode()) {
    SmallVector<Value> resultGrads;
    for (Value result : op->getResults())
      resultGrads.push_back(constants.contains(result) ? Value() : grads.lookup(result));
    if (llvm::all_of(resultGrads, [](Value g) { return !g; }) ||
        llvm::none_of(op->getOperands(), [&](Value v) { return fromXs.contains(v); }))
      continue;
    auto vjp = dyn_cast<VjpOpInterface>(op);
    if (!vjp)
      return op->emitError() << op->getName()
                             << " has no gradient rule, but the gradient flows through it";
    SmallVector<Value> operandGrads;
    if (failed(vjp.buildVjp(builder, resultGrads, operandGrads)))
      return failure();
    for (auto [operand, grad] : llvm::zip(op->getOperands(), operandGrads)) {
      if (!grad || !fromXs.contains(operand))
        continue;
      Value &sum = grads[operand];
      sum = sum ? AddOp::create(builder, op->getLoc(), sum, grad).getResult() : grad;
    }
  }
  SmallVector<Value> result;
  for (Value x : xs)
    result.push_back(grads.lookup(x));
  return result;
}
