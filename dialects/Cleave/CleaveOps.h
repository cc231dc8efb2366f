//===- CleaveOps.h - cleave operations --------------------------*- C++ -*-===//

#ifndef CLEAVE_DIALECTS_CLEAVE_CLEAVEOPS_H
#define CLEAVE_DIALECTS_CLEAVE_CLEAVEOPS_H

#include "dialects/Cleave/CleaveDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <optional>

#include "dialects/Cleave/CleaveInterfaces.h.inc"

namespace cleave {

/// The multidirectional (numpy) broadcast of two shapes, or nullopt when they
/// do not broadcast.
std::optional<llvm::SmallVector<int64_t>> broadcastShapes(llvm::ArrayRef<int64_t> a,
                                                          llvm::ArrayRef<int64_t> b);

/// The multidirectional (numpy) broadcast of the shapes of `operands`, with
/// `element` as element type. Emits an error at `location` and fails when the
/// shapes do not broadcast.
llvm::LogicalResult inferBroadcastType(std::optional<mlir::Location> location,
                                       mlir::TypeRange operands, mlir::Type element,
                                       llvm::SmallVectorImpl<mlir::Type> &types);

/// Ops over one axis (softmax): the input type, once `axis` is checked.
llvm::LogicalResult inferAxisType(std::optional<mlir::Location> location, mlir::Value input,
                                  int64_t axis, llvm::SmallVectorImpl<mlir::Type> &types);

/// Reductions over `axes`, keeping them as size 1 or dropping them.
llvm::LogicalResult inferReduceType(std::optional<mlir::Location> location, mlir::Value input,
                                    llvm::ArrayRef<int64_t> axes, bool keepdims,
                                    llvm::SmallVectorImpl<mlir::Type> &types);

/// "2x3", or "scalar" for rank 0: how shapes read in diagnostics.
std::string shapeString(llvm::ArrayRef<int64_t> shape);

/// Bytes of a statically shaped tensor in host layout (a bool takes a byte).
int64_t tensorBytes(mlir::RankedTensorType type);

/// Largest number of elements a tensor may hold: 2^31 - 1, the largest
/// count a 32-bit BLAS (OpenBLAS, cuBLAS) dimension or leading dimension
/// can address. Import refuses any tensor over it, so no size computed from
/// a model (pads, ranges, shapes) can overflow a kernel or an allocation.
inline constexpr int64_t kMaxTensorElements = 2147483647;

/// Why no tensor of `shape` can exist (a negative dim, or more than
/// kMaxTensorElements elements), or nullopt when it can.
std::optional<std::string> tensorShapeError(llvm::ArrayRef<int64_t> shape);

/// The `cleave.kind` ("input", "param", "state") of the function argument
/// `value` is, or null when it is not an argument that has one.
mlir::StringAttr argumentKind(mlir::Value value);

/// Whether `value` is a function argument of kind "param" (a parameter).
bool isParameter(mlir::Value value);

/// The ONNX node name an op's location carries (the importer's NameLoc),
/// or "".
std::string onnxNodeName(mlir::Location loc);

/// Largest number of elements a fold at import may produce.
inline constexpr int64_t kMaxFoldedElements = 65536;

} // namespace cleave

#define GET_OP_CLASSES
#include "dialects/Cleave/CleaveOps.h.inc"

namespace cleave {
/// A cleave.constant of `type` with every element `value` (float or integer
/// elements).
mlir::Value splatConstant(mlir::OpBuilder &b, mlir::Location loc, mlir::RankedTensorType type,
                          double value);
/// A rank-0 cleave.constant of `element`: broadcasts against anything.
mlir::Value scalarConstant(mlir::OpBuilder &b, mlir::Location loc, mlir::Type element,
                           double value);
/// The value of every element of `value` when it is a float splat constant.
std::optional<double> splatValue(mlir::Value value);
/// Whether `op` computes each result element from the operand elements at
/// its index (after numpy broadcasting): the unary ops, the binary
/// arithmetic and comparisons, where and cast.
bool isElementwise(mlir::Operation *op);

/// The whole of `local`, split along `dim` over grid axes `axes` of the
/// mesh into `parts` parts in rank order, each rank's part made of `blocks`
/// blocks (a blockwise split: the whole holds every rank's first block,
/// then every rank's second, ...), on every rank. The runtime gathers along
/// dim 0 only: the parts are gathered stacked along dim 0 and moved into
/// place by a reshape, a transpose and a reshape (none for dim 0 in one
/// block), the inverse of cleave-slice-leading-dim's slice. A part that
/// `shard.all_slice` cut along dim 0 is not gathered: its input, which every
/// rank holds whole, is moved into place instead.
mlir::Value gatherWhole(mlir::OpBuilder &b, mlir::Location loc, mlir::Value local, int64_t dim,
                        int64_t blocks, llvm::ArrayRef<int16_t> axes, int64_t parts);

/// Attaches cleave's interfaces to other dialects' ops: the reverse rules of
/// `shard.all_reduce`, `shard.all_slice` and `shard.all_gather`. Every
/// context that differentiates needs it.
void registerExternalModels(mlir::DialectRegistry &registry);
/// Attaches the shard dialect's ShardingInterface to every cleave op
/// (CleaveSharding.cpp), for sharding-propagation and shard-partition.
void registerShardingModels(mlir::DialectRegistry &registry);
} // namespace cleave

#endif
