// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-autodiff))' | FileCheck %s
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-autodiff{loss=other}))' 2>&1 | FileCheck %s --check-prefix=OTHER
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-autodiff{loss=missing}))' 2>&1 | FileCheck %s --check-prefix=MISSING

// The gradient of every parameter the loss depends on is appended to the
// results, named after the parameter; the seed is 1; a value read twice sums
// its two gradients; a parameter the loss does not reach (a mask read only
// through a comparison) gets none; inputs get none.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<f32> {cleave.name = "loss"}, tensor<3xf32> {cleave.name = "other"}, tensor<3xf32> {cleave.grad_of = "w", cleave.name = "grad:w"})
// CHECK: %[[SEED:.*]] = cleave.constant {value = dense<1.000000e+00> : tensor<f32>}
// CHECK: cleave.add
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}} : tensor<f32>, tensor<3xf32>, tensor<3xf32>
// OTHER: error: the loss 'other' is 'tensor<3xf32>', not a float scalar
// MISSING: error: no result named 'missing'
func.func @forward(%x: tensor<3xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<3xf32> {cleave.kind = "param", cleave.name = "w"},
                   %mask: tensor<3xf32> {cleave.kind = "param", cleave.name = "mask"})
    -> (tensor<f32> {cleave.name = "loss"}, tensor<3xf32> {cleave.name = "other"}) {
  %zero = cleave.constant {value = dense<0.0> : tensor<3xf32>} : tensor<3xf32>
  %keep = cleave.equal %mask, %zero : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
  %h = cleave.mul %x, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %sq = cleave.mul %h, %h : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %m = cleave.where %keep, %sq, %zero : (tensor<3xi1>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = cleave.reduce_sum %m {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l, %h : tensor<f32>, tensor<3xf32>
}

// A frozen parameter gets no gradient.
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-autodiff{freeze=w*}))' | FileCheck %s --check-prefix=FROZEN
// FROZEN-LABEL: func.func @forward
// FROZEN-SAME: -> (tensor<f32> {cleave.name = "loss"}, tensor<3xf32> {cleave.name = "other"})
// FROZEN-NOT: grad:
