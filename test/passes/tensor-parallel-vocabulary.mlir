// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,tp=2},cleave-annotate-sharding{plan=emb.weight=tp/-},func.func(sharding-propagation{traversal=forward},cleave-check-sharding,shard-partition))' | FileCheck %s

// A tied embedding split by vocabulary rows: the lookup takes this rank's
// rows (its tp coordinate, an argument cleave-check-sharding adds) and
// all-reduces; the output head, the same table transposed, is column
// parallel (f on its input) and the cross-entropy over its split classes
// combines the row maxima (gathered), the sums of exponentials and the
// target scores over tp.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: tensor<4x4xf32> {cleave.kind = "param", cleave.name = "emb.weight", cleave.split_axis = "tp", cleave.split_blocks = 1 : i64, cleave.split_dim = 0 : i64}
// CHECK-SAME: %[[RANK:.*]]: tensor<i64> {cleave.kind = "state", cleave.name = "cleave.tp_rank", cleave.tp_coordinate}
// CHECK: %[[ROWS:.*]] = cleave.gather %{{.*}} {axis = 0 : i64} : (tensor<4x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
// CHECK: %[[MINE:.*]] = cleave.mul %[[ROWS]]
// CHECK: %[[E:.*]] = shard.all_reduce %[[MINE]] on @mesh grid_axes = [1] : tensor<2x3x4xf32>
// CHECK: %[[H:.*]] = cleave.reshape %[[E]]
// CHECK: %[[IN:.*]] = cleave.all_reduce_grad %[[H]] on @mesh grid_axes = [1] : tensor<6x4xf32>
// CHECK: %[[S:.*]] = cleave.matmul %[[IN]], %{{.*}} : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
// CHECK: shard.all_gather %{{.*}} on @mesh grid_axes = [1] gather_axis = 0 : tensor<1x6xf32> -> tensor<2x6xf32>
// CHECK: shard.all_reduce %{{.*}} on @mesh grid_axes = [1] : tensor<6xf32>
// CHECK: shard.all_reduce %{{.*}} on @mesh grid_axes = [1] : tensor<6xf32>
// CHECK-NOT: cleave.softmax_cross_entropy_loss
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
