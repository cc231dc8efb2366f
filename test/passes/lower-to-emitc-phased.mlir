// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-memory-plan,cleave-lower-to-emitc{entry-prefix=cleave_stage2_ phased-apply=true})' | FileCheck %s
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-memory-plan,cleave-lower-to-emitc)' | FileCheck %s --check-prefix=WHOLE

// A stage of an interleaved pipeline names its entry points apart, and its
// @apply runs in phases split at each sum over pp (grid axis 1 here): phase
// 0's kernels, then the sum's operand left for the driver, which adds the
// rank's stages' before phase 1 sums it over pp where it is (the partial is
// made for the sum alone: no copy). Views are
// made in every phase; kernels only in their own. @forward and the other
// entry points are not phased, and without phased-apply nothing is.

// CHECK-LABEL: emitc.func @cleave_stage2_forward
// CHECK-NOT: inApplyPhase
// CHECK: call_opaque "cleave::rt::cpu::mul"
// CHECK-LABEL: emitc.func @cleave_stage2_apply
// CHECK-SAME: (%[[CTX:[^:]*]]:
// CHECK: %[[NOW0:.*]] = call_opaque "cleave::rt::inApplyPhase"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"0">]} : (!emitc.opaque<"cleave::rt::cpu::Context&">) -> i1
// CHECK-NEXT: if %[[NOW0]] {
// CHECK: call_opaque "cleave::rt::cpu::mul"
// CHECK: call_opaque "cleave::rt::cpu::reduce_sum"
// CHECK: %[[LEAVE:.*]] = call_opaque "cleave::rt::inApplyPhase"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"0">]}
// CHECK-NEXT: if %[[LEAVE]] {
// CHECK-NEXT: call_opaque "cleave::rt::leaveStagePartial"(%[[CTX]], %[[PARTIAL:[^)]*]])
// CHECK: %[[NOW1:.*]] = call_opaque "cleave::rt::inApplyPhase"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"1">]}
// CHECK-NEXT: if %[[NOW1]] {
// CHECK-NOT: cleave::rt::cpu::copy
// CHECK: call_opaque "cleave::rt::cpu::all_reduce"(%[[CTX]], %[[PARTIAL]])
// CHECK: call_opaque "cleave::rt::inApplyPhase"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"1">]}
// CHECK: call_opaque "cleave::rt::cpu::sqrt"
// CHECK: call_opaque "cleave::rt::store"
// CHECK-NEXT: return
// CHECK-LABEL: emitc.func @cleave_stage2_backward
// CHECK-NOT: inApplyPhase

// WHOLE-LABEL: emitc.func @cleave_apply
// WHOLE-NOT: inApplyPhase
// WHOLE-NOT: leaveStagePartial
// WHOLE: call_opaque "cleave::rt::cpu::all_reduce"
// WHOLE: return

shard.grid @mesh(shape = 1x2) {cleave.axes = ["dp", "pp"]}

func.func @forward(%x: tensor<4xf32> {cleave.kind = "input", cleave.name = "x"})
    -> (tensor<4xf32> {cleave.name = "y"}) {
  %y = cleave.mul %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

func.func @apply(%g: tensor<4xf32> {cleave.kind = "input", cleave.name = "g"})
    -> (tensor<f32> {cleave.name = "norm"}) {
  %squares = cleave.mul %g, %g : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %partial = cleave.reduce_sum %squares {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  %total = shard.all_reduce %partial on @mesh grid_axes = [1] : tensor<f32> -> tensor<f32>
  %norm = cleave.sqrt %total : (tensor<f32>) -> tensor<f32>
  return %norm : tensor<f32>
}
