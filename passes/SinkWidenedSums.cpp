//===- SinkWidenedSums.cpp - each widened gradient summed where it is read -===//
//
// A large one is summed and read a chunk at a time.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

namespace cleave {
#define GEN_PASS_DEF_SINKWIDENEDSUMS
#include "passes/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// The widened copy of an argument that `reduce` alone reads, or null.
CastOp widenedArgument(shard::AllReduceOp reduce) {
  auto widen = reduce.getInput().getDefiningOp<CastOp>();
  if (!widen || !widen->hasOneUse() || !isa<BlockArgument>(widen.getInput()))
    return {};
  auto from = cast<RankedTensorType>(widen.getInput().getType()).getElementType();
  auto to = cast<RankedTensorType>(widen.getType()).getElementType();
  return from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth() ? widen : CastOp();
}

/// The chunk of a widened sum held at once: at most a quarter of the
/// elements of the parameters `func` updates (their f32 sums then take at
/// most Psi bytes, half of what bf16 accumulators save), a multiple of 32
/// elements (64 bytes of bf16).
int64_t largestChunk(func::FuncOp func) {
  int64_t parameters = 0;
  for (BlockArgument arg : func.getArguments())
    if (isParameter(arg))
      parameters += cast<RankedTensorType>(arg.getType()).getNumElements();
  return std::max<int64_t>(32, llvm::alignTo(llvm::divideCeil(parameters, 4), 32));
}

/// The fused update that alone reads `reduce`'s sum (each of its inputs
/// the sum's shape or one element, element by element) where only
/// assignments read its results, or null.
FusedElementwiseOp elementwiseUpdate(shard::AllReduceOp reduce) {
  auto update = reduce->hasOneUse() ? dyn_cast<FusedElementwiseOp>(*reduce->user_begin()) : nullptr;
  if (!update)
    return {};
  for (Value result : update->getResults())
    if (llvm::any_of(result.getUsers(), [](Operation *user) { return !isa<AssignOp>(user); }))
      return {};
  return update;
}

/// Widens, sums and updates `widen`'s argument `size` elements at a time:
/// each chunk's copy, sum and update read and write `cleave.elements` views
/// of the arguments, and each assignment of the update becomes one of each
/// chunk to its part of the target. The same arithmetic on every element.
void updateInChunks(CastOp widen, shard::AllReduceOp reduce, FusedElementwiseOp update,
                    int64_t size) {
  Location loc = update.getLoc();
  OpBuilder b(update);
  const int64_t elements = cast<RankedTensorType>(reduce.getResult().getType()).getNumElements();
  SmallVector<SmallVector<Value>> chunks(update->getNumResults());
  for (int64_t offset = 0; offset < elements; offset += size) {
    const int64_t count = std::min(size, elements - offset);
    auto view = [&](Value whole) -> Value {
      auto type = RankedTensorType::get({count}, getElementTypeOrSelf(whole));
      return ElementsOp::create(b, loc, type, whole, offset);
    };
    auto chunkOf = [&](Operation *op, ValueRange operands) {
      Operation *copy = b.clone(*op);
      copy->setOperands(operands);
      for (Value result : copy->getResults())
        result.setType(RankedTensorType::get({count}, getElementTypeOrSelf(result)));
      return copy;
    };
    Value wide = chunkOf(widen, {view(widen.getInput())})->getResult(0);
    Value sum = chunkOf(reduce, {wide})->getResult(0);
    SmallVector<Value> inputs;
    for (Value input : update.getInputs())
      inputs.push_back(input == reduce.getResult() ? sum
                       : cast<RankedTensorType>(input.getType()).getNumElements() == 1
                           ? input
                           : view(input));
    for (auto [i, result] : llvm::enumerate(chunkOf(update, inputs)->getResults()))
      chunks[i].push_back(result);
  }
  for (auto [result, parts] : llvm::zip(update->getResults(), chunks)) {
    for (Operation *user : llvm::make_early_inc_range(result.getUsers())) {
      auto assign = cast<AssignOp>(user);
      b.setInsertionPoint(assign);
      for (auto [chunk, part] : llvm::enumerate(parts)) {
        auto type = cast<RankedTensorType>(part.getType());
        Value target = ElementsOp::create(b, assign.getLoc(), type, assign.getTarget(),
                                          static_cast<int64_t>(chunk) * size);
        AssignOp::create(b, assign.getLoc(), target, part);
      }
      assign.erase();
    }
  }
  update.erase();
  reduce.erase();
  widen.erase();
}

struct SinkWidenedSumsPass : public cleave::impl::SinkWidenedSumsBase<SinkWidenedSumsPass> {
  void runOnOperation() override {
    getOperation().walk([](func::FuncOp func) {
      if (func.isExternal())
        return;
      for (auto reduce : llvm::make_early_inc_range(func.getBody().getOps<shard::AllReduceOp>())) {
        CastOp widen = widenedArgument(reduce);
        if (!widen || reduce->use_empty())
          continue;
        // The first reader of the sum, unless the argument is assigned
        // before it (its old value is what is summed).
        Operation *destination = nullptr;
        for (Operation *op = reduce->getNextNode(); op && !destination; op = op->getNextNode()) {
          auto assign = dyn_cast<AssignOp>(op);
          if ((assign && assign.getTarget() == widen.getInput()) ||
              llvm::is_contained(op->getOperands(), reduce.getResult()))
            destination = op;
        }
        if (!destination || destination == reduce->getNextNode())
          continue;
        widen->moveBefore(destination);
        reduce->moveBefore(destination);
      }
      const int64_t size = largestChunk(func);
      for (auto reduce : llvm::make_early_inc_range(func.getBody().getOps<shard::AllReduceOp>())) {
        CastOp widen = widenedArgument(reduce);
        FusedElementwiseOp update = widen ? elementwiseUpdate(reduce) : FusedElementwiseOp();
        if (update && cast<RankedTensorType>(reduce.getResult().getType()).getNumElements() > size)
          updateInChunks(widen, reduce, update, size);
      }
    });
  }
};

} // namespace
