// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-append-loss{kind=cross_entropy output=logits target=labels}))' | FileCheck %s
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-append-loss{kind=mse output=logits target=y}))' | FileCheck %s --check-prefix=MSE
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-append-loss{kind=cross_entropy output=nothing target=labels}))' 2>&1 | FileCheck %s --check-prefix=NOOUT
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-append-loss{kind=cross_entropy output=logits target=x}))' 2>&1 | FileCheck %s --check-prefix=TAKEN
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-append-loss{kind=hinge output=logits target=labels}))' 2>&1 | FileCheck %s --check-prefix=KIND

// Classes last: 2 x 3 x 5 logits flatten to 6 x 5; labels are 2 x 3 i64 and
// become the input after the existing inputs, before the parameters.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg1: tensor<2x3xi64> {cleave.kind = "input", cleave.name = "labels"}
// CHECK-SAME: %arg2: tensor<4x5xf32> {cleave.kind = "param", cleave.name = "w"}
// CHECK-SAME: -> (tensor<2x3x5xf32> {cleave.name = "logits"}, tensor<f32> {cleave.name = "loss"})
// CHECK: cleave.reshape %{{.*}} {shape = array<i64: 6, 5>}
// CHECK: cleave.reshape %arg1 {shape = array<i64: 6>}
// CHECK: cleave.softmax_cross_entropy_loss {{.*}}ignore_index = -100 : i64, reduction = "mean"

// MSE-LABEL: func.func @forward
// MSE-SAME: %arg1: tensor<2x3x5xf32> {cleave.kind = "input", cleave.name = "y"}
// MSE: cleave.sub
// MSE: cleave.mul
// MSE: cleave.reduce_mean {{.*}}axes = array<i64: 0, 1, 2>

// NOOUT: error: has no output named 'nothing' to put a loss on
// TAKEN: error: already has an input named 'x'
// KIND: error: unknown loss 'hinge': use cross_entropy or mse

func.func @forward(%x: tensor<2x3x4xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<4x5xf32> {cleave.kind = "param", cleave.name = "w"})
    -> (tensor<2x3x5xf32> {cleave.name = "logits"}) {
  %0 = cleave.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
}
