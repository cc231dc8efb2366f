// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,tp=2},cleave-annotate-sharding{plan=w=tp/-},func.func(sharding-propagation{traversal=forward},cleave-check-sharding,shard-partition))' | FileCheck %s

// BLOOM's fused q, k, v: a column-parallel product viewed as [batch, heads,
// 3, dim] with the heads split, then q taken by a gather of index 0 along
// the "3" dim. The gather runs on each rank's heads, its axis whole; the
// sum over everything is partial.
// CHECK-LABEL: func.func @forward
// CHECK: %[[H:.*]] = cleave.gemm {{.*}} -> tensor<4x12xf32>
// CHECK: %[[V:.*]] = cleave.reshape %[[H]] {shape = array<i64: 4, 2, 3, 2>} : (tensor<4x12xf32>) -> tensor<4x2x3x2xf32>
// CHECK: %[[Q:.*]] = cleave.gather %[[V]], %{{.*}} {axis = 2 : i64} : (tensor<4x2x3x2xf32>, tensor<i64>) -> tensor<4x2x2xf32>
// CHECK: %[[L:.*]] = cleave.reduce_sum %[[Q]]
// CHECK: shard.all_reduce %[[L]] on @mesh grid_axes = [1] : tensor<f32> -> tensor<f32>
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<24x8xf32> {cleave.kind = "param", cleave.name = "w"})
    -> (tensor<f32> {cleave.name = "loss.sum"}) {
  %h = cleave.gemm %x, %w {trans_b = true} : (tensor<4x8xf32>, tensor<24x8xf32>) -> tensor<4x24xf32>
  %v = cleave.reshape %h {shape = array<i64: 4, 4, 3, 2>} : (tensor<4x24xf32>) -> tensor<4x4x3x2xf32>
  %zero = cleave.constant {value = dense<0> : tensor<i64>} : tensor<i64>
  %q = cleave.gather %v, %zero {axis = 2 : i64} : (tensor<4x4x3x2xf32>, tensor<i64>) -> tensor<4x4x2xf32>
  %l = cleave.reduce_sum %q {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<4x4x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
