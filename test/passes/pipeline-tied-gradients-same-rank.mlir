// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=2},cleave-pipeline-split{stage-params=emb=0,w1=1,w2=2,w3=3 virtual-stages=2},cleave-pipeline-select-stage{stage=0},func.func(cleave-autodiff{loss=loss.sum}),cleave-build-train-step,cleave-pipeline-tied-gradients)' | FileCheck %s --check-prefix=CHECK
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=2},cleave-pipeline-split{stage-params=emb=0,w1=1,w2=2,w3=3 virtual-stages=2},cleave-pipeline-select-stage{stage=2},func.func(cleave-autodiff{loss=loss.sum}),cleave-build-train-step,cleave-pipeline-tied-gradients)' | FileCheck %s --check-prefix=SECOND
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=2},cleave-pipeline-split{stage-params=emb=0,w1=1,w2=2,w3=3 virtual-stages=2},cleave-pipeline-select-stage{stage=3},func.func(cleave-autodiff{loss=loss.sum}),cleave-build-train-step,cleave-pipeline-tied-gradients)' | FileCheck %s --check-prefix=LAST

// With two stages a rank (the interleaved schedule), the embedding is read
// by stages 0 and 2, both on pp rank 0: no message, the driver adds the two
// stages' accumulators before the update (runtime/driver/Training.cpp).

// CHECK-LABEL: func.func @apply
// CHECK-SAME: cleave.name = "grad:emb"
// CHECK-NOT: cleave.pipeline_send
// CHECK-NOT: cleave.pipeline_recv
// CHECK: return
module {
  func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                     %emb: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "emb"},
                     %w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"},
                     %w2: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w2"},
                     %w3: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w3"})
      -> (tensor<f32> {cleave.name = "loss.sum"}, tensor<f32> {cleave.name = "loss.count"}) {
    %e = cleave.matmul %x, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %h1 = cleave.matmul %e, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %h2 = cleave.matmul %h1, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %t = cleave.matmul %h2, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %logits = cleave.matmul %t, %w3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %l = cleave.reduce_sum %logits {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
    %n = cleave.constant {value = dense<4.0> : tensor<f32>} : tensor<f32>
    return %l, %n : tensor<f32>, tensor<f32>
  }
}

// -----

// Read by stages 0, 2 (rank 0) and 3 (rank 1): the driver adds stages 0
// and 2's copies first; then stage 0, the first of rank 0, sends that sum to
// stage 3, and stage 3 sends its own to both stages of rank 0. Every stage
// adds rank 0's sum and rank 1's in that order.

// CHECK-LABEL: func.func @apply
// CHECK-SAME: %[[ACC:arg[0-9]+]]: tensor<8x8xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "grad:emb"}
// CHECK-NEXT: cleave.pipeline_send gradient %[[ACC]] to stage 3 tag 4096
// CHECK-NEXT: %[[THEIRS:.*]] = cleave.pipeline_recv gradient from stage 3 tag 4096
// CHECK-NEXT: cleave.add %[[ACC]], %[[THEIRS]]

// Stage 2 is not its rank's first: it only receives.
// SECOND-LABEL: func.func @apply
// SECOND-NOT: tag 4096
// SECOND-LABEL: func.func @apply
// SECOND-SAME: %[[ACC:arg[0-9]+]]: tensor<8x8xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "grad:emb"}
// SECOND-NEXT: %[[THEIRS:.*]] = cleave.pipeline_recv gradient from stage 3 tag 4096
// SECOND-NEXT: cleave.add %[[ACC]], %[[THEIRS]]

// LAST-LABEL: func.func @apply
// LAST-NOT: tag 4096
// LAST-LABEL: func.func @apply
// LAST-SAME: %[[ACC:arg[0-9]+]]: tensor<8x8xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "grad:emb"}
// LAST-NEXT: cleave.pipeline_send gradient %[[ACC]] to stage 0 tag 4096
// LAST-NEXT: cleave.pipeline_send gradient %[[ACC]] to stage 2 tag 4096
// LAST-NEXT: %[[THEIRS:.*]] = cleave.pipeline_recv gradient from stage 0 tag 4096
// LAST-NEXT: cleave.add %[[THEIRS]], %[[ACC]]
module {
  func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                     %emb: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "emb"},
                     %w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"},
                     %w2: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w2"},
                     %w3: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w3"})
      -> (tensor<f32> {cleave.name = "loss.sum"}, tensor<f32> {cleave.name = "loss.count"}) {
    %e = cleave.matmul %x, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %h1 = cleave.matmul %e, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %h2 = cleave.matmul %h1, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %t = cleave.matmul %h2, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %h3 = cleave.matmul %t, %w3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %logits = cleave.matmul %h3, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %l = cleave.reduce_sum %logits {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
    %n = cleave.constant {value = dense<4.0> : tensor<f32>} : tensor<f32>
    return %l, %n : tensor<f32>, tensor<f32>
  }
}
