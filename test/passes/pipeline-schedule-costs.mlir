// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-pipeline-schedule{schedule=zb-h1 microbatches=2})' | FileCheck %s

// The stage costs the lists are built from, against the formulas: a 4x8 by
// 8x8 product is 2 x 4 x 8 x 8 = 512 FLOPs, an elementwise op over 4x8 is
// 32; each operand that needs a gradient costs its op's forward again,
// in I when it is computed from a received value, in W when it is a
// parameter or computed from parameters alone.
// Stage 0: F = 512 + 32 (the product and the bias); I = 0 (it receives
// nothing: the data x needs no gradient); W = 512 (w0) + 2 x 32 (the
// product's value and the bias b0, both from parameters alone).
// Stage 1: F = 32 + 512 (tanh, the product); I = 32 (tanh of the received
// h) + 512 (the product's first factor, from h); W = 512 (w1). The send
// and receive cost nothing here.
// CHECK: estimated_flops = {forward = array<f64: 5.440000e+02, 5.440000e+02>, input_grad = array<f64: 0.000000e+00, 5.440000e+02>, weight_grad = array<f64: 5.760000e+02, 5.120000e+02>}
module {
  shard.grid @mesh(shape = 1x2) {cleave.axes = ["dp", "pp"]}
  func.func @stage0(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                    %w0: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w0"},
                    %b0: tensor<8xf32> {cleave.kind = "param", cleave.name = "b0"}) attributes {cleave.stage = 0 : i64} {
    %p = cleave.matmul %x, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %h = cleave.add %p, %b0 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    cleave.pipeline_send %h to stage 1 tag 0 : tensor<4x8xf32>
    return
  }
  func.func @stage1(%w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"}) -> tensor<4x8xf32> attributes {cleave.stage = 1 : i64} {
    %h = cleave.pipeline_recv from stage 0 tag 0 : tensor<4x8xf32>
    %t = cleave.tanh %h : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %y = cleave.matmul %t, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    return %y : tensor<4x8xf32>
  }
}
