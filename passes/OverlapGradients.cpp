//===- OverlapGradients.cpp - dp sums started during the backward ---------===//

#include "passes/Passes.h"

#include "passes/Collectives.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <numeric>

namespace cleave {
#define GEN_PASS_DEF_OVERLAPGRADIENTS
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// One accumulator @apply all-reduces over dp: where it lies in the weights
/// blob, and its last write in @forward.
struct Member {
  shard::AllReduceOp reduce;
  BlockArgument inForward;
  AssignOp lastWrite;
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
    if (bucketBytes == 0 || !forward || !apply || forward->hasAttr(kStageAttr) ||
        !module.lookupSymbol<shard::GridOp>(kMeshName))
      return;
    FailureOr<MeshAxes> layout = getMesh(module);
    if (failed(layout))
      return signalPassFailure();
    if (layout->dpSize == 1)
      return;
    FailureOr<SmallVector<Member>> members = findMembers(forward, apply, layout->dpAxis);
    if (failed(members))
      return signalPassFailure();
    // Under ZeRO the gradients are reduce-scattered instead: the loss's
    // count and sum alone are not worth a thread's round trip.
    if (llvm::none_of(*members, [](const Member &m) { return m.gradient; }))
      return;

    int64_t total = 0;
    for (const Member &m : *members)
      total += m.bytes;
    const int64_t perBucket =
        bucketBytes > 0 ? bucketBytes.getValue()
                        : std::clamp<int64_t>(total / 4, int64_t{4} << 10, int64_t{25} << 20);
    OpBuilder b(module.getContext());
    for (ArrayRef<Member> bucket : cutBuckets(*members, perBucket)) {
      AssignOp last = bucket.front().lastWrite;
      SmallVector<Value> accumulators;
      for (const Member &m : bucket) {
        if (last->isBeforeInBlock(m.lastWrite))
          last = m.lastWrite;
        accumulators.push_back(m.inForward);
        m.reduce->setAttr(kStartedAttr, b.getUnitAttr());
      }
      b.setInsertionPointAfter(last);
      auto start = AllReduceStartOp::create(b, last.getLoc(), accumulators, layout->dpAxis);
      if (bucket.front().wire != bucket.front().element)
        start->setAttr(kSumTypeAttr, TypeAttr::get(bucket.front().wire));
    }
  }

  /// @apply's in-place all-reduces of accumulators over dp, in the order of
  /// the weights blob, each with its last write in @forward.
  FailureOr<SmallVector<Member>> findMembers(func::FuncOp forward, func::FuncOp apply,
                                             int64_t dpAxis) {
    llvm::StringMap<BlockArgument> byName;
    for (BlockArgument arg : forward.getArguments())
      if (auto name = forward.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr))
        byName[name.getValue()] = arg;
    llvm::DenseMap<Value, AssignOp> lastWrite;
    for (auto assign : forward.getBody().front().getOps<AssignOp>())
      lastWrite[assign.getTarget()] = assign;

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
      BlockArgument inForward = byName.lookup(name.getValue());
      AssignOp write = inForward ? lastWrite.lookup(inForward) : AssignOp();
      if (!write) {
        reduce.emitError("reduces accumulator '")
            << name.getValue() << "', which @forward never writes";
        return failure();
      }
      auto type = cast<RankedTensorType>(arg.getType());
      members.push_back({reduce, inForward, write, offset.getInt(), tensorBytes(type),
                         type.getElementType(), sumType(reduce),
                         name.getValue().starts_with("grad:")});
    }
    llvm::sort(members, [](const Member &a, const Member &b) { return a.offset < b.offset; });
    return members;
  }

  /// The buckets, in the order the backward completes them: the members
  /// taken in the order of their last writes, each joining the open bucket
  /// when it lies next to it in the weights blob (just before or just after,
  /// up to the buffers' alignment: a backward mostly finishes the last
  /// layers first), is of its element and sum types and the bucket holds fewer than
  /// `perBucket` bytes; else it opens the next. Each bucket is a run of
  /// `members` (sorted by offset).
  static SmallVector<ArrayRef<Member>> cutBuckets(ArrayRef<Member> members, int64_t perBucket) {
    auto alignedEnd = [](const Member &m) {
      return (m.offset + m.bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
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
                   ((i == high && m.offset == alignedEnd(members[high - 1])) ||
                    (i + 1 == low && alignedEnd(m) == members[low].offset));
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
