// RUN: cleave-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(func.func(cleave-autodiff))'

// expected-error @+1 {{no scalar float result to differentiate}}
func.func @no_scalar(%w: tensor<3xf32> {cleave.kind = "param", cleave.name = "w"}) -> tensor<3xf32> {
  %0 = cleave.relu %w : (tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// expected-error @+1 {{more than one scalar float result: name the loss with loss=NAME}}
func.func @two_scalars(%w: tensor<f32> {cleave.kind = "param", cleave.name = "w"}) -> (tensor<f32>, tensor<f32>) {
  %0 = cleave.relu %w : (tensor<f32>) -> tensor<f32>
  return %0, %w : tensor<f32>, tensor<f32>
}

// -----

// The gradient ops have no rules of their own (no second derivatives).
func.func @no_rule(%g: tensor<1x1x2x2xf32> {cleave.kind = "param", cleave.name = "g"},
                   %x: tensor<1x1x4x4xf32> {cleave.kind = "input", cleave.name = "x"}) -> tensor<f32> {
  // expected-error @+1 {{cleave.max_pool_grad has no gradient rule, but the gradient flows through it}}
  %0 = cleave.max_pool_grad %g, %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x1x2x2xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  %1 = cleave.reduce_sum %0 {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : (tensor<1x1x4x4xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// Piecewise-constant ops have no gradient rule.
func.func @floor(%w: tensor<3xf32> {cleave.kind = "param", cleave.name = "w"}) -> tensor<f32> {
  // expected-error @+1 {{cleave.floor has no gradient rule, but the gradient flows through it}}
  %0 = cleave.floor %w : (tensor<3xf32>) -> tensor<3xf32>
  %1 = cleave.reduce_sum %0 {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}
