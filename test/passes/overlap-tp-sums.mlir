// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-overlap-tp-sums)' | FileCheck %s
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-overlap-tp-sums,cleave-memory-plan,cleave-lower-to-emitc)' | FileCheck %s --check-prefix=LOWERED

// A column-parallel layer's backward: the input gradient's partial sums
// (a product, reshaped) summed over tp, then the weight gradient's product
// and its accumulation, then the input gradient's first reader. The sum is
// started where it is and waited for just before that reader, which reads
// the wait, as the later reader does.
// CHECK-LABEL: func.func @forward
// CHECK: %[[P:.*]] = cleave.gemm %arg1, %arg2
// CHECK-NEXT: %[[R:.*]] = cleave.reshape %[[P]]
// CHECK-NEXT: %[[S:.*]] = shard.all_reduce %[[R]] on @mesh grid_axes = [1] {cleave.started} : tensor<2x2x4xf32> -> tensor<2x2x4xf32>
// CHECK-NEXT: %[[DW:.*]] = cleave.gemm %arg0, %arg1
// CHECK-NEXT: %[[A:.*]] = cleave.add %arg3, %[[DW]]
// CHECK-NEXT: cleave.assign %[[A]] to %arg3
// CHECK-NEXT: %[[W:.*]] = cleave.collective_wait %[[S]] from %[[R]] : tensor<2x2x4xf32> -> tensor<2x2x4xf32>
// CHECK-NEXT: %[[N:.*]] = cleave.neg %[[W]]
// CHECK-NEXT: %[[M:.*]] = cleave.mul %[[N]], %[[W]]
// CHECK-NEXT: return %[[M]]

// The partial sums are summed in their own buffer on the background thread
// on every call (no copy, `false`: not a bucket's), while the weight
// gradient's product runs; the wait is on the same buffer.
// LOWERED-LABEL: emitc.func @cleave_forward
// LOWERED: call_opaque "cleave::rt::cpu::gemm"(%arg0, %{{.*}}, %{{.*}}, %[[P:[0-9]+]])
// LOWERED: %[[R:[0-9]+]] = call_opaque "cleave::rt::reshaped"(%[[P]]
// LOWERED-NOT: cleave::rt::cpu::copy
// LOWERED: call_opaque "cleave::rt::cpu::all_reduce_start"(%arg0, %[[R]]) {args = [0 : index, 1 : index, #emitc.opaque<"1">, #emitc.opaque<"cleave::rt::DType::F32">, #emitc.opaque<"false">]}
// LOWERED: call_opaque "cleave::rt::cpu::gemm"
// LOWERED: call_opaque "cleave::rt::cpu::all_reduce_wait"(%arg0, %[[R]]) {args = [0 : index, 1 : index, #emitc.opaque<"1">]}
// LOWERED: call_opaque "cleave::rt::cpu::neg"(%arg0, %[[R]]
// LOWERED-NOT: all_reduce
// LOWERED-LABEL: emitc.func @cleave_narrow_weights
shard.grid @mesh(shape = 1x2) {cleave.axes = ["dp", "tp"]}
func.func @forward(%x: tensor<4x4xf32> {cleave.kind = "input", cleave.name = "x"},
                   %dy: tensor<4x4xf32> {cleave.kind = "input", cleave.name = "dy"},
                   %w: tensor<4x4xf32> {cleave.kind = "param", cleave.name = "w"},
                   %aw: tensor<4x4xf32> {cleave.kind = "state", cleave.name = "grad:w", cleave.accumulator})
    -> tensor<2x2x4xf32> {
  %p = cleave.gemm %dy, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = cleave.reshape %p {shape = array<i64: 2, 2, 4>} : (tensor<4x4xf32>) -> tensor<2x2x4xf32>
  %s = shard.all_reduce %r on @mesh grid_axes = [1] : tensor<2x2x4xf32> -> tensor<2x2x4xf32>
  %dw = cleave.gemm %x, %dy {trans_a = true} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %a = cleave.add %aw, %dw : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  cleave.assign %a to %aw : tensor<4x4xf32>
  %n = cleave.neg %s : (tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  %m = cleave.mul %n, %s : (tensor<2x2x4xf32>, tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  return %m : tensor<2x2x4xf32>
}

// -----

// Left where they are: a sum read at once (a row-parallel output), one
// whose partial sums another op reads too (so it copies them), and one
// over dp.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: cleave.started
// CHECK-NOT: cleave.collective_wait
shard.grid @mesh(shape = 2x2) {cleave.axes = ["dp", "tp"]}
func.func @forward(%x: tensor<4x4xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<4x4xf32> {cleave.kind = "param", cleave.name = "w"})
    -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %p1 = cleave.gemm %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %s1 = shard.all_reduce %p1 on @mesh grid_axes = [1] : tensor<4x4xf32> -> tensor<4x4xf32>
  %n1 = cleave.neg %s1 : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %p2 = cleave.gemm %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r2 = cleave.reshape %p2 {shape = array<i64: 4, 4>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %s2 = shard.all_reduce %r2 on @mesh grid_axes = [1] : tensor<4x4xf32> -> tensor<4x4xf32>
  %p4 = cleave.gemm %x, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %s4 = shard.all_reduce %p4 on @mesh grid_axes = [0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %q = cleave.gemm %x, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %n2 = cleave.neg %s2 : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %n3 = cleave.add %w, %p2 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %n4 = cleave.add %s4, %q : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %n1, %n2, %n3, %n4, %q : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// One rank over tp: nothing to overlap.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: cleave.started
shard.grid @mesh(shape = 2x1) {cleave.axes = ["dp", "tp"]}
func.func @forward(%x: tensor<4x4xf32> {cleave.kind = "input", cleave.name = "x"},
                   %dy: tensor<4x4xf32> {cleave.kind = "input", cleave.name = "dy"})
    -> tensor<4x4xf32> {
  %p = cleave.gemm %dy, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %s = shard.all_reduce %p on @mesh grid_axes = [1] : tensor<4x4xf32> -> tensor<4x4xf32>
  %q = cleave.gemm %x, %dy : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %n = cleave.add %s, %q : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %n : tensor<4x4xf32>
}
