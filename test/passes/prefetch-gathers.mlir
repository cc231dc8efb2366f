// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-prefetch-gathers)' | FileCheck %s
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-prefetch-gathers,cleave-memory-plan)' | FileCheck %s --check-prefix=PLANNED
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-prefetch-gathers,cleave-memory-plan,cleave-lower-to-emitc)' | FileCheck %s --check-prefix=LOWERED

// Three layers of ZeRO 3 slices. The first segment's two gathers (w1, b1)
// stay where they are; the second's (w2, and the padded b2, sliced) move up
// to just after the first's, in their order, so they move while layer 1
// computes; the third's (w3) to just after the second's waits, behind
// layer 2. Each reads through a wait where it was.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[X:arg0]]: tensor<2x4xf32>
// CHECK-SAME: %[[W1:arg1]]: tensor<8xf32>
// CHECK-SAME: %[[B1:arg2]]: tensor<2xf32>
// CHECK-SAME: %[[W2:arg3]]: tensor<8xf32>
// CHECK-SAME: %[[B2:arg4]]: tensor<3xf32>
// CHECK-SAME: %[[W3:arg5]]: tensor<8xf32>
// CHECK-NEXT: %[[G1:.*]] = shard.all_gather %[[W1]] on @mesh grid_axes = [0] gather_axis = 0 : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[R1:.*]] = cleave.reshape %[[G1]]
// CHECK-NEXT: %[[GB1:.*]] = shard.all_gather %[[B1]] on @mesh grid_axes = [0] gather_axis = 0 : tensor<2xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[G2:.*]] = shard.all_gather %[[W2]] on @mesh grid_axes = [0] gather_axis = 0 {cleave.started} : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[GB2:.*]] = shard.all_gather %[[B2]] on @mesh grid_axes = [0] gather_axis = 0 {cleave.started} : tensor<3xf32> -> tensor<6xf32>
// CHECK-NEXT: %[[Y1:.*]] = cleave.gemm %[[X]], %[[R1]], %[[GB1]]
// CHECK-NEXT: %[[A1:.*]] = cleave.relu %[[Y1]]
// CHECK-NEXT: %[[WAIT2:.*]] = cleave.collective_wait %[[G2]] from %[[W2]] : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[R2:.*]] = cleave.reshape %[[WAIT2]]
// CHECK-NEXT: %[[WAITB2:.*]] = cleave.collective_wait %[[GB2]] from %[[B2]] : tensor<3xf32> -> tensor<6xf32>
// CHECK-NEXT: %[[G3:.*]] = shard.all_gather %[[W3]] on @mesh grid_axes = [0] gather_axis = 0 {cleave.started} : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[S2:.*]] = cleave.slice %[[WAITB2]]
// CHECK-NEXT: %[[Y2:.*]] = cleave.gemm %[[A1]], %[[R2]], %[[S2]]
// CHECK-NEXT: %[[WAIT3:.*]] = cleave.collective_wait %[[G3]] from %[[W3]]
// CHECK-NEXT: %[[R3:.*]] = cleave.reshape %[[WAIT3]]
// CHECK-NEXT: %[[Y3:.*]] = cleave.matmul %[[Y2]], %[[R3]]
// CHECK-NEXT: return %[[Y3]]

// The memory plan keeps w2's gathered buffer from its start, across layer
// 1's gemm and relu, so no result in between is placed on it.
// PLANNED-LABEL: func.func @forward
// PLANNED: shard.all_gather %arg3 {{.*}}cleave.arena_offsets = array<i64: [[W2AT:[0-9]+]]>, cleave.started}
// PLANNED: cleave.gemm {{.*}}cleave.arena_offsets = array<i64: [[Y1AT:[0-9]+]]>
// PLANNED-NOT: array<i64: [[W2AT]]>
// PLANNED: cleave.collective_wait

// The started gathers are queued on the background thread and waited for
// where they were read, each on its own buffer.
// LOWERED-LABEL: emitc.func @cleave_forward
// LOWERED: call_opaque "cleave::rt::cpu::all_gather"(
// LOWERED: call_opaque "cleave::rt::cpu::all_gather"(
// LOWERED: call_opaque "cleave::rt::cpu::all_gather_start"(%arg0, %{{.*}}, %[[G2:[0-9]+]]) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"0">]}
// LOWERED: call_opaque "cleave::rt::cpu::all_gather_start"(%arg0, %{{.*}}, %[[GB2:[0-9]+]])
// LOWERED: call_opaque "cleave::rt::cpu::gemm"
// LOWERED: call_opaque "cleave::rt::cpu::all_gather_wait"(%arg0, %[[G2]]) {args = [0 : index, 1 : index, #emitc.opaque<"0">]}
// LOWERED: call_opaque "cleave::rt::cpu::all_gather_wait"(%arg0, %[[GB2]])
// LOWERED: call_opaque "cleave::rt::cpu::all_gather_start"
// LOWERED: call_opaque "cleave::rt::cpu::all_gather_wait"
// LOWERED-NOT: all_gather
// LOWERED-LABEL: emitc.func @cleave_apply
shard.grid @mesh(shape = 2) {cleave.axes = ["dp"]}
func.func @forward(%x: tensor<2x4xf32> {cleave.kind = "input", cleave.name = "x"},
                  %w1: tensor<8xf32> {cleave.kind = "param", cleave.name = "w1"},
                  %b1: tensor<2xf32> {cleave.kind = "param", cleave.name = "b1"},
                  %w2: tensor<8xf32> {cleave.kind = "param", cleave.name = "w2"},
                  %b2: tensor<3xf32> {cleave.kind = "param", cleave.name = "b2"},
                  %w3: tensor<8xf32> {cleave.kind = "param", cleave.name = "w3"}) -> tensor<2x4xf32> {
  %g1 = shard.all_gather %w1 on @mesh grid_axes = [0] gather_axis = 0 : tensor<8xf32> -> tensor<16xf32>
  %r1 = cleave.reshape %g1 {shape = array<i64: 4, 4>} : (tensor<16xf32>) -> tensor<4x4xf32>
  %gb1 = shard.all_gather %b1 on @mesh grid_axes = [0] gather_axis = 0 : tensor<2xf32> -> tensor<4xf32>
  %y1 = cleave.gemm %x, %r1, %gb1 : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %a1 = cleave.relu %y1 : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %g2 = shard.all_gather %w2 on @mesh grid_axes = [0] gather_axis = 0 : tensor<8xf32> -> tensor<16xf32>
  %r2 = cleave.reshape %g2 {shape = array<i64: 4, 4>} : (tensor<16xf32>) -> tensor<4x4xf32>
  %gb2 = shard.all_gather %b2 on @mesh grid_axes = [0] gather_axis = 0 : tensor<3xf32> -> tensor<6xf32>
  %s2 = cleave.slice %gb2 {starts = array<i64: 0>, ends = array<i64: 4>, steps = array<i64: 1>} : (tensor<6xf32>) -> tensor<4xf32>
  %y2 = cleave.gemm %a1, %r2, %s2 : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %g3 = shard.all_gather %w3 on @mesh grid_axes = [0] gather_axis = 0 : tensor<8xf32> -> tensor<16xf32>
  %r3 = cleave.reshape %g3 {shape = array<i64: 4, 4>} : (tensor<16xf32>) -> tensor<4x4xf32>
  %y3 = cleave.matmul %y2, %r3 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y3 : tensor<2x4xf32>
}

// -----

// Left where they are: a gather of a value the function makes (the updated
// slice a flat parameter buffer gathers), and of an argument it writes.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: cleave.started
// CHECK-NOT: cleave.collective_wait
shard.grid @mesh(shape = 2) {cleave.axes = ["dp"]}
func.func @forward(%p: tensor<8xf32> {cleave.kind = "param", cleave.name = "p"},
                           %q: tensor<8xf32> {cleave.kind = "param", cleave.name = "q"}) -> (tensor<16xf32>, tensor<16xf32>) {
  %u = cleave.relu %p : (tensor<8xf32>) -> tensor<8xf32>
  %g1 = shard.all_gather %u on @mesh grid_axes = [0] gather_axis = 0 : tensor<8xf32> -> tensor<16xf32>
  %v = cleave.relu %g1 : (tensor<16xf32>) -> tensor<16xf32>
  cleave.assign %u to %q : tensor<8xf32>
  %g2 = shard.all_gather %q on @mesh grid_axes = [0] gather_axis = 0 : tensor<8xf32> -> tensor<16xf32>
  return %v, %g2 : tensor<16xf32>, tensor<16xf32>
}

// -----

// One rank over dp: nothing to gather early.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: cleave.started
shard.grid @mesh(shape = 1) {cleave.axes = ["dp"]}
func.func @forward(%x: tensor<2x4xf32>, %w1: tensor<8xf32>, %w2: tensor<8xf32>) -> tensor<2x4xf32> {
  %g1 = shard.all_gather %w1 on @mesh grid_axes = [0] gather_axis = 0 : tensor<8xf32> -> tensor<8xf32>
  %r1 = cleave.reshape %g1 {shape = array<i64: 4, 2>} : (tensor<8xf32>) -> tensor<4x2xf32>
  %y1 = cleave.matmul %x, %r1 : (tensor<2x4xf32>, tensor<4x2xf32>) -> tensor<2x2xf32>
  %g2 = shard.all_gather %w2 on @mesh grid_axes = [0] gather_axis = 0 : tensor<8xf32> -> tensor<8xf32>
  %r2 = cleave.reshape %g2 {shape = array<i64: 2, 4>} : (tensor<8xf32>) -> tensor<2x4xf32>
  %y2 = cleave.matmul %y1, %r2 : (tensor<2x2xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %y2 : tensor<2x4xf32>
}
