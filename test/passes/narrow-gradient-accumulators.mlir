// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-data-parallel,cleave-narrow-gradient-accumulators{type=bf16})' | FileCheck %s
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-data-parallel,cleave-narrow-gradient-accumulators{type=bf16},cleave-memory-plan,cleave-lower-to-emitc)' | FileCheck %s --check-prefix=LOWERED
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-data-parallel,cleave-narrow-gradient-accumulators)' | FileCheck %s --check-prefix=FP32
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-data-parallel,cleave-narrow-gradient-sums{type=bf16},cleave-narrow-gradient-accumulators{type=bf16})' | FileCheck %s --check-prefix=SUMS
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-data-parallel,cleave-narrow-gradient-sums{type=bf16},cleave-narrow-gradient-accumulators{type=bf16},cleave-memory-plan,cleave-overlap-gradients{bucket-bytes=100})' | FileCheck %s --check-prefix=BUCKETS
// RUN: not cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-narrow-gradient-accumulators{type=f16})' 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// --grad-accum-dtype bf16: the gradient accumulator is bf16 state. @forward
// widens it, adds the microbatch's gradient in f32 and rounds the sum as it
// assigns it; @apply sums a widened copy over dp (in f32) and zeroes the
// accumulator with a bf16 constant (the f32 one it replaces gone: it would
// still be filled, in the arena). The loss's count and sum stay f32.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[SUM:[^:]*]]: tensor<f32> {cleave.accumulator, cleave.kind = "state", cleave.name = "cleave.loss_sum"}
// CHECK-SAME: %[[SLOT:[^:]*]]: tensor<16xbf16> {cleave.accumulator, cleave.kind = "state", cleave.name = "grad:w"}
// CHECK: %[[WIDE:.*]] = cleave.cast %[[SLOT]] {to = f32} : (tensor<16xbf16>) -> tensor<16xf32>
// CHECK-NEXT: %[[ADDED:.*]] = cleave.add %[[WIDE]], %{{.*}} : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
// CHECK-NEXT: %[[ROUNDED:.*]] = cleave.cast %[[ADDED]] {to = bf16} : (tensor<16xf32>) -> tensor<16xbf16>
// CHECK-NEXT: cleave.assign %[[ROUNDED]] to %[[SLOT]] : tensor<16xbf16>
// CHECK-LABEL: func.func @apply
// CHECK-SAME: %[[GRAD:[^:]*]]: tensor<16xbf16> {cleave.accumulator, cleave.kind = "state", cleave.name = "grad:w"}
// CHECK: shard.all_reduce %arg1 on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
// CHECK: %[[WIDE:.*]] = cleave.cast %[[GRAD]] {to = f32} : (tensor<16xbf16>) -> tensor<16xf32>
// CHECK-NEXT: %[[TOTAL:.*]] = shard.all_reduce %[[WIDE]] on @mesh grid_axes = [0] : tensor<16xf32> -> tensor<16xf32>
// CHECK: cleave.div %[[TOTAL]], %{{.*}} : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
// CHECK-NOT: dense<0.000000e+00> : tensor<16xf32>
// CHECK: %[[ZERO:.*]] = cleave.constant {value = dense<0.000000e+00> : tensor<16xbf16>} : tensor<16xbf16>
// CHECK-NEXT: cleave.assign %[[ZERO]] to %[[GRAD]] : tensor<16xbf16>

// The accumulator is 32 bytes of the weights blob, after the count and sum.
// LOWERED-LABEL: emitc.func @cleave_forward
// LOWERED: call_opaque "cleave::rt::view"(%arg2) {args = [0 : index, #emitc.opaque<"{{[0-9]+}}">, #emitc.opaque<"cleave::rt::DType::BF16">, #emitc.opaque<"cleave::rt::Dims{16}">]}
// LOWERED-LABEL: emitc.func @cleave_apply
// LOWERED: call_opaque "cleave::rt::cpu::cast"

// Summed over dp in bf16 (--grad-reduce-dtype bf16), @apply sums the bf16
// accumulator itself, in place, and widens the sum: no f32 copy before it
// (the bf16 parts of the copy would be the accumulator's values), and the
// sum then starts in @forward after the accumulator's last write, as an
// f32 accumulator's does. The loss's count and sum are summed in f32.
// SUMS-LABEL: func.func @apply
// SUMS-SAME: %[[GRAD:[^:]*]]: tensor<16xbf16> {cleave.accumulator, cleave.kind = "state", cleave.name = "grad:w"}
// SUMS: %[[TOTAL:.*]] = shard.all_reduce %[[GRAD]] on @mesh grid_axes = [0] : tensor<16xbf16> -> tensor<16xbf16>
// SUMS-NEXT: %[[WIDE:.*]] = cleave.cast %[[TOTAL]] {to = f32} : (tensor<16xbf16>) -> tensor<16xf32>
// SUMS-NOT: cleave.cast %[[GRAD]]
// SUMS: cleave.div %[[WIDE]], %{{.*}} : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
// BUCKETS-LABEL: func.func @forward
// BUCKETS: cleave.assign %{{.*}} to %[[SLOT:arg[0-9]]] : tensor<16xbf16>
// BUCKETS-NEXT: cleave.all_reduce_start %[[SLOT]] on axis 0 : tensor<16xbf16>
// BUCKETS-LABEL: func.func @apply
// BUCKETS: shard.all_reduce %arg2 on @mesh grid_axes = [0] {cleave.started} : tensor<16xbf16> -> tensor<16xbf16>

// FP32-LABEL: func.func @forward
// FP32-NOT: bf16

// UNKNOWN: error: unknown gradient accumulator type 'f16': use fp32 or bf16

shard.grid @mesh(shape = 2) {cleave.axes = ["dp"]}

func.func @forward(%x: tensor<16xf32> {cleave.kind = "input", cleave.name = "x"},
                   %count: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.loss_count", cleave.accumulator},
                   %sum: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.loss_sum", cleave.accumulator},
                   %grad: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:w", cleave.accumulator}) {
  %one = cleave.constant {value = dense<1.0> : tensor<f32>} : tensor<f32>
  %s = cleave.add %sum, %one : (tensor<f32>, tensor<f32>) -> tensor<f32>
  cleave.assign %s to %sum : tensor<f32>
  %c = cleave.add %count, %one : (tensor<f32>, tensor<f32>) -> tensor<f32>
  cleave.assign %c to %count : tensor<f32>
  %g = cleave.add %grad, %x : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  cleave.assign %g to %grad : tensor<16xf32>
  return
}

func.func @apply(%count: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.loss_count", cleave.accumulator},
                 %sum: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.loss_sum", cleave.accumulator},
                 %grad: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:w", cleave.accumulator},
                 %w: tensor<16xf32> {cleave.kind = "param", cleave.name = "w"},
                 %lr: tensor<f32> {cleave.kind = "input", cleave.name = "cleave.lr"}) -> (tensor<f32> {cleave.name = "loss"}) {
  %loss = cleave.div %sum, %count : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %mean = cleave.div %grad, %count : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  %step = cleave.mul %lr, %mean : (tensor<f32>, tensor<16xf32>) -> tensor<16xf32>
  %new = cleave.sub %w, %step : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %zero = cleave.constant {value = dense<0.0> : tensor<16xf32>} : tensor<16xf32>
  cleave.assign %new to %w : tensor<16xf32>
  cleave.assign %zero to %grad : tensor<16xf32>
  return %loss : tensor<f32>
}
