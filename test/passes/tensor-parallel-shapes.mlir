// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,tp=2},cleave-annotate-sharding{plan=w=tp/-},func.func(sharding-propagation{traversal=forward},cleave-check-sharding,shard-partition))' | FileCheck %s

// Shape ops keep a split where they keep its dim: unsqueeze and squeeze,
// expand (its shape attribute local), concat along another dim, and flatten
// where the split dim leads its group. The sum over everything is partial.
// CHECK-LABEL: func.func @forward
// CHECK: %[[H:.*]] = cleave.gemm {{.*}} -> tensor<4x8xf32>
// CHECK: %[[U:.*]] = cleave.unsqueeze %[[H]] {axes = array<i64: 0>} : (tensor<4x8xf32>) -> tensor<1x4x8xf32>
// CHECK: %[[S:.*]] = cleave.squeeze %[[U]] {axes = array<i64: 0>} : (tensor<1x4x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[E:.*]] = cleave.expand %[[S]] {shape = array<i64: 2, 4, 8>} : (tensor<4x8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[C:.*]] = cleave.concat %[[E]], %[[E]] {axis = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<4x4x8xf32>
// CHECK: %[[F:.*]] = cleave.flatten %[[C]] {axis = 2 : i64} : (tensor<4x4x8xf32>) -> tensor<16x8xf32>
// CHECK: %[[L:.*]] = cleave.reduce_sum %[[F]]
// CHECK: shard.all_reduce %[[L]] on @mesh grid_axes = [1] : tensor<f32> -> tensor<f32>
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<16x8xf32> {cleave.kind = "param", cleave.name = "w"})
    -> (tensor<f32> {cleave.name = "loss.sum"}) {
  %h = cleave.gemm %x, %w {trans_b = true} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %u = cleave.unsqueeze %h {axes = array<i64: 0>} : (tensor<4x16xf32>) -> tensor<1x4x16xf32>
  %s = cleave.squeeze %u {axes = array<i64: 0>} : (tensor<1x4x16xf32>) -> tensor<4x16xf32>
  %e = cleave.expand %s {shape = array<i64: 2, 4, 16>} : (tensor<4x16xf32>) -> tensor<2x4x16xf32>
  %c = cleave.concat %e, %e {axis = 0 : i64} : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<4x4x16xf32>
  %f = cleave.flatten %c {axis = 2 : i64} : (tensor<4x4x16xf32>) -> tensor<16x16xf32>
  %l = cleave.reduce_sum %f {axes = array<i64: 0, 1>, keepdims = false} : (tensor<16x16xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
