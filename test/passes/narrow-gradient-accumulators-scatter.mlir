// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-narrow-gradient-accumulators{type=bf16})' | FileCheck %s

// ZeRO's reduce-scatters of bf16 accumulators read the flattened bf16
// accumulator, not a flattened f32 copy of it: one summed in bf16 gets a
// bf16 slice, which is widened; one summed in f32 widens the parts it sums
// (shard's reduce-scatter converts them to its result's type) and gets the
// f32 slice. An all-reduce in f32 still reads the f32 copy: its f32 result
// is the copy's size.
// CHECK-LABEL: func.func @apply
// CHECK-SAME: %[[A:[^:]*]]: tensor<4x4xbf16> {{.*}}"grad:a"
// CHECK-SAME: %[[B:[^:]*]]: tensor<4x4xbf16> {{.*}}"grad:b"
// CHECK-SAME: %[[C:[^:]*]]: tensor<4xbf16> {{.*}}"grad:c"
// CHECK: %[[FLAT:.*]] = cleave.reshape %[[A]] {shape = array<i64: 16>} : (tensor<4x4xbf16>) -> tensor<16xbf16>
// CHECK-NEXT: %[[SLICE:.*]] = shard.reduce_scatter %[[FLAT]] on @mesh grid_axes = [0] scatter_axis = 0 : tensor<16xbf16> -> tensor<8xbf16>
// CHECK-NEXT: %[[WIDE:.*]] = cleave.cast %[[SLICE]] {to = f32} : (tensor<8xbf16>) -> tensor<8xf32>
// CHECK-NEXT: %[[FLAT_B:.*]] = cleave.reshape %[[B]] {shape = array<i64: 16>} : (tensor<4x4xbf16>) -> tensor<16xbf16>
// CHECK-NEXT: %[[SLICE_B:.*]] = shard.reduce_scatter %[[FLAT_B]] on @mesh grid_axes = [0] scatter_axis = 0 : tensor<16xbf16> -> tensor<8xf32>
// CHECK-NEXT: %[[COPY:.*]] = cleave.cast %[[C]] {to = f32} : (tensor<4xbf16>) -> tensor<4xf32>
// CHECK-NEXT: %[[TOTAL:.*]] = shard.all_reduce %[[COPY]] on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT: return %[[WIDE]], %[[SLICE_B]], %[[TOTAL]]

shard.grid @mesh(shape = 2) {cleave.axes = ["dp"]}

func.func @apply(%a: tensor<4x4xf32> {cleave.kind = "state", cleave.name = "grad:a", cleave.accumulator},
                 %b: tensor<4x4xf32> {cleave.kind = "state", cleave.name = "grad:b", cleave.accumulator},
                 %c: tensor<4xf32> {cleave.kind = "state", cleave.name = "grad:c", cleave.accumulator}) -> (tensor<8xf32>, tensor<8xf32>, tensor<4xf32>) {
  %flat = cleave.reshape %a {shape = array<i64: 16>} : (tensor<4x4xf32>) -> tensor<16xf32>
  %slice = shard.reduce_scatter %flat on @mesh grid_axes = [0] scatter_axis = 0 {cleave.sum_type = bf16} : tensor<16xf32> -> tensor<8xf32>
  %flat_b = cleave.reshape %b {shape = array<i64: 16>} : (tensor<4x4xf32>) -> tensor<16xf32>
  %slice_b = shard.reduce_scatter %flat_b on @mesh grid_axes = [0] scatter_axis = 0 : tensor<16xf32> -> tensor<8xf32>
  %total = shard.all_reduce %c on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  return %slice, %slice_b, %total : tensor<8xf32>, tensor<8xf32>, tensor<4xf32>
}
