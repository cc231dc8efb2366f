// RUN: cleave-opt %s -verify-diagnostics --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=2,pp=2},cleave-pipeline-split{stage-params=emb=0,w1=1},cleave-pipeline-select-stage{stage=1},func.func(cleave-autodiff{loss=loss.sum}),cleave-build-train-step{zero=1})'

// A weight two pipeline stages hold (tied) with ZeRO 1, which keeps its
// gradients in a flat buffer laid out per stage, which the stages' sum does
// not reach (ZeRO 3's per-parameter slices it does).
// expected-error@+1 {{trains parameter 'emb', which pipeline stage 0 reads too (tied weights), with ZeRO 1: not built yet; train with --zero 3 or without --zero, or put its readers in one stage (--stages)}}
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %emb: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "emb"},
                   %w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"})
    -> (tensor<f32> {cleave.name = "loss.sum"}, tensor<f32> {cleave.name = "loss.count"}) {
  %e = cleave.matmul %x, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h = cleave.matmul %e, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %logits = cleave.matmul %h, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = cleave.reduce_sum %logits {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
  %n = cleave.constant {value = dense<4.0> : tensor<f32>} : tensor<f32>
  return %l, %n : tensor<f32>, tensor<f32>
}
