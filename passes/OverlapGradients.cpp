//===- OverlapGradients.cpp - dp sums started during the backward ---------===//

#include "passes/Passes.h"

#include "passes/Collectives.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <numeric>

namespace cleave {
#define GEN_PASS_DEF_OVERLAPGRADIENTS
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// One gradient summed over dp in a bucket: an accumulator @apply sums
/// (where it lies in the weights blob, and its last write in a microbatch,
/// in the last function of the microbatch that writes it), or a part of
/// ZeRO 2's packed gradients (where it lies in the concat, and the op after
/// which it is made).
struct Member {
  /// Its in-place all-reduce in @apply; null for a member of ZeRO's flat
  /// gradients, which are reduce-scattered whole.
  shard::AllReduceOp reduce;
  /// What the bucket's start takes: the accumulator in the writing
  /// function, or the concat's operand.
  Value inWriter;
  Operation *lastWrite;
  int64_t offset = 0, bytes = 0;
  /// Its element type and the one its sum moves in.
  Type element, wire;
  /// A parameter's gradient ("grad:NAME"), not the loss's count or sum.
  bool gradient = false;
};

struct OverlapGradientsPass : public cleave::impl::OverlapGradientsBase<OverlapGradientsPass> {
  using OverlapGradientsBase::OverlapGradientsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    auto apply = module.lookupSymbol<func::FuncOp>("apply");
    if (bucketBytes == 0 || !forward || !apply || !module.lookupSymbol<shard::GridOp>(kMeshName))
      return;
    FailureOr<MeshAxes> layout = getMesh(module);
    if (failed(layout))
      return signalPassFailure();
    if (layout->dpSize == 1)
      return;
    // ZeRO 1's buckets only when asked for (measured no faster on a CPU,
    // where the thread's sums take the compute's cores; off by default, as
    // DeepSpeed's overlap_comm and Megatron's --overlap-grad-reduce are).
    if (auto scatter = flatGradientScatter(apply, layout->dpAxis)) {
      if (bucketBytes > 0)
        bucketFlatGradients(module, apply, scatter, layout->dpAxis, layout->dpSize);
      return;
    }
    if (bucketBytes > 0)
      for (StringRef name : kMicrobatchFunctions)
        if (auto func = module.lookupSymbol<func::FuncOp>(name))
          bucketPackedGradients(func, layout->dpAxis);
    FailureOr<SmallVector<Member>> members = findMembers(module, apply, layout->dpAxis);
    if (failed(members))
      return signalPassFailure();
    // Under ZeRO 2 and 3 the gradients are reduce-scattered as they are
    // made: the loss's count and sum alone are not worth a thread's round
    // trip.
    if (llvm::none_of(*members, [](const Member &m) { return m.gradient; }))
      return;

    OpBuilder b(module.getContext());
    for (StringRef name : kMicrobatchFunctions)
      startBuckets(b, writtenIn(*members, name), bucketSize(*members), layout->dpAxis);
    // @apply waits for each started sum where it is first read, so that
    // the updates of the buckets summed first (cleave-order-updates puts
    // them first) run while the later buckets still move. The sums are
    // their accumulators' buffers: nothing in the arena moves.
    for (const Member &m : *members) {
      if (!m.reduce->hasAttr(kStartedAttr) || m.reduce->use_empty())
        continue;
      Operation *reader = *m.reduce->getUsers().begin();
      for (Operation *user : m.reduce->getUsers())
        if (user->isBeforeInBlock(reader))
          reader = user;
      m.reduce->moveBefore(reader);
    }
  }

  /// The bytes of a bucket: the flag's, or by default a quarter of the
  /// members' (from 4 KiB to 25 MiB).
  int64_t bucketSize(ArrayRef<Member> members) const {
    if (bucketBytes > 0)
      return bucketBytes.getValue();
    int64_t total = 0;
    for (const Member &m : members)
      total += m.bytes;
    return std::clamp<int64_t>(total / 4, int64_t{4} << 10, int64_t{25} << 20);
  }

  /// Those of `members` whose last write is in microbatch function `name`.
  static SmallVector<Member> writtenIn(ArrayRef<Member> members, StringRef name) {
    SmallVector<Member> written;
    for (const Member &m : members)
      if (m.lastWrite->getParentOfType<func::FuncOp>().getSymName() == name)
        written.push_back(m);
    return written;
  }

  /// ZeRO 1's reduce-scatter over dp of its flat f32 gradient buffer in
  /// @apply (cleave-build-train-step), or null.
  static shard::ReduceScatterOp flatGradientScatter(func::FuncOp apply, int64_t dpAxis) {
    for (auto scatter : apply.getBody().front().getOps<shard::ReduceScatterOp>()) {
      auto arg = dyn_cast<BlockArgument>(scatter.getInput());
      auto type = cast<RankedTensorType>(scatter.getInput().getType());
      if (arg && apply.getArgAttr(arg.getArgNumber(), kFlatSizeAttr) &&
          scatter.getGridAxes().size() == 1 && scatter.getGridAxes()[0] == dpAxis &&
          type.getElementType().isF32() && sumType(scatter) == type.getElementType())
        return scatter;
    }
    return nullptr;
  }

  /// ZeRO 1's buckets: each a run of the flat buffer's accumulators, whose
  /// parts in the ranks' slices are summed into them by a
  /// cleave.reduce_scatter_owned_start after the bucket's last write; @apply's
  /// reduce-scatter of the buffer then waits for them and copies this rank's
  /// slice. Left as it is where an accumulator is written in no microbatch
  /// function (its part of a slice would not be summed).
  void bucketFlatGradients(ModuleOp module, func::FuncOp apply, shard::ReduceScatterOp scatter,
                           int64_t dpAxis, int64_t dpSize) {
    auto arg = cast<BlockArgument>(scatter.getInput());
    StringAttr group = apply.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr);
    const int64_t slice =
        apply.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), kFlatSizeAttr).getInt() / dpSize;
    llvm::StringMap<Operation *> writes = lastMicrobatchWrites(module);
    SmallVector<Member> members;
    for (StringRef name : kMicrobatchFunctions) {
      auto func = module.lookupSymbol<func::FuncOp>(name);
      for (BlockArgument member : func ? func.getArguments() : ArrayRef<BlockArgument>()) {
        unsigned index = member.getArgNumber();
        if (func.getArgAttr(index, kFlatMemberAttr) != group)
          continue;
        auto accumulator = func.getArgAttrOfType<StringAttr>(index, kNameAttr);
        auto offset = func.getArgAttrOfType<IntegerAttr>(index, kWeightsOffsetAttr);
        auto write = writes.find(accumulator ? accumulator.getValue() : "");
        if (!offset || write == writes.end())
          return;
        auto assign = cast<AssignOp>(write->second);
        if (assign.getTarget() != member)
          continue;
        auto type = cast<RankedTensorType>(member.getType());
        members.push_back({nullptr, member, assign, offset.getInt(), tensorBytes(type),
                           type.getElementType(), type.getElementType(), true});
      }
    }
    if (members.empty())
      return;
    llvm::sort(members, [](const Member &a, const Member &b) { return a.offset < b.offset; });
    OpBuilder b(module.getContext());
    for (StringRef name : kMicrobatchFunctions)
      startOwnedBuckets(b, writtenIn(members, name), bucketSize(members), dpAxis, slice);
    scatter->setAttr(kSummedInBucketsAttr, b.getUnitAttr());
  }

  /// ZeRO 2's packed gradients (a microbatch's, reduce-scattered over dp
  /// into the slice accumulator) in buckets: each a run of the concat's
  /// parts, made in place in its buffer, whose parts in the ranks' slices a
  /// cleave.reduce_scatter_owned_start sums into them once they are made;
  /// the reduce-scatter then waits for them and copies this rank's slice.
  /// Each part's reshapes move up to where it is made, a filled part (the
  /// padding) to where the part before it is, so that it joins that
  /// part's bucket. A concat of one gradient and its padding (ZeRO 3's,
  /// and mixed precision ZeRO 2's, per parameter) is left as it is.
  void bucketPackedGradients(func::FuncOp func, int64_t dpAxis) {
    for (auto scatter : llvm::to_vector(func.getBody().front().getOps<shard::ReduceScatterOp>())) {
      auto concat = scatter.getInput().getDefiningOp<ConcatOp>();
      auto type = cast<RankedTensorType>(scatter.getInput().getType());
      if (!concat || !concat->hasAttr(kPartsInPlaceAttr) || scatter->hasAttr(kStartedAttr) ||
          type.getRank() != 1 || scatter.getGridAxes().size() != 1 ||
          scatter.getGridAxes()[0] != dpAxis || sumType(scatter) != type.getElementType())
        continue;
      // One gradient padded (ZeRO 3's, or mixed precision's per parameter)
      // is one bucket made at once: nothing to start early.
      if (llvm::count_if(concat.getInputs(),
                         [](Value part) { return !part.getDefiningOp<ConstantOp>(); }) < 2)
        continue;
      SmallVector<Member> members;
      int64_t offset = 0;
      for (Value part : concat.getInputs()) {
        SmallVector<Operation *> views;
        for (Operation *view = part.getDefiningOp(); view && isReshapeView(view);
             view = view->getOperand(0).getDefiningOp())
          views.push_back(view);
        for (Operation *view : llvm::reverse(views))
          if (Operation *input = view->getOperand(0).getDefiningOp())
            view->moveAfter(input);
        Operation *made = part.getDefiningOp();
        if (isa<ConstantOp>(made) && !members.empty())
          made->moveAfter(members.back().lastWrite);
        int64_t bytes = tensorBytes(cast<RankedTensorType>(part.getType()));
        members.push_back({nullptr, part, made, offset, bytes, type.getElementType(),
                           type.getElementType(), true});
        offset += bytes;
      }
      OpBuilder b(func.getContext());
      startOwnedBuckets(b, members, bucketSize(members), dpAxis,
                        cast<RankedTensorType>(scatter.getResult().getType()).getNumElements());
      scatter->setAttr(kSummedInBucketsAttr, b.getUnitAttr());
    }
  }

  /// The last write of `bucket`'s members (all in one function).
  static Operation *lastWriteOf(ArrayRef<Member> bucket) {
    Operation *last = bucket.front().lastWrite;
    for (const Member &m : bucket)
      if (last->isBeforeInBlock(m.lastWrite))
        last = m.lastWrite;
    return last;
  }

  /// Calls `start(bucket, gradients, loc)` for each bucket of `members`
  /// (made in one function, in offset order), `gradients` its members'
  /// values, with `b` set just after the last write of its members.
  template <typename Start>
  static void forEachBucket(OpBuilder &b, ArrayRef<Member> members, int64_t perBucket,
                            Start start) {
    for (ArrayRef<Member> bucket : cutBuckets(members, perBucket)) {
      Operation *last = lastWriteOf(bucket);
      b.setInsertionPointAfter(last);
      start(bucket, llvm::map_to_vector(bucket, [](const Member &m) { return m.inWriter; }),
            last->getLoc());
    }
  }

  /// A cleave.reduce_scatter_owned_start of each bucket of `members` into
  /// the slices of `slice` elements.
  static void startOwnedBuckets(OpBuilder &b, ArrayRef<Member> members, int64_t perBucket,
                                int64_t dpAxis, int64_t slice) {
    forEachBucket(b, members, perBucket,
                  [&](ArrayRef<Member>, ArrayRef<Value> gradients, Location loc) {
                    ReduceScatterOwnedStartOp::create(b, loc, gradients, dpAxis, slice);
                  });
  }

  /// A cleave.all_reduce_start of each bucket of `members`, whose sums it
  /// marks started.
  static void startBuckets(OpBuilder &b, ArrayRef<Member> members, int64_t perBucket,
                           int64_t dpAxis) {
    forEachBucket(b, members, perBucket,
                  [&](ArrayRef<Member> bucket, ArrayRef<Value> accumulators, Location loc) {
                    for (const Member &m : bucket)
                      m.reduce->setAttr(kStartedAttr, b.getUnitAttr());
                    auto start = AllReduceStartOp::create(b, loc, accumulators, dpAxis);
                    if (bucket.front().wire != bucket.front().element)
                      start->setAttr(kSumTypeAttr, TypeAttr::get(bucket.front().wire));
                  });
  }

  /// @apply's in-place all-reduces of accumulators over dp, in the order of
  /// the weights blob, each with its last write in a microbatch. A pipeline
  /// stage's tied weight's gradient is left out: it is summed with the other
  /// stages' copies before its sum over dp (cleave-pipeline-tied-gradients,
  /// and the driver for a rank's own stages).
  FailureOr<SmallVector<Member>> findMembers(ModuleOp module, func::FuncOp apply, int64_t dpAxis) {
    llvm::StringMap<Operation *> writes = lastMicrobatchWrites(module);
    // The parameters tied across stages.
    llvm::StringSet<> tied;
    for (StringRef name : kMicrobatchFunctions)
      if (auto func = module.lookupSymbol<func::FuncOp>(name))
        for (BlockArgument arg : func.getArguments())
          if (func.getArgAttr(arg.getArgNumber(), kOtherStagesAttr))
            tied.insert(
                func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr).getValue());

    SmallVector<Member> members;
    for (auto reduce : apply.getBody().front().getOps<shard::AllReduceOp>()) {
      auto arg = dyn_cast<BlockArgument>(reduce.getInput());
      if (!arg || !apply.getArgAttr(arg.getArgNumber(), kAccumulatorAttr) || !isInPlace(reduce) ||
          reduce.getGridAxes().size() != 1 || reduce.getGridAxes()[0] != dpAxis)
        continue;
      auto name = apply.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr);
      auto offset = apply.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), kWeightsOffsetAttr);
      if (!name || !offset) {
        reduce.emitError("reduces an accumulator without a name or a place in the weights "
                         "blob: run cleave-memory-plan first");
        return failure();
      }
      if (StringRef accumulator = name.getValue();
          accumulator.starts_with("grad:") && tied.contains(accumulator.drop_front(5)))
        continue;
      auto write = writes.find(name.getValue());
      if (write == writes.end()) {
        reduce.emitError("reduces accumulator '")
            << name.getValue() << "', which no microbatch function writes";
        return failure();
      }
      auto assign = cast<AssignOp>(write->second);
      auto type = cast<RankedTensorType>(arg.getType());
      members.push_back({reduce, cast<BlockArgument>(assign.getTarget()), assign, offset.getInt(),
                         tensorBytes(type), type.getElementType(), sumType(reduce),
                         name.getValue().starts_with("grad:")});
    }
    llvm::sort(members, [](const Member &a, const Member &b) { return a.offset < b.offset; });
    return members;
  }

  /// The buckets, in the order the backward completes them: the members
  /// taken in the order of their last writes, each joining the open bucket
  /// when it lies next to it in its buffer (just before or just after, up to
  /// the buffers' alignment: a backward mostly finishes the last layers
  /// first), is of its element and sum types and the bucket holds fewer
  /// than `perBucket` bytes; else it opens the next. Each bucket is a run of
  /// `members` (sorted by offset).
  static SmallVector<ArrayRef<Member>> cutBuckets(ArrayRef<Member> members, int64_t perBucket) {
    auto follows = [](const Member &before, const Member &m) {
      int64_t end = before.offset + before.bytes;
      return m.offset == end ||
             m.offset == (end + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
    };
    SmallVector<size_t> completion(members.size());
    std::iota(completion.begin(), completion.end(), 0);
    llvm::sort(completion, [&](size_t a, size_t b) {
      return members[a].lastWrite->isBeforeInBlock(members[b].lastWrite);
    });
    SmallVector<ArrayRef<Member>> buckets;
    size_t low = 0, high = 0; // the open bucket: members [low, high)
    int64_t bytes = 0;
    for (size_t i : completion) {
      const Member &m = members[i];
      bool joins = high > low && bytes < perBucket && m.element == members[low].element &&
                   m.wire == members[low].wire &&
                   ((i == high && follows(members[high - 1], m)) ||
                    (i + 1 == low && follows(m, members[low])));
      if (!joins) {
        if (high > low)
          buckets.push_back(members.slice(low, high - low));
        low = i;
        high = i + 1;
        bytes = 0;
      }
      low = std::min(low, i);
      high = std::max(high, i + 1);
      bytes += m.bytes;
    }
    if (high > low)
      buckets.push_back(members.slice(low, high - low));
    return buckets;
  }
};

} // namespace

llvm::StringMap<Operation *> cleave::lastMicrobatchWrites(ModuleOp module) {
  llvm::StringMap<Operation *> writes;
  for (StringRef name : kMicrobatchFunctions) {
    auto func = module.lookupSymbol<func::FuncOp>(name);
    if (!func)
      continue;
    for (auto assign : func.getBody().front().getOps<AssignOp>())
      if (auto arg = dyn_cast<BlockArgument>(assign.getTarget()))
        if (auto argName = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr))
          writes[argName.getValue()] = assign;
  }
  return writes;
}

bool cleave::writtenBefore(Operation *a, Operation *b) {
  auto place = [](Operation *write) {
    return llvm::find(kMicrobatchFunctions, write->getParentOfType<func::FuncOp>().getSymName()) -
           std::begin(kMicrobatchFunctions);
  };
  return place(a) != place(b) ? place(a) < place(b) : a->isBeforeInBlock(b);
}
