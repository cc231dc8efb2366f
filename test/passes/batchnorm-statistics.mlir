// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(cleave-batchnorm-statistics))' -verify-diagnostics | FileCheck %s
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(cleave-batchnorm-statistics{sync-dp=true}))' -verify-diagnostics | FileCheck %s --check-prefix=SYNC

// A training-mode BatchNorm's running statistics become model state, and
// the function ends assigning them: the mean as the op computes it, the
// variance with the batch's unbiased variance, n = 4 x 3 = 12 values per
// channel: 0.9 var + (running_var - 0.9 var) x 12 / 11.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[MEAN:[^:]*]]: tensor<2xf32> {cleave.kind = "state", cleave.model_state, cleave.name = "bn.running_mean"}
// CHECK-SAME: %[[VAR:[^:]*]]: tensor<2xf32> {cleave.kind = "state", cleave.model_state, cleave.name = "bn.running_var"}
// CHECK: %[[Y:.*]], %[[RM:.*]], %[[RV:.*]] = cleave.batch_normalization
// CHECK-DAG: %[[M:.*]] = cleave.constant {value = dense<0.899999976> : tensor<f32>}
// CHECK-DAG: %[[KEPT:.*]] = cleave.mul %[[VAR]], %[[M]]
// CHECK-DAG: %[[MIXED:.*]] = cleave.sub %[[RV]], %[[KEPT]]
// CHECK-DAG: %[[RATIO:.*]] = cleave.constant {value = dense<1.09090912> : tensor<f32>}
// CHECK-DAG: %[[SCALED:.*]] = cleave.mul %[[MIXED]], %[[RATIO]]
// CHECK: %[[NEWVAR:.*]] = cleave.add %[[KEPT]], %[[SCALED]]
// CHECK: cleave.assign %[[RM]] to %[[MEAN]]
// CHECK: cleave.assign %[[NEWVAR]] to %[[VAR]]
// CHECK: return %[[Y]]
// Without a mesh there is nothing to synchronize: the same.
// SYNC-LABEL: func.func @forward
// SYNC: cleave.batch_normalization
// SYNC-NOT: shard.all_reduce
// SYNC: cleave.assign
func.func @forward(%x: tensor<4x2x3xf32> {cleave.kind = "input", cleave.name = "x"},
                   %scale: tensor<2xf32> {cleave.kind = "param", cleave.name = "bn.weight"},
                   %bias: tensor<2xf32> {cleave.kind = "param", cleave.name = "bn.bias"},
                   %mean: tensor<2xf32> {cleave.kind = "param", cleave.name = "bn.running_mean"},
                   %var: tensor<2xf32> {cleave.kind = "param", cleave.name = "bn.running_var"}) -> tensor<4x2x3xf32> {
  %y, %rm, %rv = cleave.batch_normalization %x, %scale, %bias, %mean, %var {epsilon = 1.0e-5 : f32, momentum = 0.9 : f32, training_mode = true} : (tensor<4x2x3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4x2x3xf32>, tensor<2xf32>, tensor<2xf32>)
  return %y : tensor<4x2x3xf32>
}

// -----

// With sync-dp on dp=2 the op becomes its formula over both ranks' values:
// the per-channel sum all-reduced (and its gradient, through
// all_reduce_grad), divided by 2 x 12; then the centered squares alike.
// The unbiased variance counts n = 24.
// SYNC-LABEL: func.func @forward
// SYNC-NOT: cleave.batch_normalization
// SYNC: %[[S:.*]] = cleave.reduce_sum %arg0 {axes = array<i64: 0, 2>, keepdims = true}
// SYNC: %[[AR:.*]] = shard.all_reduce %[[S]] on @mesh grid_axes = [0]
// SYNC: %[[G:.*]] = cleave.all_reduce_grad %[[AR]] on @mesh grid_axes = [0]
// SYNC: %[[INV:.*]] = cleave.constant {value = dense<0.0416666679> : tensor<f32>}
// SYNC: %[[MU:.*]] = cleave.mul %[[G]], %[[INV]]
// SYNC: %[[C:.*]] = cleave.sub %arg0, %[[MU]]
// SYNC: %[[SQ:.*]] = cleave.mul %[[C]], %[[C]]
// SYNC: %[[Q:.*]] = cleave.reduce_sum %[[SQ]]
// SYNC: shard.all_reduce %[[Q]] on @mesh grid_axes = [0]
// SYNC: cleave.all_reduce_grad
// SYNC: cleave.sqrt
// SYNC: cleave.reciprocal
// SYNC: cleave.assign
// SYNC: cleave.assign
// SYNC: return
// And without sync-dp each rank keeps its own statistics.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: shard.all_reduce
// CHECK: cleave.batch_normalization
module {
  shard.grid @mesh(shape = 2) {cleave.axes = ["dp"]}
  func.func @forward(%x: tensor<4x2x3xf32> {cleave.kind = "input", cleave.name = "x"},
                     %scale: tensor<2xf32> {cleave.kind = "param", cleave.name = "bn.weight"},
                     %bias: tensor<2xf32> {cleave.kind = "param", cleave.name = "bn.bias"},
                     %mean: tensor<2xf32> {cleave.kind = "param", cleave.name = "bn.running_mean"},
                     %var: tensor<2xf32> {cleave.kind = "param", cleave.name = "bn.running_var"}) -> tensor<4x2x3xf32> {
    %y, %rm, %rv = cleave.batch_normalization %x, %scale, %bias, %mean, %var {epsilon = 1.0e-5 : f32, momentum = 0.9 : f32, training_mode = true} : (tensor<4x2x3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4x2x3xf32>, tensor<2xf32>, tensor<2xf32>)
    return %y : tensor<4x2x3xf32>
  }
}

// -----

// Inference mode: nothing changes.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: cleave.kind = "param", cleave.name = "bn.running_mean"
// CHECK-NOT: cleave.assign
// SYNC-LABEL: func.func @forward
// SYNC-NOT: cleave.assign
func.func @forward(%x: tensor<4x2x3xf32> {cleave.kind = "input", cleave.name = "x"},
                   %scale: tensor<2xf32> {cleave.kind = "param", cleave.name = "bn.weight"},
                   %bias: tensor<2xf32> {cleave.kind = "param", cleave.name = "bn.bias"},
                   %mean: tensor<2xf32> {cleave.kind = "param", cleave.name = "bn.running_mean"},
                   %var: tensor<2xf32> {cleave.kind = "param", cleave.name = "bn.running_var"}) -> tensor<4x2x3xf32> {
  %y, %rm, %rv = cleave.batch_normalization %x, %scale, %bias, %mean, %var {epsilon = 1.0e-5 : f32, momentum = 0.9 : f32, training_mode = false} : (tensor<4x2x3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4x2x3xf32>, tensor<2xf32>, tensor<2xf32>)
  return %y : tensor<4x2x3xf32>
}

// -----

func.func @forward(%x: tensor<4x2x3xf32> {cleave.kind = "input", cleave.name = "x"},
                   %scale: tensor<2xf32> {cleave.kind = "param", cleave.name = "bn.weight"},
                   %bias: tensor<2xf32> {cleave.kind = "param", cleave.name = "bn.bias"},
                   %mean: tensor<2xf32> {cleave.kind = "param", cleave.name = "bn.running_mean"},
                   %var: tensor<2xf32> {cleave.kind = "param", cleave.name = "bn.running_var"}) -> (tensor<4x2x3xf32>, tensor<2xf32>) {
  // expected-error @+1 {{running statistic 'bn.running_mean' is read by other ops too}}
  %y, %rm, %rv = cleave.batch_normalization %x, %scale, %bias, %mean, %var {epsilon = 1.0e-5 : f32, momentum = 0.9 : f32, training_mode = true} : (tensor<4x2x3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4x2x3xf32>, tensor<2xf32>, tensor<2xf32>)
  %m = cleave.relu %mean : (tensor<2xf32>) -> tensor<2xf32>
  return %y, %m : tensor<4x2x3xf32>, tensor<2xf32>
}

// -----

func.func @forward(%x: tensor<1x2x1xf32> {cleave.kind = "input", cleave.name = "x"},
                   %scale: tensor<2xf32> {cleave.kind = "param", cleave.name = "bn.weight"},
                   %bias: tensor<2xf32> {cleave.kind = "param", cleave.name = "bn.bias"},
                   %mean: tensor<2xf32> {cleave.kind = "param", cleave.name = "bn.running_mean"},
                   %var: tensor<2xf32> {cleave.kind = "param", cleave.name = "bn.running_var"}) -> tensor<1x2x1xf32> {
  // expected-error @+1 {{normalizes 1 value per channel in training mode: its running variance (unbiased, as PyTorch's) needs at least 2}}
  %y, %rm, %rv = cleave.batch_normalization %x, %scale, %bias, %mean, %var {epsilon = 1.0e-5 : f32, momentum = 0.9 : f32, training_mode = true} : (tensor<1x2x1xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<1x2x1xf32>, tensor<2xf32>, tensor<2xf32>)
  return %y : tensor<1x2x1xf32>
}
