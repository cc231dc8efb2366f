// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=2},func.func(cleave-autodiff{loss=loss.sum}),cleave-build-train-step{zero=2},cleave-data-parallel,cleave-memory-plan,cleave-overlap-gradients{bucket-bytes=100})' | FileCheck %s
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=2},func.func(cleave-autodiff{loss=loss.sum}),cleave-build-train-step{zero=2},cleave-data-parallel,cleave-memory-plan,cleave-overlap-gradients{bucket-bytes=100},cleave-lower-to-emitc)' | FileCheck %s --check-prefix=LOWERED
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=2},func.func(cleave-autodiff{loss=loss.sum}),cleave-build-train-step{zero=2},cleave-data-parallel,cleave-memory-plan,cleave-overlap-gradients{bucket-bytes=1000})' | FileCheck %s --check-prefix=ONE
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=2},func.func(cleave-autodiff{loss=loss.sum}),cleave-build-train-step{zero=2},cleave-data-parallel,cleave-memory-plan,cleave-overlap-gradients{bucket-bytes=0})' | FileCheck %s --check-prefix=NONE
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=2},func.func(cleave-autodiff{loss=loss.sum}),cleave-build-train-step{zero=2},cleave-data-parallel,cleave-memory-plan,cleave-overlap-gradients{bucket-bytes=-1})' | FileCheck %s --check-prefix=NONE
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=2},func.func(cleave-autodiff{loss=loss.sum}),cleave-build-train-step{zero=3},cleave-data-parallel,cleave-memory-plan,cleave-overlap-gradients{bucket-bytes=100})' | FileCheck %s --check-prefix=ZERO3

// ZeRO 2 packs each microbatch's gradients into a concat (w0 at element 0,
// w1 at 64, b1 at 96, zeros to 128; rank r owns elements [64 r, 64 r + 64))
// whose parts are made in place, and reduce-scatters it over dp into its
// slice accumulator. In buckets, each part's reshape moves up to where the
// part is made, the padding to where b1 is, and a bucket's parts are
// reduce-scattered into their owners right after they are made: b1 and the
// padding first (128 bytes, past the 100), then w1, then w0. The concat's
// reduce-scatter only waits for them (cleave.summed_in_buckets).
// CHECK-LABEL: func.func @forward
// CHECK: %[[B1:.*]] = cleave.reshape %{{.*}} {shape = array<i64: 4>}
// CHECK-NEXT: %[[PAD:.*]] = cleave.constant {{.*}}dense<0.000000e+00> : tensor<28xf32>
// CHECK-NEXT: cleave.reduce_scatter_owned_start %[[B1]], %[[PAD]] on axis 0 slices 64 : tensor<4xf32>, tensor<28xf32>
// CHECK: %[[W1:.*]] = cleave.matmul {{.*}} -> tensor<8x4xf32>
// CHECK-NEXT: %[[W1FLAT:.*]] = cleave.reshape %[[W1]] {shape = array<i64: 32>}
// CHECK-NEXT: cleave.reduce_scatter_owned_start %[[W1FLAT]] on axis 0 slices 64 : tensor<32xf32>
// CHECK: %[[W0:.*]] = cleave.matmul {{.*}} -> tensor<8x8xf32>
// CHECK-NEXT: %[[W0FLAT:.*]] = cleave.reshape %[[W0]] {shape = array<i64: 64>}
// CHECK-NEXT: cleave.reduce_scatter_owned_start %[[W0FLAT]] on axis 0 slices 64 : tensor<64xf32>
// CHECK-NEXT: %[[PACKED:.*]] = cleave.concat %[[W0FLAT]], %[[W1FLAT]], %[[B1]], %[[PAD]] {{.*}}cleave.parts_in_place
// CHECK-NEXT: shard.reduce_scatter %[[PACKED]] on @mesh grid_axes = [0] scatter_axis = 0 {{{.*}}cleave.summed_in_buckets}
// CHECK-LABEL: func.func @apply
// CHECK-NOT: reduce_scatter_owned_start

// The packed buffer lies at byte 192 of the arena: the buckets are the 32
// floats from element 96 (576: all rank 1's), the 32 from 64 (448: rank
// 1's) and the 64 from 0 (192: rank 0's), each summed on every call
// ("false": not on the last microbatch alone); the wait is for the whole
// buffer, then this rank's slice (its view) is copied.
// LOWERED-LABEL: emitc.func @cleave_forward
// LOWERED: %[[S0:.*]] = call_opaque "cleave::rt::view"(%arg1) {args = [0 : index, #emitc.opaque<"576">, #emitc.opaque<"cleave::rt::DType::F32">, #emitc.opaque<"cleave::rt::Dims{32}">]}
// LOWERED: call_opaque "cleave::rt::cpu::reduce_scatter_owned_start"(%arg0, %[[S0]]) {args = [0 : index, 1 : index, #emitc.opaque<"0">, #emitc.opaque<"cleave::rt::DType::F32">, #emitc.opaque<"96">, #emitc.opaque<"64">, #emitc.opaque<"false">]}
// LOWERED: %[[S1:.*]] = call_opaque "cleave::rt::view"(%arg1) {args = [0 : index, #emitc.opaque<"448">, #emitc.opaque<"cleave::rt::DType::F32">, #emitc.opaque<"cleave::rt::Dims{32}">]}
// LOWERED: call_opaque "cleave::rt::cpu::reduce_scatter_owned_start"(%arg0, %[[S1]]) {args = [0 : index, 1 : index, #emitc.opaque<"0">, #emitc.opaque<"cleave::rt::DType::F32">, #emitc.opaque<"64">, #emitc.opaque<"64">, #emitc.opaque<"false">]}
// LOWERED: %[[S2:.*]] = call_opaque "cleave::rt::view"(%arg1) {args = [0 : index, #emitc.opaque<"192">, #emitc.opaque<"cleave::rt::DType::F32">, #emitc.opaque<"cleave::rt::Dims{64}">]}
// LOWERED: call_opaque "cleave::rt::cpu::reduce_scatter_owned_start"(%arg0, %[[S2]]) {args = [0 : index, 1 : index, #emitc.opaque<"0">, #emitc.opaque<"cleave::rt::DType::F32">, #emitc.opaque<"0">, #emitc.opaque<"64">, #emitc.opaque<"false">]}
// LOWERED: %[[ALL:.*]] = call_opaque "cleave::rt::view"(%arg1) {args = [0 : index, #emitc.opaque<"192">, #emitc.opaque<"cleave::rt::DType::F32">, #emitc.opaque<"cleave::rt::Dims{128}">]}
// LOWERED: call_opaque "cleave::rt::cpu::reduce_scatter_wait"(%arg0, %[[ALL]]) {args = [0 : index, 1 : index, #emitc.opaque<"0">]}
// LOWERED-NEXT: %[[SLICE:.*]] = call_opaque "cleave::rt::rankPart"(%arg0, %[[ALL]]) {args = [0 : index, 1 : index, #emitc.opaque<"cleave::rt::Dims{64}">, #emitc.opaque<"0">]}
// LOWERED-NEXT: call_opaque "cleave::rt::markOp"
// LOWERED-NEXT: call_opaque "cleave::rt::cpu::copy"(%arg0, %[[SLICE]], %{{.*}})
// LOWERED-NOT: cpu::concat
// LOWERED-NOT: cpu::reduce_scatter(

// One bucket of every gradient: from 0, across both ranks' slices.
// ONE-LABEL: func.func @forward
// ONE-COUNT-1: cleave.reduce_scatter_owned_start
// ONE-NEXT: cleave.concat

// Without a size (0), and with auto (-1): ZeRO 2's buckets are asked for.
// NONE-LABEL: func.func @forward
// NONE-NOT: reduce_scatter_owned_start
// NONE: shard.reduce_scatter
// NONE-NOT: summed_in_buckets

// ZeRO 3 reduce-scatters each gradient on its own, b1's padded by a concat
// of it and zeros: one gradient, made at once, is not cut into buckets.
// ZERO3-LABEL: func.func @forward
// ZERO3: cleave.concat {{.*}}cleave.parts_in_place
// ZERO3-NOT: reduce_scatter_owned_start
// ZERO3-NOT: summed_in_buckets
// ZERO3: return

func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w0: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w0"},
                   %w1: tensor<8x4xf32> {cleave.kind = "param", cleave.name = "w1"},
                   %b1: tensor<4xf32> {cleave.kind = "param", cleave.name = "b1"})
    -> (tensor<f32> {cleave.name = "loss.sum"}, tensor<f32> {cleave.name = "loss.count"}) {
  %g = cleave.matmul %x, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h = cleave.matmul %g, %w1 : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %o = cleave.add %h, %b1 : (tensor<4x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
  %l = cleave.reduce_sum %o {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x4xf32>) -> tensor<f32>
  %n = cleave.constant {value = dense<4.0> : tensor<f32>} : tensor<f32>
  return %l, %n : tensor<f32>, tensor<f32>
}
