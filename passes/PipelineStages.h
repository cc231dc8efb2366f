//===- PipelineStages.h - a split module's stages and schedule --*- C++ -*-===//
//
// What cleave-pipeline-schedule and cleave-verify-pipeline-schedule read
// from a module that cleave-pipeline-split has split: the stage functions,
// which stages send to which, what each costs, and the schedule attribute.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PASSES_PIPELINESTAGES_H
#define CLEAVE_PASSES_PIPELINESTAGES_H

#include "passes/PipelineSimulator.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace cleave {

/// The module's stage functions, @stage0 ... in order, checked: one per
/// stage up to the last, as many as the mesh's pp ranks times a whole
/// number of virtual stages, and every send met by one receive of the same
/// tag, from its stage, of the same type (and every receive by a send).
/// Sets the shape's ranks, virtual stages and edges (not the microbatches).
mlir::FailureOr<PipelineShape> pipelineShape(mlir::ModuleOp module,
                                             llvm::SmallVectorImpl<mlir::func::FuncOp> &stages);

/// Each stage's estimated cost: its forward's FLOPs (F), those of the
/// gradients that flow back to the stages it receives from (I: every
/// operand computed from a received value) and those of the rest (W: the
/// parameters and what is computed from them alone), each operand's
/// gradient costing as much as its op's forward. The first stage has no I.
StageCosts estimateStageCosts(llvm::ArrayRef<mlir::func::FuncOp> stages);

/// Checks the module's `cleave.pipeline_schedule` against its stages by
/// simulating it (PipelineSimulator.h): every action once on its stage's
/// rank, and no rank waiting on what its order or another's never lets
/// run. An error at the module saying which ranks and actions otherwise.
mlir::LogicalResult verifyPipelineSchedule(mlir::ModuleOp module);

} // namespace cleave

#endif
