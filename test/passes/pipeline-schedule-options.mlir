// The schedule pass's own refusals, before it writes anything.
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-pipeline-schedule{schedule=2f2b microbatches=4})' -verify-diagnostics
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(cleave-pipeline-schedule{schedule=1f1b microbatches=1})' 2>&1 | FileCheck %s --check-prefix=FEW
// FEW: error: the 1f1b schedule needs at least as many microbatches (1) as pipeline ranks (2)

// expected-error @+1 {{unknown pipeline schedule '2f2b': the schedules are gpipe, 1f1b, interleaved and zb-h1}}
module {
  shard.grid @mesh(shape = 1x2) {cleave.axes = ["dp", "pp"]}
  func.func @stage0(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"}) attributes {cleave.stage = 0 : i64} {
    %h = cleave.relu %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
    cleave.pipeline_send %h to stage 1 tag 0 : tensor<4x8xf32>
    return
  }
  func.func @stage1() -> tensor<4x8xf32> attributes {cleave.stage = 1 : i64} {
    %h = cleave.pipeline_recv from stage 0 tag 0 : tensor<4x8xf32>
    return %h : tensor<4x8xf32>
  }
}
