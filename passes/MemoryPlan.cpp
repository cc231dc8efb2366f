//===- MemoryPlan.cpp - one arena per rank, placed by liveness -----------===//

#include "passes/Passes.h"

#include "passes/Collectives.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/DenseMap.h"

namespace cleave {
#define GEN_PASS_DEF_MEMORYPLAN
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

bool cleave::isReshapeView(Operation *op) {
  return isa<ReshapeOp, FlattenOp, SqueezeOp, UnsqueezeOp, IdentityOp, AllReduceGradOp, DetachOp>(
      op);
}

namespace {

int64_t alignUp(int64_t bytes) {
  return (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
}

int64_t bytesOf(Value value) { return tensorBytes(cast<RankedTensorType>(value.getType())); }

/// Ops whose result is another value's buffer: the reshapes and element
/// ranges (`cleave.elements`, at an offset in it), and the rank's part
/// (`shard.all_slice`, at an offset only the run knows); an all-reduce
/// of a stored argument, or of a value made for it alone, works in place
/// (cleave-lower-to-emitc); a wait for a started gather or reduce-scatter is
/// its buffer once the collective is done.
bool isView(Operation *op) {
  if (auto reduce = dyn_cast<shard::AllReduceOp>(op))
    return isInPlace(reduce) || sumsItsOperandInPlace(reduce);
  return isReshapeView(op) || isa<CollectiveWaitOp, ElementsOp, shard::AllSliceOp>(op);
}

/// A splat of more than one element is filled at run time in the arena rather
/// than stored in the weights blob.
bool isStoredConstant(ConstantOp op) {
  auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
  return !(dense && dense.isSplat() && dense.getNumElements() > 1);
}

struct Allocation {
  int64_t offset;
  int64_t size;
  int64_t lastUse;
};

/// The lowest offset where `size` bytes fit between the live allocations.
int64_t firstFit(std::vector<Allocation> &live, int64_t size) {
  llvm::sort(live, [](const Allocation &a, const Allocation &b) { return a.offset < b.offset; });
  int64_t candidate = 0;
  for (const Allocation &a : live) {
    if (candidate + size <= a.offset)
      break;
    candidate = std::max(candidate, a.offset + a.size);
  }
  return candidate;
}

/// Bytes [begin, end) of the weights blob.
struct StoredBytes {
  int64_t begin;
  int64_t end;
  bool overlaps(const StoredBytes &other) const { return begin < other.end && other.begin < end; }
  bool operator==(const StoredBytes &other) const {
    return begin == other.begin && end == other.end;
  }
};

/// The bytes of the weights blob that each stored argument of `func` is,
/// and each view of one (a `cleave.elements` view those elements' bytes).
llvm::DenseMap<Value, StoredBytes> storedBytes(func::FuncOp func) {
  llvm::DenseMap<Value, StoredBytes> bytes;
  for (BlockArgument arg : func.getArguments())
    if (auto offset = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), kWeightsOffsetAttr))
      bytes[arg] = {offset.getInt(), offset.getInt() + bytesOf(arg)};
  for (Operation &op : func.getBody().front()) {
    auto of = isView(&op) ? bytes.find(op.getOperand(0)) : bytes.end();
    if (of == bytes.end())
      continue;
    StoredBytes view = of->second;
    if (auto chunk = dyn_cast<ElementsOp>(op)) {
      int64_t size = bytesOf(chunk.getOutput());
      auto type = cast<RankedTensorType>(chunk.getOutput().getType());
      view.begin += static_cast<int64_t>(chunk.getOffset()) * (size / type.getNumElements());
      view.end = view.begin + size;
    }
    bytes[op.getResult(0)] = view;
  }
  return bytes;
}

/// Whether `op` chooses one of two whole tensors by a single condition (loss
/// scaling's guard of its one-element state, and of any update whose where
/// is not in a fused chain): its kernels read each element before they write
/// it, the CPU's by copying the chosen operand whole.
bool choosesWhole(Operation *op) {
  auto where = dyn_cast<WhereOp>(op);
  auto elements = [](Value v) { return cast<RankedTensorType>(v.getType()).getNumElements(); };
  return where && elements(where.getCondition()) == 1 &&
         elements(where.getX()) == elements(where.getResult()) &&
         elements(where.getY()) == elements(where.getResult());
}

/// The values written straight into the parameter or state they are
/// assigned to (its weights offset), instead of into the arena and then
/// copied: each produced by a fused elementwise chain, an elementwise op, a
/// where choosing a whole tensor by one condition, a fill or a gemm whose c
/// is the target, where no op after its producer
/// reads the target's old bytes (the producer itself may: it reads each
/// element before writing it), or by an all-gather that does not read it
/// (ZeRO's updated parameters gathered into the flat buffer). Targets are
/// compared by their bytes in the weights blob: a flat buffer overlaps its
/// members, other arguments, and a `cleave.elements` view of an argument
/// is those elements alone (a chunk of a parameter updated while later
/// chunks are still to be read). A member is written in place like any
/// argument (ZeRO 1's gradient accumulators, each a member of its flat
/// gradient buffer, added to by their products).
llvm::DenseMap<Value, int64_t> inPlaceResults(func::FuncOp func,
                                              llvm::DenseMap<Operation *, int64_t> &position) {
  Block &body = func.getBody().front();
  llvm::DenseMap<Value, StoredBytes> stored = storedBytes(func);
  // Each read of stored bytes, directly or through a view, and when; the
  // assignment to a target writes it, and making a `cleave.elements` view
  // reads nothing (its readers do).
  SmallVector<std::pair<StoredBytes, int64_t>> reads;
  for (Operation &op : body) {
    if (isa<ElementsOp>(op))
      continue;
    for (OpOperand &use : op.getOpOperands())
      if (auto read = stored.find(use.get());
          read != stored.end() && !(isa<AssignOp>(op) && use.getOperandNumber() == 0))
        reads.push_back({read->second, position[&op]});
  }
  llvm::DenseMap<Value, int64_t> inPlace;
  SmallVector<StoredBytes> written;
  for (auto assign : body.getOps<AssignOp>()) {
    auto target = stored.find(assign.getTarget());
    Value value = assign.getValue();
    Operation *producer = value.getDefiningOp();
    if (target == stored.end() || !producer || inPlace.contains(value))
      continue;
    const StoredBytes bytes = target->second;
    auto readsTarget = [&](Value operand) {
      auto read = stored.find(operand);
      return read != stored.end() && read->second.overlaps(bytes);
    };
    auto constant = dyn_cast<ConstantOp>(producer);
    // A product adding the target's old value as its c (an accumulator,
    // cleave-accumulate-into-products): its kernels read c before they
    // write, as long as neither factor is the target.
    auto gemm = dyn_cast<GemmOp>(producer);
    auto c = gemm && gemm.getC() ? stored.find(gemm.getC()) : stored.end();
    bool accumulates = c != stored.end() && c->second == bytes && !readsTarget(gemm.getA()) &&
                       !readsTarget(gemm.getB());
    // An all-gather reads another rank's parts as it writes: never the
    // target; one started early runs while later ops read the target.
    auto gather = dyn_cast<shard::AllGatherOp>(producer);
    bool gathers = gather && !gather->hasAttr(kStartedAttr) && !readsTarget(gather.getInput());
    if (!isa<FusedElementwiseOp>(producer) && !isFusableElementwise(producer) &&
        !choosesWhole(producer) && !(constant && !isStoredConstant(constant)) && !accumulates &&
        !gathers)
      continue;
    // The producer reads no other bytes over the target's (its elements
    // would not be the ones it writes), and none is written in place
    // already.
    if (llvm::any_of(written, [&](const StoredBytes &w) { return w.overlaps(bytes); }) ||
        llvm::any_of(producer->getOperands(), [&](Value operand) {
          auto read = stored.find(operand);
          return readsTarget(operand) && !(read->second == bytes);
        }))
      continue;
    if (llvm::any_of(reads, [&](const std::pair<StoredBytes, int64_t> &read) {
          return read.first.overlaps(bytes) && read.second > position[producer];
        }))
      continue;
    if (llvm::any_of(value.getUsers(), [](Operation *user) { return isa<func::ReturnOp>(user); }))
      continue;
    inPlace[value] = bytes.begin;
    written.push_back(bytes);
  }
  return inPlace;
}

/// The values written straight into the output slot of the stash `func`
/// returns them as (the buffer the driver keeps for their microbatch),
/// instead of into the arena and then copied: each made by a kernel of its
/// own (not a view, a receive, a collective or a stored constant), the
/// first stash result it is (inPlaceResults takes no returned value).
llvm::DenseMap<Value, int64_t> stashResults(func::FuncOp func) {
  llvm::DenseMap<Value, int64_t> slots;
  int64_t firstOutput = func->getAttrOfType<IntegerAttr>(kFirstOutputAttr).getInt();
  Operation *ret = func.getBody().front().getTerminator();
  for (auto [i, value] : llvm::enumerate(ret->getOperands())) {
    auto kind = func.getResultAttrOfType<StringAttr>(i, kKindAttr);
    Operation *producer = value.getDefiningOp();
    if (!kind || kind.getValue() != "stash" || !producer || isView(producer) ||
        !isa<CleaveDialect>(producer->getDialect()) || isa<PipelineRecvOp>(producer) ||
        slots.contains(value))
      continue;
    if (auto constant = dyn_cast<ConstantOp>(producer); constant && isStoredConstant(constant))
      continue;
    slots[value] = firstOutput + static_cast<int64_t>(i);
  }
  return slots;
}

/// Where a concat along dim 0 finds a part already: the concat, and the
/// part's byte offset in its result.
struct PartOf {
  ConcatOp concat;
  int64_t offset;
};

/// The values made straight into their part of a concat's result, instead
/// of into buffers of their own that the concat then copies (ZeRO 2's
/// gradients packed into one flat buffer a microbatch): each operand of a
/// concat along dim 0 that the concat alone reads (through whole views),
/// made by a single-result kernel of this function (not a view, a
/// collective, a receive, a concat, a stored constant, or a value written
/// in place of an argument or a stash), at an offset the buffers' alignment divides
/// (a splat filled at run time anywhere). A concat takes them all or none,
/// and is marked cleave.parts_in_place when it does.
llvm::DenseMap<Value, PartOf> partsInPlace(func::FuncOp func,
                                           const llvm::DenseMap<Value, int64_t> &placed,
                                           llvm::function_ref<Value(Value)> rootOf) {
  Block &body = func.getBody().front();
  // The ops other than views that read each buffer.
  llvm::DenseMap<Value, SmallVector<Operation *>> readers;
  for (Operation &op : body)
    if (!isView(&op))
      for (Value operand : op.getOperands())
        readers[rootOf(operand)].push_back(&op);
  llvm::DenseMap<Value, PartOf> parts;
  for (auto concat : body.getOps<ConcatOp>()) {
    if (concat.getAxis() != 0)
      continue;
    llvm::DenseMap<Value, PartOf> found;
    int64_t offset = 0;
    bool all = true;
    for (Value operand : concat.getInputs()) {
      Value part = rootOf(operand);
      Operation *producer = part.getDefiningOp();
      auto constant = dyn_cast_or_null<ConstantOp>(producer);
      bool filled = constant && !isStoredConstant(constant);
      all = producer && producer->getNumResults() == 1 && !isView(producer) &&
            isa<CleaveDialect>(producer->getDialect()) &&
            !isa<PipelineRecvOp, ConcatOp>(producer) && !(constant && !filled) &&
            !placed.contains(part) && !parts.contains(part) && !found.contains(part) &&
            bytesOf(part) == bytesOf(operand) && (filled || offset % kBufferAlignment == 0) &&
            llvm::all_of(readers.lookup(part),
                         [&](Operation *reader) { return reader == concat.getOperation(); });
      if (!all)
        break;
      found[part] = {concat, offset};
      offset += bytesOf(operand);
    }
    if (all && !found.empty()) {
      concat->setAttr(kPartsInPlaceAttr, UnitAttr::get(func.getContext()));
      parts.insert(found.begin(), found.end());
    }
  }
  return parts;
}

/// Places `func`'s intermediates in the arena (returning its peak) and its
/// stored constants in the weights blob after `weights`.
int64_t planFunction(func::FuncOp func, int64_t &weights) {
  Block &body = func.getBody().front();
  Builder b(func.getContext());

  // The buffer behind each value, and the last op that reads that buffer
  // through any of its views.
  llvm::DenseMap<Operation *, int64_t> position;
  for (auto [index, op] : llvm::enumerate(body))
    position[&op] = index;
  llvm::DenseMap<Value, Value> root;
  auto rootOf = [&](Value v) {
    auto it = root.find(v);
    return it == root.end() ? v : it->second;
  };
  llvm::DenseMap<Value, int64_t> lastUse;
  for (Operation &op : body) {
    if (isView(&op))
      root[op.getResult(0)] = rootOf(op.getOperand(0));
    for (Value operand : op.getOperands()) {
      int64_t &last = lastUse[rootOf(operand)];
      last = std::max(last, position[&op]);
    }
  }

  llvm::DenseMap<Value, int64_t> inPlace = inPlaceResults(func, position);
  llvm::DenseMap<Value, int64_t> stashed = stashResults(func);
  llvm::DenseMap<Value, int64_t> placed = inPlace;
  placed.insert(stashed.begin(), stashed.end());
  llvm::DenseMap<Value, PartOf> parts = partsInPlace(func, placed, rootOf);
  std::vector<Allocation> live;
  int64_t peak = 0;
  // A concat whose parts are made in place is placed when its first part is
  // made, for as long as its result is read.
  llvm::DenseMap<Operation *, int64_t> concatAt;
  auto allocate = [&](Value value) {
    int64_t size = alignUp(bytesOf(value));
    int64_t offset = firstFit(live, size);
    live.push_back({offset, size, lastUse.lookup(value)});
    peak = std::max(peak, offset + size);
    return offset;
  };
  for (Operation &op : body) {
    if (isView(&op) || op.getNumResults() == 0)
      continue;
    if (auto constant = dyn_cast<ConstantOp>(op); constant && isStoredConstant(constant)) {
      op.setAttr(kWeightsOffsetAttr, b.getI64IntegerAttr(weights));
      weights = alignUp(weights + bytesOf(constant));
      continue;
    }
    int64_t at = position[&op];
    llvm::erase_if(live, [at](const Allocation &a) { return a.lastUse < at; });
    SmallVector<int64_t> offsets, inPlaceOffsets, stashSlots;
    for (Value result : op.getResults()) {
      auto target = inPlace.find(result);
      auto slot = stashed.find(result);
      inPlaceOffsets.push_back(target == inPlace.end() ? -1 : target->second);
      stashSlots.push_back(slot == stashed.end() ? -1 : slot->second);
      if (target != inPlace.end() || slot != stashed.end()) {
        offsets.push_back(-1);
        continue;
      }
      auto part = parts.find(result);
      Operation *concat = part != parts.end()             ? part->second.concat.getOperation()
                          : op.hasAttr(kPartsInPlaceAttr) ? &op
                                                          : nullptr;
      if (!concat) {
        offsets.push_back(allocate(result));
        continue;
      }
      auto [group, added] = concatAt.try_emplace(concat, 0);
      if (added)
        group->second = allocate(concat->getResult(0));
      offsets.push_back(group->second + (part != parts.end() ? part->second.offset : 0));
    }
    op.setAttr(kArenaOffsetsAttr, b.getDenseI64ArrayAttr(offsets));
    if (llvm::any_of(inPlaceOffsets, [](int64_t offset) { return offset >= 0; }))
      op.setAttr(kInPlaceOffsetsAttr, b.getDenseI64ArrayAttr(inPlaceOffsets));
    if (llvm::any_of(stashSlots, [](int64_t slot) { return slot >= 0; }))
      op.setAttr(kStashSlotsAttr, b.getDenseI64ArrayAttr(stashSlots));
  }
  func->setAttr(kArenaBytesAttr, b.getI64IntegerAttr(peak));
  return peak;
}

struct MemoryPlanPass : public cleave::impl::MemoryPlanBase<MemoryPlanPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    Builder b(module.getContext());
    SmallVector<func::FuncOp> funcs;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      if (!func.getBody().hasOneBlock()) {
        func.emitError("memory planning needs a function with one block");
        return signalPassFailure();
      }
      funcs.push_back(func);
    }

    // Parameters and state first, one slot per name whichever function
    // reads it (an unnamed argument is named argN); inputs numbered by name
    // the same way; outputs one after another in function order.
    // A flat buffer (`cleave.flat_size` elements) holds its members at their
    // `cleave.flat_offset`: it gets its slot when it or a member comes first.
    int64_t weights = 0;
    llvm::StringMap<int64_t> weightsOffsets, inputIndices, flatBytes;
    for (func::FuncOp func : funcs)
      for (auto [i, arg] : llvm::enumerate(func.getArguments()))
        if (auto size = func.getArgAttrOfType<IntegerAttr>(i, kFlatSizeAttr))
          flatBytes[func.getArgAttrOfType<StringAttr>(i, kNameAttr).getValue()] =
              size.getInt() *
              ((cast<RankedTensorType>(arg.getType()).getElementTypeBitWidth() + 7) / 8);
    auto flatSlot = [&](StringRef group) {
      auto [slot, added] = weightsOffsets.try_emplace(group, weights);
      if (added)
        weights = alignUp(weights + flatBytes.lookup(group));
      return slot->second;
    };
    // A training step's gradient accumulators come first, in the order a
    // microbatch finishes them (their writes in @forward, then in a pipeline
    // stage's @backward and @backward_weight): cleave-overlap-gradients sums
    // them over dp in buckets taken in that order, each one span.
    for (StringRef entry : kMicrobatchFunctions) {
      auto writer = module.lookupSymbol<func::FuncOp>(entry);
      if (!writer || funcs.empty())
        continue;
      for (auto assign : writer.getBody().front().getOps<AssignOp>()) {
        auto arg = dyn_cast<BlockArgument>(assign.getTarget());
        unsigned i = arg ? arg.getArgNumber() : 0;
        auto name = arg ? writer.getArgAttrOfType<StringAttr>(i, kNameAttr) : StringAttr();
        if (!name || !writer.getArgAttr(i, kAccumulatorAttr) ||
            writer.getArgAttr(i, kFlatMemberAttr) || flatBytes.contains(name.getValue()))
          continue;
        if (weightsOffsets.try_emplace(name.getValue(), weights).second)
          weights = alignUp(weights + bytesOf(arg));
      }
    }
    int64_t outputs = 0;
    for (func::FuncOp func : funcs) {
      for (auto [i, arg] : llvm::enumerate(func.getArguments())) {
        auto kind = func.getArgAttrOfType<StringAttr>(i, kKindAttr);
        auto name = func.getArgAttrOfType<StringAttr>(i, kNameAttr);
        std::string key = name ? name.getValue().str() : "arg" + std::to_string(i);
        bool stored = kind && (kind.getValue() == "param" || kind.getValue() == "state");
        if (auto group = func.getArgAttrOfType<StringAttr>(i, kFlatMemberAttr)) {
          auto element = cast<RankedTensorType>(arg.getType()).getElementType();
          int64_t offset = func.getArgAttrOfType<IntegerAttr>(i, kFlatOffsetAttr).getInt();
          func.setArgAttr(i, kWeightsOffsetAttr,
                          b.getI64IntegerAttr(flatSlot(group.getValue()) +
                                              offset * element.getIntOrFloatBitWidth() / 8));
          continue;
        }
        if (flatBytes.contains(key)) {
          func.setArgAttr(i, kWeightsOffsetAttr, b.getI64IntegerAttr(flatSlot(key)));
          continue;
        }
        llvm::StringMap<int64_t> &slots = stored ? weightsOffsets : inputIndices;
        auto [slot, added] =
            slots.try_emplace(key, stored ? weights : static_cast<int64_t>(slots.size()));
        if (stored && added)
          weights = alignUp(weights + bytesOf(arg));
        func.setArgAttr(i, stored ? kWeightsOffsetAttr : kInputIndexAttr,
                        b.getI64IntegerAttr(slot->second));
      }
      func->setAttr(kFirstOutputAttr, b.getI64IntegerAttr(outputs));
      outputs += func.getNumResults();
    }
    int64_t arena = 0;
    for (func::FuncOp func : funcs)
      arena = std::max(arena, planFunction(func, weights));
    module->setAttr(kArenaBytesAttr, b.getI64IntegerAttr(arena));
    module->setAttr(kWeightsBytesAttr, b.getI64IntegerAttr(weights));
  }
};

} // namespace
