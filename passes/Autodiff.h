//===- Autodiff.h - reverse-mode gradients inside one block -----*- C++ -*-===//

#ifndef CLEAVE_PASSES_AUTODIFF_H
#define CLEAVE_PASSES_AUTODIFF_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

namespace cleave {

/// Whether a value of `type` can be the loss that cleave differentiates,
/// splits into a sum and a count, and logs: a float scalar (rank 0).
bool isScalarLoss(mlir::Type type);

/// What findLoss found.
struct LossSearch {
  enum Outcome { Found, NoSuchName, NotScalar, NoScalar, SeveralScalars } outcome;
  /// With Found and NotScalar: the index of the loss.
  unsigned index = 0;
  /// Without a name: the index of every scalar loss.
  llvm::SmallVector<unsigned> scalars;
};

/// The loss among values of `types` named `names`: the first one named
/// `name`, which must be a scalar loss, or with an empty `name` the only
/// scalar loss.
LossSearch findLoss(llvm::ArrayRef<llvm::StringRef> names, mlir::TypeRange types,
                    llvm::StringRef name);

/// findLoss over `func`'s results by their cleave.name. Emits an error at
/// `func` and fails when there is no such loss; `purpose` ends the message
/// when no result is a float scalar ("to differentiate").
mlir::FailureOr<unsigned> findLossResult(mlir::func::FuncOp func, llvm::StringRef name,
                                         llvm::StringRef purpose);

/// Reverse-mode gradients of `y`, a float tensor, with respect to each of
/// `xs`: values (block arguments or op results) of the block that defines y.
/// y's gradient is seeded with ones, so for a y with several elements the
/// result is the gradient of their sum. Gradients flow back from y through
/// every op before it, in reverse order, by the op's VjpOpInterface rule, and
/// are summed where a value has several readers (also through an x computed
/// from another x: these are total derivatives). The new ops are built at
/// `builder`'s insertion point, which must follow y's definition in the same
/// block. Returns one gradient per x, of x's type, or null where y does not
/// depend on x. Fails, with an error at the op, when an op on a path from an x
/// to y has no rule or its rule fails. Values in `constants` are taken as
/// constants: no gradient flows back through them to what computed them.
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
buildGradients(mlir::OpBuilder &builder, mlir::Value y, mlir::ArrayRef<mlir::Value> xs,
               const llvm::DenseSet<mlir::Value> &constants = {});
/// The same from several values at once, each with its seed (its
/// gradient, of its type): the gradient of the sum over the seeds of
/// sum(value * seed), each seed taken as a constant.
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
buildGradients(mlir::OpBuilder &builder, llvm::ArrayRef<std::pair<mlir::Value, mlir::Value>> seeds,
               mlir::ArrayRef<mlir::Value> xs, const llvm::DenseSet<mlir::Value> &constants = {});

} // namespace cleave

#endif
