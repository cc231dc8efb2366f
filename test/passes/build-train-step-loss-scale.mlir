// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-split-loss,cleave-autodiff{loss=loss.sum loss-scale=1024}),cleave-build-train-step{optimizer=adam loss-scale=1024 loss-scale-window=5})' | FileCheck %s

// Dynamic loss scaling. @forward differentiates the loss's sum times the
// scale, 1024 * 2^e with e the state cleave.loss_scale_exponent; @apply
// divides the gradient by the count times the same scale, counts Adam's
// steps without the skipped ones, keeps every update only where the
// gradient is finite (its elements times 0 sum to 0), advances the scale's
// state, and returns the scale it used and whether the step was skipped.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[E:arg[0-9]+]]: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.loss_scale_exponent"}
// CHECK: %[[TWO:.*]] = cleave.constant {value = dense<2.000000e+00> : tensor<f32>}
// CHECK-NEXT: %[[POW:.*]] = cleave.pow %[[TWO]], %[[E]]
// CHECK-NEXT: %[[INITIAL:.*]] = cleave.constant {value = dense<1.024000e+03> : tensor<f32>}
// CHECK-NEXT: %[[SCALE:.*]] = cleave.mul %[[INITIAL]], %[[POW]]
// CHECK: cleave.mul %{{.*}}, %[[SCALE]]

// CHECK-LABEL: func.func @apply
// CHECK-SAME: %[[COUNT:arg[0-9]+]]: tensor<f32> {cleave.accumulator, cleave.kind = "state", cleave.name = "cleave.loss_count"}
// CHECK-SAME: %[[STEP:arg[0-9]+]]: tensor<f32> {cleave.kind = "input", cleave.name = "cleave.step"}
// CHECK-SAME: %[[EXP:arg[0-9]+]]: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.loss_scale_exponent"}
// CHECK-SAME: %[[GOOD:arg[0-9]+]]: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.loss_scale_good_steps"}
// CHECK-SAME: %[[SKIPPED:arg[0-9]+]]: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.skipped_steps"}
// CHECK-SAME: %[[GRAD:arg[0-9]+]]: tensor<3xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "grad:w"}
// CHECK-SAME: %[[W:arg[0-9]+]]: tensor<3xf32> {cleave.kind = "param", cleave.name = "w"}
// CHECK-SAME: -> (tensor<f32> {cleave.name = "objective"}, tensor<f32> {cleave.name = "cleave.loss_scale"}, tensor<f32> {cleave.name = "cleave.skipped_step"})
// CHECK: %[[POW:.*]] = cleave.pow %{{.*}}, %[[EXP]]
// CHECK-NEXT: %[[INITIAL:.*]] = cleave.constant {value = dense<1.024000e+03> : tensor<f32>}
// CHECK-NEXT: %[[SCALE:.*]] = cleave.mul %[[INITIAL]], %[[POW]]
// CHECK-NEXT: %[[DIVISOR:.*]] = cleave.mul %{{.*}}, %[[SCALE]]
// CHECK-NEXT: %[[TAKEN:.*]] = cleave.sub %[[STEP]], %[[SKIPPED]]
// CHECK: %[[G:.*]] = cleave.div %[[GRAD]], %[[DIVISOR]]
// CHECK: cleave.cast %[[TAKEN]] {to = f64}
// CHECK: %[[NEWW:.*]] = cleave.sub %[[W]], %{{.*}} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
// CHECK: %[[ZERO:.*]] = cleave.constant {value = dense<0.000000e+00> : tensor<f32>}
// CHECK: %[[TIMES0:.*]] = cleave.mul %[[G]], %{{.*}} : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
// CHECK-NEXT: %[[SUM0:.*]] = cleave.reduce_sum %[[TIMES0]]
// CHECK-NEXT: %[[INDICATOR:.*]] = cleave.add %[[ZERO]], %[[SUM0]]
// CHECK-NEXT: %[[FINITE:.*]] = cleave.equal %[[INDICATOR]], %[[ZERO]]
// CHECK-DAG: cleave.where %[[FINITE]], %[[NEWW]], %[[W]]
// CHECK-DAG: %[[GROWN:.*]] = cleave.not %{{.*}}
// CHECK-DAG: %[[SKIPNOW:.*]] = cleave.where %[[FINITE]], %[[ZERO]], %{{.*}}
// CHECK: return %{{.*}}, %[[SCALE]], %[[SKIPNOW]]
func.func @forward(%x: tensor<3xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<3xf32> {cleave.kind = "param", cleave.name = "w"})
    -> (tensor<f32> {cleave.name = "objective"}) {
  %h = cleave.mul %x, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = cleave.reduce_sum %h {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
