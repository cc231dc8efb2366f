// RUN: cleave-opt %s --split-input-file --cleave-split-backward | FileCheck %s

// A stage between others, as cleave-build-train-step leaves it: the forward
// receives an activation, multiplies and sends the product on; the backward
// receives the product's gradient, sends the activation's back and adds the
// weight's into its accumulator. The forward keeps the send and the loss's
// accumulators; the backward reads the activation and the data input it
// needs from the stash; the constant is made again, not stashed.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg0: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"}
// CHECK-SAME: -> (tensor<4x8xf32> {cleave.kind = "stash", cleave.name = "stash:0"}, tensor<4x8xf32> {cleave.kind = "stash", cleave.name = "stash:1"})
// CHECK-SAME: attributes {cleave.stage = 1 : i64}
// CHECK: %[[A:.*]] = cleave.pipeline_recv from stage 0 tag 0
// CHECK: %[[H:.*]] = cleave.matmul %[[A]], %arg1
// CHECK: cleave.pipeline_send %[[H]] to stage 2 tag 1
// CHECK: cleave.assign %{{.*}} to %arg2
// CHECK-NOT: gradient
// CHECK: return %arg0, %[[A]]
// CHECK-LABEL: func.func @backward
// CHECK-SAME: %arg0: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w"}
// CHECK-SAME: %arg1: tensor<8x8xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "grad:w"}
// CHECK-SAME: %arg2: tensor<4x8xf32> {cleave.kind = "stash", cleave.name = "stash:0"}
// CHECK-SAME: %arg3: tensor<4x8xf32> {cleave.kind = "stash", cleave.name = "stash:1"}
// CHECK-SAME: attributes {cleave.stage = 1 : i64}
// CHECK: %[[TWO:.*]] = cleave.constant {value = dense<2.000000e+00>
// CHECK: %[[G:.*]] = cleave.pipeline_recv gradient from stage 2 tag 1
// CHECK: %[[GX:.*]] = cleave.mul %[[G]], %arg2
// CHECK: %[[GA:.*]] = cleave.gemm %[[GX]], %arg0
// CHECK: cleave.pipeline_send gradient %[[GA]] to stage 0 tag 0
// CHECK: %[[GW:.*]] = cleave.gemm %arg3, %[[GX]]
// CHECK: %[[SCALED:.*]] = cleave.mul %[[GW]], %[[TWO]]
// CHECK: %[[SUM:.*]] = cleave.add %arg1, %[[SCALED]]
// CHECK: cleave.assign %[[SUM]] to %arg1
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

// -----

// The last stage of a tied head, as torch exports it: the logits are the
// product with the embedding's transpose (here of a reshape of it), which
// the backward reads too. A transpose or reshape of a parameter is made again
// in the backward, not stashed; the received activation is stashed.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<4x8xf32> {cleave.kind = "stash", cleave.name = "stash:0"})
// CHECK: %[[A:.*]] = cleave.pipeline_recv from stage 0 tag 0
// CHECK: return %[[A]]
// CHECK-LABEL: func.func @backward
// CHECK-SAME: %arg0: tensor<128xf32> {cleave.kind = "param", cleave.name = "emb"}
// CHECK-SAME: %arg2: tensor<4x8xf32> {cleave.kind = "stash", cleave.name = "stash:0"})
// CHECK: %[[FLAT:.*]] = cleave.reshape %arg0
// CHECK: %[[T:.*]] = cleave.transpose %[[FLAT]]
// CHECK: %[[G:.*]] = cleave.pipeline_recv gradient from stage 2 tag 1
// CHECK: cleave.gemm %[[G]], %[[T]] {trans_b = true}
func.func @forward(%emb: tensor<128xf32> {cleave.kind = "param", cleave.name = "emb"},
                   %gemb: tensor<128xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "grad:emb"})
    attributes {cleave.stage = 1 : i64} {
  %a = cleave.pipeline_recv from stage 0 tag 0 : tensor<4x8xf32>
  %flat = cleave.reshape %emb {shape = array<i64: 16, 8>} : (tensor<128xf32>) -> tensor<16x8xf32>
  %t = cleave.transpose %flat {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %logits = cleave.matmul %a, %t : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  cleave.pipeline_send %logits to stage 2 tag 1 : tensor<4x16xf32>
  %g = cleave.pipeline_recv gradient from stage 2 tag 1 : tensor<4x16xf32>
  %ga = cleave.gemm %g, %t {trans_b = true} : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  cleave.pipeline_send gradient %ga to stage 0 tag 0 : tensor<4x8xf32>
  %gt = cleave.gemm %g, %a {trans_a = true} : (tensor<4x16xf32>, tensor<4x8xf32>) -> tensor<16x8xf32>
  %gflat = cleave.reshape %gt {shape = array<i64: 128>} : (tensor<16x8xf32>) -> tensor<128xf32>
  %newg = cleave.add %gemb, %gflat : (tensor<128xf32>, tensor<128xf32>) -> tensor<128xf32>
  cleave.assign %newg to %gemb : tensor<128xf32>
  return
}
