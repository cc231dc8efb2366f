// RUN: cleave-opt %s -verify-diagnostics --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,tp=2 whole-sums=true},cleave-annotate-sharding{plan=emb.weight=tp/-},func.func(sharding-propagation{traversal=forward},cleave-check-sharding,shard-partition,cleave-slice-leading-dim,cleave-autodiff{loss=loss.sum}),cleave-gather-split-products)' | FileCheck %s

// A tied embedding split by vocabulary rows on a mesh with whole sums
// (--deterministic). The lookup's sum over tp adds one rank's row to zeros,
// exact: it stays, with no warning. The cross-entropy over the split
// classes gathers the scores and is one device's; its gradient's slice is
// this rank's (the all-gather's reverse rule). The head's input gradient,
// a sum over the split classes, gathers its factors: the weight's parts,
// and for the scores' gradient, sliced from a value every rank holds
// whole, that value itself, with no second gather.
// CHECK-LABEL: func.func @forward
// CHECK: %[[ROWS:.*]] = cleave.gather %arg2
// CHECK: %[[MINE:.*]] = cleave.mul %[[ROWS]]
// CHECK: shard.all_reduce %[[MINE]] on @mesh grid_axes = [1] : tensor<2x3x4xf32>
// CHECK: %[[S:.*]] = cleave.matmul %{{.*}}, %{{.*}} : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
// CHECK: shard.all_gather %[[S]] on @mesh grid_axes = [1] gather_axis = 0 : tensor<6x4xf32> -> tensor<12x4xf32>
// CHECK: %[[WHOLE:.*]] = cleave.reshape %{{.*}} {shape = array<i64: 6, 8>}
// CHECK: %{{.*}}, %[[LP:.*]] = cleave.softmax_cross_entropy_loss %[[WHOLE]], %arg1 {ignore_index = -100 : i64, reduction = "sum"} : (tensor<6x8xf32>, tensor<6xi64>)
// CHECK: %[[G:.*]] = cleave.softmax_cross_entropy_grad %[[LP]]
// CHECK: %[[STACKED:.*]] = cleave.reshape %{{.*}} {shape = array<i64: 12, 4>}
// CHECK: %[[PART:.*]] = shard.all_slice %[[STACKED]] on @mesh grid_axes = [1] slice_axis = 0 : tensor<12x4xf32> -> tensor<6x4xf32>
// CHECK-NOT: shard.all_gather %[[PART]]
// CHECK: %[[R:.*]] = cleave.reshape %[[STACKED]] {shape = array<i64: 2, 6, 1, 4>}
// CHECK: %[[T:.*]] = cleave.transpose %[[R]]
// CHECK: %[[DS:.*]] = cleave.reshape %[[T]] {shape = array<i64: 6, 8>}
// CHECK: %[[DH:.*]] = cleave.matmul %[[DS]], %{{.*}} : (tensor<6x8xf32>, tensor<8x4xf32>) -> tensor<6x4xf32>
// CHECK-NOT: shard.all_reduce
// CHECK: return
func.func @forward(%idx: tensor<2x3xi64> {cleave.kind = "input", cleave.name = "idx"},
                   %labels: tensor<6xi64> {cleave.kind = "input", cleave.name = "labels"},
                   %emb: tensor<8x4xf32> {cleave.kind = "param", cleave.name = "emb.weight"})
    -> (tensor<f32> {cleave.name = "loss.sum"}) {
  %e = cleave.gather %emb, %idx {axis = 0 : i64} : (tensor<8x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %h = cleave.reshape %e {shape = array<i64: 6, 4>} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %t = cleave.transpose %emb {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %s = cleave.matmul %h, %t : (tensor<6x4xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
  %loss, %lp = cleave.softmax_cross_entropy_loss %s, %labels {reduction = "sum", ignore_index = -100 : i64} : (tensor<6x8xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6x8xf32>)
  return %loss : tensor<f32>
}
