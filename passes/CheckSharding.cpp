//===- CheckSharding.cpp - propagated shardings that partition as planned ---===//
//
// Runs between upstream sharding-propagation and shard-partition. Where
// propagation found no rule that keeps a value as it arrives, it asks for a
// resharding (a `shard.shard` of a `shard.shard` with another sharding).
// One kind is kept: a value that arrives whole where an op reads it split,
// other than a parameter, which shard-partition slices on each rank
// (`shard.all_slice`, no communication; its gradient gathers the parts):
// Megatron's row-parallel input, or the key/value heads of grouped-query
// attention with fewer heads than ranks. Every other one, a gather the plan
// did not ask for or a whole parameter read split (split it in the plan),
// is an error here, at the op that needs it. So is a split dim that does not
// divide (upstream would miscompile it). Lookups and cross-entropies that
// sum over split rows or classes get the tp coordinate they read
// (`cleave.tp_rank`).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/IR/Builders.h"

namespace cleave {
#define GEN_PASS_DEF_CHECKSHARDING
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// The first dim `sharding` splits, if any.
std::optional<int64_t> splitDim(const shard::Sharding &sharding) {
  for (auto [dim, axes] : llvm::enumerate(sharding.getSplitAxes()))
    if (!axes.empty())
      return static_cast<int64_t>(dim);
  return std::nullopt;
}

/// The value under `v`'s sharding annotations.
Value unannotated(Value v) {
  while (auto annotation = v.getDefiningOp<shard::ShardOp>())
    v = annotation.getSrc();
  return v;
}

/// The sharding annotated on `operand`, if any.
shard::Sharding shardingOf(Value operand) {
  auto annotation = operand.getDefiningOp<shard::ShardOp>();
  return annotation ? shard::Sharding(annotation.getSharding()) : shard::Sharding();
}

struct CheckShardingPass : public cleave::impl::CheckShardingBase<CheckShardingPass> {
  using CheckShardingBase::CheckShardingBase;

  /// A resharding from `from` to `to` that `user` (operand #index) asks for.
  LogicalResult refuse(Operation *user, unsigned index, const shard::Sharding &from,
                       const shard::Sharding &to) {
    if (isa<func::ReturnOp>(user))
      return user->emitError("returns a value split over tp (result #") << index << ")";
    // Shardings split one dim over tp: they differ in whether and where.
    std::optional<int64_t> arriving = splitDim(from), wanted = splitDim(to);
    // Only a parameter arriving whole is refused; other values are sliced.
    if (!arriving)
      return user->emitError("runs split over tp along dim ")
             << *wanted << " of operand #" << index << ", which arrives whole: split it in the plan too";
    // The op could run split along that dim: another operand that arrives
    // whole along it kept it from doing so.
    if (auto whole = wholeOperandAlong(user, index, *arriving))
      return user->emitError("operand #")
             << index << " arrives split over tp along dim " << *arriving << ", operand #" << *whole
             << " whole along the same loop" << planHint(user, *whole);
    InFlightDiagnostic error = user->emitError("has no tensor-parallel rule that keeps operand #")
                               << index << " split along dim " << *arriving << " as it arrives";
    if (std::optional<StringRef> parameter = splitParameter(sourceOf(user, index)))
      error << ": it is split because the plan splits '" << *parameter << "'";
    return error;
  }

  /// The first parameter, found walking back from `value` through the
  /// operands that arrive split, that the plan splits: what makes `value`
  /// split (a k projection split by its output dim where there are fewer
  /// key/value heads than ranks, say).
  static std::optional<StringRef> splitParameter(Value value) {
    SmallVector<Value> work{value};
    llvm::DenseSet<Value> seen;
    while (!work.empty()) {
      Value v = unannotated(work.pop_back_val());
      if (!seen.insert(v).second)
        continue;
      if (auto arg = dyn_cast<BlockArgument>(v)) {
        auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
        StringAttr name =
            func ? func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr) : StringAttr();
        if (name && isParameter(arg))
          return name.getValue();
        continue;
      }
      for (unsigned i = 0; i < v.getDefiningOp()->getNumOperands(); ++i)
        if (splitDim(shardingOf(v.getDefiningOp()->getOperand(i))))
          work.push_back(sourceOf(v.getDefiningOp(), i));
    }
    return std::nullopt;
  }

  /// The source of operand #index of `op`, through sharding annotations.
  static Value sourceOf(Operation *op, unsigned index) {
    return unannotated(op->getOperand(index));
  }

  /// What the plan can change so that operand #index arrives split: a
  /// parameter is split in the plan too; an activation comes split from a
  /// column-parallel producer (Megatron pairs each row-parallel linear with
  /// one); a graph input or a constant never arrives split (empty).
  static std::string planHint(Operation *op, unsigned index) {
    Value source = sourceOf(op, index);
    if (isParameter(source))
      return ": split it in the plan too";
    if (isa<BlockArgument>(source) || source.getDefiningOp<ConstantOp>())
      return "";
    return ": split the linear that computes it by its output dim (column parallel), so "
           "that it arrives split";
  }

  /// Another operand of `op` whose dims run along the loop dim `dim` of
  /// operand #index runs along, but which arrives whole along it.
  static std::optional<unsigned> wholeOperandAlong(Operation *op, unsigned index, int64_t dim) {
    auto sharded = dyn_cast<shard::ShardingInterface>(op);
    if (!sharded)
      return std::nullopt;
    SmallVector<AffineMap> maps = sharded.getIndexingMaps();
    if (maps.size() <= index || static_cast<int64_t>(maps[index].getNumResults()) <= dim)
      return std::nullopt;
    auto loop = dyn_cast<AffineDimExpr>(maps[index].getResult(dim));
    if (!loop)
      return std::nullopt;
    for (unsigned other = 0; other < op->getNumOperands(); ++other) {
      if (other == index)
        continue;
      for (auto [d, expr] : llvm::enumerate(maps[other].getResults())) {
        auto along = dyn_cast<AffineDimExpr>(expr);
        if (!along || along.getPosition() != loop.getPosition())
          continue;
        Value source = sourceOf(op, other);
        // How it arrives: the first annotation after its source.
        for (Operation *user : source.getUsers())
          if (auto first = dyn_cast<shard::ShardOp>(user);
              first && splitDim(shard::Sharding(first.getSharding())) !=
                           std::optional<int64_t>(static_cast<int64_t>(d)))
            return other;
      }
    }
    return std::nullopt;
  }

  /// A constant of one repeated value (T5's position bias of zeros) read
  /// split where it arrives whole needs no communication: each rank makes
  /// its part. The reader of `annotation` gets its own copy of the constant,
  /// made with the sharding it reads it with, which shard-partition builds at
  /// the local shape.
  static LogicalResult splitSplat(shard::ShardOp annotation) {
    auto constant = unannotated(annotation.getSrc()).getDefiningOp<ConstantOp>();
    if (!constant || !isa<SplatElementsAttr>(constant.getValue()))
      return failure();
    OpBuilder b(annotation);
    Location loc = constant.getLoc();
    Value copy = ConstantOp::create(b, loc, constant.getType(), constant.getValue());
    auto sharding = annotation.getSharding();
    auto made = shard::ShardOp::create(b, loc, copy, sharding, /*annotate_for_users=*/false);
    annotation.getSrcMutable().assign(made);
    return success();
  }

  LogicalResult checkDivisible(shard::ShardOp annotation, shard::GridOp grid) {
    auto type = dyn_cast<RankedTensorType>(annotation.getSrc().getType());
    shard::Sharding sharding(annotation.getSharding());
    if (!type)
      return success();
    for (auto [dim, axes] : llvm::enumerate(sharding.getSplitAxes())) {
      if (axes.empty() || dim >= static_cast<size_t>(type.getRank()))
        continue;
      int64_t parts = shard::collectiveProcessGroupSize(axes.asArrayRef(), grid.getShape());
      if (type.getDimSize(dim) % parts != 0) {
        Value source = unannotated(annotation.getSrc());
        Operation *at = source.getDefiningOp() ? source.getDefiningOp() : annotation;
        return at->emitError("dim ")
               << dim << " (" << type.getDimSize(dim) << ") of this value does not split into "
               << parts << " equal parts over tp";
      }
    }
    return success();
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
        func, FlatSymbolRefAttr::get(func.getContext(), "mesh"));
    bool needsCoordinate = false;
    WalkResult walk = func.walk([&](Operation *op) -> WalkResult {
      if (auto annotation = dyn_cast<shard::ShardOp>(op)) {
        if (grid && failed(checkDivisible(annotation, grid)))
          return WalkResult::interrupt();
        auto source = annotation.getSrc().getDefiningOp<shard::ShardOp>();
        shard::Sharding from = source ? shard::Sharding(source.getSharding()) : shard::Sharding();
        shard::Sharding to(annotation.getSharding());
        if (!source || from == to ||
            (shard::isFullReplication(from) && shard::isFullReplication(to)))
          return WalkResult::advance();
        // Through further annotations to the op that reads it.
        OpOperand *reader = nullptr;
        for (Value value = annotation.getResult(); !value.use_empty();) {
          reader = &*value.getUses().begin();
          auto next = dyn_cast<shard::ShardOp>(reader->getOwner());
          if (!next)
            break;
          value = next.getResult();
        }
        if (!reader || isa<shard::ShardOp>(reader->getOwner()))
          return WalkResult::advance(); // read by nothing
        if (!splitDim(from) && succeeded(splitSplat(annotation)))
          return WalkResult::advance();
        if (!splitDim(from) && !isParameter(unannotated(annotation.getSrc())))
          return WalkResult::advance();
        (void)refuse(reader->getOwner(), reader->getOperandNumber(), from, to);
        return WalkResult::interrupt();
      }
      if (auto gather = dyn_cast<GatherOp>(op))
        needsCoordinate |= splitDim(shardingOf(gather.getData())) == std::optional<int64_t>(0);
      if (auto sce = dyn_cast<SoftmaxCrossEntropyLossOp>(op))
        needsCoordinate |= splitDim(shardingOf(sce.getScores())) == std::optional<int64_t>(1);
      if (auto dropout = dyn_cast<DropoutOp>(op))
        needsCoordinate |= dropout.getTrainingMode() &&
                           dropout.getRatio().convertToDouble() > 0.0 &&
                           splitDim(shardingOf(dropout.getData())).has_value();
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
    if (!needsCoordinate)
      return;
    MLIRContext *ctx = func.getContext();
    unsigned index = func.getNumArguments();
    if (failed(func.insertArgument(index, RankedTensorType::get({}, IntegerType::get(ctx, 64)), {},
                                   func.getLoc())))
      return signalPassFailure();
    func.setArgAttr(index, kNameAttr, StringAttr::get(ctx, "cleave.tp_rank"));
    func.setArgAttr(index, kKindAttr, StringAttr::get(ctx, "state"));
    func.setArgAttr(index, kTpCoordinateAttr, UnitAttr::get(ctx));
  }
};

} // namespace
