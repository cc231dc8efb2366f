// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-memory-plan)' | FileCheck %s
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-memory-plan,cleave-lower-to-emitc)' | FileCheck %s --check-prefix=EMITC

// A pipeline stage's stash (a result the driver keeps for the microbatch's
// later call) made by a kernel of its own is written straight into its
// output slot: no arena space, no copy at the return. The second function's
// slots follow the first's. A view (the reshape), a value returned twice
// (its second slot) and an argument are copied there.
// CHECK-LABEL: func.func @forward
// CHECK: cleave.tanh {{.*}}cleave.arena_offsets = array<i64: -1>, cleave.stash_slots = array<i64: 0>
// CHECK-LABEL: func.func @backward
// CHECK: cleave.exp {{.*}}cleave.arena_offsets = array<i64: -1>, cleave.stash_slots = array<i64: 1>
// CHECK: cleave.neg {{.*}}cleave.arena_offsets = array<i64: 0>}
// CHECK: cleave.sqrt {{.*}}cleave.arena_offsets = array<i64: -1>, cleave.stash_slots = array<i64: 3>
// EMITC-LABEL: emitc.func @cleave_forward
// EMITC: %[[OUT:.*]] = call_opaque "cleave::rt::load"(%arg4) {args = [0 : index, #emitc.opaque<"0">]}
// EMITC: call_opaque "cleave::rt::cpu::tanh"(%arg0, %{{.*}}, %[[OUT]])
// EMITC-NOT: cleave::rt::cpu::copy
// EMITC: return
// EMITC-LABEL: emitc.func @cleave_backward
// EMITC: call_opaque "cleave::rt::cpu::sqrt"
// EMITC-COUNT-3: call_opaque "cleave::rt::cpu::copy"
// EMITC-NOT: cleave::rt::cpu::copy
// EMITC: return
func.func @forward(%x: tensor<16xf32> {cleave.kind = "input", cleave.name = "x"})
    -> (tensor<16xf32> {cleave.kind = "stash", cleave.name = "stash:0"}) {
  %t = cleave.tanh %x : (tensor<16xf32>) -> tensor<16xf32>
  return %t : tensor<16xf32>
}
func.func @backward(%s: tensor<16xf32> {cleave.kind = "stash", cleave.name = "stash:0"})
    -> (tensor<16xf32> {cleave.kind = "stash", cleave.name = "bstash:0"},
        tensor<4x4xf32> {cleave.kind = "stash", cleave.name = "bstash:1"},
        tensor<16xf32> {cleave.kind = "stash", cleave.name = "bstash:2"},
        tensor<16xf32> {cleave.kind = "stash", cleave.name = "bstash:3"},
        tensor<16xf32> {cleave.kind = "stash", cleave.name = "bstash:4"}) {
  %e = cleave.exp %s : (tensor<16xf32>) -> tensor<16xf32>
  %n = cleave.neg %e : (tensor<16xf32>) -> tensor<16xf32>
  %r = cleave.reshape %n {shape = array<i64: 4, 4>} : (tensor<16xf32>) -> tensor<4x4xf32>
  %q = cleave.sqrt %e : (tensor<16xf32>) -> tensor<16xf32>
  return %e, %r, %q, %q, %s : tensor<16xf32>, tensor<4x4xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}
