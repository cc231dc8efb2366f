// RUN: cleave-opt %s -verify-diagnostics --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,tp=2},cleave-annotate-sharding{plan=qkv.weight=tp:3/-,wo=tp/-},func.func(sharding-propagation{traversal=forward},cleave-check-sharding,shard-partition,cleave-slice-leading-dim,cleave-autodiff{loss=loss.sum}),cleave-gather-split-products)' | FileCheck %s

// A fused q, k, v projection split in 3 blocks: each rank's part of the
// input gradient's factors holds its part of q, k and v. Gathered, the
// parts are put back in the whole's order (every rank's q, then k, then v),
// so that the product sums over the 24 rows in one device's order.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: tensor<12x8xf32> {cleave.kind = "param", cleave.name = "qkv.weight", cleave.split_axis = "tp", cleave.split_blocks = 3 : i64, cleave.split_dim = 0 : i64}
// CHECK: %[[DP:.*]] = cleave.concat
// CHECK: %[[W:.*]] = cleave.transpose %{{.*}} {perm = array<i64: 1, 0>} : (tensor<8x12xf32>) -> tensor<12x8xf32>
// CHECK: %[[DPS:.*]] = shard.all_gather %[[DP]] on @mesh grid_axes = [1] gather_axis = 0 : tensor<4x12xf32> -> tensor<8x12xf32>
// CHECK: %[[DPR:.*]] = cleave.reshape %[[DPS]] {shape = array<i64: 2, 4, 3, 4>}
// CHECK: %[[DPT:.*]] = cleave.transpose %[[DPR]] {perm = array<i64: 1, 2, 0, 3>} : (tensor<2x4x3x4xf32>) -> tensor<4x3x2x4xf32>
// CHECK: %[[DPW:.*]] = cleave.reshape %[[DPT]] {shape = array<i64: 4, 24>}
// CHECK: %[[WS:.*]] = shard.all_gather %[[W]] on @mesh grid_axes = [1] gather_axis = 0 : tensor<12x8xf32> -> tensor<24x8xf32>
// CHECK: %[[WR:.*]] = cleave.reshape %[[WS]] {shape = array<i64: 2, 3, 4, 8>}
// CHECK: %[[WT:.*]] = cleave.transpose %[[WR]] {perm = array<i64: 1, 0, 2, 3>} : (tensor<2x3x4x8xf32>) -> tensor<3x2x4x8xf32>
// CHECK: %[[WW:.*]] = cleave.reshape %[[WT]] {shape = array<i64: 24, 8>}
// CHECK: %[[DX:.*]] = cleave.matmul %[[DPW]], %[[WW]] : (tensor<4x24xf32>, tensor<24x8xf32>) -> tensor<4x8xf32>
// CHECK-NOT: shard.all_reduce
// CHECK: return %{{.*}}, %[[DX]]
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "param", cleave.name = "x"},
                   %qkv: tensor<24x8xf32> {cleave.kind = "param", cleave.name = "qkv.weight"},
                   %wo: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "wo"})
    -> (tensor<f32> {cleave.name = "loss.sum"}) {
  %t = cleave.transpose %qkv {perm = array<i64: 1, 0>} : (tensor<24x8xf32>) -> tensor<8x24xf32>
  %p = cleave.matmul %x, %t : (tensor<4x8xf32>, tensor<8x24xf32>) -> tensor<4x24xf32>
  %q, %k, %v = cleave.split %p {axis = 1 : i64, split = array<i64: 8, 8, 8>} : (tensor<4x24xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
  %qk = cleave.mul %q, %k : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = cleave.add %qk, %v : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %o = cleave.matmul %s, %wo : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = cleave.reduce_sum %o {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
