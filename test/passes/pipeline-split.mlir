// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=2},cleave-pipeline-split)' | FileCheck %s --check-prefix=AUTO
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=2},cleave-pipeline-split{virtual-stages=2})' | FileCheck %s --check-prefix=VIRTUAL

// A balanced cut. The first product costs 2*8*256*32 = 131072 FLOPs, the
// second 2*8*8100 = 129600, the rest a few: cutting after the first
// product makes the larger stage 131072, after the row sum 131080, within
// 5% of it, and sends 8 floats instead of 8 x 256, so that is the cut.

// AUTO-LABEL: func.func @stage0
// AUTO-SAME: %arg0: tensor<8x32xf32> {cleave.kind = "input", cleave.name = "x"}
// AUTO-SAME: %arg1: tensor<256x32xf32> {cleave.kind = "param", cleave.name = "w0"}
// AUTO-SAME: attributes {cleave.stage = 0 : i64}
// AUTO: %[[H:.*]] = cleave.gemm %arg0, %arg1
// AUTO: %[[S:.*]] = cleave.reduce_sum %[[H]]
// AUTO: cleave.pipeline_send %[[S]] to stage 1 tag 0 : tensor<8x1xf32>
// AUTO-NEXT: %[[ZERO:.*]] = cleave.constant {value = dense<0.000000e+00> : tensor<f32>}
// AUTO-NEXT: return %[[ZERO]]
// AUTO-LABEL: func.func @stage1
// AUTO-SAME: %arg0: tensor<8100x1xf32> {cleave.kind = "param", cleave.name = "w1"}
// AUTO-SAME: -> (tensor<f32> {cleave.name = "loss.sum"})
// AUTO-SAME: attributes {cleave.stage = 1 : i64}
// AUTO: %[[R:.*]] = cleave.pipeline_recv from stage 0 tag 0 : tensor<8x1xf32>
// AUTO: %[[Y:.*]] = cleave.gemm %[[R]], %arg0
// AUTO: %[[L:.*]] = cleave.reduce_sum %[[Y]]
// AUTO: return %[[L]]
// AUTO-NOT: func.func @forward

// Four stages on two ranks: each op its own stage, each value sent on.
// VIRTUAL-LABEL: func.func @stage0
// VIRTUAL: cleave.gemm
// VIRTUAL: cleave.pipeline_send %{{.*}} to stage 1 tag 0 : tensor<8x256xf32>
// VIRTUAL-LABEL: func.func @stage1
// VIRTUAL: cleave.pipeline_recv from stage 0 tag 0
// VIRTUAL: cleave.reduce_sum
// VIRTUAL: cleave.pipeline_send %{{.*}} to stage 2 tag 1 : tensor<8x1xf32>
// VIRTUAL-LABEL: func.func @stage2
// VIRTUAL-SAME: cleave.stage = 2
// VIRTUAL-LABEL: func.func @stage3
// VIRTUAL-SAME: cleave.stage = 3
// VIRTUAL: cleave.pipeline_recv from stage 2 tag 2 : tensor<8x8100xf32>
// VIRTUAL: return
func.func @forward(%x: tensor<8x32xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w0: tensor<256x32xf32> {cleave.kind = "param", cleave.name = "w0"},
                   %w1: tensor<8100x1xf32> {cleave.kind = "param", cleave.name = "w1"})
    -> (tensor<f32> {cleave.name = "loss.sum"}) {
  %h = cleave.gemm %x, %w0 {trans_b = true} : (tensor<8x32xf32>, tensor<256x32xf32>) -> tensor<8x256xf32>
  %s = cleave.reduce_sum %h {axes = array<i64: 1>, keepdims = true} : (tensor<8x256xf32>) -> tensor<8x1xf32>
  %y = cleave.gemm %s, %w1 {trans_b = true} : (tensor<8x1xf32>, tensor<8100x1xf32>) -> tensor<8x8100xf32>
  %l = cleave.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<8x8100xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
