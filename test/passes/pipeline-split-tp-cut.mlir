// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,tp=2,pp=2},cleave-annotate-sharding{plan=w1=-/tp,w2=tp/-},func.func(sharding-propagation{traversal=forward},cleave-check-sharding,shard-partition),cleave-pipeline-split)' | FileCheck %s

// A balanced cut: the row-parallel product's sum over tp stays in the
// product's stage, which sends the whole sum; the cut alone would put it
// in stage 1, which would receive the ranks' partial sums.
// CHECK-LABEL: func.func @stage0
// CHECK: %[[P:.*]] = cleave.matmul %{{.*}}, %arg2 : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[S:.*]] = shard.all_reduce %[[P]] on @mesh grid_axes = [1]
// CHECK: cleave.pipeline_send %[[S]] to stage 1 tag 0
// CHECK-LABEL: func.func @stage1
// CHECK: %[[R:.*]] = cleave.pipeline_recv from stage 0 tag 0
// CHECK-NOT: shard.all_reduce
// CHECK: cleave.matmul %[[R]], %arg0
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"},
                   %w2: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w2"},
                   %w3: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w3"})
    -> (tensor<f32> {cleave.name = "loss.sum"}) {
  %h = cleave.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a = cleave.tanh %h : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = cleave.matmul %a, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %z = cleave.matmul %y, %w3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = cleave.reduce_sum %z {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
