// RUN: not cleave-opt %s --pass-pipeline='builtin.module(cleave-data-parallel{mesh=dp=x})' 2>&1 | FileCheck %s --check-prefix=SIZE
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(cleave-data-parallel{mesh=dp=2,dp=2})' 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(cleave-data-parallel{mesh=tp=2})' 2>&1 | FileCheck %s --check-prefix=NODP
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-split-loss),cleave-data-parallel{mesh=dp=2})' 2>&1 | FileCheck %s --check-prefix=NOAPPLY

// SIZE: error: mesh entry 'dp=x' is not NAME=SIZE with SIZE >= 1
// TWICE: error: mesh axis 'dp' is named twice
// NODP: error: the mesh has no 'dp' axis
// NOAPPLY: error: has no @apply: run cleave-build-train-step first

func.func @forward(%x: tensor<f32> {cleave.kind = "input", cleave.name = "x"}) -> (tensor<f32> {cleave.name = "loss"}) {
  return %x : tensor<f32>
}
