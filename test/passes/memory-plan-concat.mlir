// RUN: cleave-opt %s -split-input-file --pass-pipeline='builtin.module(cleave-memory-plan)' | FileCheck %s
// RUN: cleave-opt %s -split-input-file --pass-pipeline='builtin.module(cleave-memory-plan,cleave-lower-to-emitc)' | FileCheck %s --check-prefix=LOWERED

// ZeRO 2's packed gradients: a concat along dim 0 of values it alone reads
// (through reshapes) takes its buffer when its first part is made, and each
// part is made where it lies in it: %a at 0, %b's 12 floats 64 bytes on,
// the filled zeros right after them at 112 (a splat may lie off the
// alignment). The concat copies nothing, and its result lives on in the
// same 192 bytes; %s, made after it, goes after them.
// CHECK-LABEL: func.func @forward(%arg0: tensor<16xf32>{{.*}}, %arg1: tensor<12xf32>
// CHECK-SAME: cleave.arena_bytes = 384 : i64
// CHECK: cleave.relu {{.*}}cleave.arena_offsets = array<i64: 0>
// CHECK: cleave.exp {{.*}}cleave.arena_offsets = array<i64: 64>
// CHECK: cleave.constant {{.*}}cleave.arena_offsets = array<i64: 112>
// CHECK: cleave.concat {{.*}}cleave.arena_offsets = array<i64: 0>, cleave.parts_in_place
// CHECK: cleave.neg {{.*}}cleave.arena_offsets = array<i64: 192>
// LOWERED-LABEL: emitc.func @cleave_forward
// LOWERED-NOT: cleave::rt::cpu::concat
// LOWERED: cleave::rt::cpu::neg
func.func @forward(%x: tensor<16xf32>, %y: tensor<12xf32>) -> tensor<f32> {
  %a = cleave.relu %x : (tensor<16xf32>) -> tensor<16xf32>
  %b = cleave.exp %y : (tensor<12xf32>) -> tensor<12xf32>
  %v = cleave.reshape %b {shape = array<i64: 12>} : (tensor<12xf32>) -> tensor<12xf32>
  %z = cleave.constant {value = dense<0.0> : tensor<8xf32>} : tensor<8xf32>
  %c = cleave.concat %a, %v, %z {axis = 0 : i64} : (tensor<16xf32>, tensor<12xf32>, tensor<8xf32>) -> tensor<36xf32>
  %s = cleave.neg %c : (tensor<36xf32>) -> tensor<36xf32>
  %r = cleave.reduce_sum %s {axes = array<i64: 0>, keepdims = false} : (tensor<36xf32>) -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// A part something else reads too, a part at an offset the alignment does
// not divide (after 3 floats), and a concat along another dim: each concat
// copies its parts as before.
// CHECK-LABEL: func.func @forward(%arg0: tensor<16xf32>{{.*}}, %arg1: tensor<3xf32>
// CHECK-COUNT-3: cleave.concat
// CHECK-NOT: parts_in_place
func.func @forward(%x: tensor<16xf32>, %y: tensor<3xf32>, %m: tensor<2x8xf32>) -> (tensor<32xf32>, tensor<16xf32>, tensor<19xf32>, tensor<2x16xf32>) {
  %a = cleave.relu %x : (tensor<16xf32>) -> tensor<16xf32>
  %b = cleave.exp %x : (tensor<16xf32>) -> tensor<16xf32>
  %c = cleave.concat %a, %b {axis = 0 : i64} : (tensor<16xf32>, tensor<16xf32>) -> tensor<32xf32>
  %d = cleave.neg %a : (tensor<16xf32>) -> tensor<16xf32>
  %e = cleave.relu %y : (tensor<3xf32>) -> tensor<3xf32>
  %f = cleave.exp %x : (tensor<16xf32>) -> tensor<16xf32>
  %g = cleave.concat %e, %f {axis = 0 : i64} : (tensor<3xf32>, tensor<16xf32>) -> tensor<19xf32>
  %h = cleave.relu %m : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %k = cleave.exp %m : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %l = cleave.concat %h, %k {axis = 1 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x16xf32>
  return %c, %d, %g, %l : tensor<32xf32>, tensor<16xf32>, tensor<19xf32>, tensor<2x16xf32>
}

// -----

// A concat of a concat: the inner one's parts are made in place, the outer
// one copies (a part is never a concat's result).
// CHECK-LABEL: func.func @forward(%arg0: tensor<16xf32>{{.*}}) -> tensor<48xf32>
// CHECK: cleave.concat {{.*}}cleave.parts_in_place
// CHECK: cleave.concat
// CHECK-NOT: parts_in_place
// CHECK-SAME: -> tensor<48xf32>
func.func @forward(%x: tensor<16xf32>) -> tensor<48xf32> {
  %a = cleave.relu %x : (tensor<16xf32>) -> tensor<16xf32>
  %b = cleave.exp %x : (tensor<16xf32>) -> tensor<16xf32>
  %c = cleave.concat %a, %b {axis = 0 : i64} : (tensor<16xf32>, tensor<16xf32>) -> tensor<32xf32>
  %d = cleave.neg %x : (tensor<16xf32>) -> tensor<16xf32>
  %e = cleave.concat %c, %d {axis = 0 : i64} : (tensor<32xf32>, tensor<16xf32>) -> tensor<48xf32>
  return %e : tensor<48xf32>
}
