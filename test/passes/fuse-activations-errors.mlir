// RUN: cleave-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(func.func(cleave-autodiff{loss=y}))'

// A fused conv or gemm cannot be differentiated: the fusion runs after
// autodiff.
func.func @forward(%x: tensor<1x2x5x5xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<4x2x3x3xf32> {cleave.kind = "param", cleave.name = "w"})
    -> (tensor<f32> {cleave.name = "y"}) {
  // expected-error @below {{with a fused activation has no gradient rule: fuse after autodiff}}
  %c = cleave.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64, activation = "relu"} : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x3x3xf32>
  %y = cleave.reduce_sum %c {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : (tensor<1x4x3x3xf32>) -> tensor<f32>
  return %y : tensor<f32>
}

// -----

// Nor a matmul with a transposed operand: cleave-fold-transposes runs after
// autodiff too.
func.func @forward(%x: tensor<2x4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<2x4x8xf32> {cleave.kind = "param", cleave.name = "w"})
    -> (tensor<f32> {cleave.name = "y"}) {
  // expected-error @below {{with a transposed operand has no gradient rule: fold transposes after autodiff}}
  %g = cleave.matmul %x, %w {trans_b = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  %y = cleave.reduce_sum %g {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<2x4x4xf32>) -> tensor<f32>
  return %y : tensor<f32>
}

// -----

func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w"})
    -> (tensor<f32> {cleave.name = "y"}) {
  // expected-error @below {{with a fused activation has no gradient rule: fuse after autodiff}}
  %g = cleave.gemm %x, %w {activation = "gelu"} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %y = cleave.reduce_sum %g {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
  return %y : tensor<f32>
}

// -----

func.func @forward(%x: tensor<1x2x5x5xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<1x4x3x3xf32> {
  // expected-error @below {{activation 'gelu' is not relu}}
  %c = cleave.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64, activation = "gelu"} : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x3x3xf32>
  return %c : tensor<1x4x3x3xf32>
}

// -----

func.func @forward(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  // expected-error @below {{activation 'tanh' is not relu or gelu}}
  %g = cleave.gemm %x, %w {activation = "tanh"} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %g : tensor<4x8xf32>
}
