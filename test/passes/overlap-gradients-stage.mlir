// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-memory-plan,cleave-overlap-gradients{bucket-bytes=100})' | FileCheck %s

// A pipeline stage's program: @forward adds the loss's sum and count, its
// @backward the gradients, one of them a weight tied to stage 1. The memory
// plan lays the accumulators out in the order a microbatch finishes them
// (the loss's in @forward, then the gradients in @backward: count at 0, sum
// at 64, grad:w at 128, grad:v at 192, grad:t at 256). The buckets are cut
// per function: [count, sum] starts in @forward after its last write,
// [grad:w, grad:v] in @backward after theirs. The tied weight's gradient is
// summed with stage 1's copy before its sum over dp: its all-reduce stays
// in @apply, not started, where it was; the started ones move down to
// their first readers.

// CHECK-LABEL: func.func @forward
// CHECK: cleave.assign %{{.*}} to %arg3 : tensor<f32>
// CHECK-NEXT: cleave.all_reduce_start %arg2, %arg3 on axis 0 : tensor<f32>, tensor<f32>
// CHECK-NEXT: cleave.mul
// CHECK-LABEL: func.func @backward
// CHECK-SAME: cleave.name = "grad:w", cleave.weights_offset = 128
// CHECK-SAME: cleave.name = "grad:v", cleave.weights_offset = 192
// CHECK-SAME: cleave.name = "grad:t", cleave.weights_offset = 256
// CHECK: cleave.assign %{{.*}} to %arg2 : tensor<16xf32>
// CHECK-NEXT: cleave.all_reduce_start %arg1, %arg2 on axis 0 : tensor<16xf32>, tensor<16xf32>
// CHECK-NOT: all_reduce_start
// CHECK: return
// CHECK-LABEL: func.func @apply
// CHECK-NEXT: shard.all_reduce %arg4 on @mesh grid_axes = [0] :
// CHECK-NEXT: shard.all_reduce %arg0 on @mesh grid_axes = [0] {cleave.started}
// CHECK-NEXT: shard.all_reduce %arg1 on @mesh grid_axes = [0] {cleave.started}
// CHECK-NEXT: cleave.div
// CHECK-NEXT: shard.all_reduce %arg2 on @mesh grid_axes = [0] {cleave.started}
// CHECK-NEXT: shard.all_reduce %arg3 on @mesh grid_axes = [0] {cleave.started}
// CHECK-NEXT: return

shard.grid @mesh(shape = 2x2) {cleave.axes = ["dp", "pp"]}

func.func @forward(%x: tensor<16xf32> {cleave.kind = "input", cleave.name = "x"},
                   %t: tensor<16xf32> {cleave.kind = "param", cleave.name = "t", cleave.other_stages = array<i64: 1>},
                   %count: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.loss_count", cleave.accumulator},
                   %sum: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.loss_sum", cleave.accumulator})
    -> tensor<16xf32> attributes {cleave.stage = 0 : i64} {
  %one = cleave.constant {value = dense<1.0> : tensor<f32>} : tensor<f32>
  %c = cleave.add %count, %one : (tensor<f32>, tensor<f32>) -> tensor<f32>
  cleave.assign %c to %count : tensor<f32>
  %s = cleave.add %sum, %one : (tensor<f32>, tensor<f32>) -> tensor<f32>
  cleave.assign %s to %sum : tensor<f32>
  %y = cleave.mul %x, %t : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %y : tensor<16xf32>
}

func.func @backward(%dy: tensor<16xf32> {cleave.kind = "input", cleave.name = "dy"},
                    %gw: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:w", cleave.accumulator},
                    %gv: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:v", cleave.accumulator},
                    %gt: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:t", cleave.accumulator}) {
  %a = cleave.add %gw, %dy : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  cleave.assign %a to %gw : tensor<16xf32>
  %b = cleave.add %gv, %dy : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  cleave.assign %b to %gv : tensor<16xf32>
  %c = cleave.add %gt, %dy : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  cleave.assign %c to %gt : tensor<16xf32>
  return
}

func.func @apply(%count: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.loss_count", cleave.accumulator},
                 %sum: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.loss_sum", cleave.accumulator},
                 %gw: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:w", cleave.accumulator},
                 %gv: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:v", cleave.accumulator},
                 %gt: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:t", cleave.accumulator})
    -> (tensor<f32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %rc = shard.all_reduce %count on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
  %rs = shard.all_reduce %sum on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
  %rw = shard.all_reduce %gw on @mesh grid_axes = [0] : tensor<16xf32> -> tensor<16xf32>
  %rv = shard.all_reduce %gv on @mesh grid_axes = [0] : tensor<16xf32> -> tensor<16xf32>
  %rt = shard.all_reduce %gt on @mesh grid_axes = [0] : tensor<16xf32> -> tensor<16xf32>
  %loss = cleave.div %rs, %rc : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %loss, %rw, %rv, %rt : tensor<f32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}
