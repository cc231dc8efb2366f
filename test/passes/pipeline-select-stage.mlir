// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=2},cleave-pipeline-split{stage-params=w0=0,w1=1,emb=0},cleave-pipeline-select-stage{stage=0})' | FileCheck %s --check-prefix=FIRST
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=2},cleave-pipeline-split{stage-params=w0=0,w1=1,emb=0},cleave-pipeline-select-stage{stage=1})' | FileCheck %s --check-prefix=LAST

// Each stage's program: its function as @forward, with every data input of
// the model (the labels the first stage does not read, the features the
// last does not), the loss's count computed in every stage from the labels
// and, before the last stage, a zero loss sum. The embedding the head reads
// again (tied) says which other stage reads it.

// FIRST-LABEL: func.func @forward
// FIRST-SAME: %arg0: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"}
// FIRST-SAME: %arg1: tensor<4xf32> {cleave.kind = "input", cleave.name = "y"}
// FIRST-SAME: %arg2: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "emb", cleave.other_stages = array<i64: 1>}
// FIRST-SAME: %arg3: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w0"}
// FIRST-SAME: -> (tensor<f32> {cleave.name = "loss.sum"}, tensor<f32> {cleave.name = "loss.count"})
// FIRST-SAME: attributes {cleave.stage = 0 : i64}
// FIRST: %[[COUNT:.*]] = cleave.reduce_sum %arg1
// FIRST: cleave.pipeline_send
// FIRST: %[[ZERO:.*]] = cleave.constant {value = dense<0.000000e+00> : tensor<f32>}
// FIRST: return %[[ZERO]], %[[COUNT]]
// FIRST-NOT: func.func @stage

// LAST-LABEL: func.func @forward
// LAST-SAME: %arg0: tensor<4xf32> {cleave.kind = "input", cleave.name = "y"}
// LAST-SAME: cleave.name = "emb", cleave.other_stages = array<i64: 0>
// LAST-SAME: cleave.name = "w1"
// LAST-SAME: %arg3: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"}
// LAST-SAME: attributes {cleave.stage = 1 : i64}
// LAST: cleave.pipeline_recv from stage 0 tag 0
// LAST: %[[SUM:.*]] = cleave.reduce_sum %{{.*}} {axes = array<i64: 0, 1>
// LAST: %[[COUNT:.*]] = cleave.reduce_sum %arg0
// LAST: return %[[SUM]], %[[COUNT]]
// LAST-NOT: func.func @stage
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %y: tensor<4xf32> {cleave.kind = "input", cleave.name = "y"},
                   %emb: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "emb"},
                   %w0: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w0"},
                   %w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"})
    -> (tensor<f32> {cleave.name = "loss.sum"}, tensor<f32> {cleave.name = "loss.count"}) {
  %e = cleave.matmul %x, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h0 = cleave.matmul %e, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h1 = cleave.matmul %h0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %logits = cleave.matmul %h1, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = cleave.reduce_sum %logits {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
  %n = cleave.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  return %l, %n : tensor<f32>, tensor<f32>
}
