// RUN: cleave-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,tp=2},cleave-annotate-sharding{plan=w=tp/-},func.func(sharding-propagation{traversal=forward},cleave-check-sharding,shard-partition))' | FileCheck %s

// A constant of one repeated value added to a value split over tp (T5 adds
// a position bias of zeros over all heads to its cross-attention's scores):
// each rank makes its part, at the local shape, with no communication.
// CHECK-LABEL: func.func @forward
// CHECK: %[[P:.*]] = cleave.matmul %{{.*}} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
// CHECK: %[[Z:.*]] = cleave.constant {value = dense<2.500000e-01> : tensor<4x4xf32>} : tensor<4x4xf32>
// CHECK: cleave.add %[[P]], %[[Z]] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NOT: shard.all_slice
// CHECK-NOT: shard.all_gather
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w"})
    -> (tensor<f32> {cleave.name = "loss.sum"}) {
  %t = cleave.transpose %w {perm = array<i64: 1, 0>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %p = cleave.matmul %x, %t : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %c = cleave.constant {value = dense<0.25> : tensor<4x8xf32>} : tensor<4x8xf32>
  %s = cleave.add %p, %c : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %l = cleave.reduce_sum %s {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A constant of several values read split: each rank slices its part of it
// (no communication).
// CHECK-LABEL: func.func @forward
// CHECK: %[[C:.*]] = cleave.constant {value = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>} : tensor<2xf32>
// CHECK: %[[S:.*]] = shard.all_slice %[[C]] on @mesh grid_axes = [1] slice_axis = 0 : tensor<2xf32> -> tensor<1xf32>
// CHECK: cleave.add %{{.*}}, %[[S]] : (tensor<4x1xf32>, tensor<1xf32>) -> tensor<4x1xf32>
func.func @forward(%x: tensor<4x2xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<2x2xf32> {cleave.kind = "param", cleave.name = "w"})
    -> (tensor<f32> {cleave.name = "loss.sum"}) {
  %t = cleave.transpose %w {perm = array<i64: 1, 0>} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %p = cleave.matmul %x, %t : (tensor<4x2xf32>, tensor<2x2xf32>) -> tensor<4x2xf32>
  %c = cleave.constant {value = dense<[1.0, 2.0]> : tensor<2xf32>} : tensor<2xf32>
  %s = cleave.add %p, %c : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  %l = cleave.reduce_sum %s {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
