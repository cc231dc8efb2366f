// RUN: cleave-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,tp=2},cleave-annotate-sharding{plan=w=tp/-},func.func(sharding-propagation{traversal=forward},cleave-check-sharding,shard-partition))'

// Plans that do not fit the parameters (cleave-annotate-sharding), before
// anything changes.

// expected-error @below {{plan entry 'w: ["tp", "-"]' matches no parameter}}
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %v: tensor<16x8xf32> {cleave.kind = "param", cleave.name = "v"})
    -> tensor<f32> {
  %l = cleave.reduce_sum %v {axes = array<i64: 0, 1>, keepdims = false} : (tensor<16x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @below {{plan entry 'w: ["tp", "-"]' has 2 dims, but parameter 'w' is 'tensor<16xf32>'}}
func.func @forward(%w: tensor<16xf32> {cleave.kind = "param", cleave.name = "w"}) -> tensor<f32> {
  %l = cleave.reduce_sum %w {axes = array<i64: 0>, keepdims = false} : (tensor<16xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @below {{plan entry 'w: ["tp", "-"]': dim 0 of parameter 'w' (5) does not split into 1 x 2 equal parts}}
func.func @forward(%w: tensor<5x8xf32> {cleave.kind = "param", cleave.name = "w"}) -> tensor<f32> {
  %l = cleave.reduce_sum %w {axes = array<i64: 0, 1>, keepdims = false} : (tensor<5x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Shardings that would need a resharding nobody asked for
// (cleave-check-sharding), at the op that needs it.

// A split value the function returns.
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<16x8xf32> {cleave.kind = "param", cleave.name = "w"})
    -> tensor<4x16xf32> {
  %h = cleave.gemm %x, %w {trans_b = true} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  // expected-error @below {{returns a value split over tp (result #0)}}
  return %h : tensor<4x16xf32>
}

// -----

// Normalizing along the split dim has no rule.
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<16x8xf32> {cleave.kind = "param", cleave.name = "w"})
    -> tensor<f32> {
  %h = cleave.gemm %x, %w {trans_b = true} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  // expected-error @below {{has no tensor-parallel rule that keeps operand #0 split along dim 1 as it arrives: it is split because the plan splits 'w'}}
  %s = cleave.softmax %h {axis = 1 : i64} : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %l = cleave.reduce_sum %s {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x16xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A replicated parameter added to a split activation.
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<16x8xf32> {cleave.kind = "param", cleave.name = "w"},
                   %v: tensor<4x16xf32> {cleave.kind = "param", cleave.name = "v"})
    -> tensor<f32> {
  %h = cleave.gemm %x, %w {trans_b = true} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  // expected-error @below {{operand #0 arrives split over tp along dim 1, operand #1 whole along the same loop: split it in the plan too}}
  %s = cleave.add %h, %v : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %l = cleave.reduce_sum %s {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x16xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A reshape that would split a dim of 3 over 2 ranks.
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<6x8xf32> {cleave.kind = "param", cleave.name = "w"})
    -> tensor<f32> {
  %h = cleave.gemm %x, %w {trans_b = true} : (tensor<4x8xf32>, tensor<6x8xf32>) -> tensor<4x6xf32>
  // expected-error @below {{dim 1 (3) of this value does not split into 2 equal parts over tp}}
  %r = cleave.reshape %h {shape = array<i64: 4, 3, 2>} : (tensor<4x6xf32>) -> tensor<4x3x2xf32>
  %l = cleave.reduce_sum %r {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<4x3x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A mean over rows split over tp has no rule (a sum over them has).
func.func @forward(%x: tensor<4x3xf32> {cleave.kind = "input", cleave.name = "x"},
                   %labels: tensor<8xi64> {cleave.kind = "input", cleave.name = "labels"},
                   %w: tensor<8x4xf32> {cleave.kind = "param", cleave.name = "w"})
    -> tensor<f32> {
  %s = cleave.gemm %w, %x : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
  // expected-error @below {{has no tensor-parallel rule that keeps operand #0 split along dim 0 as it arrives}}
  %loss, %lp = cleave.softmax_cross_entropy_loss %s, %labels {reduction = "mean"} : (tensor<8x3xf32>, tensor<8xi64>) -> (tensor<f32>, tensor<8x3xf32>)
  return %loss : tensor<f32>
}

// -----

// An input, which no plan splits, added to a split activation: no hint to
// split it in the plan.
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %y: tensor<4x16xf32> {cleave.kind = "input", cleave.name = "y"},
                   %w: tensor<16x8xf32> {cleave.kind = "param", cleave.name = "w"})
    -> tensor<f32> {
  %h = cleave.gemm %x, %w {trans_b = true} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  // expected-error-re @below {{operand #0 arrives split over tp along dim 1, operand #1 whole along the same loop{{$}}}}
  %s = cleave.add %h, %y : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %l = cleave.reduce_sum %s {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x16xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
