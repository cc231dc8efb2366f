//===- Passes.h - Cleave's passes -------------------------------*- C++ -*-===//

#ifndef CLEAVE_PASSES_PASSES_H
#define CLEAVE_PASSES_PASSES_H

#include "dialects/Cleave/CleaveDialect.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Pass/Pass.h"

namespace cleave {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// The seed of the `index`-th dropout without one, in @forward's order:
/// its masks' stream (runtime/Random.h), apart from every seeded one's.
inline uint64_t unseededDropoutSeed(uint64_t index) { return (uint64_t(1) << 63) + index; }

/// The pipeline message tags from which the stages that hold a tied weight
/// send each other its gradient (cleave-pipeline-tied-gradients); the tags
/// of the values that cross stages (cleave-pipeline-split) stay below.
inline constexpr int64_t kTiedGradientTagBase = 1 << 12;

/// An f32 elementwise op that cleave.fused_elementwise's kernel runs, at
/// its result's shape (more than one element), each operand of that shape or
/// one element (cleave-fuse-elementwise). Its kernel reads each element
/// before it writes it, so its result may take an operand's place.
bool isFusableElementwise(mlir::Operation *op);

/// The name of a ZeRO 1/2 flat buffer `base` ("flat:params", "flat:grads")
/// in the program whose @forward is `forward`: a pipeline stage's carries
/// its stage (":stage1"), so that a pipeline's checkpoint tells the stages'
/// buffers and optimizer slots apart.
std::string flatBufferName(mlir::StringRef base, mlir::func::FuncOp forward);

/// Alignment of every arena and weights offset, in bytes.
inline constexpr int64_t kBufferAlignment = 64;

} // namespace cleave

#endif
