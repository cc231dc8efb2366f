// Hand-broken schedules and stage functions: cleave-verify-pipeline-schedule
// refuses each, naming the ranks and actions or the op at fault.
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-verify-pipeline-schedule)' -verify-diagnostics

// expected-error @+1 {{pipeline schedule: the schedule deadlocks: rank 0 at B0@0, rank 1 at F1@1 each wait for an action that their ranks' orders never let run first}}
module attributes {cleave.pipeline_schedule = {kind = "hand", microbatches = 2 : i64, ranks = [["F0@0", "B0@0", "F1@0", "B1@0"], ["F1@1", "F0@1", "B0@1", "B1@1"]]}} {
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

// -----

// expected-error @+1 {{the schedule deadlocks: rank 0 at B0@0, rank 1 at F0@1}}
module attributes {cleave.pipeline_schedule = {kind = "hand", microbatches = 2 : i64, ranks = [["B0@0", "F0@0", "F1@0", "B1@0"], ["F0@1", "B0@1", "F1@1", "B1@1"]]}} {
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

// -----

// expected-error @+1 {{rank 0 never runs B0@0}}
module attributes {cleave.pipeline_schedule = {kind = "hand", microbatches = 2 : i64, ranks = [["F0@0", "F1@0", "B1@0"], ["F0@1", "B0@1", "F1@1", "B1@1"]]}} {
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

// -----

// expected-error @+1 {{rank 0's B0@0 is in the schedule twice}}
module attributes {cleave.pipeline_schedule = {kind = "hand", microbatches = 2 : i64, ranks = [["F0@0", "F1@0", "B0@0", "B0@0", "B1@0"], ["F0@1", "B0@1", "F1@1", "B1@1"]]}} {
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

// -----

// expected-error @+1 {{rank 0's F0@1: stage 1 runs on rank 1}}
module attributes {cleave.pipeline_schedule = {kind = "hand", microbatches = 2 : i64, ranks = [["F0@0", "F1@0", "B0@0", "B1@0", "F0@1"], ["B0@1", "F1@1", "B1@1"]]}} {
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

// -----

// expected-error @+1 {{schedule entry "X1@0" is not an action such as "F3@1" (F, B, I or W; microbatch; stage)}}
module attributes {cleave.pipeline_schedule = {kind = "hand", microbatches = 2 : i64, ranks = [["F0@0", "X1@0"], []]}} {
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

// -----

// expected-error @+1 {{rank 1's B0@1: a schedule uses either B or both I and W}}
module attributes {cleave.pipeline_schedule = {kind = "hand", microbatches = 2 : i64, ranks = [["F0@0", "F1@0", "I0@0", "W0@0", "I1@0", "W1@0"], ["F0@1", "B0@1", "F1@1", "I1@1", "W1@1"]]}} {
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

// -----

// expected-error @+1 {{rank 0's F2@0 names a microbatch or stage the pipeline does not have}}
module attributes {cleave.pipeline_schedule = {kind = "hand", microbatches = 2 : i64, ranks = [["F0@0", "F1@0", "B0@0", "B1@0", "F2@0"], ["F0@1", "B0@1", "F1@1", "B1@1"]]}} {
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

// -----

// expected-error @+1 {{pipeline schedule: the schedule has 1 ranks, the pipeline 2}}
module attributes {cleave.pipeline_schedule = {kind = "hand", microbatches = 2 : i64, ranks = [["F0@0"]]}} {
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

// -----

// expected-error @+1 {{has no cleave.pipeline_schedule with 'microbatches' and 'ranks': run cleave-pipeline-schedule first}}
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

// -----

module attributes {cleave.pipeline_schedule = {kind = "hand", microbatches = 1 : i64, ranks = [["F0@0", "B0@0"], ["F0@1", "B0@1"]]}} {
  shard.grid @mesh(shape = 1x2) {cleave.axes = ["dp", "pp"]}
  func.func @stage0(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"}) attributes {cleave.stage = 0 : i64} {
    %h = cleave.relu %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
    // expected-error @+1 {{tag 0 has no receive in stage 1}}
    cleave.pipeline_send %h to stage 1 tag 0 : tensor<4x8xf32>
    return
  }
  func.func @stage1() attributes {cleave.stage = 1 : i64} {
    %r = cleave.pipeline_recv from stage 0 tag 5 : tensor<4x8xf32>
    return
  }
}

// -----

module attributes {cleave.pipeline_schedule = {kind = "hand", microbatches = 1 : i64, ranks = [["F0@0", "B0@0"], ["F0@1", "B0@1"]]}} {
  shard.grid @mesh(shape = 1x2) {cleave.axes = ["dp", "pp"]}
  func.func @stage0(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"}) attributes {cleave.stage = 0 : i64} {
    %h = cleave.relu %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
    cleave.pipeline_send %h to stage 1 tag 0 : tensor<4x8xf32>
    return
  }
  func.func @stage1() attributes {cleave.stage = 1 : i64} {
    // expected-error @+1 {{receives tag 0 as 'tensor<8x4xf32>', but it is sent as 'tensor<4x8xf32>'}}
    %r = cleave.pipeline_recv from stage 0 tag 0 : tensor<8x4xf32>
    return
  }
}

// -----

module attributes {cleave.pipeline_schedule = {kind = "hand", microbatches = 1 : i64, ranks = [["F0@0", "B0@0"], ["F0@1", "B0@1"]]}} {
  shard.grid @mesh(shape = 1x2) {cleave.axes = ["dp", "pp"]}
  func.func @stage0(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"}) attributes {cleave.stage = 0 : i64} {
    %h = cleave.relu %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
    // expected-error @+1 {{sends tag 0 to stage 0 from stage 0: a value goes to a later stage}}
    cleave.pipeline_send %h to stage 0 tag 0 : tensor<4x8xf32>
    return
  }
  func.func @stage1() attributes {cleave.stage = 1 : i64} {
    %r = cleave.pipeline_recv from stage 0 tag 0 : tensor<4x8xf32>
    return
  }
}

// -----

module attributes {cleave.pipeline_schedule = {kind = "hand", microbatches = 1 : i64, ranks = [["F0@0", "B0@0"], ["F0@1", "B0@1"]]}} {
  shard.grid @mesh(shape = 1x2) {cleave.axes = ["dp", "pp"]}
  func.func @stage0(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"}) attributes {cleave.stage = 0 : i64} {
    %h = cleave.relu %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
    cleave.pipeline_send %h to stage 1 tag 0 : tensor<4x8xf32>
    return
  }
  func.func @stage1() attributes {cleave.stage = 1 : i64} {
    %r = cleave.pipeline_recv from stage 0 tag 0 : tensor<4x8xf32>
    // expected-error @+1 {{tag 1 is never sent}}
    %s = cleave.pipeline_recv from stage 0 tag 1 : tensor<4x8xf32>
    return
  }
}

// -----

module attributes {cleave.pipeline_schedule = {kind = "hand", microbatches = 1 : i64, ranks = [["F0@0", "B0@0"], ["F0@1", "B0@1"]]}} {
  shard.grid @mesh(shape = 1x2) {cleave.axes = ["dp", "pp"]}
  func.func @stage0(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"}) attributes {cleave.stage = 0 : i64} {
    %h = cleave.relu %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
    cleave.pipeline_send %h to stage 1 tag 0 : tensor<4x8xf32>
    return
  }
  // expected-error @+1 {{is stage 2, but the stage functions must be stages 0, 1, ... in order}}
  func.func @stage1() attributes {cleave.stage = 2 : i64} {
    %r = cleave.pipeline_recv from stage 0 tag 0 : tensor<4x8xf32>
    return
  }
}

// -----

// expected-error @+1 {{has 1 stage functions, not a whole number of stages for each of the 2 pp ranks: run cleave-pipeline-split first}}
module attributes {cleave.pipeline_schedule = {kind = "hand", microbatches = 1 : i64, ranks = [["F0@0", "B0@0"]]}} {
  shard.grid @mesh(shape = 1x2) {cleave.axes = ["dp", "pp"]}
  func.func @stage0(%x: tensor<4x8xf32>) attributes {cleave.stage = 0 : i64} {
    return
  }
}
