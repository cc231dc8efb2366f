//===- Collectives.cpp - how collectives over stored buffers are grouped --===//

#include "passes/Collectives.h"

#include "dialects/Cleave/CleaveOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

#include <optional>

using namespace mlir;

namespace cleave {

FailureOr<MeshAxes> getMesh(ModuleOp module) {
  auto grid = module.lookupSymbol<shard::GridOp>(kMeshName);
  auto names = grid ? grid->getAttrOfType<ArrayAttr>(kAxesAttr) : ArrayAttr();
  if (!names || names.size() != grid.getShape().size())
    return module.emitError("has no device mesh (shard.grid @mesh with its axes in ")
           << kAxesAttr << "): run cleave-create-mesh first";
  MeshAxes mesh;
  mesh.grid = grid;
  for (auto [index, name] : llvm::enumerate(names.getAsValueRange<StringAttr>())) {
    if (name == "dp") {
      mesh.dpAxis = index;
      mesh.dpSize = grid.getShape()[index];
    }
    if (name == "tp") {
      mesh.tpAxis = index;
      mesh.tpSize = grid.getShape()[index];
    }
    if (name == "pp") {
      mesh.ppAxis = index;
      mesh.ppSize = grid.getShape()[index];
    }
  }
  return mesh;
}

MessageEnds pipelineMessageEnds(Operation *message, const MeshAxes &mesh) {
  auto ends = [&](auto op) -> MessageEnds {
    return {static_cast<int64_t>(op.getPeer()) % mesh.ppSize,
            2 * static_cast<int64_t>(op.getTag()) + (op.getGradient() ? 1 : 0)};
  };
  if (auto send = dyn_cast<PipelineSendOp>(message))
    return ends(send);
  return ends(cast<PipelineRecvOp>(message));
}

LogicalResult forEachFunctionOver(ModuleOp module, SplitAxis axis,
                                  function_ref<void(func::FuncOp, int64_t)> body) {
  if (!module.lookupSymbol<shard::GridOp>(kMeshName))
    return success();
  FailureOr<MeshAxes> layout = getMesh(module);
  if (failed(layout))
    return failure();
  const bool dp = axis == SplitAxis::DataParallel;
  if ((dp ? layout->dpSize : layout->tpSize) > 1)
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() && func.getBody().hasOneBlock())
        body(func, dp ? layout->dpAxis : layout->tpAxis);
  return success();
}

int64_t inWireType(int64_t bytes, Type element, Type wire) {
  return bytes * wire.getIntOrFloatBitWidth() / element.getIntOrFloatBitWidth();
}

Type sumType(Operation *op) {
  if (auto attr = op->getAttrOfType<TypeAttr>(kSumTypeAttr))
    return attr.getValue();
  return cast<RankedTensorType>(op->getOperand(0).getType()).getElementType();
}

bool isInPlace(shard::AllReduceOp reduce) {
  StringAttr kind = argumentKind(reduce.getInput());
  return kind && (kind.getValue() == "param" || kind.getValue() == "state");
}

bool sumsItsOperandInPlace(shard::AllReduceOp reduce) {
  // The operand's readers: the sum, and the wait for it when it is started
  // (cleave-overlap-tp-sums); each reshape on the way to the kernel that made
  // it, the next one alone.
  auto readOnlyBy = [&](Value value, Operation *reader) {
    return llvm::all_of(value.getUsers(), [&](Operation *user) {
      auto wait = dyn_cast<CollectiveWaitOp>(user);
      return user == reader || (wait && wait.getStarted() == reduce.getResult());
    });
  };
  Value value = reduce.getInput();
  Operation *reader = reduce;
  for (;;) {
    Operation *producer = value.getDefiningOp();
    if (!producer || !readOnlyBy(value, reader) || !isa<CleaveDialect>(producer->getDialect()) ||
        isa<ConstantOp, CollectiveWaitOp>(producer))
      return false;
    if (!isReshapeView(producer))
      return true;
    reader = producer;
    value = producer->getOperand(0);
  }
}

namespace {

/// The span of one stored argument of `func`, summed through `wire`; null
/// when it has no place in the weights blob.
std::optional<ReductionSpan> storedSpan(func::FuncOp func, Value value, int64_t axis, Type wire) {
  auto arg = dyn_cast<BlockArgument>(value);
  auto offset = arg ? func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), kWeightsOffsetAttr)
                    : IntegerAttr();
  if (!offset)
    return std::nullopt;
  auto type = cast<RankedTensorType>(arg.getType());
  int64_t bytes = tensorBytes(type);
  return ReductionSpan{offset.getInt(), bytes, axis, type.getElementType(), bytes, wire};
}

/// `pieces` in offset order, each run of them that follows one another (up
/// to the buffers' alignment) over one axis, of one element type and summed
/// through one, merged.
SmallVector<ReductionSpan> mergeSpans(SmallVector<ReductionSpan> pieces) {
  llvm::sort(pieces,
             [](const ReductionSpan &a, const ReductionSpan &b) { return a.offset < b.offset; });
  SmallVector<ReductionSpan> spans;
  for (const ReductionSpan &piece : pieces) {
    if (!spans.empty()) {
      ReductionSpan &last = spans.back();
      int64_t alignedEnd =
          (last.offset + last.bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
      if (piece.axis == last.axis && piece.element == last.element && piece.wire == last.wire &&
          piece.offset == alignedEnd) {
        last.bytes = piece.offset + piece.bytes - last.offset;
        last.payload += piece.payload;
        continue;
      }
    }
    spans.push_back(piece);
  }
  return spans;
}

/// Where the parts a cleave.reduce_scatter_owned_start sums lie in the
/// concat that packs them (ZeRO 2's gradients): the concat and the element
/// its first part starts at; none for operands that are not a concat's.
struct PackedPlace {
  ConcatOp concat;
  int64_t first;
};
std::optional<PackedPlace> packedPlace(Operation *start) {
  Value front = start->getOperand(0);
  for (Operation *user : front.getUsers())
    if (auto concat = dyn_cast<ConcatOp>(user)) {
      int64_t first = 0;
      for (Value input : concat.getInputs()) {
        if (input == front)
          return PackedPlace{concat, first};
        first += cast<RankedTensorType>(input.getType()).getNumElements();
      }
    }
  return std::nullopt;
}

} // namespace

FailureOr<SmallVector<ReductionSpan>> reductionSpans(func::FuncOp func,
                                                     ArrayRef<shard::AllReduceOp> run) {
  SmallVector<ReductionSpan> pieces;
  for (shard::AllReduceOp reduce : run) {
    if (reduce.getReduction() != shard::ReductionKind::Sum || reduce.getGridAxes().size() != 1)
      return reduce.emitError("only a sum over one mesh axis is lowered");
    std::optional<ReductionSpan> piece =
        storedSpan(func, reduce.getInput(), reduce.getGridAxes()[0], sumType(reduce));
    if (!piece)
      return reduce.emitError("all-reduces only parameters and state in place; an all-reduce "
                              "of an intermediate value has no lowering yet");
    if (reduce.getInput().getType() != reduce.getResult().getType())
      return reduce.emitError("changes the element type, which the in-place lowering cannot");
    for (OpOperand &use : reduce.getInput().getUses()) {
      auto assign = dyn_cast<AssignOp>(use.getOwner());
      if (use.getOwner() != reduce && !(assign && use.getOperandNumber() == 0))
        return reduce.emitError("its input is read elsewhere, so it cannot be reduced in place");
    }
    pieces.push_back(*piece);
  }
  return mergeSpans(std::move(pieces));
}

FailureOr<ReductionSpan> bucketSpan(func::FuncOp func, Operation *start) {
  const int64_t axis = start->getAttrOfType<IntegerAttr>("axis").getInt();
  if (std::optional<PackedPlace> place = packedPlace(start)) {
    auto offsets = place->concat->getAttrOfType<DenseI64ArrayAttr>(kArenaOffsetsAttr);
    if (!offsets)
      return start->emitError("its parts have no place in the arena: run cleave-memory-plan "
                              "first");
    Type element = cast<RankedTensorType>(start->getOperand(0).getType()).getElementType();
    ReductionSpan span{offsets[0] + place->first * element.getIntOrFloatBitWidth() / 8,
                       0,
                       axis,
                       element,
                       0,
                       sumType(start),
                       /*inArena=*/true};
    for (Value part : start->getOperands()) {
      int64_t bytes = tensorBytes(cast<RankedTensorType>(part.getType()));
      span.bytes += bytes;
      if (!part.getDefiningOp<ConstantOp>())
        span.payload += bytes;
    }
    return span;
  }
  SmallVector<ReductionSpan> pieces;
  for (Value accumulator : start->getOperands()) {
    std::optional<ReductionSpan> piece = storedSpan(func, accumulator, axis, sumType(start));
    if (!piece)
      return start->emitError("an accumulator has no place in the weights blob: run "
                              "cleave-memory-plan first");
    pieces.push_back(*piece);
  }
  SmallVector<ReductionSpan> spans = mergeSpans(std::move(pieces));
  if (spans.size() != 1)
    return start->emitError("its accumulators are not one span of the weights blob (")
           << spans.size() << " spans)";
  return spans.front();
}

int64_t ownedBucketFirst(func::FuncOp func, Operation *start) {
  if (std::optional<PackedPlace> place = packedPlace(start))
    return place->first;
  int64_t first = INT64_MAX;
  for (Value member : start->getOperands())
    first = std::min(first, func.getArgAttrOfType<IntegerAttr>(
                                    cast<BlockArgument>(member).getArgNumber(), kFlatOffsetAttr)
                                .getInt());
  return first;
}

SmallVector<SmallVector<shard::AllReduceOp>> allReduceRuns(func::FuncOp func) {
  SmallVector<SmallVector<shard::AllReduceOp>> runs;
  bool inRun = false;
  for (Operation &op : func.getBody().front()) {
    auto reduce = dyn_cast<shard::AllReduceOp>(op);
    if (reduce && !isInPlace(reduce))
      reduce = nullptr;
    if (reduce && !inRun)
      runs.emplace_back();
    if (reduce)
      runs.back().push_back(reduce);
    inRun = static_cast<bool>(reduce);
  }
  return runs;
}

} // namespace cleave
