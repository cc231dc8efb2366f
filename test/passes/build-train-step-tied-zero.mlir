// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=2,pp=2},cleave-pipeline-split{stage-params=emb=0,w0=0,w1=1},cleave-pipeline-select-stage{stage=0},func.func(cleave-autodiff{loss=loss.sum}),cleave-build-train-step{zero=1 clip-grad-norm=1.0})' | FileCheck %s

// A weight two pipeline stages hold (tied) with ZeRO 1: each stage lays out
// its own flat buffer, whose dp slices would not hold the same elements in
// both stages, so the tied weight stays whole beside it (an accumulator and
// an update of its own, as without ZeRO) and the buffer holds the rest.
// Clipping adds the slice's squares over dp, then the tied weight's, which
// every dp rank holds whole (counted in stage 0, its first holder), then
// sums over pp.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: cleave.kind = "param", cleave.name = "emb", cleave.other_stages = array<i64: 1>}
// CHECK-SAME: cleave.flat_member = "flat:params:stage0", cleave.flat_offset = 0 : i64, cleave.kind = "param", cleave.name = "w0"}
// CHECK-LABEL: func.func @apply
// CHECK-SAME: %[[FLAT:arg[0-9]+]]: tensor<64xf32> {cleave.flat_size = 64 : i64, cleave.kind = "state", cleave.name = "flat:grads:stage0"}
// CHECK-SAME: %[[ACC:arg[0-9]+]]: tensor<8x8xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "grad:emb"}
// CHECK: shard.reduce_scatter %[[FLAT]]
// CHECK: %[[TIED:.*]] = cleave.div %[[ACC]]
// CHECK: %[[SQUARES:.*]] = cleave.mul %[[TIED]], %[[TIED]]
// CHECK: %[[MINE:.*]] = cleave.reduce_sum %[[SQUARES]]
// CHECK: %[[SLICES:.*]] = shard.all_reduce %{{.*}} on @mesh grid_axes = [0]
// CHECK: %[[BOTH:.*]] = cleave.add %[[SLICES]], %[[MINE]]
// CHECK: %[[ALL:.*]] = shard.all_reduce %[[BOTH]] on @mesh grid_axes = [1]
// CHECK: cleave.sqrt %[[ALL]]
// CHECK: shard.all_gather
// CHECK: cleave.assign %{{.*}} to %{{.*}} : tensor<8x8xf32>
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %emb: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "emb"},
                   %w0: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w0"},
                   %w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"})
    -> (tensor<f32> {cleave.name = "loss.sum"}, tensor<f32> {cleave.name = "loss.count"}) {
  %e = cleave.matmul %x, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %g = cleave.matmul %e, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h = cleave.matmul %g, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %logits = cleave.matmul %h, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = cleave.reduce_sum %logits {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
  %n = cleave.constant {value = dense<4.0> : tensor<f32>} : tensor<f32>
  return %l, %n : tensor<f32>, tensor<f32>
}
