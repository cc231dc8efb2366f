//===- CleaveSharding.cpp - cleave ops under upstream shard partitioning ---===//
//
// Every cleave op implements the shard dialect's ShardingInterface, so that
// upstream `sharding-propagation` and `shard-partition` split @forward.
// An op describes its iteration space: one loop per result dim, then the
// dims it sums over, and for each dim of each operand and result the loop
// that runs along it (none where the op broadcasts the dim or needs it
// whole, so a split there is a resharding, which cleave-check-sharding
// refuses). Partitioning clones the op at its local shapes, then adds
// Megatron's two operators: `cleave.all_reduce_grad` (f) on a float operand
// that does not run along a split loop (every rank's gradient of it is a
// partial sum), and `shard.all_reduce` (g) on the results when a summed
// loop is split. A row-parallel Gemm's bias, the lookup in a table split by
// rows and the cross-entropy over split classes have partitions of their
// own (Megatron's vocabulary-parallel forms).
//
//===----------------------------------------------------------------------===//

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace cleave;
using shard::GridAxis;
using shard::Sharding;
using utils::IteratorType;

namespace {

/// The loop each dim of a value runs along; none: broadcast or read whole.
using DimLoops = SmallVector<std::optional<unsigned>>;

/// An op's iteration space as the sharding interface sees it.
struct LoopNest {
  SmallVector<IteratorType> loops;
  /// Operands first, then results.
  SmallVector<DimLoops> values;

  void parallel(int64_t count) { loops.append(count, IteratorType::parallel); }
  /// Adds a summed loop and returns it.
  unsigned reduction() {
    loops.push_back(IteratorType::reduction);
    return static_cast<unsigned>(loops.size() - 1);
  }
  /// The dims of every operand and result of `op`, as `dims` gives them.
  void everyValue(Operation *op, function_ref<DimLoops(Value)> dims) {
    for (Value v : op->getOperands())
      values.push_back(dims(v));
    for (Value v : op->getResults())
      values.push_back(dims(v));
  }
};

RankedTensorType tensorOf(Value v) { return dyn_cast<RankedTensorType>(v.getType()); }
int64_t rankOf(Value v) { return tensorOf(v) ? tensorOf(v).getRank() : 0; }

DimLoops whole(Value v) { return DimLoops(rankOf(v), std::nullopt); }

DimLoops identity(Value v) {
  DimLoops dims;
  for (int64_t d = 0; d < rankOf(v); ++d)
    dims.push_back(static_cast<unsigned>(d));
  return dims;
}

/// `operand`'s dims aligned from the right with `result`'s, as broadcasting
/// does: a dim of another size (1) is broadcast.
DimLoops broadcast(Value operand, Value result) {
  DimLoops dims = whole(operand);
  int64_t offset = rankOf(result) - rankOf(operand);
  for (int64_t d = 0; d < rankOf(operand); ++d)
    if (tensorOf(operand).getDimSize(d) == tensorOf(result).getDimSize(d + offset))
      dims[d] = static_cast<unsigned>(d + offset);
  return dims;
}

/// Maps each input dim of a reshape to the output dim it is the same
/// contiguous split of: the leading dims of groups whose sizes multiply to
/// the same product (whether the split divides both is checked later).
/// Dims of size 1 belong to no group.
DimLoops reshapedDims(ArrayRef<int64_t> in, ArrayRef<int64_t> out) {
  DimLoops dims(in.size(), std::nullopt);
  auto skipOnes = [](ArrayRef<int64_t> shape, size_t &at) {
    while (at < shape.size() && shape[at] == 1)
      ++at;
    return at < shape.size();
  };
  size_t i = 0, o = 0;
  while (skipOnes(in, i) && skipOnes(out, o)) {
    size_t groupIn = i, groupOut = o;
    int64_t a = in[i++], c = out[o++];
    while (a != c) {
      if (a < c && i < in.size())
        a *= in[i++];
      else if (c < a && o < out.size())
        c *= out[o++];
      else
        return dims;
    }
    dims[groupIn] = static_cast<unsigned>(groupOut);
  }
  return dims;
}

/// An op that needs every value whole: no loop runs along any dim.
LoopNest wholeLoops(Operation *op) {
  LoopNest nest;
  nest.everyValue(op, whole);
  return nest;
}

LoopNest loopsOf(MatMulOp matmul) {
  Value lhs = matmul.getLhs(), rhs = matmul.getRhs(), out = matmul.getOutput();
  if (rankOf(lhs) < 2 || rankOf(rhs) < 2)
    return wholeLoops(matmul);
  LoopNest nest;
  int64_t rank = rankOf(out);
  nest.parallel(rank);
  unsigned k = nest.reduction();
  // Batch dims broadcast; then M x K times K x N (each read transposed
  // where its flag says).
  DimLoops a = broadcast(lhs, out), b = broadcast(rhs, out);
  const bool ta = matmul.getTransA(), tb = matmul.getTransB();
  a[rankOf(lhs) - (ta ? 1 : 2)] = rank - 2;
  a[rankOf(lhs) - (ta ? 2 : 1)] = k;
  b[rankOf(rhs) - (tb ? 1 : 2)] = k;
  b[rankOf(rhs) - (tb ? 2 : 1)] = rank - 1;
  nest.values = {a, b, identity(out)};
  return nest;
}

LoopNest loopsOf(GemmOp gemm) {
  LoopNest nest;
  nest.parallel(2);
  unsigned k = nest.reduction();
  DimLoops a{0u, k}, b{k, 1u};
  if (gemm.getTransA())
    std::swap(a[0], a[1]);
  if (gemm.getTransB())
    std::swap(b[0], b[1]);
  nest.values = {a, b};
  if (gemm.getC())
    nest.values.push_back(broadcast(gemm.getC(), gemm.getOutput()));
  nest.values.push_back(identity(gemm.getOutput()));
  return nest;
}

LoopNest loopsOf(TransposeOp transpose) {
  LoopNest nest;
  nest.parallel(rankOf(transpose.getOutput()));
  DimLoops in = whole(transpose.getInput());
  for (auto [loop, dim] : llvm::enumerate(transpose.getPerm()))
    in[dim] = static_cast<unsigned>(loop);
  nest.values = {in, identity(transpose.getOutput())};
  return nest;
}

/// Reshape, Flatten, Squeeze, Unsqueeze.
LoopNest reshapeLoops(Operation *reshape) {
  LoopNest nest;
  Value input = reshape->getOperand(0), output = reshape->getResult(0);
  nest.parallel(rankOf(output));
  nest.values = {reshapedDims(tensorOf(input).getShape(), tensorOf(output).getShape()),
                 identity(output)};
  return nest;
}

LoopNest loopsOf(ExpandOp expand) {
  LoopNest nest;
  nest.parallel(rankOf(expand.getOutput()));
  nest.values = {broadcast(expand.getInput(), expand.getOutput()), identity(expand.getOutput())};
  return nest;
}

/// Every dim along its loop but `except`'s, which are whole.
LoopNest identityExcept(Operation *op, int64_t rank, function_ref<bool(int64_t)> except) {
  LoopNest nest;
  nest.parallel(rank);
  nest.everyValue(op, [&](Value v) {
    DimLoops dims = identity(v);
    for (int64_t d = 0; d < rankOf(v); ++d)
      if (except(d))
        dims[d] = std::nullopt;
    return dims;
  });
  return nest;
}

LoopNest loopsOf(ConcatOp concat) {
  // The joined dim whole, the others alike in every piece.
  return identityExcept(concat, rankOf(concat.getOutput()),
                        [&](int64_t d) { return d == concat.getAxis(); });
}

LoopNest loopsOf(SplitOp split) {
  // Split along a dim split over tp only into its blocks (marked by
  // cleave-annotate-sharding): each rank's part of every block.
  bool blockwise = split->hasAttr(kBlockwiseAttr);
  return identityExcept(split, rankOf(split.getInput()),
                        [&](int64_t d) { return !blockwise && d == split.getAxis(); });
}

LoopNest loopsOf(SliceOp slice) {
  auto type = tensorOf(slice.getInput());
  return identityExcept(slice, type.getRank(), [&](int64_t d) {
    return slice.getStarts()[d] != 0 || slice.getSteps()[d] != 1 ||
           slice.getEnds()[d] < type.getDimSize(d);
  });
}

LoopNest loopsOf(GatherOp gather) {
  LoopNest nest;
  int64_t indices = rankOf(gather.getIndices());
  nest.parallel(rankOf(gather.getOutput()));
  const int64_t axis = gather.getAxis();
  if (axis != 0) {
    // Entries taken along another dim (BLOOM's fused q, k, v cut by index):
    // the dims before and after the axis run as the output's, the axis is
    // read whole.
    DimLoops data = whole(gather.getData()), taken;
    for (int64_t d = 0; d < rankOf(gather.getData()); ++d)
      if (d != axis)
        data[d] = static_cast<unsigned>(d < axis ? d : d - 1 + indices);
    for (int64_t d = 0; d < indices; ++d)
      taken.push_back(static_cast<unsigned>(axis + d));
    nest.values = {data, taken, identity(gather.getOutput())};
    return nest;
  }
  // A lookup sums over the table's rows: exactly one row is taken.
  unsigned rows = nest.reduction();
  DimLoops table{rows};
  for (int64_t d = 1; d < rankOf(gather.getData()); ++d)
    table.push_back(static_cast<unsigned>(indices + d - 1));
  nest.values = {table, identity(gather.getIndices()), identity(gather.getOutput())};
  return nest;
}

LoopNest loopsOf(SoftmaxCrossEntropyLossOp sce) {
  if (rankOf(sce.getScores()) != 2)
    return wholeLoops(sce);
  // Per row, or summed over rows; a mean over rows needs them whole.
  LoopNest nest;
  StringRef reduction = sce.getReduction();
  std::optional<unsigned> rows = 0u;
  if (reduction == "mean")
    rows = std::nullopt;
  nest.loops = {reduction == "none" ? IteratorType::parallel : IteratorType::reduction,
                IteratorType::reduction};
  nest.values = {{rows, 1u}, {rows}};
  if (sce.getWeights())
    nest.values.push_back({1u});
  nest.values.push_back(reduction == "none" ? DimLoops{rows} : DimLoops{});
  nest.values.push_back({rows, 1u});
  return nest;
}

/// Softmax, LogSoftmax, SoftmaxGrad: the axis whole.
LoopNest softmaxLoops(Operation *op) {
  int64_t axis = cast<IntegerAttr>(op->getAttr("axis")).getInt();
  return identityExcept(op, rankOf(op->getOperand(0)), [&](int64_t d) { return d == axis; });
}

/// LayerNormalization and its gradient: rows apart, the dims from `axis` on
/// whole; the scale and bias whole.
LoopNest layerNormalizationLoops(Operation *op, Value x, int64_t axis, ValueRange affine) {
  LoopNest nest;
  nest.parallel(rankOf(x));
  auto leading = [&](Value v) {
    DimLoops dims = identity(v);
    for (int64_t d = axis; d < rankOf(v); ++d)
      dims[d] = std::nullopt;
    return dims;
  };
  for (Value v : op->getOperands())
    nest.values.push_back(llvm::is_contained(affine, v) ? whole(v) : leading(v));
  for (Value v : op->getResults())
    nest.values.push_back(leading(v));
  return nest;
}

LoopNest loopsOf(LayerNormalizationOp norm) {
  SmallVector<Value, 2> affine{norm.getScale()};
  if (norm.getBias())
    affine.push_back(norm.getBias());
  return layerNormalizationLoops(norm, norm.getX(), norm.getAxis(), affine);
}

LoopNest loopsOf(LayerNormalizationGradOp grad) {
  return layerNormalizationLoops(grad, grad.getX(), grad.getAxis(), grad.getScale());
}

/// ReduceSum, ReduceMean, ReduceMax: a sum over a split dim is a partial
/// sum; a mean or maximum needs the dim whole.
LoopNest reduceLoops(Operation *reduce) {
  LoopNest nest;
  Value input = reduce->getOperand(0);
  int64_t rank = rankOf(input);
  auto axes = cast<DenseI64ArrayAttr>(reduce->getAttr("axes")).asArrayRef();
  bool keepdims = cast<BoolAttr>(reduce->getAttr("keepdims")).getValue();
  bool sum = isa<ReduceSumOp>(reduce);
  nest.parallel(rank);
  DimLoops in = identity(input), out;
  for (int64_t d = 0; d < rank; ++d) {
    if (!llvm::is_contained(axes, d)) {
      out.push_back(static_cast<unsigned>(d));
      continue;
    }
    if (sum)
      nest.loops[d] = IteratorType::reduction;
    else
      in[d] = std::nullopt;
    if (keepdims)
      out.push_back(std::nullopt);
  }
  nest.values = {in, out};
  return nest;
}

/// Dropout: elementwise, its mask too; each element's draw is keyed by its
/// index in the whole tensor (a split part is told where it lies).
LoopNest loopsOf(DropoutOp dropout) {
  LoopNest nest;
  nest.parallel(rankOf(dropout.getData()));
  nest.everyValue(dropout, [](Value v) { return rankOf(v) ? identity(v) : whole(v); });
  return nest;
}

/// Elementwise ops broadcast their operands (numpy rules); any other op
/// needs its values whole.
LoopNest elementwiseLoops(Operation *op) {
  if (!isElementwise(op) || op->getNumResults() != 1)
    return wholeLoops(op);
  LoopNest nest;
  Value out = op->getResult(0);
  nest.parallel(rankOf(out));
  for (Value v : op->getOperands())
    nest.values.push_back(broadcast(v, out));
  nest.values.push_back(identity(out));
  return nest;
}

LoopNest loopNest(Operation *op) {
  return llvm::TypeSwitch<Operation *, LoopNest>(op)
      .Case<MatMulOp, GemmOp, TransposeOp, ExpandOp, ConcatOp, SplitOp, SliceOp, GatherOp,
            SoftmaxCrossEntropyLossOp, LayerNormalizationOp, LayerNormalizationGradOp, DropoutOp>(
          [](auto typed) { return loopsOf(typed); })
      .Case<ReshapeOp, FlattenOp, SqueezeOp, UnsqueezeOp>(reshapeLoops)
      .Case<SoftmaxOp, LogSoftmaxOp, SoftmaxGradOp>(softmaxLoops)
      .Case<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>(reduceLoops)
      .Default(elementwiseLoops);
}

/// Whether an op other than a sharding annotation reads `v`.
bool isRead(Value v) {
  return llvm::any_of(v.getUsers(), [](Operation *user) {
    auto annotation = dyn_cast<shard::ShardOp>(user);
    return !annotation || isRead(annotation.getResult());
  });
}

FlatSymbolRefAttr meshOf(MLIRContext *ctx) { return FlatSymbolRefAttr::get(ctx, "mesh"); }

/// The grid axes each loop is split over, as the given shardings say
/// (results first): a dim split where no loop runs, or along axes another
/// loop took, leaves the loop whole (cleave-check-sharding reports it).
shard::ShardingArray loopSplits(const LoopNest &nest, unsigned numOperands,
                                ArrayRef<Sharding> operandShardings,
                                ArrayRef<Sharding> resultShardings) {
  shard::ShardingArray loops(nest.loops.size());
  auto take = [&](const Sharding &sharding, const DimLoops &dims) {
    if (!sharding)
      return;
    for (auto [d, axes] : llvm::enumerate(sharding.getSplitAxes())) {
      if (axes.empty() || d >= dims.size() || !dims[d] || !loops[*dims[d]].empty())
        continue;
      ArrayRef<GridAxis> wanted = axes.asArrayRef();
      bool taken = llvm::any_of(loops, [&](ArrayRef<GridAxis> used) {
        return llvm::any_of(wanted, [&](GridAxis axis) { return llvm::is_contained(used, axis); });
      });
      if (!taken)
        loops[*dims[d]].assign(wanted.begin(), wanted.end());
    }
  };
  for (auto [i, sharding] : llvm::enumerate(resultShardings))
    take(sharding, nest.values[numOperands + i]);
  for (auto [i, sharding] : llvm::enumerate(operandShardings))
    take(sharding, nest.values[i]);
  return loops;
}

/// The sharding of a value whose dims run along `dims`.
Sharding valueSharding(MLIRContext *ctx, Value v, const DimLoops &dims,
                       const shard::ShardingArray &loops) {
  if (!tensorOf(v))
    return Sharding();
  SmallVector<shard::GridAxesAttr> split;
  for (const std::optional<unsigned> &loop : dims)
    split.push_back(shard::GridAxesAttr::get(ctx, loop && *loop < loops.size()
                                                      ? ArrayRef<GridAxis>(loops[*loop])
                                                      : ArrayRef<GridAxis>()));
  while (!split.empty() && split.back().empty())
    split.pop_back();
  return Sharding::get(meshOf(ctx), split);
}

/// The grid axes split loops of kind `kind` use.
SmallVector<GridAxis> axesOf(const LoopNest &nest, const shard::ShardingArray &loops,
                             IteratorType kind) {
  SmallVector<GridAxis> axes;
  for (auto [type, split] : llvm::zip(nest.loops, loops))
    if (type == kind)
      axes.append(split.begin(), split.end());
  return axes;
}

/// The axes of `axes` along which no dim of `dims` runs.
SmallVector<GridAxis> missing(ArrayRef<GridAxis> axes, const DimLoops &dims,
                              const shard::ShardingArray &loops) {
  SmallVector<GridAxis> result;
  for (GridAxis axis : axes)
    if (llvm::none_of(dims, [&](const std::optional<unsigned> &loop) {
          return loop && llvm::is_contained(loops[*loop], axis);
        }))
      result.push_back(axis);
  return result;
}

} // namespace

Value cleave::gatherWhole(OpBuilder &b, Location loc, Value local, int64_t dim, int64_t blocks,
                          ArrayRef<int16_t> axes, int64_t parts) {
  auto type = cast<RankedTensorType>(local.getType());
  SmallVector<int64_t> stacked(type.getShape()), whole(type.getShape());
  stacked[0] *= parts;
  whole[dim] *= parts;
  // A part sliced from a value every rank holds whole (the cross-entropy's
  // gradient under --deterministic, a row-parallel input) is that value's:
  // no gather.
  auto slice = local.getDefiningOp<shard::AllSliceOp>();
  Value value = slice && slice.getSliceAxis() == 0 && slice.getGridAxes() == axes
                    ? slice.getInput()
                    : shard::AllGatherOp::create(b, loc, type.clone(stacked), "mesh", axes, local,
                                                 llvm::APInt(64, 0))
                          .getResult();
  if (dim == 0 && blocks == 1)
    return value;
  // [P x d0, .., B x L, ..] -> [P, d0, .., B, L, ..] -> [d0, .., B, P, L, ..] -> whole
  int64_t rank = type.getRank();
  SmallVector<int64_t> byPart{parts};
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d) {
    if (d != dim) {
      perm.push_back(byPart.size());
      byPart.push_back(type.getDimSize(d));
      continue;
    }
    perm.push_back(byPart.size());
    perm.push_back(0);
    perm.push_back(byPart.size() + 1);
    byPart.push_back(blocks);
    byPart.push_back(type.getDimSize(d) / blocks);
  }
  value = ReshapeOp::create(b, loc, value, b.getDenseI64ArrayAttr(byPart));
  value = TransposeOp::create(b, loc, value, b.getDenseI64ArrayAttr(perm));
  return ReshapeOp::create(b, loc, value, b.getDenseI64ArrayAttr(whole));
}

namespace {

/// Megatron's f on `value`, made once per value and axes; with `wholeSums`
/// once per reader, so that each reader's gradient is summed over tp alone
/// and the readers' gradients are added in one device's order (a post-LN
/// block's q, k and v gradients beside its residual's).
Value enterSplit(OpBuilder &b, Value value, ArrayRef<GridAxis> axes, bool wholeSums) {
  if (!wholeSums)
    for (Operation *user : value.getUsers())
      if (auto f = dyn_cast<AllReduceGradOp>(user); f && f.getGridAxes() == axes)
        return f;
  return AllReduceGradOp::create(b, value.getLoc(), value, "mesh", axes);
}

Value allReduce(OpBuilder &b, Location loc, Value v, ArrayRef<GridAxis> axes) {
  return shard::AllReduceOp::create(b, loc, v, "mesh", axes, shard::ReductionKind::Sum);
}

/// This rank's coordinate on the one grid axis `axes` holds, as a scalar of
/// `type`: the argument marked `cleave.tp_coordinate` (cleave-check-sharding
/// adds it) of the function being partitioned; an error on `op` without it.
FailureOr<Value> tpCoordinate(Operation *op, ArrayRef<GridAxis> axes, IRMapping &map,
                              IntegerType type, OpBuilder &b) {
  if (axes.size() != 1)
    return op->emitError("splits rows or classes over more than one grid axis");
  auto func = op->getParentOfType<func::FuncOp>();
  for (BlockArgument arg : func.getArguments()) {
    if (!func.getArgAttr(arg.getArgNumber(), kTpCoordinateAttr))
      continue;
    Value rank = map.lookup(arg);
    return type.getWidth() == 64 ? rank : CastOp::create(b, op->getLoc(), rank, type).getResult();
  }
  return op->emitError("needs the tp coordinate: run cleave-check-sharding first");
}

/// Whether 0 <= v < size, elementwise.
Value within(OpBuilder &b, Location loc, Value v, int64_t size) {
  auto index = cast<IntegerType>(tensorOf(v).getElementType());
  Value below = LessOp::create(b, loc, v, scalarConstant(b, loc, index, 0));
  Value above =
      NotOp::create(b, loc, LessOp::create(b, loc, v, scalarConstant(b, loc, index, size)));
  // below and above never hold together: they are equal exactly within.
  return EqualOp::create(b, loc, CastOp::create(b, loc, below, index),
                         CastOp::create(b, loc, above, index));
}

/// A lookup in a table split by rows: each rank takes the rows it holds,
/// zero for the others, and the partial results are all-reduced. Negative
/// indices count from the end of the whole table; one outside it reaches
/// the kernel as it is, which stops the run as on one device.
FailureOr<Value> vocabularyParallelGather(GatherOp gather, Value table, Value indices,
                                          ArrayRef<GridAxis> axes, int64_t ranks, IRMapping &map,
                                          OpBuilder &b) {
  Location loc = gather.getLoc();
  auto index = cast<IntegerType>(tensorOf(indices).getElementType());
  int64_t rows = tensorOf(table).getDimSize(0); // this rank's
  FailureOr<Value> rank = tpCoordinate(gather, axes, map, index, b);
  if (failed(rank))
    return failure();
  auto scalar = [&](int64_t value) { return scalarConstant(b, loc, index, value); };
  Value wrapped = WhereOp::create(b, loc, LessOp::create(b, loc, indices, scalar(0)),
                                  AddOp::create(b, loc, indices, scalar(rows * ranks)), indices);
  // This rank's rows are [rank * rows, (rank + 1) * rows) of the table.
  Value local = SubOp::create(b, loc, wrapped, MulOp::create(b, loc, *rank, scalar(rows)));
  Value mine = within(b, loc, local, rows);
  Value other = WhereOp::create(b, loc, within(b, loc, wrapped, rows * ranks), scalar(0), indices);
  Value taken = GatherOp::create(b, loc, table, WhereOp::create(b, loc, mine, local, other),
                                 gather.getAxisAttr());
  auto resultType = tensorOf(taken);
  SmallVector<int64_t> keptShape(tensorOf(indices).getShape());
  keptShape.resize(resultType.getRank(), 1);
  Value kept = ReshapeOp::create(b, loc, CastOp::create(b, loc, mine, resultType.getElementType()),
                                 b.getDenseI64ArrayAttr(keptShape));
  return allReduce(b, loc, MulOp::create(b, loc, taken, kept), axes);
}

/// Cross-entropy over classes split over tp (Megatron's vocabulary-parallel
/// loss): each rank holds its classes' scores; the row maxima (gathered,
/// detached: they only shift), the sums of exponentials and the target's
/// shifted score are combined over tp, so loss_i = log(sum) - score_t.
/// With `wholeSums` (--deterministic) every rank gathers the whole scores
/// instead and computes one device's loss: the ranks' partial sums of
/// exponentials, added, would not be one device's sum.
FailureOr<Value> vocabularyParallelLoss(SoftmaxCrossEntropyLossOp sce, Value scores, Value labels,
                                        ArrayRef<GridAxis> axes, int64_t ranks, bool wholeSums,
                                        IRMapping &map, OpBuilder &b) {
  if (sce.getWeights() || sce.getReduction() != "sum" || isRead(sce.getLogProb()))
    return sce.emitError("a cross-entropy over classes split over tp needs sum reduction, no "
                         "class weights and no log_prob reader");
  if (wholeSums) {
    // One device's loss: every rank the whole scores, whose gradient's
    // slice (the all-gather's reverse rule) is this rank's.
    Value whole = gatherWhole(b, sce.getLoc(), scores, 1, 1, axes, ranks);
    auto copy = cast<SoftmaxCrossEntropyLossOp>(b.clone(*sce));
    copy->setOperands(0, 2, {whole, labels});
    return copy.getLoss();
  }
  Location loc = sce.getLoc();
  auto type = tensorOf(scores);
  int64_t rows = type.getDimSize(0), classes = type.getDimSize(1); // this rank's classes
  Type element = type.getElementType();
  auto index = cast<IntegerType>(tensorOf(labels).getElementType());
  FailureOr<Value> rank = tpCoordinate(sce, axes, map, index, b);
  if (failed(rank))
    return failure();
  auto sumOver = [&](Value v, int64_t axis) -> Value {
    return ReduceSumOp::create(b, loc, v, b.getDenseI64ArrayAttr({axis}), false);
  };
  Value localMax = ReduceMaxOp::create(b, loc, scores, b.getDenseI64ArrayAttr({1}), false);
  Value gathered = shard::AllGatherOp::create(
      b, loc, RankedTensorType::get({ranks, rows}, element), "mesh", axes,
      ReshapeOp::create(b, loc, localMax, b.getDenseI64ArrayAttr({1, rows})), llvm::APInt(64, 0));
  Value maxima = ReduceMaxOp::create(b, loc, gathered, b.getDenseI64ArrayAttr({0}), false);
  Value shift = DetachOp::create(
      b, loc, ReshapeOp::create(b, loc, maxima, b.getDenseI64ArrayAttr({rows, 1})));
  Value shifted = SubOp::create(b, loc, scores, shift);
  Value sums = allReduce(b, loc, sumOver(ExpOp::create(b, loc, shifted), 1), axes);
  // This rank's classes are [rank * classes, (rank + 1) * classes).
  Value ids = RangeOp::create(b, loc, b.getIntegerAttr(index, 0), b.getIntegerAttr(index, classes),
                              b.getIntegerAttr(index, 1));
  // A target outside the classes (and not ignored) stops the run as on one
  // device: it reaches a lookup in this rank's class ids, out of range
  // (shifted below -classes when negative); the zero it adds keeps it live.
  Value zero = scalarConstant(b, loc, index, 0);
  Value outside = WhereOp::create(
      b, loc, LessOp::create(b, loc, labels, zero),
      SubOp::create(b, loc, labels, scalarConstant(b, loc, index, classes * ranks)), labels);
  Value probeIndex =
      WhereOp::create(b, loc, within(b, loc, labels, classes * ranks), zero, outside);
  if (IntegerAttr ignored = sce.getIgnoreIndexAttr())
    probeIndex = WhereOp::create(
        b, loc, EqualOp::create(b, loc, labels, scalarConstant(b, loc, index, ignored.getInt())),
        zero, probeIndex);
  Value probe = GatherOp::create(b, loc, ids, probeIndex, b.getI64IntegerAttr(0));
  Value first = MulOp::create(b, loc, *rank, scalarConstant(b, loc, index, classes));
  Value checked = AddOp::create(b, loc, SubOp::create(b, loc, labels, first),
                                MulOp::create(b, loc, probe, zero));
  Value local = ReshapeOp::create(b, loc, checked, b.getDenseI64ArrayAttr({rows, 1}));
  Value oneHot = CastOp::create(b, loc, EqualOp::create(b, loc, local, ids), element);
  Value target = allReduce(b, loc, sumOver(MulOp::create(b, loc, shifted, oneHot), 1), axes);
  Value perRow = SubOp::create(b, loc, LogOp::create(b, loc, sums), target);
  if (IntegerAttr ignored = sce.getIgnoreIndexAttr()) {
    Value kept = NotOp::create(
        b, loc, EqualOp::create(b, loc, labels, scalarConstant(b, loc, index, ignored.getInt())));
    perRow = MulOp::create(b, loc, perRow, CastOp::create(b, loc, kept, element));
  }
  return sumOver(perRow, 0);
}

/// A training dropout on a part of a split tensor: told which dim is split
/// over how many ranks, and this rank's coordinate, so that its draws are
/// those of the whole tensor's elements.
LogicalResult keyByWholeIndex(Operation *original, DropoutOp dropout, const LoopNest &nest,
                              const shard::ShardingArray &loops, shard::GridOp grid,
                              IRMapping &map, OpBuilder &b) {
  if (!dropout.getTrainingMode() || dropout.getRatio().convertToDouble() <= 0.0)
    return success(); // an identity, under any split
  for (auto [dim, loop] : llvm::enumerate(nest.values[0])) {
    ArrayRef<GridAxis> axes = loops[*loop];
    if (axes.empty())
      continue;
    FailureOr<Value> rank =
        tpCoordinate(original, axes, map, IntegerType::get(b.getContext(), 64), b);
    if (failed(rank))
      return failure();
    dropout->insertOperands(1, *rank);
    dropout.setSplitAttr(b.getDenseI64ArrayAttr(
        {static_cast<int64_t>(dim), shard::collectiveProcessGroupSize(axes, grid.getShape())}));
    return success();
  }
  return success();
}

/// The attributes of `op` at local shapes: a reshape's or an expand's
/// shape, a split's sizes, a slice's ends and a splat constant's value
/// (cleave-check-sharding lets only those be split) follow its local result
/// types.
void localizeAttributes(Operation *op, ArrayRef<Type> resultTypes, ArrayRef<Value> operands,
                        Builder &b) {
  if (auto constant = dyn_cast<ConstantOp>(op)) {
    if (auto splat = dyn_cast<SplatElementsAttr>(constant.getValue()))
      constant.setValueAttr(SplatElementsAttr::get(cast<ShapedType>(resultTypes[0]),
                                                   splat.getSplatValue<Attribute>()));
  } else if (isa<ReshapeOp, ExpandOp>(op)) {
    op->setAttr("shape", b.getDenseI64ArrayAttr(cast<RankedTensorType>(resultTypes[0]).getShape()));
  } else if (auto split = dyn_cast<SplitOp>(op)) {
    SmallVector<int64_t> sizes;
    for (Type t : resultTypes)
      sizes.push_back(cast<RankedTensorType>(t).getDimSize(split.getAxis()));
    split.setSplitAttr(b.getDenseI64ArrayAttr(sizes));
  } else if (auto slice = dyn_cast<SliceOp>(op)) {
    SmallVector<int64_t> ends(slice.getEnds());
    auto input = cast<RankedTensorType>(operands[0].getType());
    for (int64_t d = 0; d < input.getRank(); ++d)
      ends[d] = std::min(ends[d], input.getDimSize(d));
    slice.setEndsAttr(b.getDenseI64ArrayAttr(ends));
  }
}

template <typename Op>
struct CleaveShardingModel
    : public shard::ShardingInterface::ExternalModel<CleaveShardingModel<Op>, Op> {
  SmallVector<IteratorType> getLoopIteratorTypes(Operation *op) const { return loopNest(op).loops; }

  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    LoopNest nest = loopNest(op);
    MLIRContext *ctx = op->getContext();
    SmallVector<AffineMap> maps;
    for (const DimLoops &dims : nest.values) {
      SmallVector<AffineExpr> exprs;
      for (const std::optional<unsigned> &loop : dims)
        exprs.push_back(loop ? getAffineDimExpr(*loop, ctx) : getAffineConstantExpr(0, ctx));
      maps.push_back(AffineMap::get(nest.loops.size(), 0, exprs, ctx));
    }
    return maps;
  }

  FailureOr<shard::ShardingOption> getShardingOption(Operation *op,
                                                     ArrayRef<Sharding> operandShardings,
                                                     ArrayRef<Sharding> resultShardings) const {
    LoopNest nest = loopNest(op);
    return shard::ShardingOption(
        loopSplits(nest, op->getNumOperands(), operandShardings, resultShardings),
        meshOf(op->getContext()));
  }

  FailureOr<std::vector<Sharding>>
  getShardingAnnotations(Operation *op, const shard::ShardingOption &option) const {
    LoopNest nest = loopNest(op);
    std::vector<Sharding> shardings;
    unsigned i = 0;
    for (Value v : llvm::concat<Value>(op->getOperands(), op->getResults()))
      shardings.push_back(
          valueSharding(op->getContext(), v, nest.values[i++], option.shardingArray));
    return shardings;
  }

  LogicalResult addShardingAnnotations(Operation *op, OpBuilder &b,
                                       const shard::ShardingOption &option) const {
    auto shardings = getShardingAnnotations(op, option);
    if (failed(shardings))
      return failure();
    unsigned numOperands = op->getNumOperands();
    for (OpResult result : op->getResults()) {
      Sharding sharding = (*shardings)[numOperands + result.getResultNumber()];
      if (!sharding)
        continue;
      if (result.use_empty()) {
        // shard-partition wants every result annotated, read or not.
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointAfter(op);
        auto spec = shard::ShardingOp::create(b, result.getLoc(), sharding);
        shard::ShardOp::create(b, result.getLoc(), result, spec, /*annotate_for_users=*/false);
        continue;
      }
      shard::maybeInsertTargetShardingAnnotation(sharding, result, b);
    }
    for (OpOperand &operand : op->getOpOperands())
      if (Sharding sharding = (*shardings)[operand.getOperandNumber()])
        shard::maybeInsertSourceShardingAnnotation(sharding, operand, b);
    return success();
  }

  LogicalResult partition(Operation *op, ArrayRef<Value> operands,
                          ArrayRef<Sharding> operandShardings, ArrayRef<Sharding> resultShardings,
                          IRMapping &map, SymbolTableCollection &symbols, OpBuilder &b) const {
    LoopNest nest = loopNest(op);
    unsigned numOperands = op->getNumOperands();
    shard::ShardingArray loops = loopSplits(nest, numOperands, operandShardings, resultShardings);
    SmallVector<GridAxis> summed = axesOf(nest, loops, IteratorType::reduction);
    SmallVector<GridAxis> split = axesOf(nest, loops, IteratorType::parallel);
    Location loc = op->getLoc();
    shard::GridOp grid = shard::getGrid(op, meshOf(op->getContext()), symbols);

    // Summing over split rows or classes: the vocabulary-parallel forms.
    if (!summed.empty()) {
      FailureOr<Value> replaced = failure();
      bool special = true;
      if (auto gather = dyn_cast<GatherOp>(op))
        replaced = vocabularyParallelGather(
            gather, operands[0], operands[1], summed,
            shard::collectiveProcessGroupSize(summed, grid.getShape()), map, b);
      else if (auto sce = dyn_cast<SoftmaxCrossEntropyLossOp>(op); sce && loops[0].empty())
        replaced =
            vocabularyParallelLoss(sce, operands[0], operands[1], summed,
                                   shard::collectiveProcessGroupSize(summed, grid.getShape()),
                                   grid->hasAttr(kWholeSumsAttr), map, b);
      else
        special = false;
      if (special) {
        if (failed(replaced))
          return failure();
        map.map(op->getResult(0), *replaced);
        if (op->getNumResults() > 1) {
          // The log_prob nothing reads is not computed: zeros stand for it.
          auto type = cast<RankedTensorType>(
              shard::shardType(op->getResult(1).getType(), grid, resultShardings[1]));
          map.map(op->getResult(1), splatConstant(b, loc, type, 0.0));
        }
        return success();
      }
    }

    // Megatron's f: an operand replicated where the op runs split.
    SmallVector<Value> local(operands);
    for (unsigned i = 0; i < local.size(); ++i) {
      Value &operand = local[i];
      auto type = tensorOf(operand);
      if (!type || !isa<FloatType>(type.getElementType()) ||
          (operand.getDefiningOp() && operand.getDefiningOp()->hasTrait<OpTrait::ConstantLike>()))
        continue;
      SmallVector<GridAxis> axes = missing(split, nest.values[i], loops);
      if (!axes.empty())
        operand = enterSplit(b, operand, axes, grid->hasAttr(kWholeSumsAttr));
      if (!missing(summed, nest.values[i], loops).empty() && !(isa<GemmOp>(op) && i == 2))
        return op->emitError("sums over a dim split over tp, but operand #")
               << i << " does not run along it";
    }
    // A row-parallel Gemm adds its bias once, after the sum.
    Value bias;
    if (auto gemm = dyn_cast<GemmOp>(op); gemm && gemm.getC() && !summed.empty()) {
      bias = local.pop_back_val();
      Type element = tensorOf(bias).getElementType();
      if (gemm.getBeta().convertToFloat() != 1.0f)
        bias = MulOp::create(b, loc, bias,
                             scalarConstant(b, loc, element, gemm.getBeta().convertToDouble()));
    }

    SmallVector<Type> resultTypes;
    for (auto [result, sharding] : llvm::zip(op->getResults(), resultShardings))
      resultTypes.push_back(sharding ? shard::shardType(result.getType(), grid, sharding)
                                     : result.getType());
    Operation *clone;
    if (auto gemm = dyn_cast<GemmOp>(op); gemm && bias) {
      clone = GemmOp::create(b, loc, local[0], local[1], Value(), gemm.getAlphaAttr(),
                             gemm.getBetaAttr(), gemm.getTransAAttr(), gemm.getTransBAttr(),
                             gemm.getActivationAttr());
    } else {
      IRMapping operandMap;
      for (auto [original, partitioned] : llvm::zip(op->getOperands(), local))
        operandMap.map(original, partitioned);
      clone = b.clone(*op, operandMap);
    }
    for (auto [result, type] : llvm::zip(clone->getResults(), resultTypes))
      result.setType(type);
    localizeAttributes(clone, resultTypes, local, b);
    if (auto dropout = dyn_cast<DropoutOp>(clone);
        dropout && failed(keyByWholeIndex(op, dropout, nest, loops, grid, map, b)))
      return failure();
    for (auto [i, result, partitioned] : llvm::enumerate(op->getResults(), clone->getResults())) {
      Value value = partitioned;
      // Megatron's g: a result the split sum does not run along is a
      // partial sum (one that does, such as per-row values, stays split).
      SmallVector<GridAxis> partial = missing(summed, nest.values[numOperands + i], loops);
      if (!partial.empty())
        value = allReduce(b, loc, value, partial);
      if (bias)
        value = AddOp::create(b, loc, value, bias);
      map.map(result, value);
    }
    return success();
  }
};

template <typename... Ops> void attachShardingModels(MLIRContext *ctx) {
  (Ops::template attachInterface<CleaveShardingModel<Ops>>(*ctx), ...);
}

} // namespace

void cleave::registerShardingModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, CleaveDialect *) {
    attachShardingModels<
#define GET_OP_LIST
#include "dialects/Cleave/CleaveOps.cpp.inc"
        >(ctx);
  });
}
