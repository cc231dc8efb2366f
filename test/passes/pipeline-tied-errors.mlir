// RUN: cleave-opt %s -verify-diagnostics --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=2},cleave-pipeline-split{stage-params=emb=0,w1=1},cleave-pipeline-select-stage{stage=1},func.func(cleave-autodiff{loss=loss.sum}))'

// The head reads the embedding again (tied weights): stage 1 would train
// it apart from stage 0, whose gradient it never sees.
// expected-error@+1 {{trains parameter 'emb', which pipeline stage 0 reads too (tied weights): summing its gradients between stages is not built yet; put its readers in one stage (--stages) or freeze it (--freeze)}}
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %emb: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "emb"},
                   %w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"})
    -> (tensor<f32> {cleave.name = "loss.sum"}) {
  %e = cleave.matmul %x, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h = cleave.matmul %e, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %logits = cleave.matmul %h, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = cleave.reduce_sum %logits {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
