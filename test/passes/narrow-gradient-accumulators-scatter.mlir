// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-narrow-gradient-accumulators{type=bf16})' | FileCheck %s

// ZeRO's reduce-scatter of a bf16 accumulator summed in bf16 reads the
// flattened bf16 accumulator, not a flattened f32 copy of it; the slice it
// gets is widened. One summed in f32 still reads the f32 copy.
// CHECK-LABEL: func.func @apply
// CHECK-SAME: %[[A:[^:]*]]: tensor<4x4xbf16> {{.*}}"grad:a"
// CHECK-SAME: %[[B:[^:]*]]: tensor<4x4xbf16> {{.*}}"grad:b"
// CHECK: %[[FLAT:.*]] = cleave.reshape %[[A]] {shape = array<i64: 16>} : (tensor<4x4xbf16>) -> tensor<16xbf16>
// CHECK-NEXT: %[[SLICE:.*]] = shard.reduce_scatter %[[FLAT]] on @mesh grid_axes = [0] scatter_axis = 0 : tensor<16xbf16> -> tensor<8xbf16>
// CHECK-NEXT: %[[WIDE:.*]] = cleave.cast %[[SLICE]] {to = f32} : (tensor<8xbf16>) -> tensor<8xf32>
// CHECK: %[[COPY:.*]] = cleave.cast %[[B]] {to = f32} : (tensor<4x4xbf16>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[FLAT_B:.*]] = cleave.reshape %[[COPY]]
// CHECK-NEXT: shard.reduce_scatter %[[FLAT_B]] on @mesh grid_axes = [0] scatter_axis = 0 : tensor<16xf32> -> tensor<8xf32>
// CHECK: return %[[WIDE]]

shard.grid @mesh(shape = 2) {cleave.axes = ["dp"]}

func.func @apply(%a: tensor<4x4xf32> {cleave.kind = "state", cleave.name = "grad:a", cleave.accumulator},
                 %b: tensor<4x4xf32> {cleave.kind = "state", cleave.name = "grad:b", cleave.accumulator}) -> (tensor<8xf32>, tensor<8xf32>) {
  %flat = cleave.reshape %a {shape = array<i64: 16>} : (tensor<4x4xf32>) -> tensor<16xf32>
  %slice = shard.reduce_scatter %flat on @mesh grid_axes = [0] scatter_axis = 0 {cleave.sum_type = bf16} : tensor<16xf32> -> tensor<8xf32>
  %flat_b = cleave.reshape %b {shape = array<i64: 16>} : (tensor<4x4xf32>) -> tensor<16xf32>
  %slice_b = shard.reduce_scatter %flat_b on @mesh grid_axes = [0] scatter_axis = 0 : tensor<16xf32> -> tensor<8xf32>
  return %slice, %slice_b : tensor<8xf32>, tensor<8xf32>
}
