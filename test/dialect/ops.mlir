// RUN: cleave-opt %s | FileCheck %s
// RUN: cleave-opt %s | cleave-opt | FileCheck %s

// Every op round-trips through the printer and parser, and the declared
// result types agree with the inferred ones (the verifier checks both).

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %m: tensor<2x3xi1>) -> tensor<2x3xf32> {
  // CHECK: cleave.neg
  %0 = cleave.neg %a : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: cleave.sqrt
  %1 = cleave.sqrt %0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: cleave.reciprocal
  %2 = cleave.reciprocal %1 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: cleave.exp
  %3 = cleave.exp %2 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: cleave.log
  %4 = cleave.log %3 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: cleave.abs
  %5 = cleave.abs %4 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: cleave.tanh
  %6 = cleave.tanh %5 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: cleave.sigmoid
  %7 = cleave.sigmoid %6 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: cleave.relu
  %8 = cleave.relu %7 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: cleave.erf
  %9 = cleave.erf %8 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: cleave.leaky_relu %{{.*}} {alpha = 1.000000e-01 : f32}
  %10 = cleave.leaky_relu %9 {alpha = 0.1 : f32} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: cleave.gelu %{{.*}} {approximate = "tanh"}
  %11 = cleave.gelu %10 {approximate = "tanh"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: cleave.identity
  %12 = cleave.identity %11 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: cleave.add %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %13 = cleave.add %12, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: cleave.sub
  %14 = cleave.sub %13, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: cleave.mul
  %15 = cleave.mul %14, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: cleave.div
  %16 = cleave.div %15, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: cleave.pow
  %17 = cleave.pow %16, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: cleave.equal {{.*}} -> tensor<2x3xi1>
  %18 = cleave.equal %17, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK: cleave.less
  %19 = cleave.less %17, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK: cleave.greater
  %20 = cleave.greater %17, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK: cleave.not
  %21 = cleave.not %20 : (tensor<2x3xi1>) -> tensor<2x3xi1>
  // CHECK: cleave.where {{.*}} : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %22 = cleave.where %21, %17, %b : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: cleave.cast %{{.*}} {to = f16} : (tensor<2x3xf32>) -> tensor<2x3xf16>
  %23 = cleave.cast %22 {to = f16} : (tensor<2x3xf32>) -> tensor<2x3xf16>
  return %22 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @normalization
func.func @normalization(%x: tensor<2x4x8xf32>, %s: tensor<8xf32>, %img: tensor<2x3x4x4xf32>, %c: tensor<3xf32>) {
  // CHECK: cleave.softmax %{{.*}} {axis = 2 : i64}
  %0 = cleave.softmax %x {axis = 2 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  // CHECK: cleave.log_softmax
  %1 = cleave.log_softmax %x {axis = 1 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  // CHECK: cleave.softmax_grad %{{.*}}, %{{.*}} {axis = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %g = cleave.softmax_grad %0, %1 {axis = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  // CHECK: cleave.layer_normalization {{.*}} -> (tensor<2x4x8xf32>, tensor<2x4x1xf32>, tensor<2x4x1xf32>)
  %2:3 = cleave.layer_normalization %x, %s, %s {axis = 2 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x1xf32>, tensor<2x4x1xf32>)
  // CHECK: cleave.layer_normalization_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {axis = 2 : i64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x1xf32>, tensor<2x4x1xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %gx = cleave.layer_normalization_grad %x, %s, %2#1, %2#2, %0 {axis = 2 : i64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x1xf32>, tensor<2x4x1xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  // CHECK: cleave.scaled_masked_softmax %{{.*}} mask(%{{.*}} : tensor<4x8xi1>) {fill = 0xFF800000 : f32, scale = 1.250000e-01 : f32} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %mask = cleave.constant {value = dense<false> : tensor<4x8xi1>} : tensor<4x8xi1>
  %sm = cleave.scaled_masked_softmax %x mask(%mask : tensor<4x8xi1>) {fill = 0xFF800000 : f32, scale = 0.125 : f32} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  // CHECK: cleave.scaled_masked_softmax_grad %{{.*}}, %{{.*}}, %{{.*}} {divide, scale = 8.000000e+00 : f32} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<4x8xi1>) -> tensor<2x4x8xf32>
  %smg = cleave.scaled_masked_softmax_grad %sm, %x, %mask {divide, scale = 8.0 : f32} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<4x8xi1>) -> tensor<2x4x8xf32>
  // CHECK: cleave.batch_normalization
  %3:3 = cleave.batch_normalization %img, %c, %c, %c, %c {epsilon = 1.0e-5 : f32, momentum = 0.9 : f32, training_mode = true} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  // CHECK: cleave.dropout {{.*}} -> (tensor<2x4x8xf32>, tensor<2x4x8xi1>)
  %4:2 = cleave.dropout %x {ratio = 0.1 : f32, training_mode = true, seed = 7 : i64} : (tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xi1>)
  // A rank's part of a tensor split along dim 2 over 2 ranks.
  // CHECK: cleave.dropout %{{.*}}, %{{.*}} {{.*}}split = array<i64: 2, 2>{{.*}} : (tensor<2x4x8xf32>, tensor<i64>) -> (tensor<2x4x8xf32>, tensor<2x4x8xi1>)
  %rank = cleave.constant {value = dense<1> : tensor<i64>} : tensor<i64>
  %5:2 = cleave.dropout %x, %rank {ratio = 0.1 : f32, training_mode = true, split = array<i64: 2, 2>} : (tensor<2x4x8xf32>, tensor<i64>) -> (tensor<2x4x8xf32>, tensor<2x4x8xi1>)
  return
}

// CHECK-LABEL: func.func @linear_algebra
func.func @linear_algebra(%a: tensor<5x2x3xf32>, %b: tensor<3x4xf32>, %v: tensor<3xf32>, %m: tensor<4x3xf32>, %bias: tensor<4xf32>) {
  // CHECK: cleave.matmul {{.*}} -> tensor<5x2x4xf32>
  %0 = cleave.matmul %a, %b : (tensor<5x2x3xf32>, tensor<3x4xf32>) -> tensor<5x2x4xf32>
  // CHECK: cleave.matmul {{.*}} -> tensor<4xf32>
  %1 = cleave.matmul %v, %b : (tensor<3xf32>, tensor<3x4xf32>) -> tensor<4xf32>
  // CHECK: cleave.gemm {{.*}}trans_b = true{{.*}} -> tensor<4x4xf32>
  %2 = cleave.gemm %m, %m, %bias {trans_b = true} : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4xf32>) -> tensor<4x4xf32>
  return
}

// bf16 factors sum in f32 and write f32, or bf16 with a bf16 c.
// CHECK-LABEL: func.func @low_precision_products
func.func @low_precision_products(%a: tensor<2x3xbf16>, %b: tensor<3x4xbf16>, %c: tensor<2x4xbf16>) {
  // CHECK: cleave.gemm {{.*}} -> tensor<2x4xf32>
  %0 = cleave.gemm %a, %b : (tensor<2x3xbf16>, tensor<3x4xbf16>) -> tensor<2x4xf32>
  // CHECK: cleave.gemm {{.*}} -> tensor<2x4xbf16>
  %1 = cleave.gemm %a, %b, %c : (tensor<2x3xbf16>, tensor<3x4xbf16>, tensor<2x4xbf16>) -> tensor<2x4xbf16>
  return
}

// CHECK-LABEL: func.func @data_movement
func.func @data_movement(%x: tensor<2x3x4xf32>, %i: tensor<5xi64>, %one: tensor<1x3xf32>) {
  // CHECK: cleave.reshape %{{.*}} {shape = array<i64: 6, 4>}
  %0 = cleave.reshape %x {shape = array<i64: 6, 4>} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  // CHECK: cleave.flatten
  %1 = cleave.flatten %x {axis = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<2x12xf32>
  // CHECK: cleave.transpose {{.*}} -> tensor<4x2x3xf32>
  %2 = cleave.transpose %x {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  // CHECK: cleave.unsqueeze {{.*}} -> tensor<1x2x3x4xf32>
  %3 = cleave.unsqueeze %x {axes = array<i64: 0>} : (tensor<2x3x4xf32>) -> tensor<1x2x3x4xf32>
  // CHECK: cleave.squeeze {{.*}} -> tensor<2x3x4xf32>
  %4 = cleave.squeeze %3 {axes = array<i64: 0>} : (tensor<1x2x3x4xf32>) -> tensor<2x3x4xf32>
  // CHECK: cleave.concat {{.*}} -> tensor<4x3x4xf32>
  %5 = cleave.concat %x, %x {axis = 0 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<4x3x4xf32>
  // CHECK: cleave.split {{.*}} -> (tensor<2x1x4xf32>, tensor<2x2x4xf32>)
  %6:2 = cleave.split %x {axis = 1 : i64, split = array<i64: 1, 2>} : (tensor<2x3x4xf32>) -> (tensor<2x1x4xf32>, tensor<2x2x4xf32>)
  // CHECK: cleave.slice {{.*}} -> tensor<2x3x2xf32>
  %7 = cleave.slice %x {starts = array<i64: 0, 0, 3>, ends = array<i64: 2, 3, -1>, steps = array<i64: 1, 1, -2>} : (tensor<2x3x4xf32>) -> tensor<2x3x2xf32>
  // CHECK: cleave.gather {{.*}} -> tensor<2x5x4xf32>
  %8 = cleave.gather %x, %i {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<5xi64>) -> tensor<2x5x4xf32>
  // CHECK: cleave.expand {{.*}} -> tensor<2x4x3xf32>
  %9 = cleave.expand %one {shape = array<i64: 2, 4, 3>} : (tensor<1x3xf32>) -> tensor<2x4x3xf32>
  return
}

// CHECK-LABEL: func.func @reductions
func.func @reductions(%x: tensor<2x3x4xf32>) {
  // CHECK: cleave.reduce_sum {{.*}} -> tensor<2x1x4xf32>
  %0 = cleave.reduce_sum %x {axes = array<i64: 1>, keepdims = true} : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
  // CHECK: cleave.reduce_mean {{.*}} -> tensor<3xf32>
  %1 = cleave.reduce_mean %x {axes = array<i64: 0, 2>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<3xf32>
  // CHECK: cleave.reduce_max {{.*}} -> tensor<f32>
  %2 = cleave.reduce_max %x {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<f32>
  // CHECK: cleave.reduce_prod {{.*}} -> tensor<2x4xf32>
  %3 = cleave.reduce_prod %x {axes = array<i64: 1>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
  // CHECK: cleave.top_k {{.*}} -> (tensor<2x2x4xf32>, tensor<2x2x4xi64>)
  %4:2 = cleave.top_k %x {k = 2 : i64, axis = 1 : i64, largest = true} : (tensor<2x3x4xf32>) -> (tensor<2x2x4xf32>, tensor<2x2x4xi64>)
  // CHECK: cleave.fmod {{.*}} -> tensor<2x3x4xf32>
  %5 = cleave.fmod %x, %2 : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  return
}

// CHECK-LABEL: func.func @conv_pool
func.func @conv_pool(%x: tensor<1x4x7x7xf32>, %w: tensor<6x2x3x3xf32>, %b: tensor<6xf32>) {
  // CHECK: cleave.conv {{.*}} -> tensor<1x6x4x4xf32>
  %0 = cleave.conv %x, %w, %b {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 2 : i64} : (tensor<1x4x7x7xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<1x6x4x4xf32>
  // CHECK: cleave.max_pool {{.*}} -> tensor<1x4x3x3xf32>
  %1 = cleave.max_pool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<1x4x7x7xf32>) -> tensor<1x4x3x3xf32>
  // CHECK: cleave.average_pool {{.*}} -> tensor<1x4x4x4xf32>
  %2 = cleave.average_pool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = true, count_include_pad = false} : (tensor<1x4x7x7xf32>) -> tensor<1x4x4x4xf32>
  // CHECK: cleave.global_average_pool {{.*}} -> tensor<1x4x1x1xf32>
  %3 = cleave.global_average_pool %x : (tensor<1x4x7x7xf32>) -> tensor<1x4x1x1xf32>
  return
}

// CHECK-LABEL: func.func @losses
func.func @losses(%s: tensor<4x10xf32>, %l: tensor<4xi64>, %w: tensor<10xf32>) {
  // CHECK: cleave.softmax_cross_entropy_loss {{.*}} -> (tensor<f32>, tensor<4x10xf32>)
  %0:2 = cleave.softmax_cross_entropy_loss %s, %l {reduction = "mean", ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>)
  // CHECK: cleave.negative_log_likelihood_loss {{.*}} -> tensor<4xf32>
  %1 = cleave.negative_log_likelihood_loss %s, %l, %w {reduction = "none"} : (tensor<4x10xf32>, tensor<4xi64>, tensor<10xf32>) -> tensor<4xf32>
  // CHECK: cleave.softmax_cross_entropy_grad {{.*}} -> tensor<4x10xf32>
  %2 = cleave.softmax_cross_entropy_grad %0#1, %l, %0#0 {reduction = "mean", ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x10xf32>
  // CHECK: cleave.softmax_cross_entropy_grad {{.*}} -> tensor<4x10xf32>
  %3 = cleave.softmax_cross_entropy_grad %0#1, %l, %1 {reduction = "none"} : (tensor<4x10xf32>, tensor<4xi64>, tensor<4xf32>) -> tensor<4x10xf32>
  return
}

// CHECK-LABEL: func.func @generators
func.func @generators(%x: tensor<3x5xf32>) {
  // CHECK: cleave.trilu
  %0 = cleave.trilu %x {upper = false, k = 1 : i64} : (tensor<3x5xf32>) -> tensor<3x5xf32>
  // CHECK: cleave.constant {value = dense<[1, 2]> : tensor<2xi64>} : tensor<2xi64>
  %1 = cleave.constant {value = dense<[1, 2]> : tensor<2xi64>} : tensor<2xi64>
  // CHECK: cleave.constant_of_shape {{.*}} : tensor<2x3xf32>
  %2 = cleave.constant_of_shape {shape = array<i64: 2, 3>, value = 0.0 : f32} : tensor<2x3xf32>
  // CHECK: cleave.shape {{.*}} -> tensor<1xi64>
  %3 = cleave.shape %x {start = 1 : i64, end = 2 : i64} : (tensor<3x5xf32>) -> tensor<1xi64>
  // CHECK: cleave.range {{.*}} : tensor<4xi64>
  %4 = cleave.range {start = 1 : i64, limit = 9 : i64, delta = 2 : i64} : tensor<4xi64>
  return
}

// CHECK-LABEL: func.func @gradient_ops
func.func @gradient_ops(%g: tensor<2x4x3xf32>, %i: tensor<4xi64>, %s: tensor<1x2xf64>) {
  // CHECK: cleave.gather_grad %{{.*}}, %{{.*}} {axis = 1 : i64, shape = array<i64: 2, 5, 3>} : (tensor<2x4x3xf32>, tensor<4xi64>) -> tensor<2x5x3xf32>
  %0 = cleave.gather_grad %g, %i {axis = 1 : i64, shape = array<i64: 2, 5, 3>} : (tensor<2x4x3xf32>, tensor<4xi64>) -> tensor<2x5x3xf32>
  // CHECK: cleave.slice_grad %{{.*}} {shape = array<i64: 2, 4>, starts = array<i64: 1, 3>, steps = array<i64: 1, -2>} : (tensor<1x2xf64>) -> tensor<2x4xf64>
  %1 = cleave.slice_grad %s {starts = array<i64: 1, 3>, steps = array<i64: 1, -2>, shape = array<i64: 2, 4>} : (tensor<1x2xf64>) -> tensor<2x4xf64>
  return
}

// The adjoints of conv and the pools: the result has the `shape` attribute
// (conv's input 7x7 or 8x8 give the same 4x4 output at stride 2), and grad
// may have the pool's output with or without ceil mode.
// CHECK-LABEL: func.func @conv_pool_gradient_ops
func.func @conv_pool_gradient_ops(%g: tensor<1x6x4x4xf32>, %w: tensor<6x2x3x3xf32>, %x: tensor<1x4x7x7xf32>,
                                  %p: tensor<1x4x3x3xf32>, %q: tensor<1x4x4x4xf32>) {
  // CHECK: cleave.conv_grad_input %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, group = 2 : i64, pads = array<i64: 1, 1, 1, 1>, shape = array<i64: 1, 4, 7, 7>, strides = array<i64: 2, 2>} : (tensor<1x6x4x4xf32>, tensor<6x2x3x3xf32>) -> tensor<1x4x7x7xf32>
  %0 = cleave.conv_grad_input %g, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 2 : i64, shape = array<i64: 1, 4, 7, 7>} : (tensor<1x6x4x4xf32>, tensor<6x2x3x3xf32>) -> tensor<1x4x7x7xf32>
  // CHECK: cleave.conv_grad_input {{.*}} -> tensor<1x4x8x8xf32>
  %1 = cleave.conv_grad_input %g, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 2 : i64, shape = array<i64: 1, 4, 8, 8>} : (tensor<1x6x4x4xf32>, tensor<6x2x3x3xf32>) -> tensor<1x4x8x8xf32>
  // CHECK: cleave.conv_grad_weight %{{.*}}, %{{.*}} {{{.*}}shape = array<i64: 6, 2, 3, 3>{{.*}}} : (tensor<1x6x4x4xf32>, tensor<1x4x7x7xf32>) -> tensor<6x2x3x3xf32>
  %2 = cleave.conv_grad_weight %g, %x {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 2 : i64, shape = array<i64: 6, 2, 3, 3>} : (tensor<1x6x4x4xf32>, tensor<1x4x7x7xf32>) -> tensor<6x2x3x3xf32>
  // CHECK: cleave.max_pool_grad {{.*}} : (tensor<1x4x3x3xf32>, tensor<1x4x7x7xf32>) -> tensor<1x4x7x7xf32>
  %3 = cleave.max_pool_grad %p, %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x4x3x3xf32>, tensor<1x4x7x7xf32>) -> tensor<1x4x7x7xf32>
  // CHECK: cleave.max_pool_grad {{.*}} : (tensor<1x4x4x4xf32>, tensor<1x4x7x7xf32>) -> tensor<1x4x7x7xf32>
  %4 = cleave.max_pool_grad %q, %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x4x4x4xf32>, tensor<1x4x7x7xf32>) -> tensor<1x4x7x7xf32>
  // CHECK: cleave.average_pool_grad %{{.*}} {count_include_pad = true, {{.*}}shape = array<i64: 1, 4, 7, 7>{{.*}}} : (tensor<1x4x4x4xf32>) -> tensor<1x4x7x7xf32>
  %5 = cleave.average_pool_grad %q {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, count_include_pad = true, shape = array<i64: 1, 4, 7, 7>} : (tensor<1x4x4x4xf32>) -> tensor<1x4x7x7xf32>
  return
}

// The ends of a value crossing a pipeline stage boundary: neither is removed
// when unused, since each takes or gives one message.
// CHECK-LABEL: func.func @pipeline_ends
func.func @pipeline_ends(%x: tensor<4x8xf32>) {
  // CHECK: cleave.pipeline_send %{{.*}} to stage 1 tag 0 : tensor<4x8xf32>
  cleave.pipeline_send %x to stage 1 tag 0 : tensor<4x8xf32>
  // CHECK: cleave.pipeline_recv from stage 1 tag 3 : tensor<4x8xf32>
  %0 = cleave.pipeline_recv from stage 1 tag 3 : tensor<4x8xf32>
  return
}
