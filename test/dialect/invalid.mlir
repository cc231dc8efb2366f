// RUN: cleave-opt %s -split-input-file -verify-diagnostics

func.func @broadcast_mismatch(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+2 {{operands are not broadcast-compatible: 2x3 and 4x5}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.add %a, %b : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @wrong_result_type(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{'cleave.add' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<3x2xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.add %a, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @add_element_types(%a: tensor<2xf32>, %b: tensor<2xi64>) {
  // expected-error @+1 {{all of {lhs, rhs} have same element type}}
  %0 = cleave.add %a, %b : (tensor<2xf32>, tensor<2xi64>) -> tensor<2xf32>
  return
}

// -----

func.func @sqrt_of_integers(%a: tensor<2xi64>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or 64-bit float values}}
  %0 = cleave.sqrt %a : (tensor<2xi64>) -> tensor<2xi64>
  return
}

// -----

func.func @dynamic_shape(%a: tensor<?x3xf32>) {
  // expected-error @+1 {{must be statically shaped tensor}}
  %0 = cleave.relu %a : (tensor<?x3xf32>) -> tensor<?x3xf32>
  return
}

// -----

func.func @matmul_contraction(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+2 {{contraction dims differ: 2x3 times 4x5}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.matmul %a, %b : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

// A product of bf16 factors gives f32, not bf16.
func.func @matmul_bf16_result(%a: tensor<2x3xbf16>, %b: tensor<3x4xbf16>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x4xf32>' are incompatible with return type(s) of operation 'tensor<2x4xbf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.matmul %a, %b : (tensor<2x3xbf16>, tensor<3x4xbf16>) -> tensor<2x4xbf16>
  return
}

// -----

func.func @gemm_mixed_factors(%a: tensor<2x3xbf16>, %b: tensor<3x4xf32>) {
  // expected-error @+2 {{a and b have different element types}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.gemm %a, %b : (tensor<2x3xbf16>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @gemm_c_type(%a: tensor<2x3xbf16>, %b: tensor<3x4xbf16>, %c: tensor<4xf16>) {
  // expected-error @+2 {{c's element type is not the result's}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.gemm %a, %b, %c : (tensor<2x3xbf16>, tensor<3x4xbf16>, tensor<4xf16>) -> tensor<2x4xf32>
  return
}

// -----

// bf16 factors and a bf16 c write bf16 (the sum rounded), not f32.
func.func @gemm_bf16_c_result(%a: tensor<2x3xbf16>, %b: tensor<3x4xbf16>, %c: tensor<2x4xbf16>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x4xbf16>' are incompatible with return type(s) of operation 'tensor<2x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.gemm %a, %b, %c : (tensor<2x3xbf16>, tensor<3x4xbf16>, tensor<2x4xbf16>) -> tensor<2x4xf32>
  return
}

// -----

func.func @gemm_bf16_result_activation(%a: tensor<2x3xbf16>, %b: tensor<3x4xbf16>, %c: tensor<2x4xbf16>) {
  // expected-error @+1 {{'cleave.gemm' op with a bf16 result takes no activation}}
  %0 = cleave.gemm %a, %b, %c {activation = "relu"} : (tensor<2x3xbf16>, tensor<3x4xbf16>, tensor<2x4xbf16>) -> tensor<2x4xbf16>
  return
}

// -----

// A convolution of bf16 factors gives f32, from factors of one type, with
// an f32 bias.
func.func @conv_bf16_result(%x: tensor<1x2x5x5xbf16>, %w: tensor<4x2x3x3xbf16>) {
  // expected-error @+1 {{result #0 must be statically shaped tensor of 32-bit float or 64-bit float values, but got 'tensor<1x4x3x3xbf16>'}}
  %0 = cleave.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x2x5x5xbf16>, tensor<4x2x3x3xbf16>) -> tensor<1x4x3x3xbf16>
  return
}

// -----

func.func @conv_mixed_factors(%x: tensor<1x2x5x5xbf16>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+2 {{x and w have different element types}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x2x5x5xbf16>, tensor<4x2x3x3xf32>) -> tensor<1x4x3x3xf32>
  return
}

// -----

func.func @conv_bias_type(%x: tensor<1x2x5x5xbf16>, %w: tensor<4x2x3x3xbf16>, %b: tensor<4xf64>) {
  // expected-error @+2 {{bias must have the result's element type}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.conv %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x2x5x5xbf16>, tensor<4x2x3x3xbf16>, tensor<4xf64>) -> tensor<1x4x3x3xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x2x3xf32>, %b: tensor<3x3x4xf32>) {
  // expected-error @+2 {{batch dims do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.matmul %a, %b : (tensor<2x2x3xf32>, tensor<3x3x4xf32>) -> tensor<2x2x4xf32>
  return
}

// -----

func.func @matmul_transposed_vector(%a: tensor<3xf32>, %b: tensor<3x4xf32>) {
  // expected-error @+2 {{a transposed operand must have rank 2 or more}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.matmul %a, %b {trans_a = true} : (tensor<3xf32>, tensor<3x4xf32>) -> tensor<4xf32>
  return
}

// -----

// A transposed operand is read with its last two dims swapped: 4x3 read as
// 3x4 does not meet a 2x5.
func.func @matmul_transposed_contraction(%a: tensor<4x3xf32>, %b: tensor<2x5xf32>) {
  // expected-error @+2 {{contraction dims differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.matmul %a, %b {trans_a = true} : (tensor<4x3xf32>, tensor<2x5xf32>) -> tensor<3x5xf32>
  return
}

// -----

func.func @gemm_bias(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>, %c: tensor<3xf32>) {
  // expected-error @+2 {{c of shape 3 does not broadcast to 2x4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.gemm %a, %b, %c : (tensor<2x3xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @softmax_axis(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.softmax %a {axis = 2 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @softmax_grad_axis(%y: tensor<2x3xf32>, %g: tensor<2x3xf32>) {
  // expected-error @+2 {{axis -3 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.softmax_grad %y, %g {axis = -3 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @softmax_grad_types(%y: tensor<2x3xf32>, %g: tensor<2x3xf64>) {
  // expected-error @+2 {{y 'tensor<2x3xf32>' and grad 'tensor<2x3xf64>' differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.softmax_grad %y, %g {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x3xf64>) -> tensor<2x3xf32>
  return
}

// -----

func.func @scaled_masked_softmax_mask(%x: tensor<2x8xf32>, %m: tensor<3x8xi1>) {
  // expected-error @+2 {{mask of shape 3x8 does not broadcast to 2x8}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.scaled_masked_softmax %x mask(%m : tensor<3x8xi1>) {fill = 0.0 : f32, scale = 1.0 : f32} : tensor<2x8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @scaled_masked_softmax_scalar(%x: tensor<f32>, %m: tensor<i1>) {
  // expected-error @+2 {{the input has no dim to normalise}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.scaled_masked_softmax %x mask(%m : tensor<i1>) {fill = 0.0 : f32, scale = 1.0 : f32} : tensor<f32> -> tensor<f32>
  return
}

// -----

func.func @scaled_masked_softmax_bias(%x: tensor<2x8xf32>, %b: tensor<2x1x8xf32>) {
  // expected-error @+2 {{bias of shape 2x1x8 does not broadcast to 2x8}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.scaled_masked_softmax %x bias(%b : tensor<2x1x8xf32>) {fill = 0.0 : f32, scale = 1.0 : f32} : tensor<2x8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @scaled_masked_softmax_bias_type(%x: tensor<2x8xf32>, %b: tensor<8xf64>) {
  // expected-error @+2 {{bias 'tensor<8xf64>' is not of the input's element type 'f32'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.scaled_masked_softmax %x bias(%b : tensor<8xf64>) {fill = 0.0 : f32, scale = 1.0 : f32} : tensor<2x8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @scaled_masked_softmax_grad_types(%y: tensor<2x8xf32>, %g: tensor<2x8xf64>, %m: tensor<8xi1>) {
  // expected-error @+2 {{y 'tensor<2x8xf32>' and grad 'tensor<2x8xf64>' differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.scaled_masked_softmax_grad %y, %g, %m {scale = 1.0 : f32} : (tensor<2x8xf32>, tensor<2x8xf64>, tensor<8xi1>) -> tensor<2x8xf32>
  return
}

// -----

func.func @scaled_masked_softmax_grad_mask(%y: tensor<2x8xf32>, %m: tensor<2x8xf32>) {
  // expected-error @+1 {{operand #2 must be}}
  %0 = cleave.scaled_masked_softmax_grad %y, %y, %m {scale = 1.0 : f32} : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_grad_axis(%x: tensor<2x8xf32>, %s: tensor<8xf32>, %m: tensor<2x1xf32>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.layer_normalization_grad %x, %s, %m, %m, %x {axis = 2 : i64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_grad_types(%x: tensor<2x8xf32>, %s: tensor<8xf32>, %m: tensor<2x1xf32>, %g: tensor<2x8xf64>) {
  // expected-error @+2 {{x 'tensor<2x8xf32>' and grad 'tensor<2x8xf64>' differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.layer_normalization_grad %x, %s, %m, %m, %g {axis = 1 : i64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x8xf64>) -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_grad_scale(%x: tensor<2x8xf32>, %s: tensor<4xf32>, %m: tensor<2x1xf32>) {
  // expected-error @+2 {{scale of shape 4 does not broadcast to the normalised shape 8}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.layer_normalization_grad %x, %s, %m, %m, %x {axis = 1 : i64} : (tensor<2x8xf32>, tensor<4xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_grad_stats(%x: tensor<2x8xf32>, %s: tensor<8xf32>, %m: tensor<2x1xf32>, %v: tensor<1x2xf32>) {
  // expected-error @+2 {{inv_std_dev 'tensor<1x2xf32>' is not 'tensor<2x1xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.layer_normalization_grad %x, %s, %m, %v, %x {axis = 1 : i64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x1xf32>, tensor<1x2xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_scale(%x: tensor<2x8xf32>, %s: tensor<4xf32>) {
  // expected-error @+2 {{scale of shape 4 does not broadcast to the normalised shape 8}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:3 = cleave.layer_normalization %x, %s {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x8xf32>, tensor<4xf32>) -> (tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  return
}

// -----

func.func @batch_norm_channels(%x: tensor<2x3x4xf32>, %c: tensor<4xf32>) {
  // expected-error @+2 {{scale must have shape 3 (the channels), got 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:3 = cleave.batch_normalization %x, %c, %c, %c, %c {epsilon = 1.0e-5 : f32, momentum = 0.9 : f32, training_mode = false} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @dropout_ratio(%x: tensor<4xf32>) {
  // expected-error @+1 {{ratio must be in [0, 1), got 1.5}}
  %0:2 = cleave.dropout %x {ratio = 1.5 : f32, training_mode = true} : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>)
  return
}

// -----

func.func @dropout_split_alone(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{split and coordinate go together}}
  %0:2 = cleave.dropout %x {ratio = 0.5 : f32, training_mode = true, split = array<i64: 1, 2>} : (tensor<4x6xf32>) -> (tensor<4x6xf32>, tensor<4x6xi1>)
  return
}

// -----

func.func @dropout_split_dim(%x: tensor<4x6xf32>, %rank: tensor<i64>) {
  // expected-error @+1 {{split must be [dim, parts] with a dim of the data and parts >= 1}}
  %0:2 = cleave.dropout %x, %rank {ratio = 0.5 : f32, training_mode = true, split = array<i64: 2, 2>} : (tensor<4x6xf32>, tensor<i64>) -> (tensor<4x6xf32>, tensor<4x6xi1>)
  return
}

// -----

func.func @dropout_coordinate_scalar(%x: tensor<4x6xf32>, %rank: tensor<1xi64>) {
  // expected-error @+1 {{coordinate must be a scalar}}
  %0:2 = cleave.dropout %x, %rank {ratio = 0.5 : f32, training_mode = true, split = array<i64: 1, 2>} : (tensor<4x6xf32>, tensor<1xi64>) -> (tensor<4x6xf32>, tensor<4x6xi1>)
  return
}

// -----

func.func @gelu_mode(%x: tensor<4xf32>) {
  // expected-error @+1 {{approximate must be "none" or "tanh", not "fast"}}
  %0 = cleave.gelu %x {approximate = "fast"} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @reshape_count(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{cannot reshape 6 elements (2x3) to 4x2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.reshape %x {shape = array<i64: 4, 2>} : (tensor<2x3xf32>) -> tensor<4x2xf32>
  return
}

// -----

func.func @transpose_perm(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{axis 1 appears twice}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.transpose %x {perm = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<3x3xf32>
  return
}

// -----

func.func @squeeze_non_unit(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{cannot squeeze dim 0 of size 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.squeeze %x {axes = array<i64: 0>} : (tensor<2x3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @concat_mismatch(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+2 {{cannot concatenate 2x3 and 2x4 along axis 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.concat %a, %b {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @split_sizes(%x: tensor<6xf32>) {
  // expected-error @+2 {{split sizes add up to 5, but dim 0 has 6}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = cleave.split %x {axis = 0 : i64, split = array<i64: 2, 3>} : (tensor<6xf32>) -> (tensor<2xf32>, tensor<3xf32>)
  return
}

// -----

func.func @slice_unclamped(%x: tensor<4xf32>) {
  // expected-error @+2 {{dim 0: start 0, end 9, step 1 are not a clamped slice of size 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.slice %x {starts = array<i64: 0>, ends = array<i64: 9>, steps = array<i64: 1>} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @gather_indices(%x: tensor<4x2xf32>, %i: tensor<3xf32>) {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = cleave.gather %x, %i {axis = 0 : i64} : (tensor<4x2xf32>, tensor<3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @expand_shape(%x: tensor<3xf32>) {
  // expected-error @+2 {{cannot expand 3 to 2x4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.expand %x {shape = array<i64: 2, 4>} : (tensor<3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @reduce_no_axes(%x: tensor<3xf32>) {
  // expected-error @+2 {{needs at least one axis to reduce}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.reduce_sum %x {axes = array<i64>, keepdims = true} : (tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @conv_channels(%x: tensor<1x3x5x5xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+2 {{input channels 3 do not match weight 4x2x3x3 with group 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x3x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x3x3xf32>
  return
}

// -----

func.func @pool_window(%x: tensor<1x1x2x2xf32>) {
  // expected-error @+2 {{window of 3 does not fit spatial dim 0 of size 2 (padded)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.max_pool %x {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<1x1x2x2xf32>) -> tensor<1x1x1x1xf32>
  return
}

// -----

func.func @loss_labels(%s: tensor<4x10xf32>, %l: tensor<5xi64>) {
  // expected-error @+2 {{targets of shape 5 do not fit scores 4x10 (expected 4)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = cleave.softmax_cross_entropy_loss %s, %l {reduction = "mean"} : (tensor<4x10xf32>, tensor<5xi64>) -> (tensor<f32>, tensor<4x10xf32>)
  return
}

// -----

func.func @cross_entropy_grad_per_target(%lp: tensor<4x10xf32>, %l: tensor<4xi64>, %g: tensor<f32>) {
  // expected-error @+2 {{grad 'tensor<f32>' is not of the none loss's type 'tensor<4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.softmax_cross_entropy_grad %lp, %l, %g {reduction = "none"} : (tensor<4x10xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x10xf32>
  return
}

// -----

func.func @cross_entropy_grad_labels(%lp: tensor<4x10xf32>, %l: tensor<5xi64>, %g: tensor<f32>) {
  // expected-error @+2 {{targets of shape 5 do not fit scores 4x10 (expected 4)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.softmax_cross_entropy_grad %lp, %l, %g {reduction = "sum"} : (tensor<4x10xf32>, tensor<5xi64>, tensor<f32>) -> tensor<4x10xf32>
  return
}

// -----

func.func @loss_reduction(%s: tensor<4x10xf32>, %l: tensor<4xi64>) {
  // expected-error @+2 {{reduction must be none, mean or sum, not 'max'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.negative_log_likelihood_loss %s, %l {reduction = "max"} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  return
}

// -----

func.func @trilu_rank(%x: tensor<4xf32>) {
  // expected-error @+2 {{input must have rank 2 or more}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.trilu %x {upper = true, k = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @shape_bounds(%x: tensor<4xf32>) {
  // expected-error @+2 {{start 0 and end 2 must satisfy 0 <= start <= end <= rank 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.shape %x {start = 0 : i64, end = 2 : i64} : (tensor<4xf32>) -> tensor<2xi64>
  return
}

// -----

func.func @range_delta() {
  // expected-error @+2 {{delta must not be 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.range {start = 0 : i64, limit = 4 : i64, delta = 0 : i64} : tensor<4xi64>
  return
}

// -----

func.func @gather_grad_shape(%g: tensor<2x3xf32>, %i: tensor<4xi64>) {
  // expected-error @+2 {{grad of shape 2x3 is not what gather gives for data 5x3 and indices 4 (4x3)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.gather_grad %g, %i {axis = 0 : i64, shape = array<i64: 5, 3>} : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<5x3xf32>
  return
}

// -----

func.func @slice_grad_bounds(%g: tensor<3xf32>) {
  // expected-error @+2 {{dim 0: 3 positions from 1 by step 2 do not fit size 5}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.slice_grad %g {starts = array<i64: 1>, steps = array<i64: 2>, shape = array<i64: 5>} : (tensor<3xf32>) -> tensor<5xf32>
  return
}

// -----

func.func @conv_grad_input_shape(%g: tensor<1x6x3x3xf32>, %w: tensor<6x2x3x3xf32>) {
  // expected-error @+2 {{grad of shape 1x6x3x3 is not what conv gives (1x6x4x4)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.conv_grad_input %g, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 2 : i64, shape = array<i64: 1, 4, 7, 7>} : (tensor<1x6x3x3xf32>, tensor<6x2x3x3xf32>) -> tensor<1x4x7x7xf32>
  return
}

// -----

func.func @conv_grad_input_types(%g: tensor<1x6x4x4xf32>, %w: tensor<6x2x3x3xf64>) {
  // expected-error @+2 {{grad and the conv operand have different element types}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.conv_grad_input %g, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 2 : i64, shape = array<i64: 1, 4, 7, 7>} : (tensor<1x6x4x4xf32>, tensor<6x2x3x3xf64>) -> tensor<1x4x7x7xf32>
  return
}

// -----

func.func @conv_grad_weight_group(%g: tensor<1x6x4x4xf32>, %x: tensor<1x4x7x7xf32>) {
  // expected-error @+2 {{input channels 4 do not match weight 6x2x3x3 with group 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.conv_grad_weight %g, %x {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 3 : i64, shape = array<i64: 6, 2, 3, 3>} : (tensor<1x6x4x4xf32>, tensor<1x4x7x7xf32>) -> tensor<6x2x3x3xf32>
  return
}

// -----

func.func @max_pool_grad_shape(%g: tensor<1x4x5x5xf32>, %x: tensor<1x4x7x7xf32>) {
  // expected-error @+2 {{grad of shape 1x4x5x5 is not what max_pool gives (1x4x3x3)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.max_pool_grad %g, %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x4x5x5xf32>, tensor<1x4x7x7xf32>) -> tensor<1x4x7x7xf32>
  return
}

// -----

func.func @average_pool_grad_window(%g: tensor<1x1x1x1xf32>) {
  // expected-error @+2 {{window of 3 does not fit spatial dim 1 of size 2 (padded)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = cleave.average_pool_grad %g {kernel_shape = array<i64: 1, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, count_include_pad = false, shape = array<i64: 1, 1, 2, 2>} : (tensor<1x1x1x1xf32>) -> tensor<1x1x2x2xf32>
  return
}

// -----

func.func @pipeline_send_negative_tag(%x: tensor<4xf32>) {
  // expected-error @+1 {{peer stage and tag must be non-negative}}
  cleave.pipeline_send %x to stage 1 tag -1 : tensor<4xf32>
  return
}

// -----

func.func @pipeline_recv_negative_stage() {
  // expected-error @+1 {{peer stage and tag must be non-negative}}
  %0 = cleave.pipeline_recv from stage -2 tag 0 : tensor<4xf32>
  return
}

// -----

func.func @top_k_too_many(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{k 4 is not between 0 and the 3 entries of axis 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = cleave.top_k %x {k = 4 : i64, axis = 1 : i64, largest = true} : (tensor<2x3xf32>) -> (tensor<2x4xf32>, tensor<2x4xi64>)
  return
}
