// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=3},cleave-pipeline-split)' | FileCheck %s

// A head that outweighs the layers before it, as a language model's does:
// its product is 2*8*64*4096 = 4194304 FLOPs, each layer's 2*8*64*64 =
// 65536. The smallest largest stage is the head's, and every cut of the
// four layers into the other two stages is within it and sends 2 KiB, so
// FLOPs and bytes alone cannot tell {h1, h2, h3} {h4} from an even cut.
// The stages' memory (a layer's 16 KiB weight and 2 KiB result) does: two
// layers each.

// CHECK-LABEL: func.func @stage0
// CHECK-SAME: cleave.name = "w1"
// CHECK-SAME: cleave.name = "w2"
// CHECK-NOT: cleave.name = "w3"
// CHECK-SAME: attributes {cleave.stage = 0 : i64}
// CHECK-COUNT-2: cleave.gemm
// CHECK-NOT: cleave.gemm
// CHECK: cleave.pipeline_send %{{.*}} to stage 1 tag 0 : tensor<8x64xf32>
// CHECK-LABEL: func.func @stage1
// CHECK-SAME: cleave.name = "w3"
// CHECK-SAME: cleave.name = "w4"
// CHECK-SAME: attributes {cleave.stage = 1 : i64}
// CHECK-COUNT-2: cleave.gemm
// CHECK-NOT: cleave.gemm
// CHECK: cleave.pipeline_send %{{.*}} to stage 2 tag 1 : tensor<8x64xf32>
// CHECK-LABEL: func.func @stage2
// CHECK-SAME: cleave.name = "head"
// CHECK-SAME: attributes {cleave.stage = 2 : i64}
// CHECK: cleave.pipeline_recv from stage 1 tag 1 : tensor<8x64xf32>
// CHECK: cleave.gemm
// CHECK: cleave.reduce_sum
func.func @forward(%x: tensor<8x64xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w1: tensor<64x64xf32> {cleave.kind = "param", cleave.name = "w1"},
                   %w2: tensor<64x64xf32> {cleave.kind = "param", cleave.name = "w2"},
                   %w3: tensor<64x64xf32> {cleave.kind = "param", cleave.name = "w3"},
                   %w4: tensor<64x64xf32> {cleave.kind = "param", cleave.name = "w4"},
                   %head: tensor<4096x64xf32> {cleave.kind = "param", cleave.name = "head"})
    -> (tensor<f32> {cleave.name = "loss.sum"}) {
  %h1 = cleave.gemm %x, %w1 {trans_b = true} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %h2 = cleave.gemm %h1, %w2 {trans_b = true} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %h3 = cleave.gemm %h2, %w3 {trans_b = true} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %h4 = cleave.gemm %h3, %w4 {trans_b = true} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %y = cleave.gemm %h4, %head {trans_b = true} : (tensor<8x64xf32>, tensor<4096x64xf32>) -> tensor<8x4096xf32>
  %l = cleave.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<8x4096xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
