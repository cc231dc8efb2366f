// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,tp=2},cleave-annotate-sharding{plan=qkv.weight=tp:3/-},func.func(sharding-propagation{traversal=forward},cleave-check-sharding,shard-partition))' | FileCheck %s

// A fused projection split in 3 blocks: each rank holds its part of q, k
// and v (12 of 24 rows), the product is split like it, and the split into
// the blocks (`cleave.blockwise`) gives each rank its part of each.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: tensor<12x8xf32> {cleave.kind = "param", cleave.name = "qkv.weight", cleave.split_axis = "tp", cleave.split_blocks = 3 : i64, cleave.split_dim = 0 : i64}
// CHECK: %[[T:.*]] = cleave.transpose %{{.*}} {perm = array<i64: 1, 0>} : (tensor<12x8xf32>) -> tensor<8x12xf32>
// CHECK: %[[IN:.*]] = cleave.all_reduce_grad %arg0 on @mesh grid_axes = [1] : tensor<4x8xf32>
// CHECK: %[[P:.*]] = cleave.matmul %[[IN]], %[[T]] : (tensor<4x8xf32>, tensor<8x12xf32>) -> tensor<4x12xf32>
// CHECK: cleave.split %[[P]] {axis = 1 : i64, cleave.blockwise, split = array<i64: 4, 4, 4>}
// CHECK: %[[L:.*]] = cleave.reduce_sum
// A sum over a split dim is a partial sum, all-reduced.
// CHECK: shard.all_reduce %[[L]] on @mesh grid_axes = [1] : tensor<f32> -> tensor<f32>
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %qkv: tensor<24x8xf32> {cleave.kind = "param", cleave.name = "qkv.weight"})
    -> (tensor<f32> {cleave.name = "loss.sum"}) {
  %t = cleave.transpose %qkv {perm = array<i64: 1, 0>} : (tensor<24x8xf32>) -> tensor<8x24xf32>
  %p = cleave.matmul %x, %t : (tensor<4x8xf32>, tensor<8x24xf32>) -> tensor<4x24xf32>
  %q, %k, %v = cleave.split %p {axis = 1 : i64, split = array<i64: 8, 8, 8>} : (tensor<4x24xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
  %qk = cleave.mul %q, %k : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = cleave.add %qk, %v : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %l = cleave.reduce_sum %s {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

