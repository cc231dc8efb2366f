// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-split-loss,cleave-autodiff{loss=loss.sum loss-scale=1024}),cleave-build-train-step{optimizer=adam loss-scale=1024 loss-scale-window=5 loss-scale-growth=3 loss-scale-backoff=0.25})' | FileCheck %s

// Dynamic loss scaling. @forward differentiates the loss's sum times the
// scale, the state cleave.dynamic_loss_scale (1024 before the first step);
// @apply divides the gradient by the count times the same scale, counts
// Adam's steps without the skipped ones, keeps every update only where the
// gradient is finite (its elements times 0 sum to 0), multiplies the scale
// by 3 after 5 finite steps (where the product is finite) and by 0.25 after
// a step that was not, and returns (a copy of) the scale it used and whether
// the step was skipped.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[S:arg[0-9]+]]: tensor<f32> {cleave.initial_value = 1.024000e+03 : f32, cleave.kind = "state", cleave.name = "cleave.dynamic_loss_scale"}
// CHECK: cleave.mul %{{.*}}, %[[S]]

// CHECK-LABEL: func.func @apply
// CHECK-SAME: %[[COUNT:arg[0-9]+]]: tensor<f32> {cleave.accumulator, cleave.kind = "state", cleave.name = "cleave.loss_count"}
// CHECK-SAME: %[[STEP:arg[0-9]+]]: tensor<f32> {cleave.kind = "input", cleave.name = "cleave.step"}
// CHECK-SAME: %[[SCALE:arg[0-9]+]]: tensor<f32> {cleave.initial_value = 1.024000e+03 : f32, cleave.kind = "state", cleave.name = "cleave.dynamic_loss_scale"}
// CHECK-SAME: %[[GOOD:arg[0-9]+]]: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.loss_scale_good_steps"}
// CHECK-SAME: %[[SKIPPED:arg[0-9]+]]: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.skipped_steps"}
// CHECK-SAME: %[[GRAD:arg[0-9]+]]: tensor<3xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "grad:w"}
// CHECK-SAME: %[[W:arg[0-9]+]]: tensor<3xf32> {cleave.kind = "param", cleave.name = "w"}
// CHECK-SAME: -> (tensor<f32> {cleave.name = "objective"}, tensor<f32> {cleave.name = "cleave.loss_scale"}, tensor<f32> {cleave.name = "cleave.skipped_step"})
// CHECK: %[[DIVISOR:.*]] = cleave.mul %{{.*}}, %[[SCALE]]
// CHECK-NEXT: %[[TAKEN:.*]] = cleave.sub %[[STEP]], %[[SKIPPED]]
// CHECK: %[[G:.*]] = cleave.div %[[GRAD]], %[[DIVISOR]]
// CHECK: cleave.cast %[[TAKEN]] {to = f64}
// CHECK: %[[NEWW:.*]] = cleave.sub %[[W]], %{{.*}} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
// CHECK-NEXT: %[[ONE:.*]] = cleave.constant {value = dense<1.000000e+00> : tensor<f32>}
// CHECK-NEXT: %[[USED:.*]] = cleave.mul %[[SCALE]], %[[ONE]]
// CHECK: %[[ZERO:.*]] = cleave.constant {value = dense<0.000000e+00> : tensor<f32>}
// CHECK: %[[TIMES0:.*]] = cleave.mul %[[G]], %{{.*}} : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
// CHECK-NEXT: %[[SUM0:.*]] = cleave.reduce_sum %[[TIMES0]]
// CHECK-NEXT: %[[INDICATOR:.*]] = cleave.add %[[ZERO]], %[[SUM0]]
// CHECK-NEXT: %[[FINITE:.*]] = cleave.equal %[[INDICATOR]], %[[ZERO]]
// CHECK: cleave.where %[[FINITE]], %[[NEWW]], %[[W]]
// CHECK: %[[WINDOW:.*]] = cleave.constant {value = dense<5.000000e+00> : tensor<f32>}
// CHECK-NEXT: %[[SHORT:.*]] = cleave.less %{{.*}}, %[[WINDOW]]
// CHECK-NEXT: %[[GROW:.*]] = cleave.not %[[SHORT]]
// CHECK-NEXT: %[[SKIPNOW:.*]] = cleave.where %[[FINITE]], %[[ZERO]], %{{.*}}
// CHECK-NEXT: %[[GROWTH:.*]] = cleave.constant {value = dense<3.000000e+00> : tensor<f32>}
// CHECK-NEXT: %[[GROWN:.*]] = cleave.mul %[[SCALE]], %[[GROWTH]]
// CHECK-NEXT: %[[GROWN0:.*]] = cleave.mul %[[GROWN]], %[[ZERO]]
// CHECK-NEXT: %[[GROWNFINITE:.*]] = cleave.equal %[[GROWN0]], %[[ZERO]]
// CHECK-NEXT: %[[KEPT:.*]] = cleave.where %[[GROWNFINITE]], %[[GROWN]], %[[SCALE]]
// CHECK-NEXT: %[[AFTERGOOD:.*]] = cleave.where %[[GROW]], %[[KEPT]], %[[SCALE]]
// CHECK-NEXT: %[[BACKOFF:.*]] = cleave.constant {value = dense<2.500000e-01> : tensor<f32>}
// CHECK-NEXT: %[[BACKED:.*]] = cleave.mul %[[SCALE]], %[[BACKOFF]]
// CHECK-NEXT: %[[NEXT:.*]] = cleave.where %[[FINITE]], %[[AFTERGOOD]], %[[BACKED]]
// CHECK: cleave.assign %[[NEXT]] to %[[SCALE]]
// CHECK: return %{{.*}}, %[[USED]], %[[SKIPNOW]]
func.func @forward(%x: tensor<3xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<3xf32> {cleave.kind = "param", cleave.name = "w"})
    -> (tensor<f32> {cleave.name = "objective"}) {
  %h = cleave.mul %x, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = cleave.reduce_sum %h {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
