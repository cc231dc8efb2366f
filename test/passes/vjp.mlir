// RUN: cleave-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(func.func(cleave-autodiff))' | FileCheck %s

// The structure of some reverse-mode rules (dialects/Cleave/CleaveVjp.cpp).
// Their numbers are checked against finite differences in test/gradients/.

// matmul: dA = G B^T, dB = A^T G.
// CHECK-LABEL: func.func @matmul
// CHECK-SAME: (%[[A:.*]]: tensor<2x3xf32> {{.*}}, %[[B:.*]]: tensor<3x4xf32> {{.*}})
// CHECK: %[[G:.*]] = cleave.expand {{.*}} -> tensor<2x4xf32>
// CHECK: %[[BT:.*]] = cleave.transpose %[[B]] {perm = array<i64: 1, 0>} : (tensor<3x4xf32>) -> tensor<4x3xf32>
// CHECK: %[[DA:.*]] = cleave.matmul %[[G]], %[[BT]] : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
// CHECK: %[[AT:.*]] = cleave.transpose %[[A]] {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
// CHECK: %[[DB:.*]] = cleave.matmul %[[AT]], %[[G]] : (tensor<3x2xf32>, tensor<2x4xf32>) -> tensor<3x4xf32>
// CHECK: return %{{.*}}, %[[DA]], %[[DB]]
func.func @matmul(%a: tensor<2x3xf32> {cleave.kind = "param", cleave.name = "a"},
                  %b: tensor<3x4xf32> {cleave.kind = "param", cleave.name = "b"}) -> tensor<f32> {
  %0 = cleave.matmul %a, %b : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %1 = cleave.reduce_sum %0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x4xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// A batched lhs times a vector: the vector is a 3 x 1 column, its gradient
// is summed over the batch dim and reshaped back to 3.
// CHECK-LABEL: func.func @matmul_vector
// CHECK-SAME: (%[[X:.*]]: tensor<5x2x3xf32> {{.*}}, %[[W:.*]]: tensor<3xf32> {{.*}})
// CHECK: %[[G:.*]] = cleave.reshape %{{.*}} {shape = array<i64: 5, 2, 1>}
// CHECK: %[[XT:.*]] = cleave.transpose %[[X]] {perm = array<i64: 0, 2, 1>} : (tensor<5x2x3xf32>) -> tensor<5x3x2xf32>
// CHECK: %[[P:.*]] = cleave.matmul %[[XT]], %[[G]] : (tensor<5x3x2xf32>, tensor<5x2x1xf32>) -> tensor<5x3x1xf32>
// CHECK: %[[S:.*]] = cleave.reduce_sum %[[P]] {axes = array<i64: 0>, keepdims = false} : (tensor<5x3x1xf32>) -> tensor<3x1xf32>
// CHECK: %[[DW:.*]] = cleave.reshape %[[S]] {shape = array<i64: 3>} : (tensor<3x1xf32>) -> tensor<3xf32>
// CHECK: return %{{.*}}, %[[DW]]
func.func @matmul_vector(%x: tensor<5x2x3xf32> {cleave.kind = "input", cleave.name = "x"},
                         %w: tensor<3xf32> {cleave.kind = "param", cleave.name = "w"}) -> tensor<f32> {
  %0 = cleave.matmul %x, %w : (tensor<5x2x3xf32>, tensor<3xf32>) -> tensor<5x2xf32>
  %1 = cleave.reduce_sum %0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<5x2xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// add: the 1 x 3 operand's gradient is summed over the broadcast dim 0,
// then reshaped to 1 x 3; the 4 x 2 x 3 operand lacks nothing.
// CHECK-LABEL: func.func @add_broadcast
// CHECK: %[[G:.*]] = cleave.expand {{.*}} -> tensor<4x2x3xf32>
// CHECK: %[[S:.*]] = cleave.reduce_sum %[[G]] {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x2x3xf32>) -> tensor<3xf32>
// CHECK: %[[DB:.*]] = cleave.reshape %[[S]] {shape = array<i64: 1, 3>} : (tensor<3xf32>) -> tensor<1x3xf32>
// CHECK: return %{{.*}}, %[[G]], %[[DB]]
func.func @add_broadcast(%x: tensor<4x2x3xf32> {cleave.kind = "param", cleave.name = "x"},
                         %b: tensor<1x3xf32> {cleave.kind = "param", cleave.name = "b"}) -> tensor<f32> {
  %0 = cleave.add %x, %b : (tensor<4x2x3xf32>, tensor<1x3xf32>) -> tensor<4x2x3xf32>
  %1 = cleave.reduce_sum %0 {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<4x2x3xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// softmax: dx = y (g - sum(g y, axis)), one softmax_grad. The gradient
// arriving from reduce_max goes to the maximum only (an equality mask).
// CHECK-LABEL: func.func @softmax
// CHECK: %[[Y:.*]] = cleave.softmax %{{.*}} {axis = 1 : i64}
// CHECK: %[[M:.*]] = cleave.reduce_max %[[Y]]
// CHECK: %[[MASK:.*]] = cleave.equal %[[Y]], %{{.*}} : (tensor<2x3xf32>, tensor<1x1xf32>) -> tensor<2x3xi1>
// CHECK: %[[G:.*]] = cleave.where %[[MASK]], %{{.*}}, %{{.*}} : (tensor<2x3xi1>, tensor<1x1xf32>, tensor<f32>) -> tensor<2x3xf32>
// CHECK: %[[DX:.*]] = cleave.softmax_grad %[[Y]], %[[G]] {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: return %[[M]], %[[DX]]
func.func @softmax(%x: tensor<2x3xf32> {cleave.kind = "param", cleave.name = "x"}) -> tensor<f32> {
  %0 = cleave.softmax %x {axis = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = cleave.reduce_max %0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// layer_normalization: dx is one layer_normalization_grad of x, the scale,
// the op's own statistics (f32 data) and dy; the scale's gradient sums
// dy xhat over the rows, the bias's dy.
// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32> {{.*}}, %[[S:.*]]: tensor<4xf32> {{.*}}, %[[B:.*]]: tensor<4xf32> {{.*}})
// CHECK: %[[Y:.*]], %[[MEAN:.*]], %[[INV:.*]] = cleave.layer_normalization %[[X]], %[[S]], %[[B]]
// CHECK: %[[DX:.*]] = cleave.layer_normalization_grad %[[X]], %[[S]], %[[MEAN]], %[[INV]], %{{.*}} {axis = 1 : i64} : (tensor<2x4xf32>, tensor<4xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK: %[[DS:.*]] = cleave.reduce_sum %{{.*}} {axes = array<i64: 0>, keepdims = false}
// CHECK: %[[DB:.*]] = cleave.reduce_sum %{{.*}} {axes = array<i64: 0>, keepdims = false}
// CHECK: return %{{.*}}, %[[DX]], %[[DS]], %[[DB]]
func.func @layer_norm(%x: tensor<2x4xf32> {cleave.kind = "param", cleave.name = "x"},
                      %s: tensor<4xf32> {cleave.kind = "param", cleave.name = "s"},
                      %b: tensor<4xf32> {cleave.kind = "param", cleave.name = "b"}) -> tensor<f32> {
  %y:3 = cleave.layer_normalization %x, %s, %b {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  %l = cleave.reduce_sum %y#0 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// softmax_cross_entropy_loss without class weights: d scores is one
// softmax_cross_entropy_grad of log_prob, the labels and the loss's gradient.
// CHECK-LABEL: func.func @sce
// CHECK-SAME: (%[[S:.*]]: tensor<4x10xf32> {{.*}}, %[[L:.*]]: tensor<4xi64> {{.*}})
// CHECK: %[[LOSS:.*]], %[[LP:.*]] = cleave.softmax_cross_entropy_loss %[[S]], %[[L]]
// CHECK: %[[ONE:.*]] = cleave.constant {value = dense<1.000000e+00> : tensor<f32>}
// CHECK: %[[DS:.*]] = cleave.softmax_cross_entropy_grad %[[LP]], %[[L]], %[[ONE]] {ignore_index = -100 : i64, reduction = "mean"} : (tensor<4x10xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x10xf32>
// CHECK: return %[[LOSS]], %[[DS]]
func.func @sce(%s: tensor<4x10xf32> {cleave.kind = "param", cleave.name = "s"},
               %l: tensor<4xi64> {cleave.kind = "input", cleave.name = "l"}) -> tensor<f32> {
  %0:2 = cleave.softmax_cross_entropy_loss %s, %l {reduction = "mean", ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>)
  return %0#0 : tensor<f32>
}

// -----

// With class weights, mean: d scores = (softmax - onehot(labels)) w_i / W,
// with ignored labels mapped to -1 (no class), w_i the target's weight and
// W the sum of the counted targets' weights.
// CHECK-LABEL: func.func @sce_weights
// CHECK-SAME: (%[[S:.*]]: tensor<4x10xf32> {{.*}}, %[[L:.*]]: tensor<4xi64> {{.*}}, %[[WS:.*]]: tensor<10xf32> {{.*}})
// CHECK: %[[LOSS:.*]], %[[LP:.*]] = cleave.softmax_cross_entropy_loss %[[S]], %[[L]], %[[WS]]
// CHECK: %[[ONE:.*]] = cleave.constant {value = dense<1.000000e+00> : tensor<f32>}
// (the where's operands in any order: C++ leaves the order in which a
// call's arguments are built to the compiler, and gcc and clang differ)
// CHECK-DAG: %[[NONE:.*]] = cleave.constant {value = dense<-1> : tensor<i64>}
// CHECK-DAG: %[[IGN:.*]] = cleave.constant {value = dense<-100> : tensor<i64>}
// CHECK-DAG: %[[ISIGN:.*]] = cleave.equal %[[L]], %[[IGN]]
// CHECK: %[[T:.*]] = cleave.where %[[ISIGN]], %[[NONE]], %[[L]]
// CHECK: %[[IDS:.*]] = cleave.range {delta = 1 : i64, limit = 10 : i64, start = 0 : i64} : tensor<10xi64>
// CHECK: %[[TC:.*]] = cleave.reshape %[[T]] {shape = array<i64: 4, 1>}
// CHECK: %[[HOT:.*]] = cleave.equal %[[TC]], %[[IDS]] : (tensor<4x1xi64>, tensor<10xi64>) -> tensor<4x10xi1>
// CHECK: %[[ONEHOT:.*]] = cleave.cast %[[HOT]] {to = f32} : (tensor<4x10xi1>) -> tensor<4x10xf32>
// CHECK: %[[SEL:.*]] = cleave.mul %[[ONEHOT]], %[[WS]]
// CHECK: %[[W:.*]] = cleave.reduce_sum %[[SEL]] {axes = array<i64: 1>, keepdims = true} : (tensor<4x10xf32>) -> tensor<4x1xf32>
// CHECK: %[[TOTAL:.*]] = cleave.reduce_sum %[[W]] {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x1xf32>) -> tensor<f32>
// CHECK: %[[SCALED:.*]] = cleave.div %[[ONE]], %[[TOTAL]]
// CHECK: %[[COEF:.*]] = cleave.mul %[[W]], %[[SCALED]]
// CHECK: %[[P:.*]] = cleave.exp %[[LP]]
// CHECK: %[[DIFF:.*]] = cleave.sub %[[P]], %[[ONEHOT]]
// CHECK: %[[DS:.*]] = cleave.mul %[[DIFF]], %[[COEF]] : (tensor<4x10xf32>, tensor<4x1xf32>) -> tensor<4x10xf32>
// CHECK: return %[[LOSS]], %[[DS]]
func.func @sce_weights(%s: tensor<4x10xf32> {cleave.kind = "param", cleave.name = "s"},
                       %l: tensor<4xi64> {cleave.kind = "input", cleave.name = "l"},
                       %w: tensor<10xf32> {cleave.kind = "input", cleave.name = "w"}) -> tensor<f32> {
  %0:2 = cleave.softmax_cross_entropy_loss %s, %l, %w {reduction = "mean", ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi64>, tensor<10xf32>) -> (tensor<f32>, tensor<4x10xf32>)
  return %0#0 : tensor<f32>
}

// -----

// gather and slice have their adjoint ops; the indices get no gradient.
// CHECK-LABEL: func.func @gather_slice
// CHECK-SAME: (%[[E:.*]]: tensor<5x3xf32> {{.*}}, %[[I:.*]]: tensor<2x2xi64> {{.*}})
// CHECK: %[[DG:.*]] = cleave.slice_grad %{{.*}} {shape = array<i64: 2, 2, 3>, starts = array<i64: 1, 0, 2>, steps = array<i64: -1, 1, -2>} : (tensor<2x2x2xf32>) -> tensor<2x2x3xf32>
// CHECK: %[[DE:.*]] = cleave.gather_grad %[[DG]], %[[I]] {axis = 0 : i64, shape = array<i64: 5, 3>} : (tensor<2x2x3xf32>, tensor<2x2xi64>) -> tensor<5x3xf32>
// CHECK: return %{{.*}}, %[[DE]]
func.func @gather_slice(%e: tensor<5x3xf32> {cleave.kind = "param", cleave.name = "e"},
                        %i: tensor<2x2xi64> {cleave.kind = "input", cleave.name = "i"}) -> tensor<f32> {
  %0 = cleave.gather %e, %i {axis = 0 : i64} : (tensor<5x3xf32>, tensor<2x2xi64>) -> tensor<2x2x3xf32>
  %1 = cleave.slice %0 {starts = array<i64: 1, 0, 2>, ends = array<i64: -1, 2, -1>, steps = array<i64: -1, 1, -2>} : (tensor<2x2x3xf32>) -> tensor<2x2x2xf32>
  %2 = cleave.reduce_sum %1 {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<2x2x2xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

// conv: dx = conv_grad_input(g, w) at x's shape, dw = conv_grad_weight(g, x)
// at w's shape, db = g summed over all dims but the channels. The max pool
// before it sends its gradient back through max_pool_grad, and the average
// pool after it through average_pool_grad (with x's shape: 5x5 and 6x6 both
// give 2x2 here).
// CHECK-LABEL: func.func @conv_pools
// CHECK-SAME: (%[[X:.*]]: tensor<1x2x6x6xf32> {{.*}}, %[[W:.*]]: tensor<4x1x3x3xf32> {{.*}}, %[[B:.*]]: tensor<4xf32> {{.*}})
// CHECK: %[[P:.*]] = cleave.max_pool %[[X]]
// CHECK: %[[C:.*]] = cleave.conv %[[P]], %[[W]], %[[B]]
// CHECK: %[[GA:.*]] = cleave.average_pool_grad %{{.*}} {count_include_pad = true, {{.*}}shape = array<i64: 1, 4, 5, 5>{{.*}}} : (tensor<1x4x2x2xf32>) -> tensor<1x4x5x5xf32>
// CHECK: %[[GP:.*]] = cleave.conv_grad_input %[[GA]], %[[W]] {dilations = array<i64: 1, 1>, group = 2 : i64, pads = array<i64: 1, 1, 1, 1>, shape = array<i64: 1, 2, 5, 5>, strides = array<i64: 1, 1>} : (tensor<1x4x5x5xf32>, tensor<4x1x3x3xf32>) -> tensor<1x2x5x5xf32>
// CHECK: %[[GW:.*]] = cleave.conv_grad_weight %[[GA]], %[[P]] {{{.*}}shape = array<i64: 4, 1, 3, 3>{{.*}}} : (tensor<1x4x5x5xf32>, tensor<1x2x5x5xf32>) -> tensor<4x1x3x3xf32>
// CHECK: %[[GB:.*]] = cleave.reduce_sum %[[GA]] {axes = array<i64: 0, 2, 3>, keepdims = false} : (tensor<1x4x5x5xf32>) -> tensor<4xf32>
// CHECK: %[[GX:.*]] = cleave.max_pool_grad %[[GP]], %[[X]] {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x5x5xf32>, tensor<1x2x6x6xf32>) -> tensor<1x2x6x6xf32>
// CHECK: return %{{.*}}, %[[GX]], %[[GW]], %[[GB]]
func.func @conv_pools(%x: tensor<1x2x6x6xf32> {cleave.kind = "param", cleave.name = "x"},
                      %w: tensor<4x1x3x3xf32> {cleave.kind = "param", cleave.name = "w"},
                      %b: tensor<4xf32> {cleave.kind = "param", cleave.name = "b"}) -> tensor<f32> {
  %0 = cleave.max_pool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<1x2x6x6xf32>) -> tensor<1x2x5x5xf32>
  %1 = cleave.conv %0, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 2 : i64} : (tensor<1x2x5x5xf32>, tensor<4x1x3x3xf32>, tensor<4xf32>) -> tensor<1x4x5x5xf32>
  %2 = cleave.average_pool %1 {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false, count_include_pad = true} : (tensor<1x4x5x5xf32>) -> tensor<1x4x2x2xf32>
  %3 = cleave.reduce_sum %2 {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : (tensor<1x4x2x2xf32>) -> tensor<f32>
  return %3 : tensor<f32>
}

// -----

// An input's gradient is never read: conv of an input x builds only dw.
// CHECK-LABEL: func.func @conv_of_input
// CHECK-NOT: conv_grad_input
// CHECK: cleave.conv_grad_weight
// CHECK-NOT: conv_grad_input
func.func @conv_of_input(%x: tensor<1x1x3x3xf32> {cleave.kind = "input", cleave.name = "x"},
                         %w: tensor<1x1x2x2xf32> {cleave.kind = "param", cleave.name = "w"}) -> tensor<f32> {
  %0 = cleave.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x1x3x3xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  %1 = cleave.reduce_sum %0 {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : (tensor<1x1x2x2xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}
