//===- TensorParallel.cpp - split @forward's parameters over tp ------------===//
//
// Megatron-style tensor parallelism before autodiff: the plan splits
// parameters along a dim over the mesh's tp axis; the layouts flow forward
// through the ops, every op takes the local shapes, and the two Megatron
// operators appear where the layout changes: `cleave.all_reduce_grad` (f)
// where a replicated activation enters split computation, and
// `shard.all_reduce` (g) right after an op whose result is a partial sum.
// Autodiff then differentiates the per-rank function as it is.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"
#include "passes/Collectives.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/GlobPattern.h"

#include <deque>

namespace cleave {
#define GEN_PASS_DEF_TENSORPARALLEL
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// How a value lies over the tp ranks.
struct Layout {
  enum Kind { Replicated, Split, Partial } kind = Replicated;
  /// Split: the dim, and the equal blocks it is made of, each split over the
  /// ranks (a fused q, k, v projection is 3 blocks).
  int64_t dim = 0;
  int64_t blocks = 1;

  static Layout split(int64_t dim, int64_t blocks = 1) { return {Split, dim, blocks}; }
  bool isSplit() const { return kind == Split; }
  bool operator==(const Layout &other) const {
    return kind == other.kind && (kind != Split || (dim == other.dim && blocks == other.blocks));
  }
};

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// One plan entry: a parameter-name glob and its layout.
struct PlanEntry {
  std::string text;
  llvm::GlobPattern glob;
  /// Per dim: split over tp (with blocks) or not.
  SmallVector<std::optional<int64_t>> blocks;
  bool used = false;
};

struct TensorParallelPass : public cleave::impl::TensorParallelBase<TensorParallelPass> {
  using TensorParallelBase::TensorParallelBase;

  int64_t ranks = 1;
  shard::GridAxis tpAxis = 0;
  llvm::DenseMap<Value, Layout> layouts;
  /// The f wrapper of each replicated value, made once.
  llvm::DenseMap<Value, Value> entered;
  std::deque<std::string> globTexts;
  /// This rank's tp coordinate, an i64 scalar in the weights blob (made when
  /// a rule needs it).
  Value tpRank;

  Value tpRankOf(func::FuncOp func) {
    if (!tpRank) {
      MLIRContext *ctx = func.getContext();
      unsigned index = func.getNumArguments();
      (void)func.insertArgument(index, RankedTensorType::get({}, IntegerType::get(ctx, 64)), {},
                                func.getLoc());
      func.setArgAttr(index, "cleave.name", StringAttr::get(ctx, "cleave.tp_rank"));
      func.setArgAttr(index, "cleave.kind", StringAttr::get(ctx, "state"));
      func.setArgAttr(index, "cleave.tp_coordinate", UnitAttr::get(ctx));
      tpRank = func.getArgument(index);
    }
    return tpRank;
  }

  /// A lookup in a table split by rows over tp (a vocabulary-parallel
  /// embedding): each rank takes the rows it holds, zero for the others,
  /// and the partial results are all-reduced.
  LogicalResult vocabularyParallelGather(GatherOp gather, OpBuilder &b) {
    Value table = gather.getData(), indices = gather.getIndices();
    Layout layout = layoutOf(table);
    if (gather.getAxis() != 0 || layout.dim != 0 || layout.blocks != 1 ||
        layoutOf(indices).isSplit())
      return gather.emitError("a lookup in a table split over tp must gather whole rows of a "
                              "table split by rows, with indices whole on every rank");
    Location loc = gather.getLoc();
    auto func = gather->getParentOfType<func::FuncOp>();
    auto index = cast<IntegerType>(typeOf(indices).getElementType());
    int64_t rows = typeOf(table).getDimSize(0);
    auto scalar = [&](int64_t value) -> Value {
      auto tensor = RankedTensorType::get({}, index);
      return ConstantOp::create(b, loc, tensor,
                                DenseElementsAttr::get(tensor, b.getIntegerAttr(index, value)));
    };
    b.setInsertionPoint(gather);
    Value rank = tpRankOf(func);
    if (index.getWidth() != 64)
      rank = CastOp::create(b, loc, rank, index);
    // This rank's rows are [rank * rows, (rank + 1) * rows) of the table.
    Value local = SubOp::create(b, loc, indices, MulOp::create(b, loc, rank, scalar(rows)));
    Value below = LessOp::create(b, loc, local, scalar(0));
    Value above = NotOp::create(b, loc, LessOp::create(b, loc, local, scalar(rows)));
    Value outside = NotOp::create(
        b, loc, EqualOp::create(b, loc, CastOp::create(b, loc, below, index),
                                CastOp::create(b, loc, above, index)));
    // below and above never hold together: they differ exactly outside.
    Value safe = WhereOp::create(b, loc, outside, scalar(0), local);
    Value rowsTaken = GatherOp::create(b, loc, table, safe, gather.getAxisAttr());
    auto resultType = typeOf(rowsTaken);
    SmallVector<int64_t> keptShape(typeOf(indices).getShape());
    keptShape.resize(resultType.getRank(), 1);
    Value kept = ReshapeOp::create(
        b, loc, CastOp::create(b, loc, NotOp::create(b, loc, outside), resultType.getElementType()),
        b.getDenseI64ArrayAttr(keptShape));
    Value partial = MulOp::create(b, loc, rowsTaken, kept);
    const shard::GridAxis axes[] = {tpAxis};
    Value whole = shard::AllReduceOp::create(b, loc, partial, "mesh", axes,
                                             shard::ReductionKind::Sum);
    gather.getOutput().replaceAllUsesWith(whole);
    gather.erase();
    return success();
  }

  /// Cross-entropy over classes split over tp (Megatron's vocabulary-parallel
  /// loss): each rank holds its classes' scores; the row maxima (gathered,
  /// detached: they only shift), the sums of exponentials and the target's
  /// shifted score are combined over tp, so loss_i = log(sum) - score_t.
  LogicalResult vocabularyParallelLoss(SoftmaxCrossEntropyLossOp sce, OpBuilder &b) {
    Value scores = sce.getScores(), labels = sce.getLabels();
    auto type = typeOf(scores);
    Layout layout = layoutOf(scores);
    if (type.getRank() != 2 || layout.dim != 1 || layout.blocks != 1 || sce.getWeights() ||
        sce.getReduction() != "sum" || !sce.getLogProb().use_empty() ||
        layoutOf(labels).isSplit())
      return sce.emitError("a cross-entropy over classes split over tp needs N x C scores, "
                           "sum reduction, no class weights and no log_prob reader");
    Location loc = sce.getLoc();
    auto func = sce->getParentOfType<func::FuncOp>();
    int64_t rows = type.getDimSize(0), classes = type.getDimSize(1);
    Type element = type.getElementType();
    auto index = cast<IntegerType>(typeOf(labels).getElementType());
    const shard::GridAxis axes[] = {tpAxis};
    auto scalar = [&](Type t, double value) -> Value {
      auto tensor = RankedTensorType::get({}, t);
      Attribute attr = isa<FloatType>(t) ? Attribute(b.getFloatAttr(t, value))
                                         : Attribute(b.getIntegerAttr(t, static_cast<int64_t>(value)));
      return ConstantOp::create(b, loc, tensor, DenseElementsAttr::get(tensor, attr));
    };
    auto sumOver = [&](Value v, int64_t axis) -> Value {
      return ReduceSumOp::create(b, loc, v, b.getDenseI64ArrayAttr({axis}), false);
    };
    auto reduce = [&](Value v) -> Value {
      return shard::AllReduceOp::create(b, loc, v, "mesh", axes, shard::ReductionKind::Sum);
    };
    b.setInsertionPoint(sce);
    Value localMax = ReduceMaxOp::create(b, loc, scores, b.getDenseI64ArrayAttr({1}), false);
    Value gathered = shard::AllGatherOp::create(
        b, loc, RankedTensorType::get({ranks, rows}, element), "mesh", axes,
        ReshapeOp::create(b, loc, localMax, b.getDenseI64ArrayAttr({1, rows})), llvm::APInt(64, 0));
    Value maxima = ReduceMaxOp::create(b, loc, gathered, b.getDenseI64ArrayAttr({0}), false);
    Value shift = DetachOp::create(
        b, loc, ReshapeOp::create(b, loc, maxima, b.getDenseI64ArrayAttr({rows, 1})));
    Value shifted = SubOp::create(b, loc, scores, shift);
    Value sums = reduce(sumOver(ExpOp::create(b, loc, shifted), 1));
    // This rank's classes are [rank * classes, (rank + 1) * classes).
    Value rank = tpRankOf(func);
    if (index.getWidth() != 64)
      rank = CastOp::create(b, loc, rank, index);
    Value first = MulOp::create(b, loc, rank, scalar(index, static_cast<double>(classes)));
    Value local = ReshapeOp::create(b, loc, SubOp::create(b, loc, labels, first),
                                    b.getDenseI64ArrayAttr({rows, 1}));
    Value ids = RangeOp::create(b, loc, b.getIntegerAttr(index, 0),
                                b.getIntegerAttr(index, classes), b.getIntegerAttr(index, 1));
    Value oneHot = CastOp::create(b, loc, EqualOp::create(b, loc, local, ids), element);
    Value target = reduce(sumOver(MulOp::create(b, loc, shifted, oneHot), 1));
    Value perRow = SubOp::create(b, loc, LogOp::create(b, loc, sums), target);
    if (IntegerAttr ignored = sce.getIgnoreIndexAttr()) {
      Value kept = NotOp::create(
          b, loc,
          EqualOp::create(b, loc, labels, scalar(index, static_cast<double>(ignored.getInt()))));
      perRow = MulOp::create(b, loc, perRow, CastOp::create(b, loc, kept, element));
    }
    sce.getLoss().replaceAllUsesWith(sumOver(perRow, 0));
    sce.erase();
    return success();
  }

  Layout layoutOf(Value v) { return layouts.lookup(v); }

  /// The local type of `global` under `layout`.
  RankedTensorType localType(RankedTensorType global, Layout layout) {
    if (!layout.isSplit())
      return global;
    SmallVector<int64_t> shape(global.getShape());
    shape[layout.dim] /= ranks;
    return global.clone(shape);
  }

  /// One plan entry, GLOB=DIM/DIM/..., or an error at `at`.
  FailureOr<PlanEntry> parsePlanEntry(Operation *at, StringRef entry) {
    size_t eq = entry.rfind('=');
    // A GlobPattern refers to its text: keep the text where it cannot move.
    auto glob = llvm::GlobPattern::create(globTexts.emplace_back(entry.substr(0, eq).str()));
    if (eq == StringRef::npos || !glob) {
      if (!glob)
        llvm::consumeError(glob.takeError());
      return at->emitError("plan entry '") << entry << "' is not GLOB=DIM/DIM/...";
    }
    SmallVector<StringRef> dims;
    entry.substr(eq + 1).split(dims, '/');
    // Shown as the plan file spells it: GLOB: ["tp", "-"].
    std::string shown = entry.substr(0, eq).str() + ": [";
    for (auto [i, dim] : llvm::enumerate(dims))
      shown += (i ? ", \"" : "\"") + dim.str() + "\"";
    PlanEntry parsed{shown + "]", std::move(*glob), {}, false};
    for (StringRef dim : dims) {
      if (dim == "-") {
        parsed.blocks.push_back(std::nullopt);
        continue;
      }
      auto [axis, blockText] = dim.split(':');
      int64_t blocks = 1;
      if (axis != "tp" ||
          (!blockText.empty() && (blockText.getAsInteger(10, blocks) || blocks < 1)))
        return at->emitError("plan entry '")
               << parsed.text << "': '" << dim
               << "' is not '-', 'tp' or 'tp:BLOCKS' (parameters split over tp only)";
      parsed.blocks.push_back(blocks);
    }
    if (llvm::count_if(parsed.blocks, [](auto b) { return b.has_value(); }) > 1)
      return at->emitError("plan entry '") << parsed.text << "' splits more than one dim";
    return parsed;
  }

  /// Plan entries from the ONNX 1.18 sharding specs the importer kept on the
  /// ops (`cleave.device_config`): a spec naming a parameter, split along one
  /// axis into as many shards as tp has ranks, splits that dim over tp.
  FailureOr<SmallVector<PlanEntry>> annotatedPlan(func::FuncOp func) {
    llvm::StringMap<BlockArgument> params;
    for (BlockArgument arg : func.getArguments()) {
      auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "cleave.name");
      auto kind = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "cleave.kind");
      if (name && kind && kind.getValue() == "param")
        params[name.getValue()] = arg;
    }
    llvm::StringMap<int64_t> splitDim; // parameter -> dim (-1: whole)
    SmallVector<std::string> order;
    WalkResult walk = func.walk([&](Operation *op) -> WalkResult {
      auto configs = op->getAttrOfType<ArrayAttr>("cleave.device_config");
      if (!configs)
        return WalkResult::advance();
      for (auto config : configs.getAsRange<DictionaryAttr>()) {
        auto specs = config.getAs<ArrayAttr>("sharding");
        if (!specs)
          continue;
        for (auto spec : specs.getAsRange<DictionaryAttr>()) {
          StringRef tensor = spec.getAs<StringAttr>("tensor").getValue();
          auto param = params.find(tensor);
          if (param == params.end())
            continue; // activations follow from the parameters
          auto dims = spec.getAs<ArrayAttr>("sharded_dims").getAsRange<DictionaryAttr>();
          SmallVector<DictionaryAttr> split(dims.begin(), dims.end());
          int64_t dim = -1;
          if (split.size() > 1)
            return op->emitError("the sharding spec of '")
                   << tensor << "' splits more than one dim; cleave splits one, over tp";
          if (split.size() == 1) {
            auto shards = split[0].getAs<ArrayAttr>("num_shards");
            int64_t rank = cast<RankedTensorType>(param->second.getType()).getRank();
            dim = split[0].getAs<IntegerAttr>("axis").getInt();
            dim = dim < 0 ? dim + rank : dim;
            if (shards.size() != 1 || cast<IntegerAttr>(shards[0]).getInt() != ranks)
              return op->emitError("the sharding spec of '")
                     << tensor << "' does not split it into the mesh's " << ranks
                     << " tp ranks";
          }
          auto [known, added] = splitDim.try_emplace(tensor, dim);
          if (added)
            order.push_back(tensor.str());
          else if (known->second != dim)
            return op->emitError("the sharding specs of '") << tensor << "' disagree";
        }
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    SmallVector<PlanEntry> entries;
    for (const std::string &name : order) {
      int64_t dim = splitDim.lookup(name);
      if (dim < 0)
        continue;
      int64_t rank = cast<RankedTensorType>(params.lookup(name).getType()).getRank();
      std::string text = name + "=";
      for (int64_t d = 0; d < rank; ++d)
        text += (d ? "/" : "") + std::string(d == dim ? "tp" : "-");
      auto parsed = parsePlanEntry(func, text);
      if (failed(parsed))
        return failure();
      entries.push_back(std::move(*parsed));
    }
    return entries;
  }

  /// Gives each parameter the plan's layout and its local type.
  LogicalResult splitParameters(func::FuncOp func, MutableArrayRef<PlanEntry> entries) {
    Builder b(func.getContext());
    SmallVector<Type> argTypes;
    for (BlockArgument arg : func.getArguments()) {
      auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "cleave.name");
      auto kind = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "cleave.kind");
      PlanEntry *match = nullptr;
      if (name && kind && kind.getValue() == "param")
        for (PlanEntry &entry : entries)
          if (entry.glob.match(name.getValue())) {
            match = &entry;
            break;
          }
      if (match) {
        match->used = true;
        auto type = typeOf(arg);
        if (static_cast<int64_t>(match->blocks.size()) != type.getRank())
          return func.emitError("plan entry '")
                 << match->text << "' has " << match->blocks.size() << " dims, but parameter '"
                 << name.getValue() << "' is " << type;
        for (auto [dim, blocks] : llvm::enumerate(match->blocks)) {
          if (!blocks)
            continue;
          if (type.getDimSize(dim) % (*blocks * ranks) != 0)
            return func.emitError("plan entry '")
                   << match->text << "': dim " << dim << " of parameter '" << name.getValue()
                   << "' (" << type.getDimSize(dim) << ") does not split into " << *blocks
                   << " x " << ranks << " equal parts";
          Layout layout = Layout::split(dim, *blocks);
          layouts[arg] = layout;
          arg.setType(localType(type, layout));
          func.setArgAttr(arg.getArgNumber(), "cleave.split_dim", b.getI64IntegerAttr(dim));
          func.setArgAttr(arg.getArgNumber(), "cleave.split_blocks",
                          b.getI64IntegerAttr(*blocks));
          func.setArgAttr(arg.getArgNumber(), "cleave.split_axis", b.getStringAttr("tp"));
        }
      }
      argTypes.push_back(arg.getType());
    }
    for (PlanEntry &entry : entries)
      if (!entry.used)
        return func.emitError("plan entry '") << entry.text << "' matches no parameter";
    func.setType(FunctionType::get(func.getContext(), argTypes, func.getResultTypes()));
    return success();
  }

  /// Megatron's f: `value` (replicated) as an input of split computation.
  Value enter(OpBuilder &b, Value value) {
    Value &wrapped = entered[value];
    if (!wrapped) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointAfterValue(value);
      const shard::GridAxis axes[] = {tpAxis};
      wrapped = AllReduceGradOp::create(b, value.getLoc(), value, "mesh", axes);
      layouts[wrapped] = Layout();
    }
    return wrapped;
  }

  /// The layout of the results of elementwise `op` whose operands broadcast
  /// to its result shape: the one split among them, which every split
  /// operand shares and every replicated one broadcasts along (size 1 or
  /// absent in that dim).
  FailureOr<Layout> elementwise(Operation *op) {
    int64_t rank = typeOf(op->getResult(0)).getRank();
    std::optional<Layout> out;
    for (Value operand : op->getOperands()) {
      Layout layout = layoutOf(operand);
      if (!layout.isSplit())
        continue;
      // Broadcasting aligns dims from the right.
      Layout aligned = Layout::split(layout.dim + rank - typeOf(operand).getRank(), layout.blocks);
      if (out && !(*out == aligned))
        return op->emitError("operands split along different dims over tp");
      out = aligned;
    }
    if (!out)
      return Layout();
    for (Value operand : op->getOperands()) {
      auto type = typeOf(operand);
      int64_t dim = out->dim - (rank - type.getRank());
      if (!layoutOf(operand).isSplit() && dim >= 0 && type.getDimSize(dim) != 1)
        return op->emitError("an operand is replicated over tp where another is split along ")
               << "dim " << out->dim << ": split it too in the plan";
    }
    return *out;
  }

  /// The layout of a matrix product's result: split along N (column
  /// parallel, the replicated left operand entering through f), partial
  /// (row parallel: both split along K), or split along a batch dim both
  /// share.
  FailureOr<Layout> product(Operation *op, OpBuilder &b, unsigned lhsIndex, unsigned rhsIndex,
                            int64_t lhsK, int64_t rhsK, int64_t rhsN, int64_t resultN) {
    Layout lhs = layoutOf(op->getOperand(lhsIndex)), rhs = layoutOf(op->getOperand(rhsIndex));
    int64_t lhsRank = typeOf(op->getOperand(lhsIndex)).getRank();
    int64_t rhsRank = typeOf(op->getOperand(rhsIndex)).getRank();
    if (!lhs.isSplit() && rhs.isSplit() && rhs.dim == rhsN) {
      op->setOperand(lhsIndex, enter(b, op->getOperand(lhsIndex)));
      return Layout::split(resultN, rhs.blocks);
    }
    if (lhs.isSplit() && rhs.isSplit() && lhs.dim == lhsK && rhs.dim == rhsK &&
        lhs.blocks == 1 && rhs.blocks == 1)
      return Layout{Layout::Partial};
    int64_t rank = typeOf(op->getResult(0)).getRank();
    if (lhs.isSplit() && rhs.isSplit() && lhs.dim < lhsRank - 2 && rhs.dim < rhsRank - 2 &&
        lhs.dim + rank - lhsRank == rhs.dim + rank - rhsRank)
      return Layout::split(lhs.dim + rank - lhsRank, lhs.blocks);
    return op->emitError("has no tensor-parallel rule for these operand layouts");
  }

  /// The output dim a reshape maps split input dim `dim` to: the outermost
  /// dim of the group of output dims whose product equals that of the input
  /// group `dim` leads.
  FailureOr<int64_t> reshapedDim(ReshapeOp op, int64_t dim) {
    // The input already has its local type; the shape attribute is global.
    SmallVector<int64_t> in(typeOf(op.getInput()).getShape());
    in[dim] *= ranks;
    ArrayRef<int64_t> out = op.getShape();
    int64_t i = 0, o = 0;
    while (i < static_cast<int64_t>(in.size()) && o < static_cast<int64_t>(out.size())) {
      int64_t groupStartIn = i, groupStartOut = o;
      int64_t a = in[i++], c = out[o++];
      while (a != c) {
        if (a < c && i < static_cast<int64_t>(in.size()))
          a *= in[i++];
        else if (c < a && o < static_cast<int64_t>(out.size()))
          c *= out[o++];
        else
          break;
      }
      if (dim >= groupStartIn && dim < i) {
        if (dim != groupStartIn || out[groupStartOut] % ranks != 0)
          break;
        return groupStartOut;
      }
    }
    return op.emitError("cannot keep dim ") << dim << " split over tp through this reshape";
  }

  /// Computes `op`'s result layouts and local types; inserts f and g.
  LogicalResult partition(Operation *op, OpBuilder &b) {
    bool anySplit = llvm::any_of(op->getOperands(),
                                 [&](Value v) { return layoutOf(v).isSplit(); });
    if (!anySplit)
      return success(); // replicated in, replicated out
    if (auto sce = dyn_cast<SoftmaxCrossEntropyLossOp>(op))
      return vocabularyParallelLoss(sce, b);
    if (auto gather = dyn_cast<GatherOp>(op))
      return vocabularyParallelGather(gather, b);
    SmallVector<Layout> results(op->getNumResults(), Layout());
    if (op->hasTrait<OpTrait::SameOperandsAndResultType>() ||
        isa<AddOp, SubOp, MulOp, DivOp, PowOp, EqualOp, LessOp, GreaterOp, WhereOp, CastOp>(op)) {
      auto layout = elementwise(op);
      if (failed(layout))
        return failure();
      results.assign(op->getNumResults(), *layout);
    } else if (auto gemm = dyn_cast<GemmOp>(op)) {
      int64_t aK = gemm.getTransA() ? 0 : 1, bK = gemm.getTransB() ? 1 : 0;
      auto layout = product(op, b, 0, 1, aK, bK, 1 - bK, 1);
      if (failed(layout))
        return failure();
      if (gemm.getC() && layout->kind == Layout::Partial) {
        // Row parallel: the bias joins after the sum, once.
        Location loc = gemm.getLoc();
        Value bias = gemm.getC();
        if (layoutOf(bias).isSplit())
          return op->emitError("a row-parallel product's bias must be replicated");
        auto bare = GemmOp::create(b, loc, gemm.getA(), gemm.getB(), Value(),
                                   gemm.getAlphaAttr(), gemm.getBetaAttr(),
                                   gemm.getTransAAttr(), gemm.getTransBAttr());
        const shard::GridAxis axes[] = {tpAxis};
        auto reduced = shard::AllReduceOp::create(b, loc, bare, "mesh", axes,
                                                  shard::ReductionKind::Sum);
        if (gemm.getBeta().convertToFloat() != 1.0f) {
          auto scalar = RankedTensorType::get({}, typeOf(bias).getElementType());
          bias = MulOp::create(b, loc, bias,
                               ConstantOp::create(b, loc, scalar,
                                                  DenseElementsAttr::get(scalar, gemm.getBetaAttr())));
        }
        gemm.replaceAllUsesWith(AddOp::create(b, loc, reduced, bias).getResult());
        gemm.erase();
        return success();
      }
      if (gemm.getC()) {
        // The bias broadcasts from the right to the 2-D product.
        Layout bias = layoutOf(gemm.getC());
        int64_t biasRank = typeOf(gemm.getC()).getRank();
        bool splitAlike = bias.isSplit() && bias.dim + 2 - biasRank == layout->dim &&
                          bias.blocks == layout->blocks;
        if (!splitAlike && typeOf(gemm.getC()).getShape().back() != 1)
          return op->emitError("the bias must be split like the product: split it in the plan");
      }
      results[0] = *layout;
    } else if (auto matmul = dyn_cast<MatMulOp>(op)) {
      int64_t lhsRank = typeOf(matmul.getLhs()).getRank();
      int64_t rhsRank = typeOf(matmul.getRhs()).getRank();
      int64_t rank = typeOf(matmul.getOutput()).getRank();
      auto layout = product(op, b, 0, 1, lhsRank - 1, rhsRank - 2, rhsRank - 1, rank - 1);
      if (failed(layout))
        return failure();
      results[0] = *layout;
    } else if (auto transpose = dyn_cast<TransposeOp>(op)) {
      Layout in = layoutOf(transpose.getInput());
      int64_t dim = llvm::find(transpose.getPerm(), in.dim) - transpose.getPerm().begin();
      results[0] = Layout::split(dim, in.blocks);
    } else if (auto reshape = dyn_cast<ReshapeOp>(op)) {
      Layout in = layoutOf(reshape.getInput());
      if (in.blocks != 1)
        return op->emitError("cannot reshape a value split in blocks over tp");
      auto dim = reshapedDim(reshape, in.dim);
      if (failed(dim))
        return failure();
      SmallVector<int64_t> shape(reshape.getShape());
      shape[*dim] /= ranks;
      reshape.setShapeAttr(b.getDenseI64ArrayAttr(shape));
      results[0] = Layout::split(*dim);
    } else if (auto split = dyn_cast<SplitOp>(op)) {
      Layout in = layoutOf(split.getInput());
      if (in.dim != split.getAxis()) {
        results.assign(op->getNumResults(), in);
      } else {
        int64_t size = typeOf(split.getInput()).getDimSize(in.dim) * ranks; // global
        bool blockwise = static_cast<int64_t>(split.getSplit().size()) == in.blocks &&
                         llvm::all_of(split.getSplit(),
                                      [&](int64_t s) { return s * in.blocks == size; });
        if (!blockwise)
          return op->emitError("splits a dim split over tp into other than its ")
                 << in.blocks << " blocks";
        SmallVector<int64_t> sizes;
        for (int64_t s : split.getSplit())
          sizes.push_back(s / ranks);
        split.setSplitAttr(b.getDenseI64ArrayAttr(sizes));
        results.assign(op->getNumResults(), Layout::split(in.dim));
      }
    } else if (auto slice = dyn_cast<SliceOp>(op)) {
      // Slicing other dims keeps the split; the split dim must stay whole.
      Layout in = layoutOf(slice.getInput());
      int64_t local = typeOf(slice.getInput()).getDimSize(in.dim);
      if (slice.getStarts()[in.dim] != 0 || slice.getSteps()[in.dim] != 1 ||
          slice.getEnds()[in.dim] < local * ranks)
        return op->emitError("slices the dim split over tp");
      SmallVector<int64_t> ends(slice.getEnds());
      ends[in.dim] = local;
      slice.setEndsAttr(b.getDenseI64ArrayAttr(ends));
      results[0] = in;
    } else if (auto softmax = dyn_cast<SoftmaxOp>(op)) {
      Layout in = layoutOf(softmax.getInput());
      int64_t rank = typeOf(softmax.getInput()).getRank();
      if ((softmax.getAxis() + rank) % rank == in.dim)
        return op->emitError("normalizes along the dim split over tp");
      results[0] = in;
    } else {
      return op->emitError("has no tensor-parallel rule for an operand split over tp");
    }

    for (auto [result, layout] : llvm::zip(op->getResults(), results)) {
      layouts[result] = layout;
      result.setType(localType(typeOf(result), layout));
    }
    // Megatron's g: a partial sum is all-reduced at once.
    for (Value result : op->getResults()) {
      if (layoutOf(result).kind != Layout::Partial)
        continue;
      b.setInsertionPointAfter(op);
      const shard::GridAxis axes[] = {tpAxis};
      auto reduced = shard::AllReduceOp::create(b, op->getLoc(), result, "mesh", axes,
                                                shard::ReductionKind::Sum);
      result.replaceAllUsesExcept(reduced, reduced);
      layouts[reduced] = Layout();
    }
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<Mesh> layout = getOrCreateMesh(module, mesh);
    if (failed(layout))
      return signalPassFailure();
    if (layout->tpAxis < 0) {
      if (!plan.empty()) {
        module.emitError("a plan splits parameters over tp, but the mesh has no tp axis");
        return signalPassFailure();
      }
      return;
    }
    tpAxis = static_cast<shard::GridAxis>(layout->tpAxis);
    ranks = layout->tpSize;
    auto func = module.lookupSymbol<func::FuncOp>("forward");
    if (!func || func.isExternal() || !func.getBody().hasOneBlock()) {
      module.emitError("has no @forward function to partition");
      return signalPassFailure();
    }
    // The plan, or else the model's own ONNX sharding specs.
    FailureOr<SmallVector<PlanEntry>> entries = SmallVector<PlanEntry>();
    for (StringRef text : plan) {
      auto parsed = parsePlanEntry(module, text);
      if (failed(parsed))
        return signalPassFailure();
      entries->push_back(std::move(*parsed));
    }
    if (plan.empty())
      entries = annotatedPlan(func);
    if (failed(entries) || failed(splitParameters(func, *entries)))
      return signalPassFailure();
    if (ranks == 1)
      return;

    OpBuilder b(func.getContext());
    for (Operation &op : llvm::make_early_inc_range(func.getBody().front())) {
      if (isa<func::ReturnOp>(op)) {
        for (Value operand : op.getOperands())
          if (layoutOf(operand).isSplit()) {
            op.emitError("returns a value split over tp");
            return signalPassFailure();
          }
        continue;
      }
      b.setInsertionPoint(&op);
      if (failed(partition(&op, b)))
        return signalPassFailure();
    }
  }
};

} // namespace
