// RUN: cleave-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(cleave-tensor-parallel{mesh=dp=1,tp=2 plan=w=tp/-})'


// A split value the function returns.
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<16x8xf32> {cleave.kind = "param", cleave.name = "w"})
    -> tensor<4x16xf32> {
  %h = cleave.gemm %x, %w {trans_b = true} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  // expected-error @below {{returns a value split over tp}}
  return %h : tensor<4x16xf32>
}

// -----

// Normalizing along the split dim has no rule.
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<16x8xf32> {cleave.kind = "param", cleave.name = "w"})
    -> tensor<f32> {
  %h = cleave.gemm %x, %w {trans_b = true} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  // expected-error @below {{normalizes along the dim split over tp}}
  %s = cleave.softmax %h {axis = 1 : i64} : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %l = cleave.reduce_sum %s {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x16xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A reduction over a split value has no rule yet.
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<16x8xf32> {cleave.kind = "param", cleave.name = "w"})
    -> tensor<f32> {
  %h = cleave.gemm %x, %w {trans_b = true} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  // expected-error @below {{has no tensor-parallel rule for an operand split over tp}}
  %l = cleave.reduce_sum %h {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x16xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
