// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(cleave-autodiff))' | FileCheck %s

// A Gemm's C gradient is beta times the result's, summed over the rows C is
// broadcast down. With beta = 1 the gradient is summed as it is: no pass
// multiplying it by one.
// CHECK-LABEL: func.func @unit_beta
// CHECK: %[[G:.*]] = cleave.expand
// CHECK-NOT: cleave.mul
// CHECK: cleave.reduce_sum %[[G]] {axes = array<i64: 0>
func.func @unit_beta(%x: tensor<4x3xf32> {cleave.kind = "input", cleave.name = "x"},
                     %w: tensor<2x3xf32> {cleave.kind = "param", cleave.name = "w"},
                     %b: tensor<2xf32> {cleave.kind = "param", cleave.name = "b"})
    -> (tensor<f32> {cleave.name = "loss"}) {
  %y = cleave.gemm %x, %w, %b {trans_b = true} : (tensor<4x3xf32>, tensor<2x3xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  %l = cleave.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Any other beta scales it first.
// CHECK-LABEL: func.func @half_beta
// CHECK: %[[G:.*]] = cleave.expand
// CHECK: %[[HALF:.*]] = cleave.constant {value = dense<5.000000e-01> : tensor<f32>}
// CHECK: %[[S:.*]] = cleave.mul %[[HALF]], %[[G]]
// CHECK: cleave.reduce_sum %[[S]] {axes = array<i64: 0>
func.func @half_beta(%x: tensor<4x3xf32> {cleave.kind = "input", cleave.name = "x"},
                     %w: tensor<2x3xf32> {cleave.kind = "param", cleave.name = "w"},
                     %b: tensor<2xf32> {cleave.kind = "param", cleave.name = "b"})
    -> (tensor<f32> {cleave.name = "loss"}) {
  %y = cleave.gemm %x, %w, %b {beta = 5.000000e-01 : f32, trans_b = true} : (tensor<4x3xf32>, tensor<2x3xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  %l = cleave.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
