//===- Passes.h - Cleave's passes -------------------------------*- C++ -*-===//

#ifndef CLEAVE_PASSES_PASSES_H
#define CLEAVE_PASSES_PASSES_H

#include "dialects/Cleave/CleaveDialect.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Pass/Pass.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

namespace cleave {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Gives each dropout of `body` without a seed the seed of its own that one
/// device's @forward gives it: 2^63 + its rank among the unseeded ones, in
/// order, apart from every seeded one's (its masks' stream,
/// runtime/Random.h). Passes that split or copy dropouts (pipeline stages,
/// recomputation) seed them first, so that every copy draws one device's
/// masks; the lowering seeds what is left.
void seedUnseededDropouts(mlir::Block &body);

/// The op whose result @forward adds into the loss sum accumulator: the
/// forward's last, after which the backward begins; null if there is none.
mlir::Operation *lossSumProducer(mlir::func::FuncOp forward);

/// The ops of a pipeline stage's microbatch step (its @forward before
/// cleave-split-backward) that what it sends on and its loss's sum and count
/// need: the forward that split keeps; the rest is the backward.
mlir::FailureOr<llvm::SetVector<mlir::Operation *>> stageForwardOps(mlir::func::FuncOp stage);

/// The pipeline message tags from which the stages that hold a tied weight
/// send each other its gradient (cleave-pipeline-tied-gradients); the tags
/// of the values that cross stages (cleave-pipeline-split) stay below.
inline constexpr int64_t kTiedGradientTagBase = 1 << 12;

/// The functions a training step runs once per microbatch, in the order a
/// microbatch runs them: @forward, and a pipeline stage's @backward and
/// (zb-h1) @backward_weight (cleave-split-backward).
inline constexpr llvm::StringLiteral kMicrobatchFunctions[] = {"forward", "backward",
                                                               "backward_weight"};

/// Each named argument's last `cleave.assign` in a microbatch, by the
/// argument's name: its last one in the last of kMicrobatchFunctions that
/// assigns it (the gradient accumulators' last writes).
llvm::StringMap<mlir::Operation *> lastMicrobatchWrites(mlir::ModuleOp module);

/// Whether a microbatch makes write `a` before write `b` (two of
/// lastMicrobatchWrites'): in an earlier function, or earlier in the same.
bool writtenBefore(mlir::Operation *a, mlir::Operation *b);

/// An f32 elementwise op that cleave.fused_elementwise's kernel runs, at
/// its result's shape (more than one element), each operand of that shape or
/// one element (cleave-fuse-elementwise). Its kernel reads each element
/// before it writes it, so its result may take an operand's place.
bool isFusableElementwise(mlir::Operation *op);

/// Ops whose result is their operand's buffer under another shape: no kernel
/// and no buffer of their own (cleave-memory-plan, cleave-lower-to-emitc).
bool isReshapeView(mlir::Operation *op);

/// The name of a ZeRO 1/2 flat buffer `base` ("flat:params", "flat:grads")
/// in the program whose @forward is `forward`: a pipeline stage's carries
/// its stage (":stage1"), so that a pipeline's checkpoint tells the stages'
/// buffers and optimizer slots apart.
std::string flatBufferName(mlir::StringRef base, mlir::func::FuncOp forward);

/// Adds an argument named `name` of kind `kind` at the end of `func`; state
/// laid out like parameter (or flat buffer) `stateOf` says so, for plan.json.
mlir::Value addArgument(mlir::func::FuncOp func, mlir::Type type, mlir::StringRef name,
                        mlir::StringRef kind, mlir::StringRef stateOf = "");

/// The state a step with dynamic loss scaling (fp16) keeps: the scale (the
/// initial one before the first step), the steps since it last changed,
/// and the steps skipped for gradients that were not finite.
inline constexpr const char *kLossScale = "cleave.dynamic_loss_scale";
inline constexpr const char *kLossScaleGoodSteps = "cleave.loss_scale_good_steps";
inline constexpr const char *kSkippedSteps = "cleave.skipped_steps";

/// The loss scale's state (kLossScale, `initial` before the first step),
/// a new argument of `func`: what cleave-autodiff scales the loss by and
/// cleave-build-train-step divides the gradients by.
mlir::Value addLossScaleArgument(mlir::func::FuncOp func, double initial);

/// Alignment of every arena and weights offset, in bytes.
inline constexpr int64_t kBufferAlignment = 64;

} // namespace cleave

#endif
