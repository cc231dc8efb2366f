// RUN: cleave-opt %s --split-input-file -verify-diagnostics --pass-pipeline='builtin.module(cleave-recompute{mode=full})'
// RUN: not cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-recompute{mode=most})' 2>&1 | FileCheck %s --check-prefix=MODE

// MODE: error: unknown recompute mode 'most': use none, selective or full

// A @forward that is not a training step: no loss sum to find the backward by.
// expected-error@+1 {{has no loss sum: recomputation needs a training step (run cleave-build-train-step first)}}
func.func @forward(%x: tensor<4xf32> {cleave.kind = "input", cleave.name = "x"}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// A pipeline stage whose effect is neither a send nor an assign: which side
// of the split it is on cannot be told.
func.func @forward(%g: tensor<4xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "grad:w", cleave.weights_offset = 0 : i64}) attributes {cleave.stage = 1 : i64} {
  // expected-error@+1 {{is neither a send nor an assign: cannot tell whether it belongs to the forward or the backward of a pipeline stage}}
  cleave.all_reduce_start %g on axis 0 : tensor<4xf32>
  return
}
