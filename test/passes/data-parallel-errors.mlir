// RUN: not cleave-opt %s --pass-pipeline='builtin.module(cleave-data-parallel)' 2>&1 | FileCheck %s --check-prefix=NOMESH
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-split-loss),cleave-create-mesh{mesh=dp=2},cleave-data-parallel)' 2>&1 | FileCheck %s --check-prefix=NOAPPLY

// NOMESH: error: has no device mesh (shard.grid @mesh with its axes in cleave.axes): run cleave-create-mesh first
// NOAPPLY: error: has no @apply: run cleave-build-train-step first

func.func @forward(%x: tensor<f32> {cleave.kind = "input", cleave.name = "x"}) -> (tensor<f32> {cleave.name = "loss"}) {
  return %x : tensor<f32>
}
