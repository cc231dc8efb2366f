// RUN: cleave-opt %s -split-input-file --pass-pipeline='builtin.module(cleave-memory-plan)' | FileCheck %s

// Offsets worked out by hand: each tensor<16xf32> takes 64 bytes (one aligned
// slot). An op's output never shares its inputs' space; a buffer is reused
// only after its last reader.

// CHECK: module attributes {cleave.arena_bytes = 128 : i64, cleave.weights_bytes = 0 : i64}
// CHECK-LABEL: func.func @chain
// CHECK-SAME: cleave.arena_bytes = 128 : i64
func.func @chain(%x: tensor<16xf32>) -> tensor<16xf32> {
  // CHECK: cleave.relu {{.*}}cleave.arena_offsets = array<i64: 0>
  %a = cleave.relu %x : (tensor<16xf32>) -> tensor<16xf32>
  // CHECK: cleave.exp {{.*}}cleave.arena_offsets = array<i64: 64>
  %b = cleave.exp %a : (tensor<16xf32>) -> tensor<16xf32>
  // %a is dead once %b exists: %c takes its slot.
  // CHECK: cleave.neg {{.*}}cleave.arena_offsets = array<i64: 0>
  %c = cleave.neg %b : (tensor<16xf32>) -> tensor<16xf32>
  return %c : tensor<16xf32>
}

// -----

// A view (reshape) keeps its source alive until the view's last reader.
// CHECK: module attributes {cleave.arena_bytes = 192 : i64
// CHECK-LABEL: func.func @view_extends_life
// CHECK-SAME: cleave.arena_bytes = 192 : i64
func.func @view_extends_life(%x: tensor<16xf32>) -> tensor<4x4xf32> {
  // CHECK: cleave.relu {{.*}}cleave.arena_offsets = array<i64: 0>
  %a = cleave.relu %x : (tensor<16xf32>) -> tensor<16xf32>
  // CHECK: cleave.reshape
  // CHECK-NOT: cleave.arena_offsets
  // CHECK-SAME: -> tensor<4x4xf32>
  %v = cleave.reshape %a {shape = array<i64: 4, 4>} : (tensor<16xf32>) -> tensor<4x4xf32>
  // CHECK: cleave.exp {{.*}}cleave.arena_offsets = array<i64: 64>
  %b = cleave.exp %x : (tensor<16xf32>) -> tensor<16xf32>
  // %a is still read through %v below, so %c cannot take slot 0.
  // CHECK: cleave.neg {{.*}}cleave.arena_offsets = array<i64: 128>
  %c = cleave.neg %b : (tensor<16xf32>) -> tensor<16xf32>
  %w = cleave.reshape %c {shape = array<i64: 4, 4>} : (tensor<16xf32>) -> tensor<4x4xf32>
  %d = cleave.add %v, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %d : tensor<4x4xf32>
}

// -----

// Results of one op get distinct slots; parameters and stored constants go to
// the weights blob (64-byte aligned), splats are filled in the arena.
// CHECK: module attributes {cleave.arena_bytes = 256 : i64, cleave.weights_bytes = 320 : i64}
// CHECK-LABEL: func.func @weights_and_multiple_results
// CHECK-SAME: %arg1: tensor<3xf32> {cleave.kind = "param", cleave.name = "w", cleave.weights_offset = 0 : i64}
// CHECK-SAME: %arg2: tensor<40xf32> {cleave.kind = "param", cleave.name = "v", cleave.weights_offset = 64 : i64}
// CHECK-SAME: cleave.arena_bytes = 256 : i64
func.func @weights_and_multiple_results(%x: tensor<6xf32> {cleave.kind = "input", cleave.name = "x"},
                                        %w: tensor<3xf32> {cleave.kind = "param", cleave.name = "w"},
                                        %v: tensor<40xf32> {cleave.kind = "param", cleave.name = "v"})
    -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  // 40 floats = 160 bytes from offset 64, aligned up to 256.
  // CHECK: cleave.constant {cleave.weights_offset = 256 : i64, value = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]>
  %c = cleave.constant {value = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>} : tensor<3xf32>
  // CHECK: cleave.constant {cleave.arena_offsets = array<i64: 0>, value = dense<5.000000e+00>
  %s = cleave.constant {value = dense<5.0> : tensor<3xf32>} : tensor<3xf32>
  // CHECK: cleave.split {{.*}}cleave.arena_offsets = array<i64: 64, 128>
  %p:2 = cleave.split %x {axis = 0 : i64, split = array<i64: 3, 3>} : (tensor<6xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  // CHECK: cleave.add {{.*}}cleave.arena_offsets = array<i64: 192>
  %a = cleave.add %p#0, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %b = cleave.mul %p#1, %c : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %a, %b, %s : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}

// -----

// A training step's two functions: a stored argument has one slot whatever
// function reads it, inputs one index per name, results are numbered after
// the previous function's, and the arena is the larger function's. The
// accumulator's new sum is written in its place (memory-plan-in-place.mlir);
// the update, which @apply also returns, is not.

// CHECK: module attributes {cleave.arena_bytes = 64 : i64, cleave.weights_bytes = 128 : i64}
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg0: tensor<16xf32> {cleave.input_index = 0 : i64, cleave.kind = "input", cleave.name = "x"}
// CHECK-SAME: %arg1: tensor<16xf32> {cleave.kind = "param", cleave.name = "w", cleave.weights_offset = 0 : i64}
// CHECK-SAME: %arg2: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:w", cleave.weights_offset = 64 : i64}
// CHECK-SAME: attributes {cleave.arena_bytes = 64 : i64, cleave.first_output = 0 : i64}
// CHECK: cleave.add {{.*}}cleave.arena_offsets = array<i64: -1>, cleave.in_place_offsets = array<i64: 64>
func.func @forward(%x: tensor<16xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<16xf32> {cleave.kind = "param", cleave.name = "w"},
                   %acc: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:w"}) {
  %g = cleave.mul %x, %w : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %s = cleave.add %acc, %g : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  cleave.assign %s to %acc : tensor<16xf32>
  return
}
// CHECK-LABEL: func.func @apply
// CHECK-SAME: %arg0: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:w", cleave.weights_offset = 64 : i64}
// CHECK-SAME: %arg1: tensor<16xf32> {cleave.kind = "param", cleave.name = "w", cleave.weights_offset = 0 : i64}
// CHECK-SAME: %arg2: tensor<f32> {cleave.input_index = 1 : i64, cleave.kind = "input", cleave.name = "cleave.lr"}
// CHECK-SAME: attributes {cleave.arena_bytes = 64 : i64, cleave.first_output = 0 : i64}
func.func @apply(%acc: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:w"},
                 %w: tensor<16xf32> {cleave.kind = "param", cleave.name = "w"},
                 %lr: tensor<f32> {cleave.kind = "input", cleave.name = "cleave.lr"}) -> (tensor<16xf32> {cleave.name = "w.new"}) {
  %n = cleave.sub %w, %acc : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  cleave.assign %n to %w : tensor<16xf32>
  return %n : tensor<16xf32>
}

// -----

// A flat ZeRO buffer of 48 floats (192 bytes) holds its members at their
// element offsets: `a` (16 floats) at 0 and `b` (32) at 16 floats = 64
// bytes; the parameter after it starts at the next 64-byte boundary, 192.
// CHECK: module attributes {cleave.arena_bytes = 64 : i64, cleave.weights_bytes = 256 : i64}
// CHECK-LABEL: func.func @flat_buffer
// CHECK-SAME: %arg0: tensor<48xf32> {cleave.flat_size = 48 : i64, cleave.kind = "param", cleave.name = "flat:params", cleave.weights_offset = 0 : i64}
// CHECK-SAME: %arg1: tensor<16xf32> {cleave.flat_member = "flat:params", cleave.flat_offset = 0 : i64, cleave.kind = "param", cleave.name = "a", cleave.weights_offset = 0 : i64}
// CHECK-SAME: %arg2: tensor<32xf32> {cleave.flat_member = "flat:params", cleave.flat_offset = 16 : i64, cleave.kind = "param", cleave.name = "b", cleave.weights_offset = 64 : i64}
// CHECK-SAME: %arg3: tensor<16xf32> {cleave.kind = "param", cleave.name = "c", cleave.weights_offset = 192 : i64}
func.func @flat_buffer(%flat: tensor<48xf32> {cleave.kind = "param", cleave.name = "flat:params", cleave.flat_size = 48 : i64},
                       %a: tensor<16xf32> {cleave.kind = "param", cleave.name = "a", cleave.flat_member = "flat:params", cleave.flat_offset = 0 : i64},
                       %b: tensor<32xf32> {cleave.kind = "param", cleave.name = "b", cleave.flat_member = "flat:params", cleave.flat_offset = 16 : i64},
                       %c: tensor<16xf32> {cleave.kind = "param", cleave.name = "c"}) -> tensor<16xf32> {
  %s = cleave.add %a, %c : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %s : tensor<16xf32>
}
