// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-narrow-gradient-accumulators{type=bf16})' -verify-diagnostics -o /dev/null

// ZeRO 1/2's flat f32 buffer lays its members out in f32: refused.

func.func @forward(%g: tensor<4xf32> {cleave.kind = "input", cleave.name = "g"},
                   // expected-error @+1 {{gradient accumulator 'grad:w' is a member of ZeRO's flat f32 buffer: build the step with sliced masters}}
                   %slot: tensor<4xf32> {cleave.kind = "state", cleave.name = "grad:w", cleave.accumulator, cleave.flat_member = "flat:grads", cleave.flat_offset = 0 : i64}) {
  %sum = cleave.add %slot, %g : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  cleave.assign %sum to %slot : tensor<4xf32>
  return
}
