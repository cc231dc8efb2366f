//===- Collectives.h - how collectives over stored buffers are grouped -*- C++ -*-===//
//
// One piece of code for what the lowering emits and plan.json reports: a run
// of consecutive `shard.all_reduce` ops whose inputs are parameters or state
// (the accumulators of a data-parallel step) works in place in the weights
// blob, one call per contiguous span of it.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PASSES_COLLECTIVES_H
#define CLEAVE_PASSES_COLLECTIVES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"

namespace cleave {

/// The name of the module's device mesh (its axis names, in order, in
/// kAxesAttr).
inline constexpr llvm::StringLiteral kMeshName = "mesh";

/// Where the data- and tensor-parallel axes lie in the module's mesh
/// (`shard.grid @mesh`, made by cleave-create-mesh).
struct MeshAxes {
  mlir::shard::GridOp grid;
  /// The index of the `dp` axis and its number of ranks.
  int64_t dpAxis = 0;
  int64_t dpSize = 1;
  /// The index of the `tp` axis (-1: none) and its number of ranks.
  int64_t tpAxis = -1;
  int64_t tpSize = 1;
  /// The index of the `pp` axis (-1: none) and its number of ranks.
  int64_t ppAxis = -1;
  int64_t ppSize = 1;
};

/// The module's mesh, or an error on the module saying to run
/// cleave-create-mesh first.
mlir::FailureOr<MeshAxes> getMesh(mlir::ModuleOp module);

/// The mesh axes a pass may work over one at a time.
enum class SplitAxis { DataParallel, TensorParallel };

/// Runs `body` on each function of `module` that has a body (of one block)
/// with the index of `axis` (dp or tp), where the module has a mesh of more
/// than one rank along it; nothing without a mesh or with one rank along
/// it. Fails (with getMesh's error) for a mesh without its axes.
mlir::LogicalResult forEachFunctionOver(mlir::ModuleOp module, SplitAxis axis,
                                        llvm::function_ref<void(mlir::func::FuncOp, int64_t)> body);

/// Where a pipeline message (`cleave.pipeline_send` or `cleave.pipeline_recv`)
/// goes on the pp axis of `mesh`: its peer's rank, and its tag as the
/// runtime matches it (a value's tag doubled, plus one for its gradient, so
/// that the two never share one).
struct MessageEnds {
  int64_t peer;
  int64_t tag;
};
MessageEnds pipelineMessageEnds(mlir::Operation *message, const MeshAxes &mesh);

/// `bytes` of `element`s counted as `wire`s.
int64_t inWireType(int64_t bytes, mlir::Type element, mlir::Type wire);

/// Bytes [offset, offset + bytes) of the weights blob (or, `inArena`, of
/// the arena), summed over one mesh axis, of one element type. Padding
/// between the slots it spans is zero and stays zero.
struct ReductionSpan {
  int64_t offset;
  int64_t bytes;
  int64_t axis;
  mlir::Type element;
  /// The bytes of the values it covers, without padding.
  int64_t payload;
  /// The element type the sum moves in (sumType).
  mlir::Type wire;
  /// In the arena: values a microbatch makes (ZeRO 2's packed gradients),
  /// summed on every call, not accumulators summed on a step's last
  /// microbatch.
  bool inArena = false;
  /// `bytes` (or `payload`) as they move: in the wire's element type.
  int64_t wireBytes() const { return inWireType(bytes, element, wire); }
  int64_t wirePayload() const { return inWireType(payload, element, wire); }
};

/// The element type the sum of `op` (a shard.all_reduce or
/// shard.reduce_scatter, or a cleave.all_reduce_start) moves in: its
/// cleave.sum_type (cleave-narrow-gradient-sums), or its input's.
mlir::Type sumType(mlir::Operation *op);

/// Whether `reduce` works in place: its input is a parameter or state
/// argument (the accumulators), which nothing else reads.
bool isInPlace(mlir::shard::AllReduceOp reduce);

/// Whether `reduce` sums a value made for it alone (a widened copy, a
/// product's partial sums: the result of a kernel that nothing else reads,
/// or reshapes of it that nothing else reads; a wait for the sum may read it
/// too) in that value's buffer, which its result then is: no copy, no
/// buffer of its own.
bool sumsItsOperandInPlace(mlir::shard::AllReduceOp reduce);

/// The spans the all-reduces of `run` (consecutive ops of a memory-planned
/// `func`) reduce, in offset order; an error on the op that cannot work in
/// place (its input is not a stored argument, or is read elsewhere) or is not
/// a sum over one axis.
mlir::FailureOr<llvm::SmallVector<ReductionSpan>>
reductionSpans(mlir::func::FuncOp func, llvm::ArrayRef<mlir::shard::AllReduceOp> run);

/// The one span a bucket fills (the operands of `start`, a
/// cleave.all_reduce_start or cleave.reduce_scatter_owned_start that
/// cleave-overlap-gradients placed: accumulators in the weights blob, or
/// parts of a concat made in place in the arena), or an error on `start`
/// when they are not one.
mlir::FailureOr<ReductionSpan> bucketSpan(mlir::func::FuncOp func, mlir::Operation *start);

/// The element of the flat buffer, whose slices the ranks own, where the
/// bucket of `start` (a cleave.reduce_scatter_owned_start) begins.
int64_t ownedBucketFirst(mlir::func::FuncOp func, mlir::Operation *start);

/// Every run of consecutive in-place all-reduces in `func`, in order.
llvm::SmallVector<llvm::SmallVector<mlir::shard::AllReduceOp>> allReduceRuns(mlir::func::FuncOp func);

} // namespace cleave

#endif
