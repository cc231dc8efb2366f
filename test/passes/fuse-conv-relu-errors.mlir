// RUN: cleave-opt %s --verify-diagnostics --pass-pipeline='builtin.module(func.func(cleave-autodiff{loss=y}))'

// A fused conv cannot be differentiated: the fusion runs after autodiff.
func.func @forward(%x: tensor<1x2x5x5xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<4x2x3x3xf32> {cleave.kind = "param", cleave.name = "w"})
    -> (tensor<f32> {cleave.name = "y"}) {
  // expected-error @below {{with a fused relu has no gradient rule: fuse after autodiff}}
  %c = cleave.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64, relu} : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x3x3xf32>
  %y = cleave.reduce_sum %c {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : (tensor<1x4x3x3xf32>) -> tensor<f32>
  return %y : tensor<f32>
}
