// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=2,tp=2},cleave-annotate-sharding{plan=w=tp/-})' | FileCheck %s

// Every tensor argument gets its sharding over tp (grid axis 1) for its
// users, used or not: `w` split along dim 0 as the plan says, `x` and the
// unused `u` replicated; the tensor result is annotated replicated; the
// scalar `s` needs none.
// CHECK: shard.grid @mesh(shape = 2x2) {cleave.axes = ["dp", "tp"]}
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg1: tensor<16x8xf32> {cleave.kind = "param", cleave.name = "w", cleave.split_axis = "tp", cleave.split_blocks = 1 : i64, cleave.split_dim = 0 : i64}
// CHECK: %[[R:.*]] = shard.sharding @mesh split_axes = [] : !shard.sharding
// CHECK: %[[X:.*]] = shard.shard %arg0 to %[[R]] annotate_for_users : tensor<4x8xf32>
// CHECK: %[[S:.*]] = shard.sharding @mesh split_axes = {{\[\[}}1]] : !shard.sharding
// CHECK: %[[W:.*]] = shard.shard %arg1 to %[[S]] annotate_for_users : tensor<16x8xf32>
// CHECK: shard.shard %arg2 to %{{.*}} annotate_for_users : tensor<3xf32>
// CHECK-NOT: shard.shard %arg3
// CHECK: %[[H:.*]] = cleave.gemm %[[X]], %[[W]]
// CHECK: %[[OUT:.*]] = shard.shard %{{.*}} to %{{.*}} annotate_for_users : tensor<4x16xf32>
// CHECK: return %[[OUT]]
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<16x8xf32> {cleave.kind = "param", cleave.name = "w"},
                   %u: tensor<3xf32> {cleave.kind = "param", cleave.name = "u"},
                   %s: tensor<f32> {cleave.kind = "param", cleave.name = "s"})
    -> tensor<4x16xf32> {
  %h = cleave.gemm %x, %w {trans_b = true} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %y = cleave.mul %h, %s : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}
