// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,tp=2},cleave-annotate-sharding{plan=conv.weight=-/tp:3,conv.bias=tp:3},func.func(sharding-propagation{traversal=forward},cleave-check-sharding,shard-partition))' | FileCheck %s

// Hugging Face's Conv1D: flattened to 2-D, multiplied by weights held as
// (in, out) with the bias added, reshaped back. The reshapes keep the split
// dim, so the blocks reach the split into q, k and v.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: tensor<8x12xf32> {cleave.kind = "param", cleave.name = "conv.weight", cleave.split_axis = "tp", cleave.split_blocks = 3 : i64, cleave.split_dim = 1 : i64}
// CHECK-SAME: tensor<12xf32> {cleave.kind = "param", cleave.name = "conv.bias", cleave.split_axis = "tp", cleave.split_blocks = 3 : i64, cleave.split_dim = 0 : i64}
// CHECK: %[[P:.*]] = cleave.gemm %{{.*}} : (tensor<6x8xf32>, tensor<8x12xf32>, tensor<12xf32>) -> tensor<6x12xf32>
// CHECK: %[[R:.*]] = cleave.reshape %[[P]] {{.*}} : (tensor<6x12xf32>) -> tensor<2x3x12xf32>
// CHECK: cleave.split %[[R]] {axis = 2 : i64, cleave.blockwise, split = array<i64: 4, 4, 4>}
func.func @forward(%x: tensor<2x3x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<8x24xf32> {cleave.kind = "param", cleave.name = "conv.weight"},
                   %b: tensor<24xf32> {cleave.kind = "param", cleave.name = "conv.bias"})
    -> (tensor<f32> {cleave.name = "loss.sum"}) {
  %flat = cleave.reshape %x {shape = array<i64: 6, 8>} : (tensor<2x3x8xf32>) -> tensor<6x8xf32>
  %p = cleave.gemm %flat, %w, %b : (tensor<6x8xf32>, tensor<8x24xf32>, tensor<24xf32>) -> tensor<6x24xf32>
  %r = cleave.reshape %p {shape = array<i64: 2, 3, 24>} : (tensor<6x24xf32>) -> tensor<2x3x24xf32>
  %q, %k, %v = cleave.split %r {axis = 2 : i64, split = array<i64: 8, 8, 8>} : (tensor<2x3x24xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>)
  %qk = cleave.mul %q, %k : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %s = cleave.add %qk, %v : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %l = cleave.reduce_sum %s {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<2x3x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
