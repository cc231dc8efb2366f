// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,tp=2},cleave-annotate-sharding{plan=w=tp/-,labels=tp},func.func(sharding-propagation{traversal=forward},cleave-check-sharding,shard-partition))' | FileCheck %s

// Rows split over tp: w's rows make the scores' rows (gemm's M), reshapes
// through dims of size 1 keep the split, and a cross-entropy summed over
// the rows is a partial sum, all-reduced, while its per-row log_prob stays
// split, not summed over the ranks.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg1: tensor<4xi64> {cleave.kind = "param", cleave.name = "labels"
// CHECK-SAME: %arg2: tensor<4x4xf32> {cleave.kind = "param", cleave.name = "w"
// CHECK: %[[S:.*]] = cleave.gemm %arg2, %{{.*}} : (tensor<4x4xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK: %[[R:.*]] = cleave.reshape %[[S]] {shape = array<i64: 1, 4, 1, 3>} : (tensor<4x3xf32>) -> tensor<1x4x1x3xf32>
// CHECK: %[[B:.*]] = cleave.reshape %[[R]] {shape = array<i64: 4, 3>} : (tensor<1x4x1x3xf32>) -> tensor<4x3xf32>
// CHECK: %[[LOSS:.*]], %[[LP:.*]] = cleave.softmax_cross_entropy_loss %[[B]], %arg1 {{.*}} -> (tensor<f32>, tensor<4x3xf32>)
// CHECK: %[[SUM:.*]] = shard.all_reduce %[[LOSS]] on @mesh grid_axes = [1] : tensor<f32> -> tensor<f32>
// CHECK-NOT: shard.all_reduce %[[LP]]
// CHECK: %[[LPSUM:.*]] = cleave.reduce_sum %[[LP]]
// CHECK: shard.all_reduce %[[LPSUM]]
func.func @forward(%x: tensor<4x3xf32> {cleave.kind = "input", cleave.name = "x"},
                   %labels: tensor<8xi64> {cleave.kind = "param", cleave.name = "labels"},
                   %w: tensor<8x4xf32> {cleave.kind = "param", cleave.name = "w"})
    -> (tensor<f32> {cleave.name = "loss.sum"}, tensor<f32> {cleave.name = "log_prob.sum"}) {
  %s = cleave.gemm %w, %x : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
  %r = cleave.reshape %s {shape = array<i64: 1, 8, 1, 3>} : (tensor<8x3xf32>) -> tensor<1x8x1x3xf32>
  %b = cleave.reshape %r {shape = array<i64: 8, 3>} : (tensor<1x8x1x3xf32>) -> tensor<8x3xf32>
  %loss, %lp = cleave.softmax_cross_entropy_loss %b, %labels {reduction = "sum", ignore_index = -100 : i64} : (tensor<8x3xf32>, tensor<8xi64>) -> (tensor<f32>, tensor<8x3xf32>)
  %lps = cleave.reduce_sum %lp {axes = array<i64: 0, 1>, keepdims = false} : (tensor<8x3xf32>) -> tensor<f32>
  return %loss, %lps : tensor<f32>, tensor<f32>
}
