// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-split-loss,cleave-autodiff{loss=loss.sum}),cleave-build-train-step{optimizer=adam})' | FileCheck %s --check-prefix=ADAM
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-split-loss,cleave-autodiff{loss=loss.sum}),cleave-build-train-step{optimizer=sgd})' | FileCheck %s --check-prefix=SGD
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-split-loss,cleave-autodiff{loss=loss.sum}),cleave-create-mesh{mesh=dp=2},cleave-build-train-step{optimizer=sgd zero=1})' | FileCheck %s --check-prefix=SHARDED
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-split-loss,cleave-autodiff{loss=loss.sum}),cleave-create-mesh{mesh=dp=2},cleave-build-train-step{optimizer=sgd zero=1 sliced-masters=true})' | FileCheck %s --check-prefix=MASTERS1
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-split-loss,cleave-autodiff{loss=loss.sum}),cleave-create-mesh{mesh=dp=2},cleave-build-train-step{optimizer=sgd zero=2 sliced-masters=true})' | FileCheck %s --check-prefix=MASTERS2
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-split-loss,cleave-autodiff{loss=loss.sum}),cleave-build-train-step{optimizer=lion})' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-split-loss),cleave-build-train-step)' 2>&1 | FileCheck %s --check-prefix=NOGRAD
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-autodiff),cleave-build-train-step)' 2>&1 | FileCheck %s --check-prefix=NOSPLIT

// @forward adds one microbatch's gradient, loss sum and count into state
// accumulators, each right after its value is computed, and returns
// nothing; @apply divides by the count once, updates the parameter and the
// optimizer's state, zeroes the accumulators and returns the loss (sum /
// count) under its own name.

// ADAM-LABEL: func.func @forward
// ADAM-SAME: %arg2: tensor<f32> {cleave.accumulator, cleave.kind = "state", cleave.name = "cleave.loss_count"}
// ADAM-SAME: %arg3: tensor<f32> {cleave.accumulator, cleave.kind = "state", cleave.name = "cleave.loss_sum"}
// ADAM-SAME: %arg4: tensor<3xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "grad:w"}) {
// ADAM: %[[SUM:.*]] = cleave.reduce_sum
// ADAM-NEXT: %[[LOSS:.*]] = cleave.add %arg3, %[[SUM]]
// ADAM-NEXT: cleave.assign %[[LOSS]] to %arg3
// ADAM: %[[ONE:.*]] = cleave.constant {value = dense<1.000000e+00> : tensor<f32>}
// ADAM-NEXT: %[[COUNT:.*]] = cleave.add %arg2, %[[ONE]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// ADAM-NEXT: cleave.assign %[[COUNT]] to %arg2
// ADAM: %[[G:.*]] = cleave.mul %{{.*}}, %arg0
// ADAM-NEXT: %[[GRAD:.*]] = cleave.add %arg4, %[[G]] : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
// ADAM-NEXT: cleave.assign %[[GRAD]] to %arg4
// ADAM-NEXT: return{{$}}

// ADAM-LABEL: func.func @apply
// ADAM-SAME: %arg0: tensor<f32> {cleave.accumulator, cleave.kind = "state", cleave.name = "cleave.loss_count"}
// ADAM-SAME: %arg1: tensor<f32> {cleave.accumulator, cleave.kind = "state", cleave.name = "cleave.loss_sum"}
// ADAM-SAME: %arg2: tensor<f32> {cleave.kind = "input", cleave.name = "cleave.lr"}
// ADAM-SAME: %arg3: tensor<f32> {cleave.kind = "input", cleave.name = "cleave.step"}
// ADAM-SAME: %arg4: tensor<3xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "grad:w"}
// ADAM-SAME: %arg5: tensor<3xf32> {cleave.kind = "param", cleave.name = "w"}
// ADAM-SAME: %arg6: tensor<3xf32> {cleave.kind = "state", cleave.name = "adam.m:w", cleave.state_of = "w"}
// ADAM-SAME: %arg7: tensor<3xf32> {cleave.kind = "state", cleave.name = "adam.v:w", cleave.state_of = "w"}
// ADAM-SAME: -> (tensor<f32> {cleave.name = "objective"})
// ADAM: %[[MEAN:.*]] = cleave.div %arg1, %arg0 : (tensor<f32>, tensor<f32>) -> tensor<f32>
// ADAM: %[[G:.*]] = cleave.div %arg4, %arg0 : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
// Bias corrections 1 - beta^step, in f64.
// ADAM: %[[T:.*]] = cleave.cast %arg3 {to = f64} : (tensor<f32>) -> tensor<f64>
// ADAM: cleave.pow %{{.*}}, %[[T]] : (tensor<f64>, tensor<f64>) -> tensor<f64>
// ADAM: cleave.sqrt
// ADAM: %[[ZERO:.*]] = cleave.constant {value = dense<0.000000e+00> : tensor<3xf32>}
// ADAM: cleave.assign %{{.*}} to %arg6 : tensor<3xf32>
// ADAM: cleave.assign %{{.*}} to %arg7 : tensor<3xf32>
// ADAM: cleave.assign %{{.*}} to %arg5 : tensor<3xf32>
// ADAM: cleave.assign %{{.*}} to %arg0 : tensor<f32>
// ADAM: cleave.assign %{{.*}} to %arg1 : tensor<f32>
// ADAM: cleave.assign %[[ZERO]] to %arg4 : tensor<3xf32>
// ADAM: return %[[MEAN]] : tensor<f32>

// SGD-LABEL: func.func @apply
// SGD-NOT: adam
// SGD: %[[G:.*]] = cleave.div %arg4, %arg0
// SGD: %[[STEP:.*]] = cleave.mul %arg2, %[[G]] : (tensor<f32>, tensor<3xf32>) -> tensor<3xf32>
// SGD: %[[NEW:.*]] = cleave.sub %arg5, %[[STEP]]
// SGD: cleave.assign %[[NEW]] to %arg5 : tensor<3xf32>

// ZeRO 1 on dp=2: w (3 floats) is a member of the flat parameter buffer,
// padded to 32 floats (16 a rank); each rank updates its 16.
// SHARDED: shard.grid @mesh(shape = 2) {cleave.axes = ["dp"]}
// SHARDED-LABEL: func.func @forward
// SHARDED-SAME: %arg1: tensor<3xf32> {cleave.flat_member = "flat:params", cleave.flat_offset = 0 : i64, cleave.kind = "param", cleave.name = "w"}
// SHARDED-SAME: tensor<3xf32> {cleave.accumulator, cleave.flat_member = "flat:grads", cleave.flat_offset = 0 : i64, cleave.kind = "state", cleave.name = "grad:w", cleave.state_of = "w"}
// SHARDED-LABEL: func.func @apply
// SHARDED-SAME: %arg4: tensor<32xf32> {cleave.flat_size = 32 : i64, cleave.kind = "state", cleave.name = "flat:grads"}
// SHARDED-SAME: %arg5: tensor<32xf32> {cleave.flat_size = 32 : i64, cleave.kind = "param", cleave.name = "flat:params"}
// SHARDED: %[[G:.*]] = shard.reduce_scatter %arg4 on @mesh grid_axes = [0] scatter_axis = 0 : tensor<32xf32> -> tensor<16xf32>
// SHARDED: %[[P:.*]] = shard.all_slice %arg5 on @mesh grid_axes = [0] slice_axis = 0 : tensor<32xf32> -> tensor<16xf32>
// SHARDED: %[[NEW:.*]] = cleave.sub %[[P]]
// SHARDED: %[[ALL:.*]] = shard.all_gather %[[NEW]] on @mesh grid_axes = [0] gather_axis = 0 : tensor<16xf32> -> tensor<32xf32>
// SHARDED: cleave.assign %[[ALL]] to %arg5 : tensor<32xf32>

// With sliced masters (mixed precision), ZeRO 1 and 2 keep the parameter as
// this rank's slice (3 elements padded to 32, 16 a rank), gathered once in
// @forward (marked for cleave-autocast to make once a step); stage 1
// accumulates the whole gradient and reduce-scatters it in @apply, stage 2
// reduce-scatters each microbatch's into a slice accumulator. @apply
// updates the slice and gathers nothing.
// MASTERS1-LABEL: func.func @forward
// MASTERS1-SAME: %arg3: tensor<16xf32> {cleave.kind = "param", cleave.name = "w", cleave.zero3_elements = 3 : i64, cleave.zero3_shape = array<i64: 3>}
// MASTERS1-SAME: %arg4: tensor<3xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "grad:w", cleave.state_of = "w", cleave.whole_state}
// MASTERS1-NEXT: %[[G:.*]] = shard.all_gather %arg3 on @mesh grid_axes = [0] gather_axis = 0 {cleave.gather_once} : tensor<16xf32> -> tensor<32xf32>
// MASTERS1-NEXT: %[[U:.*]] = cleave.slice %[[G]] {cleave.gather_once, {{.*}}} : (tensor<32xf32>) -> tensor<3xf32>
// MASTERS1-NEXT: %[[W:.*]] = cleave.reshape %[[U]] {cleave.gather_once, {{.*}}} : (tensor<3xf32>) -> tensor<3xf32>
// MASTERS1-NEXT: cleave.mul %arg0, %[[W]]
// MASTERS1-NOT: shard.
// MASTERS1: cleave.assign %{{.*}} to %arg4 : tensor<3xf32>
// MASTERS1-LABEL: func.func @apply
// MASTERS1-SAME: %arg4: tensor<3xf32> {cleave.kind = "state", cleave.name = "grad:w", cleave.state_of = "w", cleave.whole_state}
// MASTERS1-SAME: %arg5: tensor<16xf32> {cleave.kind = "param", cleave.name = "w"}
// MASTERS1: %[[PADDED:.*]] = cleave.concat
// MASTERS1-NEXT: %[[GS:.*]] = shard.reduce_scatter %[[PADDED]] on @mesh grid_axes = [0] scatter_axis = 0 : tensor<32xf32> -> tensor<16xf32>
// MASTERS1-NEXT: %[[MEAN:.*]] = cleave.div %[[GS]], %arg0
// MASTERS1-NOT: shard.all_gather
// MASTERS1: cleave.assign %{{.*}} to %arg5 : tensor<16xf32>
// MASTERS2-LABEL: func.func @forward
// MASTERS2-SAME: %arg4: tensor<16xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "grad:w", cleave.state_of = "w"})
// MASTERS2-NEXT: shard.all_gather %arg3 {{.*}} {cleave.gather_once}
// MASTERS2: %[[GS:.*]] = shard.reduce_scatter %{{.*}} : tensor<32xf32> -> tensor<16xf32>
// MASTERS2-NEXT: %[[SUM:.*]] = cleave.add %arg4, %[[GS]]
// MASTERS2-LABEL: func.func @apply
// MASTERS2-NOT: shard.

// UNKNOWN: error: unknown optimizer 'lion': use sgd, momentum, adagrad, adam or adamw
// NOGRAD: error: has no gradients: run cleave-autodiff first
// NOSPLIT: error: has no loss.sum and loss.count results: run cleave-split-loss first

func.func @forward(%x: tensor<3xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<3xf32> {cleave.kind = "param", cleave.name = "w"})
    -> (tensor<f32> {cleave.name = "objective"}) {
  %h = cleave.mul %x, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = cleave.reduce_sum %h {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
