//===- CostModel.h - what an op costs, as the planners estimate it -*- C++ -*-===//

#ifndef CLEAVE_PASSES_COSTMODEL_H
#define CLEAVE_PASSES_COSTMODEL_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace cleave {

/// Floating-point operations of one op: 2 per multiply-add in matmul, gemm,
/// conv and conv's adjoints, none for a view, one per output element
/// elsewhere (an estimate for the rest). plan.json's FLOPs and the
/// pipeline's balanced stages use it.
int64_t estimateFlops(mlir::Operation *op);

/// The estimated FLOPs of `op`'s gradients for the operands that need one
/// (`needsGradient`): each as many as its forward (a product's gradient for
/// one factor is a product of its size; an elementwise op's, an
/// elementwise op). The pipeline's balanced stages and schedules use it.
int64_t estimateGradientFlops(mlir::Operation *op,
                              llvm::function_ref<bool(mlir::Value)> needsGradient);

/// Whether `op` is a product (matmul, gemm, conv or an adjoint of conv):
/// `cleave plan` times its FLOPs at the device's product rate, the other
/// kernels by the bytes they move.
bool isProduct(mlir::Operation *op);

/// Whether `kernel`, a kernel's name as a program's trace gives it (an op's
/// name without the dialect), is a product's.
bool isProductKernel(llvm::StringRef kernel);

/// Whether `op` runs no kernel: a constant or a view of its operand.
bool isView(mlir::Operation *op);

/// Bytes a kernel reads and writes: its tensor operands and results.
int64_t estimateBytesMoved(mlir::Operation *op);

} // namespace cleave

#endif
