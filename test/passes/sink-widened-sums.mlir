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

// -----

// A sum of more than a quarter of the parameters' elements (here 256 of
// 288: chunks of at most 96, a multiple of 32) read by a fused update alone
// is widened, summed and updated 96 elements at a time, each chunk's update
// reading and writing `cleave.elements` views of its arguments; each
// assignment becomes one per chunk. The 32-element parameter's sum is not
// chunked. The memory plan writes each chunk's results in place of its
// elements (the weights blob holds the count at 0, grad:w at 64, grad:b at
// 576, w at 640, b at 1664, m at 1792; a chunk of 96 f32 elements is 384
// bytes), and holds one chunk's copy at a time.

// CHECK-LABEL: func.func @chunked
// CHECK: %[[G0:.*]] = cleave.elements %arg1[0] : tensor<16x16xbf16> -> tensor<96xbf16>
// CHECK-NEXT: %[[W0:.*]] = cleave.cast %[[G0]] {to = f32} : (tensor<96xbf16>) -> tensor<96xf32>
// CHECK-NEXT: %[[S0:.*]] = shard.all_reduce %[[W0]] on @mesh grid_axes = [0] : tensor<96xf32> -> tensor<96xf32>
// CHECK-NEXT: %[[P0:.*]] = cleave.elements %arg3[0] : tensor<16x16xf32> -> tensor<96xf32>
// CHECK-NEXT: %[[M0:.*]] = cleave.elements %arg5[0] : tensor<16x16xf32> -> tensor<96xf32>
// CHECK-NEXT: %[[U0:.*]]:2 = cleave.fused_elementwise %[[S0]], %arg0, %[[P0]], %[[M0]] {program = "div 0 1;add 3 4;sub 2 5>5,6"} : (tensor<96xf32>, tensor<f32>, tensor<96xf32>, tensor<96xf32>) -> (tensor<96xf32>, tensor<96xf32>)
// CHECK: cleave.elements %arg1[96] : tensor<16x16xbf16> -> tensor<96xbf16>
// CHECK: %[[G2:.*]] = cleave.elements %arg1[192] : tensor<16x16xbf16> -> tensor<64xbf16>
// CHECK: %[[U2:.*]]:2 = cleave.fused_elementwise
// CHECK-SAME: -> (tensor<64xf32>, tensor<64xf32>)
// CHECK: %[[WB:.*]] = cleave.cast %arg2 {to = f32} : (tensor<32xbf16>) -> tensor<32xf32>
// CHECK: %[[T0:.*]] = cleave.elements %arg5[0] : tensor<16x16xf32> -> tensor<96xf32>
// CHECK-NEXT: cleave.assign %[[U0]]#0 to %[[T0]] : tensor<96xf32>
// CHECK: %[[T2:.*]] = cleave.elements %arg5[192] : tensor<16x16xf32> -> tensor<64xf32>
// CHECK-NEXT: cleave.assign %[[U2]]#0 to %[[T2]] : tensor<64xf32>
// CHECK: cleave.elements %arg3[0] : tensor<16x16xf32> -> tensor<96xf32>
// CHECK-NEXT: cleave.assign %[[U0]]#1
// CHECK-NOT: cleave.fused_elementwise {{.*}}tensor<16x16xf32>

// PLAN-LABEL: func.func @chunked
// PLAN-SAME: cleave.arena_bytes = 384 : i64
// PLAN: cleave.cast {{.*}}cleave.arena_offsets = array<i64: 0>
// PLAN: cleave.fused_elementwise {{.*}}cleave.in_place_offsets = array<i64: 1792, 640>
// PLAN: cleave.fused_elementwise {{.*}}cleave.in_place_offsets = array<i64: 2176, 1024>
// PLAN: cleave.fused_elementwise {{.*}}cleave.in_place_offsets = array<i64: 2560, 1408>
// PLAN: cleave.fused_elementwise {{.*}}cleave.in_place_offsets = array<i64: 1664>

shard.grid @mesh(shape = 2) {cleave.axes = ["dp"]}

func.func @chunked(%count: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.loss_count"},
                   %gw: tensor<16x16xbf16> {cleave.kind = "state", cleave.name = "grad:w"},
                   %gb: tensor<32xbf16> {cleave.kind = "state", cleave.name = "grad:b"},
                   %w: tensor<16x16xf32> {cleave.kind = "param", cleave.name = "w"},
                   %b: tensor<32xf32> {cleave.kind = "param", cleave.name = "b"},
                   %m: tensor<16x16xf32> {cleave.kind = "state", cleave.name = "m"}) {
  %ww = cleave.cast %gw {to = f32} : (tensor<16x16xbf16>) -> tensor<16x16xf32>
  %sw = shard.all_reduce %ww on @mesh grid_axes = [0] : tensor<16x16xf32> -> tensor<16x16xf32>
  %uw:2 = cleave.fused_elementwise %sw, %count, %w, %m {program = "div 0 1;add 3 4;sub 2 5>5,6"} : (tensor<16x16xf32>, tensor<f32>, tensor<16x16xf32>, tensor<16x16xf32>) -> (tensor<16x16xf32>, tensor<16x16xf32>)
  %wb = cleave.cast %gb {to = f32} : (tensor<32xbf16>) -> tensor<32xf32>
  %sb = shard.all_reduce %wb on @mesh grid_axes = [0] : tensor<32xf32> -> tensor<32xf32>
  %ub = cleave.fused_elementwise %sb, %count, %b {program = "div 0 1;sub 2 3>4"} : (tensor<32xf32>, tensor<f32>, tensor<32xf32>) -> tensor<32xf32>
  cleave.assign %uw#0 to %m : tensor<16x16xf32>
  cleave.assign %uw#1 to %w : tensor<16x16xf32>
  cleave.assign %ub to %b : tensor<32xf32>
  return
}

// -----

// Left whole: a large sum that another op reads too (a gradient norm), and
// one whose update's result is read by something other than an assignment.

// CHECK-LABEL: func.func @whole
// CHECK-NOT: cleave.elements
// CHECK: return

shard.grid @mesh(shape = 2) {cleave.axes = ["dp"]}

func.func @whole(%gw: tensor<16x16xbf16> {cleave.kind = "state", cleave.name = "grad:w"},
                 %gv: tensor<16x16xbf16> {cleave.kind = "state", cleave.name = "grad:v"},
                 %w: tensor<16x16xf32> {cleave.kind = "param", cleave.name = "w"},
                 %v: tensor<16x16xf32> {cleave.kind = "param", cleave.name = "v"})
    -> (tensor<f32>, tensor<16x16xf32>) {
  %ww = cleave.cast %gw {to = f32} : (tensor<16x16xbf16>) -> tensor<16x16xf32>
  %sw = shard.all_reduce %ww on @mesh grid_axes = [0] : tensor<16x16xf32> -> tensor<16x16xf32>
  %norm = cleave.reduce_sum %sw {axes = array<i64: 0, 1>, keepdims = false} : (tensor<16x16xf32>) -> tensor<f32>
  %uw = cleave.fused_elementwise %sw, %w {program = "sub 1 0>2"} : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  %wv = cleave.cast %gv {to = f32} : (tensor<16x16xbf16>) -> tensor<16x16xf32>
  %sv = shard.all_reduce %wv on @mesh grid_axes = [0] : tensor<16x16xf32> -> tensor<16x16xf32>
  %uv = cleave.fused_elementwise %sv, %v {program = "sub 1 0>2"} : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  cleave.assign %uw to %w : tensor<16x16xf32>
  cleave.assign %uv to %v : tensor<16x16xf32>
  return %norm, %uv : tensor<f32>, tensor<16x16xf32>
}
