// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=2},cleave-pipeline-split{stage-params=emb=0,mask=0,causal=0,head.*=1 send-tied-weights=true})' | FileCheck %s

// With send-tied-weights (--deterministic) a float parameter that both
// stages read is the first stage's and goes to the second each microbatch;
// a parameter no gradient reaches stays an argument of each stage that
// reads it, untrained as on one device: one of booleans (a mask), and one
// of floats that is only compared (a causal mask tested against 0 in
// stage 0, against the logits in stage 1).

// CHECK-LABEL: func.func @stage0
// CHECK-SAME: %arg1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "emb"}
// CHECK-SAME: %arg2: tensor<4x8xi1> {cleave.kind = "param", cleave.name = "mask"}
// CHECK-SAME: %arg3: tensor<4x8xf32> {cleave.kind = "param", cleave.name = "causal"}
// CHECK: cleave.pipeline_send %arg1 to stage 1 tag 0 : tensor<8x8xf32>
// CHECK-NOT: cleave.pipeline_send %arg3
// CHECK-LABEL: func.func @stage1
// CHECK-NOT: cleave.name = "emb"
// CHECK-SAME: %arg1: tensor<4x8xi1> {cleave.kind = "param", cleave.name = "mask"}
// CHECK-SAME: %arg2: tensor<4x8xf32> {cleave.kind = "param", cleave.name = "causal"}
// CHECK-SAME: %arg3: tensor<8xf32> {cleave.kind = "param", cleave.name = "head.bias"}
// CHECK: %[[EMB:.*]] = cleave.pipeline_recv from stage 0 tag 0 : tensor<8x8xf32>
// CHECK: cleave.matmul %{{.*}}, %[[EMB]]
// CHECK: cleave.less %{{.*}}, %arg2
// CHECK: cleave.where %arg1
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %emb: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "emb"},
                   %mask: tensor<4x8xi1> {cleave.kind = "param", cleave.name = "mask"},
                   %causal: tensor<4x8xf32> {cleave.kind = "param", cleave.name = "causal"},
                   %b: tensor<8xf32> {cleave.kind = "param", cleave.name = "head.bias"})
    -> (tensor<f32> {cleave.name = "loss.sum"}) {
  %zero = cleave.constant {value = dense<0.0> : tensor<f32>} : tensor<f32>
  %h0 = cleave.matmul %x, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %m0 = cleave.where %mask, %h0, %x : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %c0 = cleave.equal %causal, %zero : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xi1>
  %n0 = cleave.where %c0, %x, %m0 : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %biased = cleave.add %n0, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %logits = cleave.matmul %biased, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %c1 = cleave.less %logits, %causal : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
  %n1 = cleave.where %c1, %x, %logits : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m1 = cleave.where %mask, %n1, %x : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %l = cleave.reduce_sum %m1 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
