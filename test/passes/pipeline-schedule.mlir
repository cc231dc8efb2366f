// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-pipeline-schedule{schedule=gpipe microbatches=3})' | FileCheck %s --check-prefix=GPIPE
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-pipeline-schedule{schedule=1f1b microbatches=4})' | FileCheck %s --check-prefix=ONEF
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-pipeline-schedule{schedule=zb-h1 microbatches=2})' | FileCheck %s --check-prefix=ZB
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-pipeline-schedule{schedule=1f1b microbatches=4},cleave-verify-pipeline-schedule)' | FileCheck %s --check-prefix=ONEF

// Two stages of equal cost (one 4x8x8 product each) on pp=2.
// GPipe: every forward, then every backward.
// GPIPE: cleave.pipeline_schedule = {estimated_flops = {{.*}}, kind = "gpipe", microbatches = 3 : i64, ranks = {{\[}}["F0@0", "F1@0", "F2@0", "B0@0", "B1@0", "B2@0"], ["F0@1", "F1@1", "F2@1", "B0@1", "B1@1", "B2@1"]]}
// 1F1B (Megatron's order): rank 0 warms up with P - 1 = 1 forward, then a
// forward and a backward in turn; the last rank alternates from the start.
// ONEF: cleave.pipeline_schedule = {estimated_flops = {{.*}}, kind = "1f1b", microbatches = 4 : i64, ranks = {{\[}}["F0@0", "F1@0", "B0@0", "F2@0", "B1@0", "F3@0", "B2@0", "B3@0"], ["F0@1", "B0@1", "F1@1", "B1@1", "F2@1", "B2@1", "F3@1", "B3@1"]]}
// ZB-H1: the backward split into I (what stage 0 waits for) and W, which
// fills the waits.
// ZB: ranks = {{\[}}["F0@0", "F1@0", "I0@0", "W0@0", "I1@0", "W1@0"], ["F0@1", "I0@1", "F1@1", "I1@1", "W0@1", "W1@1"]]
module {
  shard.grid @mesh(shape = 1x2) {cleave.axes = ["dp", "pp"]}
  func.func @stage0(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                    %w0: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w0"}) attributes {cleave.stage = 0 : i64} {
    %h = cleave.matmul %x, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    cleave.pipeline_send %h to stage 1 tag 0 : tensor<4x8xf32>
    return
  }
  func.func @stage1(%w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"}) -> tensor<4x8xf32> attributes {cleave.stage = 1 : i64} {
    %h = cleave.pipeline_recv from stage 0 tag 0 : tensor<4x8xf32>
    %y = cleave.matmul %h, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    return %y : tensor<4x8xf32>
  }
}
