// RUN: cleave-opt %s --split-input-file -verify-diagnostics --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=2},cleave-data-parallel,cleave-memory-plan,cleave-overlap-gradients{bucket-bytes=64})'

// @apply sums an accumulator that no microbatch function (@forward, and a
// pipeline stage's @backward and @backward_weight) adds into: nothing could
// start its sum.
func.func @forward(%x: tensor<16xf32> {cleave.kind = "input", cleave.name = "x"},
                   %count: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.loss_count", cleave.accumulator}) {
  return
}

func.func @apply(
    // expected-error@+1 {{reduces accumulator 'cleave.loss_count', which no microbatch function writes}}
    %count: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.loss_count", cleave.accumulator},
    %lr: tensor<f32> {cleave.kind = "input", cleave.name = "cleave.lr"}) -> (tensor<f32> {cleave.name = "loss"}) {
  return %count : tensor<f32>
}
