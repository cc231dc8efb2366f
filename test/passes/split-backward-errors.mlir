// RUN: cleave-opt %s --split-input-file -verify-diagnostics --cleave-split-backward

// expected-error@+1 {{has no @forward of one block to split into forward and backward}}
module {
  func.func @apply() {
    return
  }
}

// -----

func.func @forward(%w: tensor<4xf32> {cleave.kind = "param", cleave.name = "w"})
    attributes {cleave.stage = 0 : i64} {
  // expected-error@+1 {{is a received gradient that the stage's forward needs}}
  %g = cleave.pipeline_recv gradient from stage 1 tag 0 : tensor<4xf32>
  %h = cleave.mul %g, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  cleave.pipeline_send %h to stage 1 tag 1 : tensor<4xf32>
  return
}
