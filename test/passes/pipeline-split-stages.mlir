// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=3},cleave-pipeline-split{stage-params=emb=0,w1=1,head.*=2})' | FileCheck %s
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=2},cleave-pipeline-split{stage-params=emb=0,w1=0,head.*=1})' | FileCheck %s --check-prefix=TWO
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=3},cleave-pipeline-split{stage-params=emb=0,w1=1,head.*=2 send-tied-weights=true})' | FileCheck %s --check-prefix=SENT

// A stages file: each parameter where its entry says, each op in the latest
// stage of what it reads. The embedding is tied (read again by the head in
// stage 2), so it is an argument of both; the first activation, which
// stages 1 and 2 read (stage 2 as a residual), goes to stage 1, which
// passes it on to stage 2; the scaled input depends on no parameter and is
// computed again where it is read.
// Every stage returns @forward's results: the stages before the last zeros
// for the loss, which depends on parameters.

// CHECK-LABEL: func.func @stage0
// CHECK-SAME: %arg0: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"}
// CHECK-SAME: %arg1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "emb"}
// CHECK: %[[SCALED:.*]] = cleave.mul %arg0
// CHECK: %[[H0:.*]] = cleave.matmul %[[SCALED]], %arg1
// CHECK: cleave.pipeline_send %[[H0]] to stage 1 tag 0
// CHECK-NEXT: %[[ZERO0:.*]] = cleave.constant {value = dense<0.000000e+00> : tensor<f32>}
// CHECK-NEXT: return %[[ZERO0]]
// CHECK-LABEL: func.func @stage1
// CHECK-SAME: cleave.name = "w1"
// CHECK: %[[IN:.*]] = cleave.pipeline_recv from stage 0 tag 0
// CHECK: %[[H1:.*]] = cleave.matmul %[[IN]], %arg0
// CHECK: cleave.pipeline_send %[[IN]] to stage 2 tag 1
// CHECK: cleave.pipeline_send %[[H1]] to stage 2 tag 2
// CHECK-NEXT: %[[ZERO1:.*]] = cleave.constant {value = dense<0.000000e+00> : tensor<f32>}
// CHECK-NEXT: return %[[ZERO1]]
// CHECK-LABEL: func.func @stage2
// CHECK-SAME: %arg0: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"}
// CHECK-SAME: %arg1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "emb"}
// CHECK-SAME: %arg2: tensor<8xf32> {cleave.kind = "param", cleave.name = "head.bias"}
// CHECK: %[[R0:.*]] = cleave.pipeline_recv from stage 1 tag 1
// CHECK: %[[R1:.*]] = cleave.pipeline_recv from stage 1 tag 2
// CHECK: %[[AGAIN:.*]] = cleave.mul %arg0
// CHECK: %[[BIASED:.*]] = cleave.add %[[R1]], %arg2
// CHECK: %[[RES:.*]] = cleave.add %[[BIASED]], %[[R0]]
// CHECK: %[[LOGITS:.*]] = cleave.matmul %[[RES]], %arg1
// CHECK: cleave.add %[[LOGITS]], %[[AGAIN]]
// CHECK-NOT: cleave.pipeline_send
// CHECK: return

// On two stages the first two products share stage 0.
// TWO-LABEL: func.func @stage0
// TWO: cleave.matmul
// TWO: cleave.matmul
// TWO: cleave.pipeline_send %{{.*}} to stage 1 tag 0
// TWO: cleave.pipeline_send %{{.*}} to stage 1 tag 1
// TWO-LABEL: func.func @stage1
// TWO-NOT: cleave.pipeline_send
// TWO: return
// With send-tied-weights (--deterministic) the tied embedding is stage 0's
// alone: it goes to stage 2 as a value does, its tag before the values'.
// SENT-LABEL: func.func @stage0
// SENT-SAME: cleave.name = "emb"
// SENT: %[[H0:.*]] = cleave.matmul %{{.*}}, %arg1
// SENT: cleave.pipeline_send %arg1 to stage 2 tag 0
// SENT: cleave.pipeline_send %[[H0]] to stage 1 tag 1
// SENT-LABEL: func.func @stage1
// SENT-NOT: cleave.name = "emb"
// SENT: cleave.pipeline_recv from stage 0 tag 1
// SENT-LABEL: func.func @stage2
// SENT-NOT: cleave.name = "emb"
// SENT-SAME: cleave.name = "head.bias"
// SENT: %[[EMB:.*]] = cleave.pipeline_recv from stage 0 tag 0 : tensor<8x8xf32>
// SENT: cleave.pipeline_recv from stage 1 tag 2
// SENT: %[[LOGITS:.*]] = cleave.matmul %{{.*}}, %[[EMB]]
// SENT-NOT: cleave.pipeline_send
// SENT: return
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %emb: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "emb"},
                   %w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"},
                   %b: tensor<8xf32> {cleave.kind = "param", cleave.name = "head.bias"})
    -> (tensor<f32> {cleave.name = "loss.sum"}) {
  %two = cleave.constant {value = dense<2.0> : tensor<f32>} : tensor<f32>
  %scaled = cleave.mul %x, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %h0 = cleave.matmul %scaled, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h1 = cleave.matmul %h0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %biased = cleave.add %h1, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %res = cleave.add %biased, %h0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %logits = cleave.matmul %res, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %shifted = cleave.add %logits, %scaled : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %l = cleave.reduce_sum %shifted {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
