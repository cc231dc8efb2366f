// RUN: cleave-opt %s -split-input-file --pass-pipeline='builtin.module(cleave-memory-plan)' | FileCheck %s

// A value assigned to a parameter or state, made by a fused elementwise
// chain, an elementwise op or a fill after the last read of the target's old
// value, is written straight into the target's weights slot (each
// tensor<16xf32> takes 64 bytes): no arena space, and no copy at the
// assignment (cleave-lower-to-emitc).
// CHECK-LABEL: func.func @update
// CHECK: cleave.fused_elementwise {{.*}}cleave.arena_offsets = array<i64: -1, 0>, cleave.in_place_offsets = array<i64: 64, -1>
// CHECK: cleave.add {{.*}}cleave.arena_offsets = array<i64: -1>, cleave.in_place_offsets = array<i64: 0>
// CHECK: cleave.constant {{.*}}cleave.arena_offsets = array<i64: -1>, cleave.in_place_offsets = array<i64: 128>
func.func @update(%p: tensor<16xf32> {cleave.kind = "param", cleave.name = "p"},
                  %m: tensor<16xf32> {cleave.kind = "state", cleave.name = "m"},
                  %g: tensor<16xf32> {cleave.kind = "state", cleave.name = "g"},
                  %lr: tensor<f32> {cleave.kind = "input", cleave.name = "lr"}) -> tensor<16xf32> {
  // m's new value reads m itself, element by element: in place; the second
  // output, read after, goes to the arena.
  %f:2 = cleave.fused_elementwise %m, %g, %lr {program = "add 0 1;mul 3 2>3,4"} : (tensor<16xf32>, tensor<16xf32>, tensor<f32>) -> (tensor<16xf32>, tensor<16xf32>)
  %np = cleave.add %p, %f#1 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %zero = cleave.constant {value = dense<0.0> : tensor<16xf32>} : tensor<16xf32>
  cleave.assign %f#0 to %m : tensor<16xf32>
  cleave.assign %np to %p : tensor<16xf32>
  cleave.assign %zero to %g : tensor<16xf32>
  return %f#1 : tensor<16xf32>
}

// -----

// Loss scaling's guard: a where choosing the new value or the target's old
// one reads each element before it writes it, so it writes into the target:
// by a single condition (its kernel copies the chosen tensor, or nothing
// where that is the target) and element by element (an elementwise op, as
// a chain's select is).
// CHECK-LABEL: func.func @guarded
// CHECK: cleave.where {{.*}}cleave.arena_offsets = array<i64: -1>, cleave.in_place_offsets = array<i64: 0>
// CHECK: cleave.where {{.*}}cleave.arena_offsets = array<i64: -1>, cleave.in_place_offsets = array<i64: 64>
func.func @guarded(%p: tensor<16xf32> {cleave.kind = "param", cleave.name = "p"},
                   %q: tensor<16xf32> {cleave.kind = "param", cleave.name = "q"},
                   %finite: tensor<i1> {cleave.kind = "input", cleave.name = "finite"},
                   %mask: tensor<16xi1> {cleave.kind = "input", cleave.name = "mask"}) {
  %np = cleave.neg %p : (tensor<16xf32>) -> tensor<16xf32>
  %gp = cleave.where %finite, %np, %p : (tensor<i1>, tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %nq = cleave.neg %q : (tensor<16xf32>) -> tensor<16xf32>
  %gq = cleave.where %mask, %nq, %q : (tensor<16xi1>, tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  cleave.assign %gp to %p : tensor<16xf32>
  cleave.assign %gq to %q : tensor<16xf32>
  return
}

// -----

// Kept in the arena and copied: a target read after the value is made (its
// old value is still needed), and a value the function also returns.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: cleave.in_place_offsets
func.func @kept(%p: tensor<16xf32> {cleave.kind = "param", cleave.name = "p"},
                %q: tensor<16xf32> {cleave.kind = "param", cleave.name = "q"})
    -> (tensor<16xf32>, tensor<16xf32>) {
  %a = cleave.neg %p : (tensor<16xf32>) -> tensor<16xf32>
  %b = cleave.exp %p : (tensor<16xf32>) -> tensor<16xf32>
  %c = cleave.sqrt %q : (tensor<16xf32>) -> tensor<16xf32>
  cleave.assign %a to %p : tensor<16xf32>
  cleave.assign %c to %q : tensor<16xf32>
  return %b, %c : tensor<16xf32>, tensor<16xf32>
}

// -----

// ZeRO's flat buffers: the updated slices gathered straight into the flat
// parameters, and the flat gradients zeroed in place, each after the last
// read of its old value (offsets: flat:grads 0, flat:params 64); the
// rank's slice of the parameters is a view of them, no buffer of its own.
// CHECK-LABEL: func.func @apply
// CHECK: shard.all_slice
// CHECK-NOT: cleave.arena_offsets
// CHECK-SAME: -> tensor<8xf32>
// CHECK: shard.all_gather {{.*}}cleave.arena_offsets = array<i64: -1>, cleave.in_place_offsets = array<i64: 64>
// CHECK: cleave.constant {{.*}}cleave.arena_offsets = array<i64: -1>, cleave.in_place_offsets = array<i64: 0>
shard.grid @mesh(shape = 2) {cleave.axes = ["dp"]}
func.func @apply(%g: tensor<16xf32> {cleave.flat_size = 16 : i64, cleave.kind = "state", cleave.name = "flat:grads"},
                 %p: tensor<16xf32> {cleave.flat_size = 16 : i64, cleave.kind = "param", cleave.name = "flat:params"}) {
  %rs = shard.reduce_scatter %g on @mesh grid_axes = [0] scatter_axis = 0 : tensor<16xf32> -> tensor<8xf32>
  %sl = shard.all_slice %p on @mesh grid_axes = [0] slice_axis = 0 : tensor<16xf32> -> tensor<8xf32>
  %u = cleave.sub %sl, %rs : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %ag = shard.all_gather %u on @mesh grid_axes = [0] gather_axis = 0 : tensor<8xf32> -> tensor<16xf32>
  %z = cleave.constant {value = dense<0.0> : tensor<16xf32>} : tensor<16xf32>
  cleave.assign %ag to %p : tensor<16xf32>
  cleave.assign %z to %g : tensor<16xf32>
  return
}

// -----

// Kept in the arena: a gather into a flat buffer whose member is read after
// it (the member overlaps the buffer's bytes), and one that reads a member
// of its own target.
// CHECK-LABEL: func.func @members
// CHECK-NOT: cleave.in_place_offsets
shard.grid @mesh(shape = 2) {cleave.axes = ["dp"]}
func.func @members(%p: tensor<16xf32> {cleave.flat_size = 16 : i64, cleave.kind = "param", cleave.name = "flat:params"},
                   %w: tensor<8xf32> {cleave.flat_member = "flat:params", cleave.flat_offset = 8 : i64, cleave.kind = "param", cleave.name = "w"},
                   %q: tensor<16xf32> {cleave.flat_size = 16 : i64, cleave.kind = "param", cleave.name = "flat:other"},
                   %v: tensor<8xf32> {cleave.flat_member = "flat:other", cleave.flat_offset = 0 : i64, cleave.kind = "param", cleave.name = "v"},
                   %x: tensor<8xf32> {cleave.kind = "input", cleave.name = "x"}) -> tensor<8xf32> {
  %ag = shard.all_gather %x on @mesh grid_axes = [0] gather_axis = 0 : tensor<8xf32> -> tensor<16xf32>
  %r = cleave.neg %w : (tensor<8xf32>) -> tensor<8xf32>
  %own = shard.all_gather %v on @mesh grid_axes = [0] gather_axis = 0 : tensor<8xf32> -> tensor<16xf32>
  cleave.assign %ag to %p : tensor<16xf32>
  cleave.assign %own to %q : tensor<16xf32>
  return %r : tensor<8xf32>
}

// -----

// Kept in the arena: a gather into the flat parameters while a later op
// still reads the rank's slice of them (a view: their old bytes).
// CHECK-LABEL: func.func @slice_read_after
// CHECK: shard.all_gather {{.*}}{cleave.arena_offsets = array<i64: 64>}
// CHECK-NOT: cleave.in_place_offsets
shard.grid @mesh(shape = 2) {cleave.axes = ["dp"]}
func.func @slice_read_after(%p: tensor<16xf32> {cleave.flat_size = 16 : i64, cleave.kind = "param", cleave.name = "flat:params"})
    -> tensor<8xf32> {
  %sl = shard.all_slice %p on @mesh grid_axes = [0] slice_axis = 0 : tensor<16xf32> -> tensor<8xf32>
  %u = cleave.neg %sl : (tensor<8xf32>) -> tensor<8xf32>
  %ag = shard.all_gather %u on @mesh grid_axes = [0] gather_axis = 0 : tensor<8xf32> -> tensor<16xf32>
  %r = cleave.exp %sl : (tensor<8xf32>) -> tensor<8xf32>
  cleave.assign %ag to %p : tensor<16xf32>
  return %r : tensor<8xf32>
}

// -----

// `cleave.elements` views of a parameter (32 f32 elements at weights offset
// 0, m at 128): a chunk's update is written in place of its own elements
// while a later op still reads the other chunk; one is not where a later op
// reads the whole state (its old bytes too).
// CHECK-LABEL: func.func @chunks
// CHECK: cleave.neg {{.*}}cleave.in_place_offsets = array<i64: 0>
// CHECK: cleave.neg {{.*}}cleave.in_place_offsets = array<i64: 64>
// CHECK: cleave.sqrt {{.*}}{cleave.arena_offsets = array<i64: 0>}
// CHECK-NEXT: cleave.exp {{.*}}{cleave.arena_offsets = array<i64: 64>}
func.func @chunks(%p: tensor<32xf32> {cleave.kind = "param", cleave.name = "p"},
                  %m: tensor<32xf32> {cleave.kind = "state", cleave.name = "m"}) -> tensor<32xf32> {
  %p0 = cleave.elements %p[0] : tensor<32xf32> -> tensor<16xf32>
  %n0 = cleave.neg %p0 : (tensor<16xf32>) -> tensor<16xf32>
  %p1 = cleave.elements %p[16] : tensor<32xf32> -> tensor<16xf32>
  %n1 = cleave.neg %p1 : (tensor<16xf32>) -> tensor<16xf32>
  %t0 = cleave.elements %p[0] : tensor<32xf32> -> tensor<16xf32>
  cleave.assign %n0 to %t0 : tensor<16xf32>
  %t1 = cleave.elements %p[16] : tensor<32xf32> -> tensor<16xf32>
  cleave.assign %n1 to %t1 : tensor<16xf32>
  %m0 = cleave.elements %m[0] : tensor<32xf32> -> tensor<16xf32>
  %s = cleave.sqrt %m0 : (tensor<16xf32>) -> tensor<16xf32>
  %e = cleave.exp %m : (tensor<32xf32>) -> tensor<32xf32>
  %tm = cleave.elements %m[0] : tensor<32xf32> -> tensor<16xf32>
  cleave.assign %s to %tm : tensor<16xf32>
  return %e : tensor<32xf32>
}
