// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-recompute{mode=selective})' | FileCheck %s
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-recompute{mode=selective},cleave-split-backward)' | FileCheck %s --check-prefix=SPLIT

// A pipeline stage's microbatch step, as cleave-build-train-step leaves it:
// its forward is what the value it sends on needs (the received activation,
// the product, its exponential), the rest its backward. The backward reads
// the product and its exponential; the exponential, cheap to make again
// from the product, which is kept anyway, is made just before the
// backward's first reader, after the gradient arrives. Split, the stage
// stashes the activation and the product, not the exponential.

// CHECK-LABEL: func.func @forward
// CHECK: %[[A:.*]] = cleave.pipeline_recv from stage 0 tag 0
// CHECK: %[[H:.*]] = cleave.matmul %[[A]], %arg0
// CHECK: %[[E:.*]] = cleave.exp %[[H]]
// CHECK: cleave.pipeline_send %[[E]] to stage 2 tag 1
// CHECK: %[[G:.*]] = cleave.pipeline_recv gradient from stage 2 tag 1
// CHECK-NEXT: %[[AGAIN:.*]] = cleave.exp %[[H]]
// CHECK-NEXT: %[[T:.*]] = cleave.mul %[[G]], %[[AGAIN]]
// CHECK-NEXT: cleave.mul %[[T]], %[[H]]

// SPLIT-LABEL: func.func @forward
// SPLIT-SAME: -> (tensor<4x8xf32> {cleave.kind = "stash", cleave.name = "stash:0"}, tensor<4x8xf32> {cleave.kind = "stash", cleave.name = "stash:1"})
// SPLIT: %[[A:.*]] = cleave.pipeline_recv from stage 0 tag 0
// SPLIT: %[[H:.*]] = cleave.matmul %[[A]], %arg0
// SPLIT: return %[[A]], %[[H]]
// SPLIT-LABEL: func.func @backward
// SPLIT: cleave.exp %arg3
func.func @forward(%w: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w"},
                   %count: tensor<f32> {cleave.accumulator, cleave.kind = "state", cleave.name = "cleave.loss_count"},
                   %gw: tensor<8x8xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "grad:w"})
    attributes {cleave.stage = 1 : i64} {
  %a = cleave.pipeline_recv from stage 0 tag 0 : tensor<4x8xf32>
  %h = cleave.matmul %a, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %e = cleave.exp %h : (tensor<4x8xf32>) -> tensor<4x8xf32>
  cleave.pipeline_send %e to stage 2 tag 1 : tensor<4x8xf32>
  %n = cleave.constant {value = dense<4.0> : tensor<f32>} : tensor<f32>
  %g = cleave.pipeline_recv gradient from stage 2 tag 1 : tensor<4x8xf32>
  %t = cleave.mul %g, %e : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %gh = cleave.mul %t, %h : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %ga = cleave.gemm %gh, %w {trans_b = true} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  cleave.pipeline_send gradient %ga to stage 0 tag 0 : tensor<4x8xf32>
  %gwm = cleave.gemm %a, %gh {trans_a = true} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %newc = cleave.add %count, %n : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %newg = cleave.add %gw, %gwm : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  cleave.assign %newc to %count : tensor<f32>
  cleave.assign %newg to %gw : tensor<8x8xf32>
  return
}
