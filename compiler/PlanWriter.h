//===- PlanWriter.h - plan.json and weights.bin ----------------*- C++ -*-===//

#ifndef CLEAVE_COMPILER_PLANWRITER_H
#define CLEAVE_COMPILER_PLANWRITER_H

#include "compiler/Compile.h"

#include "mlir/IR/BuiltinOps.h"

namespace cleave {

/// Writes DIR/plan.json (runtime/Plan.h: inputs, outputs, stored tensors
/// with their offsets and layouts over the mesh, arena and weights bytes,
/// collectives, FLOPs) and the weights blobs (parameters and stored
/// constants at their planned offsets, one blob per rank coordinate they
/// differ along) for a memory-planned module, with `buildId`; sets
/// `programInterface` to what the program must be generated for
/// (rt::programInterface).
mlir::LogicalResult writePlan(mlir::ModuleOp module, const ImportedModel &model,
                              const CompileOptions &options, llvm::StringRef dir,
                              const std::string &buildId, std::string &programInterface,
                              UserError &error);

} // namespace cleave

#endif
