//===- CostModel.h - what an op costs, as the planners estimate it -*- C++ -*-===//

#ifndef CLEAVE_PASSES_COSTMODEL_H
#define CLEAVE_PASSES_COSTMODEL_H

#include "mlir/IR/Operation.h"

namespace cleave {

/// Floating-point operations of one op: 2 per multiply-add in matmul, gemm
/// and conv, none for a view, one per output element elsewhere (an estimate
/// for the rest). plan.json's FLOPs and the pipeline's balanced stages use it.
int64_t estimateFlops(mlir::Operation *op);

} // namespace cleave

#endif
