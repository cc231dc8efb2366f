// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=2},cleave-data-parallel,cleave-memory-plan,cleave-overlap-gradients{bucket-bytes=100})' | FileCheck %s
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=2},cleave-data-parallel,cleave-memory-plan,cleave-overlap-gradients{bucket-bytes=100},cleave-lower-to-emitc)' | FileCheck %s --check-prefix=LOWERED
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=2},cleave-data-parallel,cleave-memory-plan,cleave-overlap-gradients{bucket-bytes=-1})' | FileCheck %s --check-prefix=AUTO
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=2},cleave-data-parallel,cleave-memory-plan,cleave-overlap-gradients{bucket-bytes=0})' | FileCheck %s --check-prefix=NONE
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1},cleave-data-parallel,cleave-memory-plan,cleave-overlap-gradients{bucket-bytes=100})' | FileCheck %s --check-prefix=NONE

// The memory plan lays the accumulators out first, 64 bytes apart, in the
// order @forward finishes them: grad:v at 0, grad:w at 64, the sum at 128,
// the count at 192. Taken in that order, each joins the open bucket while it
// holds under 100 bytes: [grad:v, grad:w] (128 bytes), then [sum, count].
// Each starts right after the last of its accumulators is written. @apply's
// sums, marked started, move down to just before their first readers: the
// loss's sum and count before the loss, each gradient's before its mean.

// CHECK-LABEL: func.func @forward
// CHECK: cleave.assign %{{.*}} to %arg5 : tensor<16xf32>
// CHECK-NEXT: cleave.all_reduce_start %arg6, %arg5 on axis 0 : tensor<16xf32>, tensor<16xf32>
// CHECK: cleave.assign %{{.*}} to %arg3 : tensor<f32>
// CHECK-NEXT: cleave.all_reduce_start %arg4, %arg3 on axis 0 : tensor<f32>, tensor<f32>
// CHECK-NEXT: return
// CHECK-LABEL: func.func @apply
// CHECK: shard.all_reduce %arg1 on @mesh grid_axes = [0] {cleave.started}
// CHECK-NEXT: shard.all_reduce %arg0 on @mesh grid_axes = [0] {cleave.started}
// CHECK-NEXT: cleave.div
// CHECK-NEXT: shard.all_reduce %arg2 on @mesh grid_axes = [0] {cleave.started}
// CHECK-NEXT: cleave.div
// CHECK-NEXT: shard.all_reduce %arg3 on @mesh grid_axes = [0] {cleave.started}
// CHECK-NEXT: cleave.div
// CHECK-NOT: shard.all_reduce

// Each start sums its bucket's one span of the weights blob: the 32 floats
// from 0, then the 17 from 128 (the padding after the sum is zero and stays
// zero). @apply waits, before each sum's first reader, for the bucket that
// holds its accumulator (the sum at 128, the count at 192, grad:w at 64,
// grad:v at 0).
// LOWERED-LABEL: emitc.func @cleave_forward
// LOWERED: %[[GRADS:.*]] = call_opaque "cleave::rt::view"(%arg2) {args = [0 : index, #emitc.opaque<"0">, #emitc.opaque<"cleave::rt::DType::F32">, #emitc.opaque<"cleave::rt::Dims{32}">]}
// LOWERED-NEXT: call_opaque "cleave::rt::markOp"
// LOWERED-NEXT: call_opaque "cleave::rt::cpu::all_reduce_start"(%arg0, %[[GRADS]]) {args = [0 : index, 1 : index, #emitc.opaque<"0">, #emitc.opaque<"cleave::rt::DType::F32">, #emitc.opaque<"true">]}
// LOWERED: %[[LOSS:.*]] = call_opaque "cleave::rt::view"(%arg2) {args = [0 : index, #emitc.opaque<"128">, #emitc.opaque<"cleave::rt::DType::F32">, #emitc.opaque<"cleave::rt::Dims{17}">]}
// LOWERED-NEXT: call_opaque "cleave::rt::markOp"
// LOWERED-NEXT: call_opaque "cleave::rt::cpu::all_reduce_start"(%arg0, %[[LOSS]]) {args = [0 : index, 1 : index, #emitc.opaque<"0">, #emitc.opaque<"cleave::rt::DType::F32">, #emitc.opaque<"true">]}
// LOWERED-LABEL: emitc.func @cleave_apply
// LOWERED-DAG: %[[COUNT:.*]] = call_opaque "cleave::rt::view"(%arg2) {args = [0 : index, #emitc.opaque<"192">,
// LOWERED-DAG: %[[SUM:.*]] = call_opaque "cleave::rt::view"(%arg2) {args = [0 : index, #emitc.opaque<"128">,
// LOWERED-DAG: %[[W:.*]] = call_opaque "cleave::rt::view"(%arg2) {args = [0 : index, #emitc.opaque<"64">,
// LOWERED-DAG: %[[V:.*]] = call_opaque "cleave::rt::view"(%arg2) {args = [0 : index, #emitc.opaque<"0">,
// LOWERED: call_opaque "cleave::rt::cpu::all_reduce_wait"(%arg0, %[[SUM]]) {args = [0 : index, 1 : index, #emitc.opaque<"0">]}
// LOWERED: call_opaque "cleave::rt::cpu::all_reduce_wait"(%arg0, %[[COUNT]])
// LOWERED: call_opaque "cleave::rt::cpu::div"
// LOWERED: call_opaque "cleave::rt::cpu::all_reduce_wait"(%arg0, %[[W]])
// LOWERED: call_opaque "cleave::rt::cpu::div"
// LOWERED: call_opaque "cleave::rt::cpu::all_reduce_wait"(%arg0, %[[V]])
// LOWERED: call_opaque "cleave::rt::cpu::div"
// LOWERED-NOT: all_reduce

// Auto: a quarter of the 136 bytes is below the 4 KiB floor, so one bucket,
// after the last write.
// AUTO-LABEL: func.func @forward
// AUTO: cleave.assign %{{.*}} to %arg3 : tensor<f32>
// AUTO-NEXT: cleave.all_reduce_start %arg6, %arg5, %arg4, %arg3 on axis 0
// AUTO-NOT: all_reduce_start

// No buckets, or no dp to sum over: nothing starts early.
// NONE-NOT: all_reduce_start
// NONE-NOT: cleave.started

func.func @forward(%x: tensor<16xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<16xf32> {cleave.kind = "param", cleave.name = "w"},
                   %v: tensor<16xf32> {cleave.kind = "param", cleave.name = "v"},
                   %count: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.loss_count", cleave.accumulator},
                   %sum: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.loss_sum", cleave.accumulator},
                   %gw: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:w", cleave.accumulator},
                   %gv: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:v", cleave.accumulator}) {
  %one = cleave.constant {value = dense<1.0> : tensor<f32>} : tensor<f32>
  %b = cleave.mul %x, %w : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %gb = cleave.add %gv, %b : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  cleave.assign %gb to %gv : tensor<16xf32>
  %a = cleave.mul %x, %v : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %ga = cleave.add %gw, %a : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  cleave.assign %ga to %gw : tensor<16xf32>
  %s = cleave.add %sum, %one : (tensor<f32>, tensor<f32>) -> tensor<f32>
  cleave.assign %s to %sum : tensor<f32>
  %c = cleave.add %count, %one : (tensor<f32>, tensor<f32>) -> tensor<f32>
  cleave.assign %c to %count : tensor<f32>
  return
}

func.func @apply(%count: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.loss_count", cleave.accumulator},
                 %sum: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.loss_sum", cleave.accumulator},
                 %gw: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:w", cleave.accumulator},
                 %gv: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:v", cleave.accumulator},
                 %w: tensor<16xf32> {cleave.kind = "param", cleave.name = "w"},
                 %v: tensor<16xf32> {cleave.kind = "param", cleave.name = "v"},
                 %lr: tensor<f32> {cleave.kind = "input", cleave.name = "cleave.lr"}) -> (tensor<f32> {cleave.name = "loss"}) {
  %loss = cleave.div %sum, %count : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %mw = cleave.div %gw, %count : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  %mv = cleave.div %gv, %count : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  %nw = cleave.sub %w, %mw : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %nv = cleave.sub %v, %mv : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %zero = cleave.constant {value = dense<0.0> : tensor<16xf32>} : tensor<16xf32>
  cleave.assign %nw to %w : tensor<16xf32>
  cleave.assign %nv to %v : tensor<16xf32>
  cleave.assign %zero to %gw : tensor<16xf32>
  cleave.assign %zero to %gv : tensor<16xf32>
  return %loss : tensor<f32>
}
