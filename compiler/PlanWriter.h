//===- PlanWriter.h - plan.json and weights.bin ----------------*- C++ -*-===//

#ifndef CLEAVE_COMPILER_PLANWRITER_H
#define CLEAVE_COMPILER_PLANWRITER_H

#include "compiler/Compile.h"

#include "mlir/IR/BuiltinOps.h"

namespace cleave {

/// Version of plan.json's layout (docs/formats.md).
inline constexpr int kPlanFormatVersion = 1;

/// Writes DIR/plan.json (inputs, outputs, parameters with their weights
/// offsets, arena and weights bytes, FLOPs) and DIR/weights.bin (parameters
/// and stored constants at their planned offsets) for a memory-planned module.
mlir::LogicalResult writePlan(mlir::ModuleOp module, const ImportedModel &model,
                              const CompileOptions &options, llvm::StringRef dir,
                              UserError &error);

/// Floating-point operations of one op: 2 per multiply-add in matmul, gemm
/// and conv, one per output element elsewhere (an estimate for the rest).
int64_t estimateFlops(mlir::Operation *op);

} // namespace cleave

#endif
