// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=2},func.func(cleave-autodiff{loss=loss.sum}),cleave-build-train-step{zero=1},cleave-data-parallel,cleave-memory-plan,cleave-overlap-gradients{bucket-bytes=100})' | FileCheck %s
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=2},func.func(cleave-autodiff{loss=loss.sum}),cleave-build-train-step{zero=1},cleave-data-parallel,cleave-memory-plan,cleave-overlap-gradients{bucket-bytes=100},cleave-lower-to-emitc)' | FileCheck %s --check-prefix=LOWERED
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=2},func.func(cleave-autodiff{loss=loss.sum}),cleave-build-train-step{zero=1},cleave-data-parallel,cleave-memory-plan,cleave-overlap-gradients{bucket-bytes=1000})' | FileCheck %s --check-prefix=ONE
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=2},func.func(cleave-autodiff{loss=loss.sum}),cleave-build-train-step{zero=1},cleave-data-parallel,cleave-memory-plan,cleave-overlap-gradients{bucket-bytes=0})' | FileCheck %s --check-prefix=NONE
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=2},func.func(cleave-autodiff{loss=loss.sum}),cleave-build-train-step{zero=1},cleave-data-parallel,cleave-memory-plan,cleave-overlap-gradients{bucket-bytes=-1})' | FileCheck %s --check-prefix=NONE

// ZeRO 1's flat gradient buffer (128 floats: w0 at 0, w1 at 64, b1 at 96;
// rank r owns elements [64 r, 64 r + 64)) is reduce-scattered in buckets
// during the backward: the backward finishes b1 and w1 first (one bucket
// under 100 bytes), then w0. Each bucket starts right after its last
// accumulator is written; @apply's reduce-scatter of the buffer only waits
// for them (cleave.summed_in_buckets). The loss's count and sum stay
// @apply's all-reduces.
// CHECK-LABEL: func.func @forward
// CHECK: cleave.assign %{{.*}} to %[[W1:arg[0-9]+]] : tensor<8x4xf32>
// CHECK-NEXT: cleave.reduce_scatter_owned_start %[[W1]], %{{.*}} on axis 0 slices 64 : tensor<8x4xf32>, tensor<4xf32>
// CHECK: cleave.assign %{{.*}} to %[[W0:arg[0-9]+]] : tensor<8x8xf32>
// CHECK-NEXT: cleave.reduce_scatter_owned_start %[[W0]] on axis 0 slices 64 : tensor<8x8xf32>
// CHECK-NEXT: return
// CHECK-LABEL: func.func @apply
// CHECK: shard.all_reduce %arg0 on @mesh grid_axes = [0] :
// CHECK: shard.reduce_scatter %arg4 on @mesh grid_axes = [0] scatter_axis = 0 {{{.*}}cleave.summed_in_buckets}

// The first bucket is the 36 floats from w1's place in the flat buffer (64:
// all in rank 1's slice), the second w0's 64 from 0 (rank 0's), each
// summed on a step's last microbatch alone ("true"); @apply waits for
// every bucket of the buffer, then copies this rank's slice (its view) into
// the buffer the memory plan gave the reduce-scatter.
// LOWERED-LABEL: emitc.func @cleave_forward
// LOWERED: %[[B1:.*]] = call_opaque "cleave::rt::view"(%arg2) {args = [0 : index, #emitc.opaque<"896">, #emitc.opaque<"cleave::rt::DType::F32">, #emitc.opaque<"cleave::rt::Dims{36}">]}
// LOWERED: call_opaque "cleave::rt::cpu::reduce_scatter_owned_start"(%arg0, %[[B1]]) {args = [0 : index, 1 : index, #emitc.opaque<"0">, #emitc.opaque<"cleave::rt::DType::F32">, #emitc.opaque<"64">, #emitc.opaque<"64">, #emitc.opaque<"true">]}
// LOWERED: %[[B0:.*]] = call_opaque "cleave::rt::view"(%arg2) {args = [0 : index, #emitc.opaque<"640">, #emitc.opaque<"cleave::rt::DType::F32">, #emitc.opaque<"cleave::rt::Dims{64}">]}
// LOWERED: call_opaque "cleave::rt::cpu::reduce_scatter_owned_start"(%arg0, %[[B0]]) {args = [0 : index, 1 : index, #emitc.opaque<"0">, #emitc.opaque<"cleave::rt::DType::F32">, #emitc.opaque<"0">, #emitc.opaque<"64">, #emitc.opaque<"true">]}
// LOWERED-LABEL: emitc.func @cleave_apply
// LOWERED: %[[FLAT:.*]] = call_opaque "cleave::rt::view"(%arg2) {args = [0 : index, #emitc.opaque<"640">, #emitc.opaque<"cleave::rt::DType::F32">, #emitc.opaque<"cleave::rt::Dims{128}">]}
// LOWERED: call_opaque "cleave::rt::cpu::reduce_scatter_wait"(%arg0, %[[FLAT]]) {args = [0 : index, 1 : index, #emitc.opaque<"0">]}
// LOWERED-NEXT: %[[SLICE:.*]] = call_opaque "cleave::rt::rankPart"(%arg0, %[[FLAT]]) {args = [0 : index, 1 : index, #emitc.opaque<"cleave::rt::Dims{64}">, #emitc.opaque<"0">]}
// LOWERED-NEXT: call_opaque "cleave::rt::markOp"
// LOWERED-NEXT: call_opaque "cleave::rt::cpu::copy"(%arg0, %[[SLICE]], %{{.*}})
// LOWERED-NOT: reduce_scatter

// One bucket of every gradient: from 0, across both ranks' slices.
// ONE-LABEL: func.func @forward
// ONE-COUNT-1: cleave.reduce_scatter_owned_start
// ONE-NEXT: return

// Without a size (0), and with auto (-1): ZeRO 1's buckets are asked for.
// NONE-LABEL: func.func @forward
// NONE-NOT: reduce_scatter_owned_start
// NONE-LABEL: func.func @apply
// NONE: shard.reduce_scatter
// NONE-NOT: summed_in_buckets

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
