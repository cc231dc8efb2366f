// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,tp=2},cleave-annotate-sharding{plan=fc1.weight=tp/-,fc1.bias=tp,fc2.weight=-/tp},func.func(sharding-propagation{traversal=forward},cleave-check-sharding,shard-partition))' | FileCheck %s
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,tp=2},cleave-annotate-sharding{plan=fc1.weight=tp/-,fc1.bias=tp,fc2.weight=-/tp},func.func(sharding-propagation{traversal=forward},cleave-check-sharding,shard-partition,cleave-autodiff{loss=loss.sum}))' | FileCheck %s --check-prefix=GRAD

// Tensor parallelism is upstream sharding-propagation and shard-partition
// over the cleave ops' sharding rules, between cleave-annotate-sharding and
// cleave-check-sharding
// (tensor-parallel-blocks.mlir and tensor-parallel-vocabulary.mlir have the
// fused projection and the vocabulary-parallel forms).

// A Megatron MLP: fc1 split by its output rows (column parallel), fc2 by its
// input columns (row parallel). The input enters the split block through
// f; fc2's product is a partial sum, all-reduced at once (g), and fc2's
// replicated bias joins after it.
// CHECK: shard.grid @mesh(shape = 1x2) {cleave.axes = ["dp", "tp"]}
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "fc1.weight", cleave.split_axis = "tp", cleave.split_blocks = 1 : i64, cleave.split_dim = 0 : i64}
// CHECK-SAME: %arg2: tensor<8xf32> {{{.*}}cleave.split_dim = 0 : i64}
// CHECK-SAME: %arg3: tensor<8x8xf32> {{{.*}}cleave.split_dim = 1 : i64}
// CHECK-SAME: %arg4: tensor<8xf32> {cleave.kind = "param", cleave.name = "fc2.bias"}
// CHECK-NOT: shard.shard
// CHECK: %[[IN:.*]] = cleave.all_reduce_grad %arg0 on @mesh grid_axes = [1] : tensor<4x8xf32>
// CHECK: %[[H:.*]] = cleave.gemm %[[IN]], %arg1, %arg2 {trans_b = true} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK: %[[A:.*]] = cleave.relu %[[H]] : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[P:.*]] = cleave.gemm %[[A]], %arg3 {trans_b = true} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[S:.*]] = shard.all_reduce %[[P]] on @mesh grid_axes = [1] : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK: %[[Y:.*]] = cleave.add %[[S]], %arg4
// CHECK: cleave.reduce_sum %[[Y]]

// The backward: g differentiates to the identity, and f's gradient (here
// the input's, which nothing needs) is not built; fc1's weight gradient is
// its local part.
// GRAD-LABEL: func.func @forward
// GRAD-COUNT-1: shard.all_reduce
// GRAD-NOT: shard.all_reduce
// GRAD: -> tensor<8x8xf32>
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w1: tensor<16x8xf32> {cleave.kind = "param", cleave.name = "fc1.weight"},
                   %b1: tensor<16xf32> {cleave.kind = "param", cleave.name = "fc1.bias"},
                   %w2: tensor<8x16xf32> {cleave.kind = "param", cleave.name = "fc2.weight"},
                   %b2: tensor<8xf32> {cleave.kind = "param", cleave.name = "fc2.bias"})
    -> (tensor<f32> {cleave.name = "loss.sum"}) {
  %h = cleave.gemm %x, %w1, %b1 {trans_b = true} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %a = cleave.relu %h : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = cleave.gemm %a, %w2, %b2 {trans_b = true} : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %l = cleave.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

