// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-sink-widened-sums)' | FileCheck %s
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-sink-widened-sums,cleave-memory-plan)' | FileCheck %s --check-prefix=PLAN

// @apply's f32 sums of two bf16 accumulators' widened copies, each read by
// its own update: each copy and its sum move down to just before that
// update, so one sum is alive at a time. The sums are made in place of the
// copies (no buffer of their own) and the updates in place of the
// parameters: the arena holds one 64-byte copy at a time.

// CHECK-LABEL: func.func @apply
// CHECK: %[[COUNT:.*]] = shard.all_reduce %arg0
// CHECK-NEXT: %[[WIDE_A:.*]] = cleave.cast %arg1 {to = f32}
// CHECK-NEXT: %[[SUM_A:.*]] = shard.all_reduce %[[WIDE_A]]
// CHECK-NEXT: %[[NEW_A:.*]] = cleave.div %[[SUM_A]], %[[COUNT]]
// CHECK-NEXT: cleave.assign %[[NEW_A]] to %arg3
// CHECK-NEXT: %[[WIDE_B:.*]] = cleave.cast %arg2 {to = f32}
// CHECK-NEXT: %[[SUM_B:.*]] = shard.all_reduce %[[WIDE_B]]
// CHECK-NEXT: %[[NEW_B:.*]] = cleave.div %[[SUM_B]], %[[COUNT]]
// CHECK-NEXT: cleave.assign %[[NEW_B]] to %arg4

// PLAN-LABEL: func.func @apply
// PLAN-SAME: cleave.arena_bytes = 64 : i64
// PLAN: cleave.cast %arg1 {cleave.arena_offsets = array<i64: 0>, to = f32}
// PLAN-NEXT: shard.all_reduce %{{[^ ]*}} on @mesh grid_axes = [0] : tensor<16xf32>
// PLAN-NEXT: cleave.div
// PLAN: cleave.cast %arg2 {cleave.arena_offsets = array<i64: 0>, to = f32}
// PLAN-NEXT: shard.all_reduce %{{[^ ]*}} on @mesh grid_axes = [0] : tensor<16xf32>

shard.grid @mesh(shape = 2) {cleave.axes = ["dp"]}

func.func @apply(%count: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.loss_count"},
                 %ga: tensor<16xbf16> {cleave.kind = "state", cleave.name = "grad:a"},
                 %gb: tensor<16xbf16> {cleave.kind = "state", cleave.name = "grad:b"},
                 %a: tensor<16xf32> {cleave.kind = "param", cleave.name = "a"},
                 %b: tensor<16xf32> {cleave.kind = "param", cleave.name = "b"}) {
  %total = shard.all_reduce %count on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
  %wa = cleave.cast %ga {to = f32} : (tensor<16xbf16>) -> tensor<16xf32>
  %sa = shard.all_reduce %wa on @mesh grid_axes = [0] : tensor<16xf32> -> tensor<16xf32>
  %wb = cleave.cast %gb {to = f32} : (tensor<16xbf16>) -> tensor<16xf32>
  %sb = shard.all_reduce %wb on @mesh grid_axes = [0] : tensor<16xf32> -> tensor<16xf32>
  %na = cleave.div %sa, %total : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  cleave.assign %na to %a : tensor<16xf32>
  %nb = cleave.div %sb, %total : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  cleave.assign %nb to %b : tensor<16xf32>
  return
}

// -----

// A sum is not moved past an assignment to its argument (the accumulator's
// zeroing: the sum is of its old value), only to just before it; a copy
// read by something else, and a narrowing cast, stay where they are.

// CHECK-LABEL: func.func @kept
// CHECK: %[[ZERO:.*]] = cleave.constant
// CHECK-NEXT: %[[WIDE:.*]] = cleave.cast %arg0 {to = f32}
// CHECK-NEXT: %[[SUM:.*]] = shard.all_reduce %[[WIDE]]
// CHECK-NEXT: cleave.assign %[[ZERO]] to %arg0
// CHECK-NEXT: cleave.exp %[[SUM]]
// CHECK: %[[SHARED:.*]] = cleave.cast %arg1 {to = f32}
// CHECK-NEXT: shard.all_reduce %[[SHARED]]
// CHECK-NEXT: cleave.exp %[[SHARED]]
// CHECK: %[[NARROW:.*]] = cleave.cast %arg2 {to = bf16}
// CHECK-NEXT: shard.all_reduce %[[NARROW]]
// CHECK-NEXT: cleave.exp

// PLAN-LABEL: func.func @kept
// The copy another op reads is summed into a buffer of its own.
// PLAN: cleave.cast %arg1
// PLAN-NEXT: shard.all_reduce {{.*}}cleave.arena_offsets

shard.grid @mesh(shape = 2) {cleave.axes = ["dp"]}

func.func @kept(%g: tensor<16xbf16> {cleave.kind = "state", cleave.name = "grad:a"},
                %h: tensor<16xbf16> {cleave.kind = "state", cleave.name = "grad:b"},
                %f: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:c"})
    -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xbf16>) {
  %wide = cleave.cast %g {to = f32} : (tensor<16xbf16>) -> tensor<16xf32>
  %sum = shard.all_reduce %wide on @mesh grid_axes = [0] : tensor<16xf32> -> tensor<16xf32>
  %zero = cleave.constant {value = dense<0.0> : tensor<16xbf16>} : tensor<16xbf16>
  cleave.assign %zero to %g : tensor<16xbf16>
  %e = cleave.exp %sum : (tensor<16xf32>) -> tensor<16xf32>
  %shared = cleave.cast %h {to = f32} : (tensor<16xbf16>) -> tensor<16xf32>
  %both = shard.all_reduce %shared on @mesh grid_axes = [0] : tensor<16xf32> -> tensor<16xf32>
  %read = cleave.exp %shared : (tensor<16xf32>) -> tensor<16xf32>
  %narrow = cleave.cast %f {to = bf16} : (tensor<16xf32>) -> tensor<16xbf16>
  %narrowSum = shard.all_reduce %narrow on @mesh grid_axes = [0] : tensor<16xbf16> -> tensor<16xbf16>
  %x = cleave.exp %f : (tensor<16xf32>) -> tensor<16xf32>
  return %e, %both, %read, %x, %narrowSum : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xbf16>
}
