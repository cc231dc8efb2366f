// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-overlap-reduce-scatters)' | FileCheck %s
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-overlap-reduce-scatters,cleave-memory-plan,cleave-lower-to-emitc)' | FileCheck %s --check-prefix=LOWERED

// A layer's two gradients (w1's product, b1's column sums) and two more
// layers' weight gradients, each reduce-scattered into its slice
// accumulator as it is made. The first three start where they are, and
// their waits, with the adds and assignments that accumulate them, move
// down to just before the first reduce-scatter after the next product:
// each moves while the next layer's gradient is computed. The last has no
// product after it to hide behind and stays.
// CHECK-LABEL: func.func @forward
// CHECK: %[[G1:.*]] = cleave.gemm
// CHECK-NEXT: %[[RS1:.*]] = shard.reduce_scatter %[[G1]] on @mesh grid_axes = [0] scatter_axis = 0 {cleave.started} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: %[[GB:.*]] = cleave.reduce_sum
// CHECK-NEXT: %[[RSB:.*]] = shard.reduce_scatter %[[GB]] on @mesh grid_axes = [0] scatter_axis = 0 {cleave.started} : tensor<4xf32> -> tensor<2xf32>
// CHECK-NEXT: %[[G2:.*]] = cleave.gemm
// CHECK-NEXT: %[[W1:.*]] = cleave.collective_wait %[[RS1]] from %[[G1]] : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: %[[S1:.*]] = cleave.add %arg2, %[[W1]]
// CHECK-NEXT: cleave.assign %[[S1]] to %arg2
// CHECK-NEXT: %[[WB:.*]] = cleave.collective_wait %[[RSB]] from %[[GB]] : tensor<4xf32> -> tensor<2xf32>
// CHECK-NEXT: %[[SB:.*]] = cleave.add %arg5, %[[WB]]
// CHECK-NEXT: cleave.assign %[[SB]] to %arg5
// CHECK-NEXT: %[[RS2:.*]] = shard.reduce_scatter %[[G2]] on @mesh grid_axes = [0] scatter_axis = 0 {cleave.started}
// CHECK-NEXT: %[[G3:.*]] = cleave.gemm
// CHECK-NEXT: %[[W2:.*]] = cleave.collective_wait %[[RS2]] from %[[G2]]
// CHECK-NEXT: %[[S2:.*]] = cleave.add %arg3, %[[W2]]
// CHECK-NEXT: cleave.assign %[[S2]] to %arg3
// CHECK-NEXT: %[[RS3:.*]] = shard.reduce_scatter %[[G3]] on @mesh grid_axes = [0] scatter_axis = 0 :
// CHECK-NEXT: %[[S3:.*]] = cleave.add %arg4, %[[RS3]]
// CHECK-NEXT: cleave.assign %[[S3]] to %arg4
// CHECK-NEXT: return

// The started reduce-scatters are queued on the background thread and
// waited for on their own buffers (each gradient stays allocated until its
// wait); the last is a plain call.
// LOWERED-LABEL: emitc.func @cleave_forward
// LOWERED: call_opaque "cleave::rt::cpu::reduce_scatter_start"(%arg0, %{{.*}}, %[[O1:[0-9]+]]) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"0">, #emitc.opaque<"cleave::rt::DType::F32">]}
// LOWERED: call_opaque "cleave::rt::cpu::reduce_scatter_start"(%arg0, %{{.*}}, %[[OB:[0-9]+]])
// LOWERED: call_opaque "cleave::rt::cpu::gemm"
// LOWERED: call_opaque "cleave::rt::cpu::reduce_scatter_wait"(%arg0, %[[O1]]) {args = [0 : index, 1 : index, #emitc.opaque<"0">]}
// LOWERED: call_opaque "cleave::rt::cpu::reduce_scatter_wait"(%arg0, %[[OB]])
// LOWERED: call_opaque "cleave::rt::cpu::reduce_scatter_start"
// LOWERED: call_opaque "cleave::rt::cpu::reduce_scatter_wait"
// LOWERED: call_opaque "cleave::rt::cpu::reduce_scatter"(
// LOWERED-NOT: reduce_scatter
// LOWERED-LABEL: emitc.func @cleave_narrow_weights
shard.grid @mesh(shape = 2) {cleave.axes = ["dp"]}
func.func @forward(%x: tensor<4x4xf32> {cleave.kind = "input", cleave.name = "x"},
                   %dy: tensor<4x4xf32> {cleave.kind = "input", cleave.name = "dy"},
                   %a1: tensor<2x4xf32> {cleave.kind = "state", cleave.name = "grad:w1", cleave.accumulator},
                   %a2: tensor<2x4xf32> {cleave.kind = "state", cleave.name = "grad:w2", cleave.accumulator},
                   %a3: tensor<2x4xf32> {cleave.kind = "state", cleave.name = "grad:w3", cleave.accumulator},
                   %ab: tensor<2xf32> {cleave.kind = "state", cleave.name = "grad:b1", cleave.accumulator}) {
  %g1 = cleave.gemm %x, %dy {trans_a = true} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %rs1 = shard.reduce_scatter %g1 on @mesh grid_axes = [0] scatter_axis = 0 : tensor<4x4xf32> -> tensor<2x4xf32>
  %s1 = cleave.add %a1, %rs1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  cleave.assign %s1 to %a1 : tensor<2x4xf32>
  %gb = cleave.reduce_sum %dy {axes = array<i64: 0>, keepdims = false} : (tensor<4x4xf32>) -> tensor<4xf32>
  %rsb = shard.reduce_scatter %gb on @mesh grid_axes = [0] scatter_axis = 0 : tensor<4xf32> -> tensor<2xf32>
  %sb = cleave.add %ab, %rsb : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  cleave.assign %sb to %ab : tensor<2xf32>
  %g2 = cleave.gemm %dy, %x {trans_a = true} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %rs2 = shard.reduce_scatter %g2 on @mesh grid_axes = [0] scatter_axis = 0 : tensor<4x4xf32> -> tensor<2x4xf32>
  %s2 = cleave.add %a2, %rs2 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  cleave.assign %s2 to %a2 : tensor<2x4xf32>
  %g3 = cleave.gemm %x, %x {trans_a = true} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %rs3 = shard.reduce_scatter %g3 on @mesh grid_axes = [0] scatter_axis = 0 : tensor<4x4xf32> -> tensor<2x4xf32>
  %s3 = cleave.add %a3, %rs3 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  cleave.assign %s3 to %a3 : tensor<2x4xf32>
  return
}

// -----

// Left where they are: one whose accumulator another op reads before its
// wait, a sum the function returns, and one with no product after it.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: cleave.started
// CHECK-NOT: cleave.collective_wait
shard.grid @mesh(shape = 2) {cleave.axes = ["dp"]}
func.func @forward(%x: tensor<4x4xf32> {cleave.kind = "input", cleave.name = "x"},
                   %a1: tensor<2x4xf32> {cleave.kind = "state", cleave.name = "grad:w1", cleave.accumulator})
    -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %g1 = cleave.gemm %x, %x {trans_a = true} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %rs1 = shard.reduce_scatter %g1 on @mesh grid_axes = [0] scatter_axis = 0 : tensor<4x4xf32> -> tensor<2x4xf32>
  %s1 = cleave.add %a1, %rs1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  cleave.assign %s1 to %a1 : tensor<2x4xf32>
  %read = cleave.neg %a1 : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %g2 = cleave.gemm %x, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %rs2 = shard.reduce_scatter %g2 on @mesh grid_axes = [0] scatter_axis = 0 : tensor<4x4xf32> -> tensor<2x4xf32>
  %g3 = cleave.gemm %x, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %rs3 = shard.reduce_scatter %g3 on @mesh grid_axes = [0] scatter_axis = 0 : tensor<4x4xf32> -> tensor<2x4xf32>
  return %read, %rs2 : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// One rank over dp: nothing to overlap.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: cleave.started
shard.grid @mesh(shape = 1) {cleave.axes = ["dp"]}
func.func @forward(%x: tensor<4x4xf32>, %a1: tensor<4x4xf32> {cleave.kind = "state", cleave.name = "grad:w1", cleave.accumulator}) {
  %g1 = cleave.gemm %x, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %rs1 = shard.reduce_scatter %g1 on @mesh grid_axes = [0] scatter_axis = 0 : tensor<4x4xf32> -> tensor<4x4xf32>
  %s1 = cleave.add %a1, %rs1 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  cleave.assign %s1 to %a1 : tensor<4x4xf32>
  %g2 = cleave.gemm %x, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return
}
