// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=2},cleave-pipeline-split{stage-params=emb=0,w1=1},cleave-pipeline-select-stage{stage=0},func.func(cleave-autodiff{loss=loss.sum}),cleave-build-train-step{clip-grad-norm=1.0},cleave-pipeline-tied-gradients)' | FileCheck %s --check-prefix=FIRST
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=2},cleave-pipeline-split{stage-params=emb=0,w1=1},cleave-pipeline-select-stage{stage=1},func.func(cleave-autodiff{loss=loss.sum}),cleave-build-train-step{clip-grad-norm=1.0},cleave-pipeline-tied-gradients)' | FileCheck %s --check-prefix=LAST

// The head reads the embedding again (tied weights): both stages hold and
// train it. Each sends its gradient to the other and adds the two in stage
// order, so both copies take the same step; the clipping norm counts the
// embedding in stage 0 only.

// FIRST-LABEL: func.func @apply
// FIRST-SAME: %[[ACC:arg[0-9]+]]: tensor<8x8xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "grad:emb"}
// FIRST-NEXT: cleave.pipeline_send gradient %[[ACC]] to stage 1 tag 4096
// FIRST-NEXT: %[[THEIRS:.*]] = cleave.pipeline_recv gradient from stage 1 tag 4096
// FIRST-NEXT: %[[SUM:.*]] = cleave.add %[[ACC]], %[[THEIRS]]
// FIRST: cleave.div %[[SUM]]
// FIRST: cleave.assign %{{.*}} to %[[ACC]]

// LAST-LABEL: func.func @apply
// LAST-SAME: %[[ACC:arg[0-9]+]]: tensor<8x8xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "grad:emb"}
// LAST-NEXT: cleave.pipeline_send gradient %[[ACC]] to stage 0 tag 4096
// LAST-NEXT: %[[THEIRS:.*]] = cleave.pipeline_recv gradient from stage 0 tag 4096
// LAST-NEXT: %[[SUM:.*]] = cleave.add %[[THEIRS]], %[[ACC]]
// LAST: %[[MEAN:.*]] = cleave.div %[[SUM]]
// LAST-NOT: cleave.mul %[[MEAN]], %[[MEAN]]
// LAST: shard.all_reduce
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %emb: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "emb"},
                   %w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"})
    -> (tensor<f32> {cleave.name = "loss.sum"}, tensor<f32> {cleave.name = "loss.count"}) {
  %e = cleave.matmul %x, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h = cleave.matmul %e, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %logits = cleave.matmul %h, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = cleave.reduce_sum %logits {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
  %n = cleave.constant {value = dense<4.0> : tensor<f32>} : tensor<f32>
  return %l, %n : tensor<f32>, tensor<f32>
}
