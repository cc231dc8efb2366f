//===- BuildTrainStep.cpp - one optimizer step from a differentiated function ===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveBuilder.h"
#include "dialects/Cleave/CleaveOps.h"
#include "passes/Collectives.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <algorithm>
#include <optional>

namespace cleave {
#define GEN_PASS_DEF_BUILDTRAINSTEP
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// Moves an accumulation (`slot + gradient`, assigned to the slot) up to
/// right after the gradient is computed, so that the gradient's buffer dies
/// there (a smaller arena) and the last microbatch can start summing the
/// slot over dp while the backward goes on (cleave-overlap-gradients).
/// Nothing else reads or writes the slot, so the order changes no value.
void accumulateEarly(AssignOp assign) {
  auto add = assign.getValue().getDefiningOp<AddOp>();
  if (!add || add.getLhs() != assign.getTarget())
    return;
  Operation *gradient = add.getRhs().getDefiningOp();
  if (!gradient || gradient->getBlock() != add->getBlock())
    return;
  add->moveAfter(gradient);
  assign->moveAfter(add);
}

/// Replaces `func`'s results by `results` (named by `names`) and erases what
/// only the old ones read.
void setResults(func::FuncOp func, ValueRange results, ArrayRef<StringRef> names) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  ret->setOperands(results);
  MLIRContext *ctx = func.getContext();
  func.setType(FunctionType::get(ctx, func.getArgumentTypes(), results.getTypes()));
  SmallVector<DictionaryAttr> attrs;
  for (StringRef name : names)
    attrs.push_back(DictionaryAttr::get(
        ctx, {NamedAttribute(StringAttr::get(ctx, kNameAttr), StringAttr::get(ctx, name))}));
  func.setAllResultAttrs(attrs);
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(func.getBody().front())))
    if (isOpTriviallyDead(&op))
      op.erase();
}

/// A trained parameter of @forward and its gradient there.
struct Member {
  StringAttr name;
  BlockArgument param;
  Value grad;
};

/// What the parts of a step share while the pass builds them: @forward
/// (built at its return) and @apply (built at its end), the values the
/// update reads, and what the step assigns.
struct Step {
  func::FuncOp forward, apply;
  CleaveBuilder &fu, &u;
  OpBuilder &fb, &b;
  MeshAxes layout;
  Value lossSum, countF32, lr, step;
  SmallVector<Member> members;
  /// Accumulators in @forward and what each adds up (target, new value).
  SmallVector<std::pair<Value, Value>> accumulate;
  /// @apply's updates (target, new value).
  SmallVector<std::pair<Value, Value>> assignments;
  /// Accumulators @apply zeroes after the update.
  SmallVector<Value> zeroed;
  /// The gradients the update reads, as it reads them (loss scaling checks
  /// that they are finite).
  SmallVector<Value> updated;
  /// With clipping, the 2-norm of all gradients before it.
  Value gradNorm;
  /// Adam's scalar factors, from the learning rate and the step count alone:
  /// built at the first parameter's update, read by every later one.
  struct AdamFactors {
    Value stepSize, correction2Root, decay;
  };
  std::optional<AdamFactors> adam;
};

struct BuildTrainStepPass : public cleave::impl::BuildTrainStepBase<BuildTrainStepPass> {
  using BuildTrainStepBase::BuildTrainStepBase;

  /// Every parameter as this rank's 1/N of its flattened elements (padded
  /// to 16 N), updated slice by slice in @apply, where nothing is gathered:
  /// ZeRO 3, and ZeRO 1/2 with sliced masters. ZeRO 3 all-gathers it in
  /// @forward where the forward first reads it and again where the backward
  /// first does (so the memory plan frees each whole copy after its last
  /// reader); sliced masters gather it once, before its first reader, the
  /// gather marked for cleave-autocast to make once a step. ZeRO 2 and 3
  /// reduce-scatter every microbatch's gradient into a slice accumulator (the
  /// whole gradient freed at once); ZeRO 1 accumulates it whole and
  /// reduce-scatters it once, in @apply.
  void buildSliced(Step &s) {
    func::FuncOp forward = s.forward, apply = s.apply;
    CleaveBuilder &u = s.u;
    OpBuilder &b = s.b;
    const MeshAxes &layout = s.layout;
    MLIRContext *ctx = forward.getContext();
    const shard::GridAxis dpAxes[] = {static_cast<shard::GridAxis>(layout.dpAxis)};
    const llvm::APInt firstDim(64, 0);
    int64_t ranks = layout.dpSize;
    // The backward starts after the loss: with ZeRO 3, uses of a parameter
    // from there on get a gather of their own.
    Operation *lossOp = s.lossSum.getDefiningOp();
    Block &body = forward.getBody().front();
    auto isBackward = [&](Operation *user) {
      return zero == 3 && lossOp && lossOp->isBeforeInBlock(user);
    };
    SmallVector<std::pair<Value, Value>> grads; // slice in @apply, mean gradient
    for (const Member &m : s.members) {
      auto type = cast<RankedTensorType>(m.param.getType());
      Location loc = m.param.getLoc();
      int64_t elements = type.getNumElements();
      int64_t quantum = (kBufferAlignment / 4) * ranks;
      int64_t padded = (elements + quantum - 1) / quantum * quantum;
      auto sliceType = RankedTensorType::get({padded / ranks}, type.getElementType());
      auto flatType = RankedTensorType::get({padded}, type.getElementType());
      Value slice = addArgument(forward, sliceType, m.name, "param");
      unsigned index = cast<BlockArgument>(slice).getArgNumber();
      forward.setArgAttr(index, kZero3ElementsAttr, b.getI64IntegerAttr(elements));
      forward.setArgAttr(index, kZero3ShapeAttr, b.getDenseI64ArrayAttr(type.getShape()));
      // The slice keeps the whole one's tp split and the other pipeline
      // stages that hold it (cleave-pipeline-tied-gradients sums over them).
      for (StringRef attr : {kSplitDimAttr, kSplitBlocksAttr, kSplitAxisAttr, kOtherStagesAttr})
        if (Attribute value = forward.getArgAttr(m.param.getArgNumber(), attr))
          forward.setArgAttr(index, attr, value);
      // The whole parameter, gathered before the first reader of each phase.
      auto whole = [&](Operation *before) -> Value {
        OpBuilder at(before);
        SmallVector<Operation *> moves{
            shard::AllGatherOp::create(at, loc, flatType, kMeshName, dpAxes, slice, firstDim)};
        if (padded != elements)
          moves.push_back(
              SliceOp::create(at, loc, moves.back()->getResult(0), at.getDenseI64ArrayAttr({0}),
                              at.getDenseI64ArrayAttr({elements}), at.getDenseI64ArrayAttr({1})));
        moves.push_back(ReshapeOp::create(at, loc, moves.back()->getResult(0),
                                          at.getDenseI64ArrayAttr(type.getShape())));
        if (zero != 3)
          for (Operation *move : moves)
            move->setAttr(kGatherOnceAttr, UnitAttr::get(ctx));
        return moves.back()->getResult(0);
      };
      Operation *firstForward = nullptr, *firstBackward = nullptr;
      for (Operation &op : body) {
        if (!llvm::is_contained(op.getOperands(), Value(m.param)))
          continue;
        Operation *&first = isBackward(&op) ? firstBackward : firstForward;
        if (!first)
          first = &op;
      }
      Value forwardCopy = firstForward ? whole(firstForward) : Value();
      Value backwardCopy = firstBackward ? whole(firstBackward) : Value();
      BlockArgument wholeParam = m.param;
      wholeParam.replaceUsesWithIf(forwardCopy ? forwardCopy : backwardCopy, [&](OpOperand &use) {
        return !isBackward(use.getOwner()) || !backwardCopy;
      });
      if (backwardCopy)
        wholeParam.replaceAllUsesWith(backwardCopy);

      // A gradient, flat and padded, reduce-scattered into this rank's slice.
      auto reduceScatter = [&](OpBuilder &at, Value grad) -> Value {
        int64_t gradElements = cast<RankedTensorType>(grad.getType()).getNumElements();
        Value flatGrad = ReshapeOp::create(at, loc, grad, at.getDenseI64ArrayAttr({gradElements}));
        if (padded != elements) {
          auto padType = RankedTensorType::get({padded - elements}, type.getElementType());
          Value zeros = splatConstant(at, loc, padType, 0.0);
          flatGrad =
              ConcatOp::create(at, loc, ValueRange{flatGrad, zeros}, at.getI64IntegerAttr(0));
        }
        return shard::ReduceScatterOp::create(at, loc, sliceType, kMeshName, dpAxes, flatGrad,
                                              shard::ReductionKind::Sum, firstDim);
      };
      std::string accName = ("grad:" + m.name.getValue()).str();
      Value sum;
      if (zero == 1) {
        Value slot = addArgument(forward, m.grad.getType(), accName, "state", m.name);
        unsigned slotIndex = cast<BlockArgument>(slot).getArgNumber();
        forward.setArgAttr(slotIndex, kAccumulatorAttr, UnitAttr::get(ctx));
        forward.setArgAttr(slotIndex, kWholeStateAttr, UnitAttr::get(ctx));
        s.accumulate.push_back({slot, s.fu.add(slot, m.grad)});
        // Not an accumulator for cleave-data-parallel: the reduce-scatter sums.
        Value accumulated = addArgument(apply, m.grad.getType(), accName, "state", m.name);
        apply.setArgAttr(cast<BlockArgument>(accumulated).getArgNumber(), kWholeStateAttr,
                         UnitAttr::get(ctx));
        s.zeroed.push_back(accumulated);
        sum = reduceScatter(b, accumulated);
      } else {
        OpBuilder gb(ctx);
        gb.setInsertionPointAfterValue(m.grad);
        CleaveBuilder gu(gb, loc);
        Value slot = addArgument(forward, sliceType, accName, "state", m.name);
        forward.setArgAttr(cast<BlockArgument>(slot).getArgNumber(), kAccumulatorAttr,
                           UnitAttr::get(ctx));
        s.accumulate.push_back({slot, gu.add(slot, reduceScatter(gb, m.grad))});
        sum = addArgument(apply, sliceType, accName, "state", m.name);
        s.zeroed.push_back(sum);
      }
      Value param = addArgument(apply, sliceType, m.name, "param");
      grads.push_back({param, u.div(sum, s.countF32)});
    }
    if (clipGradNorm > 0.0)
      s.gradNorm = clipGlobalNorm(u, b, grads, splitOverTp(forward, s.members), layout,
                                  /*dpSliced=*/true, firstStageHolding(forward, s.members));
    for (auto [entry, m] : llvm::zip(grads, s.members))
      update(s, entry.first, m.name, entry.second);
    // The whole parameters are gone from @forward: only their slices stay.
    for (const Member &m : llvm::reverse(s.members))
      (void)forward.eraseArgument(m.param.getArgNumber());
  }

  /// Whether each member is split over tp (its elements apart on the tp ranks).
  static bool isSplitOverTp(func::FuncOp forward, const Member &m) {
    return static_cast<bool>(forward.getArgAttr(m.param.getArgNumber(), kSplitDimAttr));
  }
  static SmallVector<bool> splitOverTp(func::FuncOp forward, ArrayRef<Member> members) {
    return llvm::map_to_vector(members, [&](const Member &m) { return isSplitOverTp(forward, m); });
  }

  /// Whether each member is not held by an earlier pipeline stage too (a
  /// tied weight, whose gradient the stages sum: the first one counts it).
  static SmallVector<bool> firstStageHolding(func::FuncOp forward, ArrayRef<Member> members) {
    auto stage = forward->getAttrOfType<IntegerAttr>(kStageAttr);
    return llvm::map_to_vector(members, [&](const Member &m) {
      auto others =
          forward.getArgAttrOfType<DenseI64ArrayAttr>(m.param.getArgNumber(), kOtherStagesAttr);
      return !stage || !others ||
             llvm::none_of(others.asArrayRef(), [&](int64_t s) { return s < stage.getInt(); });
    });
  }

  /// `value` summed over mesh axis `axis`.
  static Value allReduceSum(OpBuilder &b, Value value, int64_t axis) {
    const shard::GridAxis axes[] = {static_cast<shard::GridAxis>(axis)};
    return shard::AllReduceOp::create(b, value.getLoc(), value, kMeshName, axes,
                                      shard::ReductionKind::Sum);
  }

  /// Dynamic loss scaling around the update @apply has built (the
  /// description in Passes.td): every update guarded by whether the
  /// gradients were finite, and the scale's state advanced. Returns whether
  /// the step skipped (1) or not (0).
  Value guardWithLossScaling(Step &s, Value scale, Value goodSteps, Value skipped) {
    CleaveBuilder &u = s.u;
    OpBuilder &b = s.b;
    Location loc = s.apply.getLoc();
    FloatType f32 = b.getF32Type();
    Value none = u.scalar(f32, 0.0), one = u.scalar(f32, 1.0);
    // 0 where every element is finite, NaN where one is not; every rank
    // holding other elements (tp, pp, ZeRO's dp slices) adds its own.
    Value indicator = none;
    for (Value grad : s.updated)
      indicator = u.add(indicator, u.sumAll(u.mul(grad, none)));
    if (s.layout.tpSize > 1)
      indicator = allReduceSum(b, indicator, s.layout.tpAxis);
    if (zero > 0 && s.layout.dpSize > 1)
      indicator = allReduceSum(b, indicator, s.layout.dpAxis);
    if (s.layout.ppSize > 1)
      indicator = allReduceSum(b, indicator, s.layout.ppAxis);
    auto isFinite = [&](Value value) -> Value { return EqualOp::create(b, loc, value, none); };
    Value finite = isFinite(indicator);
    auto select = [&](Value condition, Value yes, Value no) -> Value {
      return WhereOp::create(b, loc, condition, yes, no);
    };
    for (auto &[target, value] : s.assignments)
      value = select(finite, value, target);
    Value good = select(finite, u.add(goodSteps, one), none);
    Value grow = u.logicalNot(LessOp::create(b, loc, good, u.scalar(f32, lossScaleWindow)));
    Value skippedNow = select(finite, none, one);
    // As GradScaler: the scale times the growth factor when that is finite,
    // times the backoff factor after a step that was not.
    Value grown = u.mul(scale, u.scalar(f32, lossScaleGrowth));
    Value afterGood = select(grow, select(isFinite(u.mul(grown, none)), grown, scale), scale);
    s.assignments.push_back(
        {scale, select(finite, afterGood, u.mul(scale, u.scalar(f32, lossScaleBackoff)))});
    s.assignments.push_back({goodSteps, select(grow, none, good)});
    s.assignments.push_back({skipped, u.add(skipped, skippedNow)});
    return skippedNow;
  }

  /// The sum of the squares of `grad`'s elements, those where `where` holds
  /// (broadcast) if given.
  static Value sumOfSquares(CleaveBuilder &u, OpBuilder &b, Value grad, Value where = Value()) {
    FloatType f32 = b.getF32Type();
    Value squares = u.mul(grad, grad);
    if (where)
      squares = WhereOp::create(b, grad.getLoc(), where, squares, u.scalar(f32, 0.0));
    return u.sumAll(squares);
  }

  /// Scales every gradient by min(1, clipGradNorm / (norm + 1e-6)), norm the
  /// 2-norm of all gradients together, each parameter element counted once:
  /// the squares of gradients split over tp (`split`) add up over tp, those
  /// of replicated ones count once, with `dpSliced` (ZeRO) the dp ranks'
  /// slices add up over dp, and the pipeline stages' over pp (a parameter
  /// several stages hold counted where `counted` says, the first of them).
  /// Returns the norm.
  Value clipGlobalNorm(CleaveBuilder &u, OpBuilder &b,
                       MutableArrayRef<std::pair<Value, Value>> grads, ArrayRef<bool> split,
                       const MeshAxes &layout, bool dpSliced, ArrayRef<bool> counted = {}) {
    auto [splitSum, wholeSum] = squaresOf(u, b, grads, split, counted);
    return clipByNorm(u, b, grads, splitSum, wholeSum, layout, dpSliced);
  }

  /// The sums of squares of `grads` (those `counted`, all without it): of
  /// the ones split over tp (`split`) and of the others.
  std::pair<Value, Value> squaresOf(CleaveBuilder &u, OpBuilder &b,
                                    ArrayRef<std::pair<Value, Value>> grads, ArrayRef<bool> split,
                                    ArrayRef<bool> counted) {
    Value splitSum, wholeSum;
    for (auto [i, entry, apart] : llvm::enumerate(grads, split)) {
      if (!counted.empty() && !counted[i])
        continue;
      Value sum = sumOfSquares(u, b, entry.second);
      Value &into = apart ? splitSum : wholeSum;
      into = into ? u.add(into, sum) : sum;
    }
    return {splitSum, wholeSum};
  }

  /// clipGlobalNorm's second half, from this rank's sums of squares; with
  /// `dpSliced`, `replicatedSplit` and `replicatedWhole` are those of
  /// parameters every dp rank holds whole beside the slices (ZeRO 1/2's
  /// tied weights), which add up over tp but not over dp.
  Value clipByNorm(CleaveBuilder &u, OpBuilder &b, MutableArrayRef<std::pair<Value, Value>> grads,
                   Value splitSum, Value wholeSum, const MeshAxes &layout, bool dpSliced,
                   Value replicatedSplit = {}, Value replicatedWhole = {}) {
    auto allReduce = [&](Value sum, int64_t axis) { return allReduceSum(b, sum, axis); };
    FloatType f32 = b.getF32Type();
    auto overTp = [&](Value split, Value whole) {
      if (split)
        split = allReduce(split, layout.tpAxis);
      return whole && split ? u.add(whole, split) : whole ? whole : split;
    };
    Value sumOfAll = overTp(splitSum, wholeSum);
    if (dpSliced)
      sumOfAll = allReduce(sumOfAll, layout.dpAxis);
    if (Value replicated = overTp(replicatedSplit, replicatedWhole))
      sumOfAll = sumOfAll ? u.add(sumOfAll, replicated) : replicated;
    // Each pipeline stage counts the parameters it trains (a tied one in the
    // first stage that holds it), so the stages' sums add up to every
    // element once; a stage without parameters adds 0 (and outputs the
    // norm like the others, which keeps its part of the sum).
    if (layout.ppSize > 1)
      sumOfAll = allReduce(sumOfAll ? sumOfAll : u.scalar(f32, 0.0), layout.ppAxis);
    Value norm = u.sqrt(sumOfAll);
    Value coefficient = u.div(u.scalar(f32, clipGradNorm), u.add(norm, u.scalar(f32, 1e-6)));
    Value one = u.scalar(f32, 1.0);
    Value clamped = WhereOp::create(b, coefficient.getLoc(),
                                    LessOp::create(b, coefficient.getLoc(), coefficient, one),
                                    coefficient, one);
    for (auto &[param, grad] : grads)
      grad = u.mul(grad, clamped);
    return norm;
  }

  /// Appends to `assignments` the optimizer's update of `param` (in @apply)
  /// from its gradient `grad`, adding the state slots it keeps.
  void update(Step &s, Value param, StringRef name, Value grad) {
    s.updated.push_back(grad);
    CleaveBuilder &u = s.u;
    Value lr = s.lr;
    SmallVectorImpl<std::pair<Value, Value>> &assignments = s.assignments;
    FloatType f32 = s.b.getF32Type();
    auto state = [&](StringRef slot) {
      return addArgument(s.apply, param.getType(), (slot + ":" + name).str(), "state", name);
    };
    // L2 weight decay joins the gradient, except in adamw (decoupled).
    if (weightDecay != 0.0 && optimizer != "adamw")
      grad = u.add(grad, u.mul(u.scalar(f32, weightDecay), param));
    if (optimizer == "sgd" || optimizer == "momentum") {
      Value direction = grad; // p -= lr * direction
      if (optimizer == "momentum") {
        Value velocity = state("momentum.velocity");
        Value next = u.add(u.mul(u.scalar(f32, momentum), velocity), grad);
        assignments.push_back({velocity, next});
        direction = nesterov ? u.add(grad, u.mul(u.scalar(f32, momentum), next)) : next;
      }
      assignments.push_back({param, u.sub(param, u.mul(lr, direction))});
      return;
    }
    if (optimizer == "adagrad") {
      // PyTorch's order: sum += g * g; p -= (lr * g) / (sqrt(sum) + eps).
      Value sum = state("adagrad.sum");
      Value nextSum = u.add(sum, u.mul(grad, grad));
      assignments.push_back({sum, nextSum});
      Value denominator = u.add(u.sqrt(nextSum), u.scalar(f32, epsilon));
      assignments.push_back({param, u.sub(param, u.div(u.mul(lr, grad), denominator))});
      return;
    }
    // Adam and AdamW in PyTorch's order of operations, with the scalar factors
    // (bias corrections, step size, decoupled decay) computed in f64 and
    // rounded once: Adam amplifies rounding where sqrt(v) is near eps.
    Value m = state("adam.m"), v = state("adam.v");
    Value nextM = u.blend(beta1, m, 1.0 - beta1, grad);
    Value nextV =
        u.add(u.mul(u.scalar(f32, beta2), v), u.mul(u.mul(u.scalar(f32, 1.0 - beta2), grad), grad));
    assignments.push_back({m, nextM});
    assignments.push_back({v, nextV});
    if (!s.adam)
      s.adam = adamFactors(s);
    Value denominator =
        u.add(u.div(u.sqrt(nextV), s.adam->correction2Root), u.scalar(f32, epsilon));
    Value decayed = s.adam->decay ? u.mul(param, s.adam->decay) : param;
    assignments.push_back(
        {param, u.sub(decayed, u.div(u.mul(s.adam->stepSize, nextM), denominator))});
  }

  /// Adam's step size lr / (1 - beta1^t), sqrt(1 - beta2^t) and AdamW's
  /// decoupled decay 1 - lr * weight_decay (null without it), computed in f64
  /// and rounded to f32 once.
  Step::AdamFactors adamFactors(Step &s) {
    CleaveBuilder &u = s.u;
    FloatType f64 = s.b.getF64Type(), f32 = s.b.getF32Type();
    Value t = u.castTo(s.step, f64), lr64 = u.castTo(s.lr, f64);
    Value correction1 = u.sub(u.scalar(f64, 1.0), u.pow(u.scalar(f64, beta1), t));
    Value correction2 = u.sub(u.scalar(f64, 1.0), u.pow(u.scalar(f64, beta2), t));
    Step::AdamFactors factors;
    factors.stepSize = u.castTo(u.div(lr64, correction1), f32);
    factors.correction2Root = u.castTo(u.sqrt(correction2), f32);
    if (optimizer == "adamw" && weightDecay != 0.0)
      factors.decay =
          u.castTo(u.sub(u.scalar(f64, 1.0), u.mul(lr64, u.scalar(f64, weightDecay))), f32);
    return factors;
  }

  /// An accumulator per gradient of `members`; returns each one's parameter
  /// in @apply and mean gradient.
  SmallVector<std::pair<Value, Value>> replicatedGrads(Step &s, ArrayRef<Member> members) {
    SmallVector<std::pair<Value, Value>> grads;
    for (const Member &member : members) {
      Value sum = addAccumulator(s, member.grad, ("grad:" + member.name.getValue()).str());
      s.zeroed.push_back(sum);
      grads.push_back({addArgument(s.apply, member.param.getType(), member.name, "param"),
                       s.u.div(sum, s.countF32)});
    }
    return grads;
  }

  /// The replicated step (no ZeRO): an accumulator per gradient, the update
  /// per parameter.
  void buildReplicated(Step &s) {
    SmallVector<std::pair<Value, Value>> grads = replicatedGrads(s, s.members);
    if (clipGradNorm > 0.0)
      s.gradNorm = clipGlobalNorm(s.u, s.b, grads, splitOverTp(s.forward, s.members), s.layout,
                                  /*dpSliced=*/false, firstStageHolding(s.forward, s.members));
    for (auto [entry, member] : llvm::zip(grads, s.members))
      update(s, entry.first, member.name, entry.second);
  }

  /// ZeRO 1 and 2: one flat buffer of every parameter, sliced over dp, but
  /// for `tied`, weights other pipeline stages train too, which stay whole
  /// as without ZeRO (each stage's buffer lays out its own parameters, so
  /// the stages' slices would not hold the same elements to sum).
  void buildFlatBuffer(Step &s, ArrayRef<Member> tied) {
    func::FuncOp forward = s.forward, apply = s.apply;
    CleaveBuilder &u = s.u, &fu = s.fu;
    OpBuilder &b = s.b, &fb = s.fb;
    const MeshAxes &layout = s.layout;
    SmallVector<Member> &members = s.members;
    MLIRContext *ctx = forward.getContext();
    const shard::GridAxis dpAxes[] = {static_cast<shard::GridAxis>(layout.dpAxis)};
    const llvm::APInt firstDim(64, 0);
    Location loc = forward.getLoc();
    // One flat buffer: every parameter at a 64-byte aligned element offset,
    // the total a multiple of 16 N so that each rank's slice is aligned.
    // Parameters split over tp come first: below `splitEnd`, elements are
    // apart on the tp ranks (clipping counts them apart).
    int64_t splitMembers = llvm::count(splitOverTp(forward, members), true);
    std::stable_partition(members.begin(), members.end(),
                          [&](const Member &m) { return isSplitOverTp(forward, m); });
    constexpr int64_t kAlign = kBufferAlignment / 4;
    int64_t flat = 0;
    SmallVector<int64_t> offsets;
    for (const Member &member : members) {
      offsets.push_back(flat);
      int64_t elements = cast<RankedTensorType>(member.param.getType()).getNumElements();
      flat = (flat + elements + kAlign - 1) / kAlign * kAlign;
    }
    int64_t quantum = kAlign * layout.dpSize;
    flat = (flat + quantum - 1) / quantum * quantum;
    auto flatType = RankedTensorType::get({flat}, b.getF32Type());
    auto sliceType = RankedTensorType::get({flat / layout.dpSize}, b.getF32Type());
    auto member = [&](func::FuncOp func, Value arg, StringRef group, int64_t offset) {
      unsigned index = cast<BlockArgument>(arg).getArgNumber();
      func.setArgAttr(index, kFlatMemberAttr, StringAttr::get(ctx, group));
      func.setArgAttr(index, kFlatOffsetAttr, b.getI64IntegerAttr(offset));
    };
    auto group = [&](func::FuncOp func, StringRef name, StringRef kind) {
      Value arg = addArgument(func, flatType, name, kind);
      func.setArgAttr(cast<BlockArgument>(arg).getArgNumber(), kFlatSizeAttr,
                      b.getI64IntegerAttr(flat));
      return arg;
    };
    const std::string flatParams = flatBufferName("flat:params", forward),
                      flatGrads = flatBufferName("flat:grads", forward),
                      flatGradSlice = flatGrads + ".slice";
    for (auto [m, offset] : llvm::zip(members, offsets))
      member(forward, m.param, flatParams, offset);

    Value gradSlice;
    if (zero == 1) {
      // Whole gradients accumulate per parameter, reduce-scattered once.
      for (auto [m, offset] : llvm::zip(members, offsets)) {
        Value slot = addArgument(forward, m.grad.getType(), ("grad:" + m.name.getValue()).str(),
                                 "state", m.name);
        forward.setArgAttr(cast<BlockArgument>(slot).getArgNumber(), kAccumulatorAttr,
                           UnitAttr::get(ctx));
        member(forward, slot, flatGrads, offset);
        s.accumulate.push_back({slot, fu.add(slot, m.grad)});
      }
      Value grads = group(apply, flatGrads, "state");
      s.zeroed.push_back(grads);
      gradSlice = shard::ReduceScatterOp::create(b, loc, sliceType, kMeshName, dpAxes, grads,
                                                 shard::ReductionKind::Sum, firstDim);
    } else {
      // Each microbatch's gradients, packed flat, are reduce-scattered at
      // once; only this rank's slice accumulates.
      SmallVector<Value> pieces;
      for (auto [m, offset] : llvm::zip(members, offsets)) {
        int64_t elements = cast<RankedTensorType>(m.grad.getType()).getNumElements();
        pieces.push_back(ReshapeOp::create(fb, loc, m.grad, fb.getDenseI64ArrayAttr({elements})));
        int64_t next = &m == &members.back() ? flat : offsets[&m - members.begin() + 1];
        if (next > offset + elements) {
          auto padType = RankedTensorType::get({next - offset - elements}, fb.getF32Type());
          pieces.push_back(splatConstant(fb, loc, padType, 0.0));
        }
      }
      Value packed = ConcatOp::create(fb, loc, pieces, fb.getI64IntegerAttr(0));
      Value slice = shard::ReduceScatterOp::create(fb, loc, sliceType, kMeshName, dpAxes, packed,
                                                   shard::ReductionKind::Sum, firstDim);
      Value slot = addArgument(forward, sliceType, flatGradSlice, "state", flatParams);
      s.accumulate.push_back({slot, fu.add(slot, slice)});
      forward.setArgAttr(cast<BlockArgument>(slot).getArgNumber(), kAccumulatorAttr,
                         UnitAttr::get(ctx));
      // Already summed over dp: not an accumulator for cleave-data-parallel.
      gradSlice = addArgument(apply, sliceType, flatGradSlice, "state", flatParams);
      s.zeroed.push_back(gradSlice);
    }
    Value params = group(apply, flatParams, "param");
    Value paramSlice = shard::AllSliceOp::create(b, loc, sliceType, params, kMeshName, dpAxes, 0);
    SmallVector<std::pair<Value, Value>> grads{{paramSlice, u.div(gradSlice, s.countF32)}};
    SmallVector<std::pair<Value, Value>> wholeGrads = replicatedGrads(s, tied);
    Value splitSum, wholeSum;
    if (clipGradNorm > 0.0 && splitMembers == 0) {
      wholeSum = sumOfSquares(u, b, grads[0].second);
    } else if (clipGradNorm > 0.0) {
      // The flat indices of this rank's slice tell split elements apart:
      // rank r holds [r * S, (r + 1) * S), r itself the slice of 0..N-1.
      int64_t splitEnd =
          splitMembers < static_cast<int64_t>(members.size()) ? offsets[splitMembers] : flat;
      int64_t sliceSize = flat / layout.dpSize;
      IntegerType i64 = b.getI64Type();
      auto range = [&](int64_t size) -> Value {
        return RangeOp::create(b, loc, b.getI64IntegerAttr(0), b.getI64IntegerAttr(size),
                               b.getI64IntegerAttr(1));
      };
      Value rank = shard::AllSliceOp::create(b, loc, RankedTensorType::get({1}, i64),
                                             range(layout.dpSize), kMeshName, dpAxes, 0);
      Value first =
          MulOp::create(b, loc, rank, scalarConstant(b, loc, i64, static_cast<double>(sliceSize)));
      Value isSplit = LessOp::create(b, loc, AddOp::create(b, loc, range(sliceSize), first),
                                     scalarConstant(b, loc, i64, static_cast<double>(splitEnd)));
      splitSum = sumOfSquares(u, b, grads[0].second, isSplit);
      wholeSum = sumOfSquares(u, b, grads[0].second, NotOp::create(b, loc, isSplit));
    }
    grads.append(wholeGrads);
    if (clipGradNorm > 0.0) {
      auto [tiedSplit, tiedWhole] =
          squaresOf(u, b, wholeGrads, splitOverTp(forward, tied), firstStageHolding(forward, tied));
      s.gradNorm = clipByNorm(u, b, grads, splitSum, wholeSum, layout, /*dpSliced=*/true,
                              tiedSplit, tiedWhole);
    }
    update(s, paramSlice, flatParams, grads[0].second);
    for (auto [entry, m] : llvm::zip(ArrayRef(grads).drop_front(), tied))
      update(s, entry.first, m.name, entry.second);
    // The updated slices, gathered, are the new parameters.
    for (auto &[target, value] : s.assignments) {
      if (target != paramSlice)
        continue;
      target = params;
      value = shard::AllGatherOp::create(b, loc, flatType, kMeshName, dpAxes, value, firstDim);
    }
  }

  /// An accumulator of `value` in @forward, summed into the same slot of
  /// the weights blob in @apply (marked so distribution finds what to
  /// reduce); returns @apply's.
  static Value addAccumulator(Step &s, Value value, StringRef name) {
    Value slot = addArgument(s.forward, value.getType(), name, "state");
    s.accumulate.push_back({slot, s.fu.add(slot, value)});
    Value sum = addArgument(s.apply, value.getType(), name, "state");
    for (auto [func, arg] : {std::pair(s.forward, slot), std::pair(s.apply, sum)})
      func.setArgAttr(cast<BlockArgument>(arg).getArgNumber(), kAccumulatorAttr,
                      UnitAttr::get(func.getContext()));
    return sum;
  }

  /// @forward's results as cleave-split-loss and cleave-autodiff leave them:
  /// the loss as sum and count, and the gradients by parameter name.
  static LogicalResult findStepResults(func::FuncOp forward, Value &lossSum, Value &lossCount,
                                       StringAttr &lossName, llvm::StringMap<Value> &gradOf) {
    auto ret = cast<func::ReturnOp>(forward.getBody().front().getTerminator());
    for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
      if (auto param = forward.getResultAttrOfType<StringAttr>(i, kGradOfAttr)) {
        gradOf[param.getValue()] = value;
        continue;
      }
      auto name = forward.getResultAttrOfType<StringAttr>(i, kNameAttr);
      if (name && name.getValue() == "loss.sum") {
        lossSum = value;
        lossName = forward.getResultAttrOfType<StringAttr>(i, kLossAttr);
      } else if (name && name.getValue() == "loss.count") {
        lossCount = value;
      }
    }
    if (!lossSum || !lossCount)
      return forward.emitError(
          "has no loss.sum and loss.count results: run cleave-split-loss first");
    // A pipeline stage may hold no parameter (a stage of activations alone).
    if (gradOf.empty() && !forward->hasAttr(kStageAttr))
      return forward.emitError("has no gradients: run cleave-autodiff first, and make the loss "
                               "depend on a parameter");
    return success();
  }

  /// The trained parameters: the f32 arguments that have a gradient.
  static LogicalResult findMembers(func::FuncOp forward, const llvm::StringMap<Value> &gradOf,
                                   SmallVectorImpl<Member> &members) {
    for (BlockArgument param : forward.getArguments()) {
      auto name = forward.getArgAttrOfType<StringAttr>(param.getArgNumber(), kNameAttr);
      Value grad = name ? gradOf.lookup(name.getValue()) : Value();
      if (!grad)
        continue;
      if (!cast<RankedTensorType>(param.getType()).getElementType().isF32())
        return emitError(param.getLoc(), "parameter '")
               << name.getValue() << "' is " << param.getType()
               << ": training supports f32 parameters";
      members.push_back({name, param, grad});
    }
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward || forward.isExternal() || !forward.getBody().hasOneBlock()) {
      module.emitError("has no @forward function to train");
      return signalPassFailure();
    }
    // The mesh of a distributed step (ZeRO, or parameters split over tp).
    MeshAxes layout;
    if (zero > 0 || module.lookupSymbol<shard::GridOp>(kMeshName)) {
      FailureOr<MeshAxes> resolved = getMesh(module);
      if (failed(resolved))
        return signalPassFailure();
      layout = *resolved;
    }
    static const char *const known[] = {"sgd", "momentum", "adagrad", "adam", "adamw"};
    if (!llvm::is_contained(known, optimizer)) {
      forward.emitError("unknown optimizer '")
          << optimizer << "': use sgd, momentum, adagrad, adam or adamw";
      return signalPassFailure();
    }
    Value lossSum, lossCount;
    StringAttr lossName;
    llvm::StringMap<Value> gradOf;
    SmallVector<Member> members;
    if (failed(findStepResults(forward, lossSum, lossCount, lossName, gradOf)) ||
        failed(findMembers(forward, gradOf, members)))
      return signalPassFailure();
    // @forward runs one microbatch and adds its gradients, loss sum and count
    // into accumulators; @apply divides by the count once and updates.
    auto ret = cast<func::ReturnOp>(forward.getBody().front().getTerminator());
    OpBuilder fb(ret);
    CleaveBuilder fu(fb, ret.getLoc());
    OpBuilder mb(ctx);
    mb.setInsertionPointAfter(forward);
    auto apply =
        func::FuncOp::create(mb, forward.getLoc(), "apply", FunctionType::get(ctx, {}, {}));
    OpBuilder b = OpBuilder::atBlockEnd(apply.addEntryBlock());
    CleaveBuilder u(b, forward.getLoc());
    Step s{forward, apply, fu, u, fb, b, layout, lossSum};
    s.members = std::move(members);
    Value count = addAccumulator(s, lossCount, "cleave.loss_count");
    Value sumOfLosses = addAccumulator(s, lossSum, "cleave.loss_sum");
    Value loss = u.div(sumOfLosses, count);
    s.zeroed = {count, sumOfLosses};
    s.countF32 = u.castTo(count, b.getF32Type());
    auto scalarInput = [&](StringRef name) {
      return addArgument(apply, RankedTensorType::get({}, b.getF32Type()), name, "input");
    };
    s.lr = scalarInput("cleave.lr");
    s.step = scalarInput("cleave.step");
    // Dynamic loss scaling: the gradients are divided by the scale with the
    // count, and Adam counts the steps taken.
    Value goodSteps, skipped, scale;
    if (lossScale > 0.0) {
      auto scalarState = [&](StringRef name) {
        return addArgument(apply, RankedTensorType::get({}, b.getF32Type()), name, "state");
      };
      scale = addLossScaleArgument(apply, lossScale);
      goodSteps = scalarState(kLossScaleGoodSteps);
      skipped = scalarState(kSkippedSteps);
      s.countF32 = u.mul(s.countF32, scale);
      s.step = u.sub(s.step, skipped);
    }

    // A tied weight's gradients are summed between the pipeline stages that
    // hold it (cleave-pipeline-tied-gradients) per parameter accumulator:
    // whole, or a slice, which covers the same elements in every stage;
    // ZeRO 1/2's flat buffer leaves it out, laid out per stage.
    bool sliced = zero == 3 || (zero > 0 && slicedMasters);
    SmallVector<Member> tied;
    if (!sliced && zero > 0) {
      auto isTied = [&](const Member &m) {
        return static_cast<bool>(forward.getArgAttr(m.param.getArgNumber(), kOtherStagesAttr));
      };
      llvm::copy_if(s.members, std::back_inserter(tied), isTied);
      llvm::erase_if(s.members, isTied);
    }
    // A pipeline stage that trains no parameter (it only computes), or only
    // tied ones, has no flat buffer to lay out.
    if (zero == 0 || s.members.empty()) {
      s.members.append(tied);
      buildReplicated(s);
    } else if (sliced) {
      buildSliced(s);
    } else {
      buildFlatBuffer(s, tied);
    }

    SmallVector<Value> results{loss};
    SmallVector<StringRef> names{lossName ? lossName.getValue() : StringRef("loss")};
    if (lossScale > 0.0) {
      // The scale this step used, copied (times 1): an output is a view of
      // its value, and the state's is assigned the next step's scale.
      Value used = u.mul(scale, 1.0);
      results.append({used, guardWithLossScaling(s, scale, goodSteps, skipped)});
      names.append({"cleave.loss_scale", "cleave.skipped_step"});
    }
    if (clipGradNorm > 0.0) {
      results.push_back(s.gradNorm);
      names.push_back("cleave.grad_norm");
    }
    for (Value slot : s.zeroed) {
      auto type = cast<RankedTensorType>(slot.getType());
      s.assignments.push_back({slot, splatConstant(b, forward.getLoc(), type, 0.0)});
    }
    for (auto [target, value] : s.accumulate)
      accumulateEarly(AssignOp::create(fb, ret.getLoc(), target, value));
    setResults(forward, {}, {});
    for (auto [target, value] : s.assignments)
      AssignOp::create(b, forward.getLoc(), target, value);
    func::ReturnOp::create(b, forward.getLoc(), ValueRange{});
    setResults(apply, results, names);
  }
};

} // namespace

std::string cleave::flatBufferName(StringRef base, func::FuncOp forward) {
  auto stage = forward->getAttrOfType<IntegerAttr>(kStageAttr);
  return stage ? (base + ":stage" + Twine(stage.getInt())).str() : base.str();
}

Value cleave::addArgument(func::FuncOp func, Type type, StringRef name, StringRef kind,
                          StringRef stateOf) {
  MLIRContext *ctx = func.getContext();
  unsigned index = func.getNumArguments();
  if (failed(func.insertArgument(index, type, {}, func.getLoc())))
    return Value();
  func.setArgAttr(index, kNameAttr, StringAttr::get(ctx, name));
  func.setArgAttr(index, kKindAttr, StringAttr::get(ctx, kind));
  if (!stateOf.empty())
    func.setArgAttr(index, kStateOfAttr, StringAttr::get(ctx, stateOf));
  return func.getArgument(index);
}

Value cleave::addLossScaleArgument(func::FuncOp func, double initial) {
  Builder b(func.getContext());
  Value scale = addArgument(func, RankedTensorType::get({}, b.getF32Type()), kLossScale, "state");
  func.setArgAttr(cast<BlockArgument>(scale).getArgNumber(), kInitialValueAttr,
                  b.getF32FloatAttr(static_cast<float>(initial)));
  return scale;
}
