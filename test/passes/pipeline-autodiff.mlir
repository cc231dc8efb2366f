// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(cleave-autodiff),cleave-pipeline-schedule{schedule=1f1b microbatches=2})' -verify-diagnostics | FileCheck %s

// Each stage differentiates on its own. The last one differentiates its
// loss, as one device does, and sends the gradient of what it received back
// to the stage it came from; an earlier stage, which has no loss,
// differentiates what it sent against the gradient that comes back: that
// gradient is the sent value's own, used as it arrives (no product with
// ones). The schedule pass then checks that every gradient sent meets its
// receive.

// CHECK-LABEL: func.func @stage0
// CHECK-SAME: -> (tensor<8x8xf32> {cleave.grad_of = "w0", cleave.name = "grad:w0"})
// CHECK: %[[H:.*]] = cleave.matmul %arg0, %arg1
// CHECK: cleave.pipeline_send %[[H]] to stage 1 tag 0
// CHECK: %[[BACK:.*]] = cleave.pipeline_recv gradient from stage 1 tag 0 : tensor<4x8xf32>
// CHECK-NEXT: %[[T:.*]] = cleave.transpose %arg0
// CHECK-NEXT: %[[GW:.*]] = cleave.matmul %[[T]], %[[BACK]]
// CHECK-NOT: cleave.pipeline_send
// CHECK: return %[[GW]]
// CHECK-LABEL: func.func @stage1
// CHECK-SAME: -> (tensor<f32> {cleave.name = "loss.sum"}, tensor<8x8xf32> {cleave.grad_of = "w1", cleave.name = "grad:w1"})
// CHECK: %[[IN:.*]] = cleave.pipeline_recv from stage 0 tag 0
// CHECK: %[[WT:.*]] = cleave.transpose %arg0
// CHECK: %[[GIN:.*]] = cleave.matmul %{{.*}}, %[[WT]]
// CHECK: cleave.pipeline_send gradient %[[GIN]] to stage 0 tag 0 : tensor<4x8xf32>
// CHECK: return
module {
  shard.grid @mesh(shape = 1x2) {cleave.axes = ["dp", "pp"]}
  func.func @stage0(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                    %w0: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w0"}) attributes {cleave.stage = 0 : i64} {
    %h = cleave.matmul %x, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    cleave.pipeline_send %h to stage 1 tag 0 : tensor<4x8xf32>
    return
  }
  func.func @stage1(%w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"}) -> (tensor<f32> {cleave.name = "loss.sum"}) attributes {cleave.stage = 1 : i64} {
    %h = cleave.pipeline_recv from stage 0 tag 0 : tensor<4x8xf32>
    %y = cleave.matmul %h, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %l = cleave.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A received value the loss does not depend on still gets a gradient back,
// zeros, so that the stage waiting for it is not left waiting.
// CHECK-LABEL: func.func @stage1
// CHECK: %[[ZEROS:.*]] = cleave.constant {value = dense<0.000000e+00> : tensor<4x8xf32>}
// CHECK: cleave.pipeline_send gradient %[[ZEROS]] to stage 0 tag 1
module {
  shard.grid @mesh(shape = 1x2) {cleave.axes = ["dp", "pp"]}
  func.func @stage0(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                    %w0: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w0"}) attributes {cleave.stage = 0 : i64} {
    %h = cleave.matmul %x, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %r = cleave.relu %h : (tensor<4x8xf32>) -> tensor<4x8xf32>
    cleave.pipeline_send %h to stage 1 tag 0 : tensor<4x8xf32>
    cleave.pipeline_send %r to stage 1 tag 1 : tensor<4x8xf32>
    return
  }
  func.func @stage1(%w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"}) -> (tensor<f32> {cleave.name = "loss.sum"}) attributes {cleave.stage = 1 : i64} {
    %h = cleave.pipeline_recv from stage 0 tag 0 : tensor<4x8xf32>
    %unused = cleave.pipeline_recv from stage 0 tag 1 : tensor<4x8xf32>
    %y = cleave.matmul %h, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %l = cleave.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

module {
  shard.grid @mesh(shape = 1x2) {cleave.axes = ["dp", "pp"]}
  // expected-error @+1 {{is a pipeline stage that sends no float value: nothing to differentiate}}
  func.func @stage0(%x: tensor<4x8xi64> {cleave.kind = "input", cleave.name = "x"}) attributes {cleave.stage = 0 : i64} {
    cleave.pipeline_send %x to stage 1 tag 0 : tensor<4x8xi64>
    return
  }
}
