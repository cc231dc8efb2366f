// RUN: cleave-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,tp=2 whole-sums=true},cleave-annotate-sharding{plan=w1=-/tp,w2=tp/-},func.func(sharding-propagation{traversal=forward},cleave-check-sharding,shard-partition,cleave-slice-leading-dim,cleave-autodiff{loss=loss.sum}),cleave-gather-split-products)' | FileCheck %s

// Megatron's MLP: w1 column parallel, w2 row parallel. The forward of w2
// sums over its split input dim, and so does the backward's product that
// makes x's gradient through w1: each gathers both factors whole (a split
// dim 1 moved into place by a reshape, a transpose and a reshape; w2's
// split dim 0 gathered as it is) and computes one device's product, with
// no all-reduce left.
// CHECK-LABEL: func.func @forward
// CHECK: %[[X:.*]] = cleave.all_reduce_grad %arg0
// CHECK: %[[A:.*]] = cleave.tanh
// CHECK: %[[AS:.*]] = shard.all_gather %[[A]] on @mesh grid_axes = [1] gather_axis = 0 : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK: %[[AP:.*]] = cleave.reshape %[[AS]] {shape = array<i64: 2, 4, 1, 4>}
// CHECK: %[[AT:.*]] = cleave.transpose %[[AP]] {perm = array<i64: 1, 2, 0, 3>}
// CHECK: %[[AW:.*]] = cleave.reshape %[[AT]] {shape = array<i64: 4, 8>}
// CHECK: %[[W2:.*]] = shard.all_gather %arg2 on @mesh grid_axes = [1] gather_axis = 0 : tensor<4x6xf32> -> tensor<8x6xf32>
// CHECK: %[[Y:.*]] = cleave.matmul %[[AW]], %[[W2]] : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
// CHECK: %[[LOSS:.*]] = cleave.reduce_sum %[[Y]]
// CHECK: %[[W1T:.*]] = cleave.transpose %arg1 {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
// CHECK: shard.all_gather %{{.*}} on @mesh grid_axes = [1] gather_axis = 0 : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK: %[[DH:.*]] = cleave.reshape %{{.*}} {shape = array<i64: 4, 8>}
// CHECK: %[[W1W:.*]] = shard.all_gather %[[W1T]] on @mesh grid_axes = [1] gather_axis = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
// CHECK: %[[DX:.*]] = cleave.matmul %[[DH]], %[[W1W]] : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK-NOT: shard.all_reduce
// CHECK: return %[[LOSS]], %[[DX]]
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "param", cleave.name = "x"},
                   %w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"},
                   %w2: tensor<8x6xf32> {cleave.kind = "param", cleave.name = "w2"})
    -> (tensor<f32> {cleave.name = "loss.sum"}) {
  %h = cleave.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a = cleave.tanh %h : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = cleave.matmul %a, %w2 : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  %l = cleave.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x6xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A loss summed over w1's split outputs: a sum over tp that no gathered
// product replaces stays, with a warning. x's gradient is made whole.
// CHECK-LABEL: func.func @forward
// CHECK: %[[PART:.*]] = cleave.reduce_sum
// CHECK: shard.all_reduce %[[PART]] on @mesh grid_axes = [1] : tensor<f32> -> tensor<f32>
// CHECK: cleave.matmul %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK-NOT: shard.all_reduce
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "param", cleave.name = "x"},
                   %w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"},
                   %w2: tensor<8x6xf32> {cleave.kind = "param", cleave.name = "w2"})
    -> (tensor<f32> {cleave.name = "loss.sum"}) {
  %h = cleave.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // expected-warning @below {{--deterministic: this sum over tp adds partial results other than products whose factors can be gathered: not bit for bit with one device}}
  %l = cleave.reduce_sum %h {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// x read whole (the residual) and by two column-parallel products: with
// whole sums each product reads x through an f of its own, so that each
// product's input gradient is made whole alone and x's three gradients are
// added as on one device (one f for both would add the two products' parts
// first, then sum them over tp).
// CHECK-LABEL: func.func @forward
// CHECK: %[[F1:.*]] = cleave.all_reduce_grad %arg0
// CHECK: cleave.matmul %[[F1]], %arg1
// CHECK: %[[F2:.*]] = cleave.all_reduce_grad %arg0
// CHECK: cleave.matmul %[[F2]], %arg1
// CHECK-NOT: shard.all_reduce
// CHECK: return
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "param", cleave.name = "x"},
                   %w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"},
                   %w2: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w2"})
    -> (tensor<f32> {cleave.name = "loss.sum"}) {
  %h = cleave.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %g = cleave.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %s = cleave.add %h, %g : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %a = cleave.tanh %s : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = cleave.matmul %a, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %z = cleave.add %y, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %l = cleave.reduce_sum %z {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
