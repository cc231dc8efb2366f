// RUN: cleave-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(func.func(cleave-split-loss))' | FileCheck %s

// A mean cross entropy becomes its sum and the count of targets that are not
// ignore_index; the other results go, and what only they read with them.

// CHECK-LABEL: func.func @cross_entropy
// CHECK-SAME: -> (tensor<f32> {cleave.loss = "loss", cleave.name = "loss.sum"}, tensor<f32> {cleave.name = "loss.count"})
// CHECK: %[[SUM:.*]], %{{.*}} = cleave.softmax_cross_entropy_loss %arg0, %arg1 {ignore_index = -100 : i64, reduction = "sum"}
// CHECK: %[[IGNORED:.*]] = cleave.constant {value = dense<-100> : tensor<i64>}
// CHECK: %[[EQ:.*]] = cleave.equal %arg1, %[[IGNORED]]
// CHECK: %[[VALID:.*]] = cleave.not %[[EQ]]
// CHECK: %[[ONES:.*]] = cleave.cast %[[VALID]] {to = f32}
// CHECK: %[[COUNT:.*]] = cleave.reduce_sum %[[ONES]] {axes = array<i64: 0>, keepdims = false}
// CHECK: return %[[SUM]], %[[COUNT]] : tensor<f32>, tensor<f32>
func.func @cross_entropy(%s: tensor<4x5xf32> {cleave.kind = "input", cleave.name = "s"},
                         %y: tensor<4xi64> {cleave.kind = "input", cleave.name = "y"})
    -> (tensor<f32> {cleave.name = "loss"}, tensor<4x5xf32> {cleave.name = "probs"}) {
  %l, %p = cleave.softmax_cross_entropy_loss %s, %y {reduction = "mean", ignore_index = -100 : i64} : (tensor<4x5xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x5xf32>)
  %e = cleave.exp %p : (tensor<4x5xf32>) -> tensor<4x5xf32>
  return %l, %e : tensor<f32>, tensor<4x5xf32>
}

// -----

// Weighted: the count is the weights of the targets that count; an ignored
// target gathers class 0 (it may be out of range) and is masked out.

// CHECK-LABEL: func.func @weighted_nll
// CHECK: %[[SUM:.*]] = cleave.negative_log_likelihood_loss %arg0, %arg1, %arg2 {ignore_index = 2 : i64, reduction = "sum"}
// CHECK: %[[VALID:.*]] = cleave.not
// CHECK: %[[ZERO:.*]] = cleave.constant {value = dense<0> : tensor<i64>}
// CHECK: %[[SAFE:.*]] = cleave.where %[[VALID]], %arg1, %[[ZERO]]
// CHECK: %[[W:.*]] = cleave.gather %arg2, %[[SAFE]] {axis = 0 : i64}
// CHECK: %[[MASK:.*]] = cleave.cast %[[VALID]] {to = f32}
// CHECK: %[[KEPT:.*]] = cleave.mul %[[W]], %[[MASK]]
// CHECK: %[[COUNT:.*]] = cleave.reduce_sum %[[KEPT]] {axes = array<i64: 0, 1>, keepdims = false}
// CHECK: return %[[SUM]], %[[COUNT]]
func.func @weighted_nll(%x: tensor<3x4x2xf32> {cleave.kind = "input", cleave.name = "x"},
                        %t: tensor<3x2xi64> {cleave.kind = "input", cleave.name = "t"},
                        %w: tensor<4xf32> {cleave.kind = "param", cleave.name = "w"})
    -> (tensor<f32> {cleave.name = "nll"}) {
  %l = cleave.negative_log_likelihood_loss %x, %t, %w {reduction = "mean", ignore_index = 2 : i64} : (tensor<3x4x2xf32>, tensor<3x2xi64>, tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A mean over elements: their sum, counting the elements (here 6 x 4).

// CHECK-LABEL: func.func @mean_squares
// CHECK: %[[SUM:.*]] = cleave.reduce_sum %{{.*}} {axes = array<i64: 0, 1>, keepdims = false}
// CHECK: %[[COUNT:.*]] = cleave.constant {value = dense<2.400000e+01> : tensor<f32>}
// CHECK: return %[[SUM]], %[[COUNT]]
func.func @mean_squares(%x: tensor<6x4xf32> {cleave.kind = "input", cleave.name = "x"})
    -> (tensor<f32> {cleave.name = "mse"}) {
  %s = cleave.mul %x, %x : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
  %m = cleave.reduce_mean %s {axes = array<i64: 0, 1>, keepdims = false} : (tensor<6x4xf32>) -> tensor<f32>
  return %m : tensor<f32>
}

// -----

// A loss cleave cannot see into counts 1 per microbatch.

// CHECK-LABEL: func.func @opaque
// CHECK: %[[L:.*]] = cleave.reduce_max
// CHECK: %[[ONE:.*]] = cleave.constant {value = dense<1.000000e+00> : tensor<f32>}
// CHECK: return %[[L]], %[[ONE]]
func.func @opaque(%x: tensor<6xf32> {cleave.kind = "input", cleave.name = "x"})
    -> (tensor<f32> {cleave.name = "worst"}) {
  %m = cleave.reduce_max %x {axes = array<i64: 0>, keepdims = false} : (tensor<6xf32>) -> tensor<f32>
  return %m : tensor<f32>
}

// -----

// expected-error @below {{more than one scalar float result: name the loss with loss=NAME}}
func.func @two_scalars(%x: tensor<f32> {cleave.kind = "input", cleave.name = "x"})
    -> (tensor<f32> {cleave.name = "a"}, tensor<f32> {cleave.name = "b"}) {
  return %x, %x : tensor<f32>, tensor<f32>
}

// -----

// expected-error @below {{no scalar float result to take as the loss}}
func.func @no_scalar(%x: tensor<3xf32> {cleave.kind = "input", cleave.name = "x"})
    -> (tensor<3xf32> {cleave.name = "y"}) {
  return %x : tensor<3xf32>
}
