// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-autodiff,cleave-build-train-step{optimizer=adam}))' | FileCheck %s --check-prefix=ADAM
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-autodiff,cleave-build-train-step{optimizer=sgd}))' | FileCheck %s --check-prefix=SGD
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-autodiff,cleave-build-train-step{optimizer=lion}))' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-build-train-step))' 2>&1 | FileCheck %s --check-prefix=NOGRAD

// The step takes the learning rate and the step number as scalar inputs,
// keeps optimizer state in arguments of kind "state", ends with one assign per
// updated parameter and state slot, and returns only the loss.

// ADAM-LABEL: func.func @forward
// ADAM-SAME: %arg2: tensor<f32> {cleave.kind = "input", cleave.name = "cleave.lr"}
// ADAM-SAME: %arg3: tensor<f32> {cleave.kind = "input", cleave.name = "cleave.step"}
// ADAM-SAME: %arg4: tensor<3xf32> {cleave.kind = "state", cleave.name = "adam.m:w"}
// ADAM-SAME: %arg5: tensor<3xf32> {cleave.kind = "state", cleave.name = "adam.v:w"}
// ADAM-SAME: -> (tensor<f32> {cleave.name = "loss"})
// Bias corrections 1 - beta^step, in f64.
// ADAM: %[[T:.*]] = cleave.cast %arg3 {to = f64} : (tensor<f32>) -> tensor<f64>
// ADAM: cleave.pow %{{.*}}, %[[T]] : (tensor<f64>, tensor<f64>) -> tensor<f64>
// ADAM: cleave.sqrt
// ADAM: cleave.assign %{{.*}} to %arg4 : tensor<3xf32>
// ADAM: cleave.assign %{{.*}} to %arg5 : tensor<3xf32>
// ADAM: cleave.assign %{{.*}} to %arg1 : tensor<3xf32>
// ADAM: return %{{.*}} : tensor<f32>

// SGD-LABEL: func.func @forward
// SGD-NOT: cleave.kind = "state"
// SGD: %[[STEP:.*]] = cleave.mul %arg2, %{{.*}} : (tensor<f32>, tensor<3xf32>) -> tensor<3xf32>
// SGD: %[[NEW:.*]] = cleave.sub %arg1, %[[STEP]]
// SGD: cleave.assign %[[NEW]] to %arg1 : tensor<3xf32>

// UNKNOWN: error: unknown optimizer 'lion': use sgd, momentum, adagrad, adam or adamw
// NOGRAD: error: has no gradients: run cleave-autodiff first

func.func @forward(%x: tensor<3xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<3xf32> {cleave.kind = "param", cleave.name = "w"})
    -> (tensor<f32> {cleave.name = "loss"}) {
  %h = cleave.mul %x, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = cleave.reduce_sum %h {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
