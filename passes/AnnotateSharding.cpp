//===- AnnotateSharding.cpp - shardings of @forward's arguments ------------===//
//
// The first step of tensor parallelism: reads the plan (or the model's ONNX
// 1.18 sharding specs), checks it against the parameters and the mesh, and
// annotates every tensor argument of @forward with its sharding over the
// mesh's tp axis (`shard.sharding` + `shard.shard ... annotate_for_users`;
// replicated unless the plan splits it), and every tensor result as
// replicated. Upstream sharding-propagation and shard-partition take it
// from there (dialects/Cleave/CleaveSharding.cpp).
//
// A parameter split in blocks (a fused q, k, v projection) looks to upstream
// like a plain split of its dim: each rank's part of every block is one
// local tensor of the same shape. Only ops that treat the blocks alike may
// read it, up to the split into its blocks, marked `cleave.blockwise`.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"
#include "passes/Collectives.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/GlobPattern.h"

#include <deque>

namespace cleave {
#define GEN_PASS_DEF_ANNOTATESHARDING
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Whether `v` is a tensor of rank 1 or more: what shardings annotate.
bool hasDims(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.getRank() > 0;
}

/// The dim of a reshape's result that is `dim` of its input: of the same
/// size, after dims of the same product (so every element keeps its index
/// along it). None if the reshape merges or splits it.
std::optional<int64_t> keptDim(ArrayRef<int64_t> in, ArrayRef<int64_t> out, int64_t dim) {
  int64_t before = 1;
  for (int64_t d = 0; d < dim; ++d)
    before *= in[d];
  int64_t product = 1;
  for (auto [d, size] : llvm::enumerate(out)) {
    if (product == before && size == in[dim])
      return static_cast<int64_t>(d);
    product *= size;
  }
  return std::nullopt;
}

/// One plan entry: a parameter-name glob and its layout.
struct PlanEntry {
  std::string text;
  llvm::GlobPattern glob;
  /// Per dim: split over tp (with blocks) or not.
  SmallVector<std::optional<int64_t>> blocks;
  bool used = false;
};

struct AnnotateShardingPass : public cleave::impl::AnnotateShardingBase<AnnotateShardingPass> {
  using AnnotateShardingBase::AnnotateShardingBase;

  int64_t ranks = 1;
  shard::GridAxis tpAxis = 0;
  std::deque<std::string> globTexts;
  /// The split dim of each split parameter and its number of blocks.
  llvm::DenseMap<Value, std::pair<int64_t, int64_t>> splits;

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
      auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr);
      auto kind = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kKindAttr);
      if (name && kind && kind.getValue() == "param")
        params[name.getValue()] = arg;
    }
    llvm::StringMap<int64_t> splitDim; // parameter -> dim (-1: whole)
    SmallVector<std::string> order;
    WalkResult walk = func.walk([&](Operation *op) -> WalkResult {
      auto configs = op->getAttrOfType<ArrayAttr>(kDeviceConfigAttr);
      if (!configs)
        return WalkResult::advance();
      for (auto config : configs.getAsRange<DictionaryAttr>()) {
        auto specs = config.getAs<ArrayAttr>("sharding");
        if (!specs)
          continue;
        for (auto spec : specs.getAsRange<DictionaryAttr>()) {
          auto tensorName = spec.getAs<StringAttr>("tensor");
          auto dims = spec.getAs<ArrayAttr>("sharded_dims");
          if (!tensorName || !dims)
            return op->emitError("a sharding spec without 'tensor' or 'sharded_dims'");
          StringRef tensor = tensorName.getValue();
          auto param = params.find(tensor);
          if (param == params.end())
            continue; // activations follow from the parameters
          SmallVector<DictionaryAttr> split(dims.getAsRange<DictionaryAttr>());
          int64_t dim = -1;
          if (split.size() > 1)
            return op->emitError("the sharding spec of '")
                   << tensor << "' splits more than one dim; cleave splits one, over tp";
          if (split.size() == 1) {
            auto shards = split[0].getAs<ArrayAttr>("num_shards");
            auto axis = split[0].getAs<IntegerAttr>("axis");
            if (!shards || !axis)
              return op->emitError("the sharding spec of '")
                     << tensor << "' has a sharded dim without 'axis' or 'num_shards'";
            int64_t rank = typeOf(param->second).getRank();
            dim = axis.getInt() < 0 ? axis.getInt() + rank : axis.getInt();
            if (dim < 0 || dim >= rank)
              return op->emitError("the sharding spec of '")
                     << tensor << "' splits axis " << axis.getInt() << " of a rank-" << rank
                     << " tensor";
            if (shards.size() != 1 || cast<IntegerAttr>(shards[0]).getInt() != ranks)
              return op->emitError("the sharding spec of '")
                     << tensor << "' does not split it into the mesh's " << ranks << " tp ranks";
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
      // The entry matches exactly this name: glob characters in it are
      // escaped.
      std::string text;
      for (char c : name) {
        if (StringRef("*?[]{}\\").contains(c))
          text += '\\';
        text += c;
      }
      text += "=";
      for (int64_t d = 0; d < rank; ++d)
        text += (d ? "/" : "") + std::string(d == dim ? "tp" : "-");
      auto parsed = parsePlanEntry(func, text);
      if (failed(parsed))
        return failure();
      entries.push_back(std::move(*parsed));
    }
    return entries;
  }

  /// Checks each parameter the plan names against it and records its split
  /// (`cleave.split_dim`, `cleave.split_blocks`, `cleave.split_axis` on the
  /// argument, for the weights blobs).
  LogicalResult splitParameters(func::FuncOp func, MutableArrayRef<PlanEntry> entries) {
    Builder b(func.getContext());
    for (BlockArgument arg : func.getArguments()) {
      auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr);
      auto kind = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kKindAttr);
      if (!name || !kind || kind.getValue() != "param")
        continue;
      auto match =
          llvm::find_if(entries, [&](PlanEntry &e) { return e.glob.match(name.getValue()); });
      if (match == entries.end())
        continue;
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
                 << match->text << "': dim " << dim << " of parameter '" << name.getValue() << "' ("
                 << type.getDimSize(dim) << ") does not split into " << *blocks << " x " << ranks
                 << " equal parts";
        splits[arg] = {static_cast<int64_t>(dim), *blocks};
        func.setArgAttr(arg.getArgNumber(), kSplitDimAttr, b.getI64IntegerAttr(dim));
        func.setArgAttr(arg.getArgNumber(), kSplitBlocksAttr, b.getI64IntegerAttr(*blocks));
        func.setArgAttr(arg.getArgNumber(), kSplitAxisAttr, b.getStringAttr("tp"));
      }
    }
    for (PlanEntry &entry : entries)
      if (!entry.used)
        return func.emitError("plan entry '") << entry.text << "' matches no parameter";
    return success();
  }

  /// An op of one result computed element by element from its operands
  /// (broadcast): blocks in an operand are blocks in the result.
  static bool isElementwiseOfOneResult(Operation &op) {
    return op.getNumResults() == 1 && isElementwise(&op);
  }

  /// An elementwise op's or a Gemm's operand, not split over tp, whose dims
  /// reach the result's dim `dim` with more than one element and which is
  /// not one repeated value: shard-partition would slice it as one block,
  /// where the value it meets is in blocks.
  static std::optional<unsigned> wholeAlong(Operation &op, int64_t dim,
                                            function_ref<bool(Value)> isSplit) {
    if (!isa<GemmOp>(op) && !isElementwiseOfOneResult(op))
      return std::nullopt;
    int64_t rank = typeOf(op.getResult(0)).getRank();
    for (auto [i, operand] : llvm::enumerate(op.getOperands())) {
      auto type = dyn_cast<RankedTensorType>(operand.getType());
      if (!type || isSplit(operand) || (isa<GemmOp>(op) && i != 2))
        continue;
      // One repeated value is the same in every block.
      if (auto constant = operand.getDefiningOp<ConstantOp>();
          constant && isa<SplatElementsAttr>(constant.getValue()))
        continue;
      int64_t aligned = dim - (rank - type.getRank());
      if (aligned >= 0 && type.getDimSize(aligned) > 1)
        return static_cast<unsigned>(i);
    }
    return std::nullopt;
  }

  /// Follows the values split in blocks to the splits into their blocks,
  /// which it marks `cleave.blockwise`; any other reader is an error. Plain
  /// splits are followed through the same ops, so that an op mixing a value
  /// split in blocks with one split otherwise (a bias split plainly, say) is
  /// an error too.
  LogicalResult followBlocks(func::FuncOp func) {
    struct Split {
      int64_t dim, blocks;
      bool operator==(const Split &other) const {
        return dim == other.dim && blocks == other.blocks;
      }
    };
    llvm::DenseMap<Value, Split> layout;
    for (auto [value, split] : splits)
      layout[value] = {split.first, split.second};
    for (Operation &op : func.getBody().front()) {
      // The operands split over tp, by index.
      SmallVector<std::pair<unsigned, Split>> in;
      for (auto [i, operand] : llvm::enumerate(op.getOperands()))
        if (auto it = layout.find(operand); it != layout.end())
          in.push_back({static_cast<unsigned>(i), it->second});
      if (in.empty())
        continue;
      auto inBlocks = llvm::find_if(in, [](auto &entry) { return entry.second.blocks > 1; });
      // Where the result is split, and into how many blocks, if this op
      // keeps the operands' split where it is.
      std::optional<Split> out;
      auto only = [&](unsigned index) -> std::optional<Split> {
        if (in.size() != 1 || in[0].first != index)
          return std::nullopt;
        return in[0].second;
      };
      if (auto transpose = dyn_cast<TransposeOp>(op)) {
        Split split = in[0].second;
        out = Split{llvm::find(transpose.getPerm(), split.dim) - transpose.getPerm().begin(),
                    split.blocks};
      } else if (auto matmul = dyn_cast<MatMulOp>(op)) {
        // Column parallel: the right operand split along N.
        const int64_t n = typeOf(matmul.getRhs()).getRank() - (matmul.getTransB() ? 2 : 1);
        if (auto split = only(1); split && split->dim == n)
          out = Split{typeOf(matmul.getOutput()).getRank() - 1, split->blocks};
      } else if (auto gemm = dyn_cast<GemmOp>(op)) {
        // Column parallel: B split along N, and a bias split alike.
        int64_t n = gemm.getTransB() ? 0 : 1;
        auto b = llvm::find_if(in, [](auto &entry) { return entry.first == 1; });
        auto c = llvm::find_if(in, [](auto &entry) { return entry.first == 2; });
        bool fromB = b != in.end() && b->second.dim == n && in.size() == 1u + (c != in.end());
        if (fromB && (c == in.end() ||
                      c->second == Split{typeOf(gemm.getC()).getRank() - 1, b->second.blocks}))
          out = Split{1, b->second.blocks};
      } else if (isa<ReshapeOp, FlattenOp, SqueezeOp, UnsqueezeOp>(op)) {
        // A reshape that keeps the split dim (Hugging Face's Conv1D flattens
        // to 2-D around its product and back) keeps its blocks.
        Split split = in[0].second;
        if (auto dim = keptDim(typeOf(op.getOperand(0)).getShape(),
                               typeOf(op.getResult(0)).getShape(), split.dim))
          out = Split{*dim, split.blocks};
      } else if (auto split = dyn_cast<SplitOp>(op)) {
        Split whole = in[0].second;
        int64_t size = typeOf(split.getInput()).getDimSize(whole.dim);
        if (split.getAxis() != whole.dim) {
          for (Value result : split.getOutputs())
            layout[result] = whole;
          continue;
        }
        if (whole.blocks > 1 && static_cast<int64_t>(split.getSplit().size()) == whole.blocks &&
            llvm::all_of(split.getSplit(), [&](int64_t s) { return s * whole.blocks == size; })) {
          split->setAttr(kBlockwiseAttr, UnitAttr::get(func.getContext()));
          for (Value result : split.getOutputs())
            layout[result] = {whole.dim, 1};
          continue;
        }
      } else if (isElementwiseOfOneResult(op)) {
        // Every split operand split alike, aligned from the right.
        int64_t rank = typeOf(op.getResult(0)).getRank();
        auto aligned = [&](auto &entry) {
          Split split = entry.second;
          return Split{split.dim + rank - typeOf(op.getOperand(entry.first)).getRank(),
                       split.blocks};
        };
        if (llvm::all_of(in, [&](auto &entry) { return aligned(entry) == aligned(in[0]); }))
          out = aligned(in[0]);
      }
      if (out && out->blocks > 1)
        if (std::optional<unsigned> whole =
                wholeAlong(op, out->dim, [&](Value v) { return layout.count(v) > 0; }))
          return op.emitError("reads a value split over tp in ")
                 << out->blocks << " blocks with operand #" << *whole
                 << " whole along its split dim; split that operand in the same blocks too";
      if (out) {
        layout[op.getResult(0)] = *out;
        continue;
      }
      if (inBlocks != in.end())
        return op.emitError("reads a value split over tp in ")
               << inBlocks->second.blocks
               << " blocks; only transposes, reshapes that keep the split dim, matrix products "
               << "(as the right operand, split along N), elementwise ops with every split "
               << "operand split alike, and a split into its blocks may read it";
    }
    return success();
  }

  /// Annotates `value`'s uses with its sharding: split along `dim` over tp,
  /// or replicated.
  void annotate(OpBuilder &b, Value value, std::optional<int64_t> dim,
                function_ref<bool(OpOperand &)> which) {
    MLIRContext *ctx = value.getContext();
    SmallVector<shard::GridAxesAttr> split;
    if (dim) {
      split.assign(*dim + 1, shard::GridAxesAttr::get(ctx, {}));
      split.back() = shard::GridAxesAttr::get(ctx, {tpAxis});
    }
    auto sharding =
        shard::ShardingOp::create(b, value.getLoc(), FlatSymbolRefAttr::get(ctx, kMeshName), split);
    auto shard = shard::ShardOp::create(b, value.getLoc(), value, sharding,
                                        /*annotate_for_users=*/true);
    value.replaceUsesWithIf(shard,
                            [&](OpOperand &use) { return use.getOwner() != shard && which(use); });
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    splits.clear();
    globTexts.clear();
    FailureOr<MeshAxes> layout = getMesh(module);
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
    // tp ranks with nothing split over them would each compute the whole
    // model: a layout the user did not ask for.
    if (splits.empty()) {
      module.emitError("the mesh's tp axis has ")
          << ranks << " ranks, but nothing is split over it: give a plan (--plan; plans/ has "
          << "Megatron-style ones) or a model with ONNX sharding specs";
      return signalPassFailure();
    }
    if (failed(followBlocks(func)))
      return signalPassFailure();

    // shard-partition wants every tensor argument annotated (used or not)
    // and every tensor result.
    OpBuilder b = OpBuilder::atBlockBegin(&func.getBody().front());
    for (BlockArgument arg : func.getArguments()) {
      if (!hasDims(arg))
        continue;
      std::optional<int64_t> dim;
      if (auto it = splits.find(arg); it != splits.end())
        dim = it->second.first;
      annotate(b, arg, dim, [](OpOperand &) { return true; });
    }
    Operation *ret = func.getBody().front().getTerminator();
    b.setInsertionPoint(ret);
    for (OpOperand &operand : ret->getOpOperands())
      if (hasDims(operand.get()))
        annotate(b, operand.get(), std::nullopt, [&](OpOperand &use) { return &use == &operand; });
  }
};

} // namespace
