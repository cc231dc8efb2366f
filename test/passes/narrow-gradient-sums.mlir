// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-data-parallel,cleave-narrow-gradient-sums{type=bf16})' | FileCheck %s
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-data-parallel,cleave-narrow-gradient-sums{type=bf16},cleave-memory-plan,cleave-lower-to-emitc)' | FileCheck %s --check-prefix=LOWERED
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-data-parallel,cleave-narrow-gradient-sums)' | FileCheck %s --check-prefix=FP32
// RUN: not cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-narrow-gradient-sums{type=f16})' 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// --grad-reduce-dtype bf16: the gradient accumulator's sum over dp moves in
// bf16; the loss's count and sum keep f32, and so does a sum over tp.

// CHECK-LABEL: func.func @forward
// CHECK: shard.all_reduce %{{.*}} on @mesh grid_axes = [1] : tensor<16xf32>
// CHECK-NOT: cleave.sum_type
// CHECK-LABEL: func.func @apply
// CHECK: shard.all_reduce %arg0 on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
// CHECK-NOT: cleave.sum_type
// CHECK: shard.all_reduce %arg1 on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
// CHECK-NOT: cleave.sum_type
// CHECK: shard.all_reduce %arg2 on @mesh grid_axes = [0] {cleave.sum_type = bf16} : tensor<16xf32> -> tensor<16xf32>

// The count and sum (bytes 0..68 of the blob) are one f32 call, the
// gradient (from 128) one through bf16: spans of different sum types do
// not merge.
// LOWERED-LABEL: emitc.func @cleave_apply
// LOWERED: %[[LOSS:.*]] = call_opaque "cleave::rt::view"(%arg2) {args = [0 : index, #emitc.opaque<"0">, #emitc.opaque<"cleave::rt::DType::F32">, #emitc.opaque<"cleave::rt::Dims{17}">]}
// LOWERED: call_opaque "cleave::rt::cpu::all_reduce"(%arg0, %[[LOSS]]) {args = [0 : index, 1 : index, #emitc.opaque<"0">, #emitc.opaque<"cleave::rt::DType::F32">]}
// LOWERED: %[[GRAD:.*]] = call_opaque "cleave::rt::view"(%arg2) {args = [0 : index, #emitc.opaque<"128">, #emitc.opaque<"cleave::rt::DType::F32">, #emitc.opaque<"cleave::rt::Dims{16}">]}
// LOWERED: call_opaque "cleave::rt::cpu::all_reduce"(%arg0, %[[GRAD]]) {args = [0 : index, 1 : index, #emitc.opaque<"0">, #emitc.opaque<"cleave::rt::DType::BF16">]}

// FP32-NOT: cleave.sum_type

// UNKNOWN: error: unknown gradient sum type 'f16': use fp32 or bf16

shard.grid @mesh(shape = 2x2) {cleave.axes = ["dp", "tp"]}

func.func @forward(%x: tensor<16xf32> {cleave.kind = "input", cleave.name = "x"},
                   %count: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.loss_count", cleave.accumulator},
                   %sum: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.loss_sum", cleave.accumulator},
                   %grad: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:w", cleave.accumulator}) {
  %one = cleave.constant {value = dense<1.0> : tensor<f32>} : tensor<f32>
  %s = cleave.add %sum, %one : (tensor<f32>, tensor<f32>) -> tensor<f32>
  cleave.assign %s to %sum : tensor<f32>
  %c = cleave.add %count, %one : (tensor<f32>, tensor<f32>) -> tensor<f32>
  cleave.assign %c to %count : tensor<f32>
  %partial = shard.all_reduce %x on @mesh grid_axes = [1] : tensor<16xf32> -> tensor<16xf32>
  %g = cleave.add %grad, %partial : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
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

// -----

// ZeRO: every reduce-scatter over dp sums gradients, and moves in bf16.
// LOWERED-LABEL: emitc.func @cleave_forward
// LOWERED: call_opaque "cleave::rt::cpu::reduce_scatter"(%arg0, %{{.*}}, %{{.*}}) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"0">, #emitc.opaque<"cleave::rt::DType::BF16">]}

// CHECK-LABEL: func.func @forward
// CHECK: shard.reduce_scatter %{{.*}} on @mesh grid_axes = [0] scatter_axis = 0 {cleave.sum_type = bf16} : tensor<16xf32> -> tensor<8xf32>

shard.grid @mesh(shape = 2x2) {cleave.axes = ["dp", "tp"]}

func.func @forward(%g: tensor<16xf32> {cleave.kind = "input", cleave.name = "g"},
                   %slot: tensor<8xf32> {cleave.kind = "state", cleave.name = "flat:grads.slice"}) {
  %slice = shard.reduce_scatter %g on @mesh grid_axes = [0] scatter_axis = 0 : tensor<16xf32> -> tensor<8xf32>
  %sum = cleave.add %slot, %slice : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  cleave.assign %sum to %slot : tensor<8xf32>
  return
}

func.func @apply() {
  return
}
