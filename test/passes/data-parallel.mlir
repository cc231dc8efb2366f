// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=2},cleave-data-parallel)' | FileCheck %s
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=2},cleave-data-parallel,cleave-memory-plan,cleave-lower-to-emitc)' | FileCheck %s --check-prefix=LOWERED
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,tp=1},cleave-data-parallel)' | FileCheck %s --check-prefix=ONE

// Data parallel: @apply starts by all-reducing every accumulator over dp;
// every read then uses the sum, and only the final zeroing still writes the
// argument itself.

// CHECK: shard.grid @mesh(shape = 2) {cleave.axes = ["dp"]}
// CHECK-LABEL: func.func @apply
// CHECK: %[[COUNT:.*]] = shard.all_reduce %arg0 on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
// CHECK: %[[SUM:.*]] = shard.all_reduce %arg1 on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
// CHECK: %[[GRAD:.*]] = shard.all_reduce %arg2 on @mesh grid_axes = [0] : tensor<16xf32> -> tensor<16xf32>
// CHECK-NOT: shard.all_reduce
// CHECK: %[[LOSS:.*]] = cleave.div %[[SUM]], %[[COUNT]]
// CHECK: cleave.div %[[GRAD]], %[[COUNT]]
// CHECK: cleave.assign %{{.*}} to %arg2 : tensor<16xf32>
// CHECK: return %[[LOSS]]

// The accumulators come first in the weights blob, in the order @forward
// writes them (the sum at 0, the count at 64, the gradient at 128..192; w
// after them), so the three all-reduces are one call over bytes 0..192 (48
// floats), in place.
// LOWERED-NOT: shard.grid
// LOWERED-LABEL: emitc.func @cleave_apply
// LOWERED: %[[SPAN:.*]] = call_opaque "cleave::rt::view"(%arg2) {args = [0 : index, #emitc.opaque<"0">, #emitc.opaque<"cleave::rt::DType::F32">, #emitc.opaque<"cleave::rt::Dims{48}">]}
// LOWERED: call_opaque "cleave::rt::cpu::all_reduce"(%arg0, %[[SPAN]]) {args = [0 : index, 1 : index, #emitc.opaque<"0">, #emitc.opaque<"cleave::rt::DType::F32">]}
// LOWERED-NOT: all_reduce

// One rank: the mesh, and nothing to reduce.
// ONE: shard.grid @mesh(shape = 1x1) {cleave.axes = ["dp", "tp"]}
// ONE-NOT: shard.all_reduce

func.func @forward(%x: tensor<16xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<16xf32> {cleave.kind = "param", cleave.name = "w"},
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
