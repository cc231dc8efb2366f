// RUN: cleave-opt %s --split-input-file -verify-diagnostics --pass-pipeline='builtin.module(cleave-pipeline-select-stage{stage=2})'

// expected-error@+1 {{has no pipeline stage functions: run cleave-pipeline-split first}}
module {
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// expected-error@+1 {{has no pipeline stage 2: its stages are 0 to 1}}
module {
  func.func @stage0(%x: tensor<4xf32>) attributes {cleave.stage = 0 : i64} {
    return
  }
  func.func @stage1(%x: tensor<4xf32>) attributes {cleave.stage = 1 : i64} {
    return
  }
}
