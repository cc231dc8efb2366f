// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,tp=2,pp=2},cleave-annotate-sharding{plan=w1=-/tp,w2=tp/-},func.func(sharding-propagation{traversal=forward},cleave-check-sharding,shard-partition),cleave-pipeline-split{stage-params=w0=0,w1=1,w2=1})' | FileCheck %s

// Megatron's f on stage 0's output, read by stage 1's column-parallel
// product, goes with its reader: stage 0 sends the output as it is, and the
// sum over tp of the product's input gradient is stage 1's, made of its
// own products (which cleave-gather-split-products can make whole under
// --deterministic), not partial sums sent back to stage 0.
// CHECK-LABEL: func.func @stage0
// CHECK: %[[A:.*]] = cleave.tanh
// CHECK-NOT: cleave.all_reduce_grad
// CHECK: cleave.pipeline_send %[[A]] to stage 1 tag 0
// CHECK-LABEL: func.func @stage1
// CHECK: %[[R:.*]] = cleave.pipeline_recv from stage 0 tag 0
// CHECK: %[[F:.*]] = cleave.all_reduce_grad %[[R]] on @mesh grid_axes = [1]
// CHECK: cleave.matmul %[[F]], %arg0
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w0: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w0"},
                   %w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"},
                   %w2: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w2"})
    -> (tensor<f32> {cleave.name = "loss.sum"}) {
  %h = cleave.matmul %x, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a = cleave.tanh %h : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %g = cleave.matmul %a, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %b = cleave.tanh %g : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = cleave.matmul %b, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = cleave.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
