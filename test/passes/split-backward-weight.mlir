// RUN: cleave-opt %s --cleave-split-backward=split-weight-gradients=true | FileCheck %s

// With split-weight-gradients (zb-h1) the backward splits once more:
// @backward keeps the activation's gradient it sends back, and
// @backward_weight the weight's accumulator, reading the product's scaled
// gradient from @backward's stash (wstash) and the activation from the
// forward's (stash:1, the same input as @backward's).

// CHECK-LABEL: func.func @forward
// CHECK: return %arg0, %{{.*}} : tensor<4x8xf32>, tensor<4x8xf32>
// CHECK-LABEL: func.func @backward
// CHECK-SAME: %arg0: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w"}
// CHECK-SAME: %[[S0:arg[0-9]+]]: tensor<4x8xf32> {cleave.kind = "stash", cleave.name = "stash:0"}
// CHECK-SAME: -> (tensor<4x8xf32> {cleave.kind = "stash", cleave.name = "wstash:0"})
// CHECK: %[[G:.*]] = cleave.pipeline_recv gradient from stage 2 tag 1
// CHECK: %[[GX:.*]] = cleave.mul %[[G]], %[[S0]]
// CHECK: %[[GA:.*]] = cleave.gemm %[[GX]], %arg0
// CHECK: cleave.pipeline_send gradient %[[GA]] to stage 0 tag 0
// CHECK-NOT: cleave.assign
// CHECK: return %[[GX]]
// CHECK-LABEL: func.func @backward_weight
// CHECK-SAME: %arg0: tensor<8x8xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "grad:w"}
// CHECK-SAME: %arg1: tensor<4x8xf32> {cleave.kind = "stash", cleave.name = "stash:1"}
// CHECK-SAME: %arg2: tensor<4x8xf32> {cleave.kind = "stash", cleave.name = "wstash:0"}
// CHECK-NOT: pipeline_
// CHECK: %[[GW:.*]] = cleave.gemm %arg1, %arg2
// CHECK: cleave.assign %{{.*}} to %arg0
// CHECK-NEXT: return
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w"},
                   %count: tensor<f32> {cleave.accumulator, cleave.kind = "state", cleave.name = "cleave.loss_count"},
                   %gw: tensor<8x8xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "grad:w"})
    attributes {cleave.stage = 1 : i64} {
  %a = cleave.pipeline_recv from stage 0 tag 0 : tensor<4x8xf32>
  %h = cleave.matmul %a, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  cleave.pipeline_send %h to stage 2 tag 1 : tensor<4x8xf32>
  %n = cleave.constant {value = dense<4.0> : tensor<f32>} : tensor<f32>
  %two = cleave.constant {value = dense<2.0> : tensor<f32>} : tensor<f32>
  %g = cleave.pipeline_recv gradient from stage 2 tag 1 : tensor<4x8xf32>
  %gx = cleave.mul %g, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %ga = cleave.gemm %gx, %w {trans_b = true} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  cleave.pipeline_send gradient %ga to stage 0 tag 0 : tensor<4x8xf32>
  %gwm = cleave.gemm %a, %gx {trans_a = true} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %scaled = cleave.mul %gwm, %two : (tensor<8x8xf32>, tensor<f32>) -> tensor<8x8xf32>
  %newc = cleave.add %count, %n : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %newg = cleave.add %gw, %scaled : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  cleave.assign %newc to %count : tensor<f32>
  cleave.assign %newg to %gw : tensor<8x8xf32>
  return
}
