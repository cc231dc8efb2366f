// RUN: cleave-opt %s -verify-diagnostics --cleave-pipeline-tied-gradients

// expected-error@+1 {{has no pipeline stage's @forward and @apply: run cleave-pipeline-select-stage and cleave-build-train-step first}}
module {
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
