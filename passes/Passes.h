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

/// Alignment of every arena and weights offset, in bytes.
inline constexpr int64_t kBufferAlignment = 64;

} // namespace cleave

#endif
