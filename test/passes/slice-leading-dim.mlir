// RUN: cleave-opt %s -split-input-file --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,tp=2},cleave-annotate-sharding{plan=w=tp/-},func.func(sharding-propagation{traversal=forward},cleave-check-sharding,shard-partition,cleave-slice-leading-dim,cleave-autodiff{loss=loss.sum}))' | FileCheck %s

// A row-parallel product whose input, an activation, arrives whole: each
// rank slices its part of the input's last dim (Megatron's row-parallel
// input), as a slice along dim 0 of the input with the parts moved to the
// front. Its gradient gathers the ranks' parts along dim 0 and moves them
// back through the same transpose.
// CHECK-LABEL: func.func @forward
// CHECK: %[[H:.*]] = cleave.tanh %arg0 : (tensor<4x6x8xf32>) -> tensor<4x6x8xf32>
// CHECK: %[[PARTS:.*]] = cleave.reshape %[[H]] {shape = array<i64: 4, 6, 2, 4>}
// CHECK: %[[FRONT:.*]] = cleave.transpose %[[PARTS]] {perm = array<i64: 2, 0, 1, 3>} : (tensor<4x6x2x4xf32>) -> tensor<2x4x6x4xf32>
// CHECK: %[[STACKED:.*]] = cleave.reshape %[[FRONT]] {shape = array<i64: 8, 6, 4>}
// CHECK: %[[MINE:.*]] = shard.all_slice %[[STACKED]] on @mesh grid_axes = [1] slice_axis = 0 : tensor<8x6x4xf32> -> tensor<4x6x4xf32>
// CHECK: cleave.matmul %[[MINE]], %arg1 : (tensor<4x6x4xf32>, tensor<4x8xf32>) -> tensor<4x6x8xf32>
// CHECK-NOT: shard.all_slice
// CHECK: %[[ALL:.*]] = shard.all_gather %{{.*}} on @mesh grid_axes = [1] gather_axis = 0 : tensor<4x6x4xf32> -> tensor<8x6x4xf32>
// CHECK: %[[R:.*]] = cleave.reshape %[[ALL]] {shape = array<i64: 2, 4, 6, 4>}
// CHECK: cleave.transpose %[[R]] {perm = array<i64: 1, 2, 0, 3>} : (tensor<2x4x6x4xf32>) -> tensor<4x6x2x4xf32>
func.func @forward(%x: tensor<4x6x8xf32> {cleave.kind = "param", cleave.name = "x"},
                   %w: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w"})
    -> (tensor<f32> {cleave.name = "loss.sum"}) {
  %h = cleave.tanh %x : (tensor<4x6x8xf32>) -> tensor<4x6x8xf32>
  %p = cleave.matmul %h, %w : (tensor<4x6x8xf32>, tensor<8x8xf32>) -> tensor<4x6x8xf32>
  %l = cleave.reduce_sum %p {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<4x6x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A slice along dim 0 already is what the runtime slices: left as it is.
// CHECK-LABEL: func.func @forward
// CHECK: %[[H:.*]] = cleave.tanh %arg0
// CHECK-NOT: cleave.reshape
// CHECK: shard.all_slice %[[H]] on @mesh grid_axes = [1] slice_axis = 0 : tensor<8x3xf32> -> tensor<4x3xf32>
// CHECK: shard.all_gather %{{.*}} on @mesh grid_axes = [1] gather_axis = 0 : tensor<4x3xf32> -> tensor<8x3xf32>
func.func @forward(%x: tensor<8x3xf32> {cleave.kind = "param", cleave.name = "x"},
                   %w: tensor<8x4xf32> {cleave.kind = "param", cleave.name = "w"})
    -> (tensor<f32> {cleave.name = "loss.sum"}) {
  %h = cleave.tanh %x : (tensor<8x3xf32>) -> tensor<8x3xf32>
  %t = cleave.transpose %w {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %p = cleave.matmul %t, %h : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  %l = cleave.reduce_sum %p {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
