// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-autocast{precision=bf16})' | FileCheck %s
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-autocast{precision=fp16})' | FileCheck %s --check-prefix=FP16
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-autocast{precision=fp32})' | FileCheck %s --check-prefix=FP32
// RUN: not cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-autocast{precision=fp8})' 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// UNKNOWN: error: unknown precision 'fp8': use fp32, bf16 or fp16

// A linear layer's forward and backward: the weight is cast once, before its
// first product, and its transpose moves the bf16 copy; the input's copy
// serves the forward product and the weight gradient; gemm's c stays f32.
// CHECK-LABEL: func.func @linear
// CHECK-SAME: (%[[X:.*]]: tensor<8x4xf32>, %[[W:.*]]: tensor<4x3xf32>, %[[B:.*]]: tensor<3xf32>, %[[DY:.*]]: tensor<8x3xf32>)
// CHECK-NEXT: %[[XL:.*]] = cleave.cast %[[X]] {to = bf16} : (tensor<8x4xf32>) -> tensor<8x4xbf16>
// CHECK-NEXT: %[[WL:.*]] = cleave.cast %[[W]] {to = bf16} : (tensor<4x3xf32>) -> tensor<4x3xbf16>
// CHECK-NEXT: %[[Y:.*]] = cleave.gemm %[[XL]], %[[WL]], %[[B]] : (tensor<8x4xbf16>, tensor<4x3xbf16>, tensor<3xf32>) -> tensor<8x3xf32>
// CHECK-NEXT: %[[DYL:.*]] = cleave.cast %[[DY]] {to = bf16} : (tensor<8x3xf32>) -> tensor<8x3xbf16>
// CHECK-NEXT: %[[WT:.*]] = cleave.transpose %[[WL]] {perm = array<i64: 1, 0>} : (tensor<4x3xbf16>) -> tensor<3x4xbf16>
// CHECK-NEXT: %[[DX:.*]] = cleave.matmul %[[DYL]], %[[WT]] : (tensor<8x3xbf16>, tensor<3x4xbf16>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[DW:.*]] = cleave.gemm %[[XL]], %[[DYL]] {trans_a = true} : (tensor<8x4xbf16>, tensor<8x3xbf16>) -> tensor<4x3xf32>
// CHECK-NEXT: return %[[Y]], %[[DX]], %[[DW]]
// FP16-LABEL: func.func @linear
// FP16: cleave.gemm {{.*}} : (tensor<8x4xf16>, tensor<4x3xf16>, tensor<3xf32>) -> tensor<8x3xf32>
// FP32-LABEL: func.func @linear
// FP32-NOT: cleave.cast
// FP32: cleave.gemm {{.*}} : (tensor<8x4xf32>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<8x3xf32>
func.func @linear(%x: tensor<8x4xf32>, %w: tensor<4x3xf32>, %b: tensor<3xf32>, %dy: tensor<8x3xf32>) -> (tensor<8x3xf32>, tensor<8x4xf32>, tensor<4x3xf32>) {
  %y = cleave.gemm %x, %w, %b : (tensor<8x4xf32>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<8x3xf32>
  %wt = cleave.transpose %w {perm = array<i64: 1, 0>} : (tensor<4x3xf32>) -> tensor<3x4xf32>
  %dx = cleave.matmul %dy, %wt : (tensor<8x3xf32>, tensor<3x4xf32>) -> tensor<8x4xf32>
  %dw = cleave.gemm %x, %dy {trans_a = true} : (tensor<8x4xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  return %y, %dx, %dw : tensor<8x3xf32>, tensor<8x4xf32>, tensor<4x3xf32>
}

// -----

// An f32 move read by something else stays; products of other types (f64,
// integers) and non-products are left alone.
// CHECK-LABEL: func.func @kept
// CHECK: %[[R:.*]] = cleave.reshape %{{.*}} {shape = array<i64: 4, 2>} : (tensor<8xf32>) -> tensor<4x2xf32>
// CHECK: %[[RL:.*]] = cleave.reshape %{{.*}} {shape = array<i64: 4, 2>} : (tensor<8xbf16>) -> tensor<4x2xbf16>
// CHECK: cleave.matmul %[[RL]], %{{.*}} : (tensor<4x2xbf16>, tensor<2x2xbf16>) -> tensor<4x2xf32>
// CHECK: cleave.exp %[[R]]
// CHECK: cleave.matmul %{{.*}}, %{{.*}} : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
// CHECK: cleave.matmul %{{.*}}, %{{.*}} : (tensor<2x2xi64>, tensor<2x2xi64>) -> tensor<2x2xi64>
func.func @kept(%v: tensor<8xf32>, %w: tensor<2x2xf32>, %d: tensor<2x2xf64>, %i: tensor<2x2xi64>) -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<2x2xf64>, tensor<2x2xi64>) {
  %r = cleave.reshape %v {shape = array<i64: 4, 2>} : (tensor<8xf32>) -> tensor<4x2xf32>
  %p = cleave.matmul %r, %w : (tensor<4x2xf32>, tensor<2x2xf32>) -> tensor<4x2xf32>
  %e = cleave.exp %r : (tensor<4x2xf32>) -> tensor<4x2xf32>
  %pd = cleave.matmul %d, %d : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
  %pi = cleave.matmul %i, %i : (tensor<2x2xi64>, tensor<2x2xi64>) -> tensor<2x2xi64>
  return %p, %e, %pd, %pi : tensor<4x2xf32>, tensor<4x2xf32>, tensor<2x2xf64>, tensor<2x2xi64>
}

// -----

// A ZeRO 3 parameter gathered from its slices (all-gather, padding sliced
// off, reshaped) for a product: the slice is cast, and the bf16 slices are
// gathered (half the bytes), sliced and reshaped.
// CHECK-LABEL: func.func @gathered
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>, %[[SLICE:.*]]: tensor<4xf32>)
// CHECK-NEXT: %[[XL:.*]] = cleave.cast %[[X]] {to = bf16}
// CHECK-NEXT: %[[SL:.*]] = cleave.cast %[[SLICE]] {to = bf16} : (tensor<4xf32>) -> tensor<4xbf16>
// CHECK-NEXT: %[[G:.*]] = shard.all_gather %[[SL]] on @mesh grid_axes = [0] gather_axis = 0 : tensor<4xbf16> -> tensor<8xbf16>
// CHECK-NEXT: %[[P:.*]] = cleave.slice %[[G]] {{.*}} : (tensor<8xbf16>) -> tensor<6xbf16>
// CHECK-NEXT: %[[W:.*]] = cleave.reshape %[[P]] {{.*}} : (tensor<6xbf16>) -> tensor<3x2xbf16>
// CHECK-NEXT: cleave.matmul %[[XL]], %[[W]] : (tensor<2x3xbf16>, tensor<3x2xbf16>) -> tensor<2x2xf32>
// CHECK-NOT: shard.all_gather
shard.grid @mesh(shape = 2)
func.func @gathered(%x: tensor<2x3xf32>, %slice: tensor<4xf32>) -> tensor<2x2xf32> {
  %flat = shard.all_gather %slice on @mesh grid_axes = [0] gather_axis = 0 : tensor<4xf32> -> tensor<8xf32>
  %unpadded = cleave.slice %flat {starts = array<i64: 0>, ends = array<i64: 6>, steps = array<i64: 1>} : (tensor<8xf32>) -> tensor<6xf32>
  %w = cleave.reshape %unpadded {shape = array<i64: 3, 2>} : (tensor<6xf32>) -> tensor<3x2xf32>
  %y = cleave.matmul %x, %w : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}

// -----

// A convolution's forward and its two adjoints, on 2 spatial dims: in bf16
// the kernels (oneDNN's on the CPU, cuBLAS's on CUDA) take the bf16
// copies and give f32; fp16 factors are rounded and widened back to f32,
// once per value (x for the forward and the weight gradient, w for the
// forward and the input gradient, the gradient for both adjoints), for
// the f32 kernels. The bias stays f32.
// CHECK-LABEL: func.func @conv
// CHECK-SAME: (%[[X:.*]]: tensor<1x2x5x5xf32>, %[[W:.*]]: tensor<4x2x3x3xf32>, %[[B:.*]]: tensor<4xf32>, %[[G:.*]]: tensor<1x4x3x3xf32>)
// CHECK-NEXT: %[[XL:.*]] = cleave.cast %[[X]] {to = bf16}
// CHECK-NEXT: %[[WL:.*]] = cleave.cast %[[W]] {to = bf16}
// CHECK-NEXT: %[[Y:.*]] = cleave.conv %[[XL]], %[[WL]], %[[B]] {{.*}} : (tensor<1x2x5x5xbf16>, tensor<4x2x3x3xbf16>, tensor<4xf32>) -> tensor<1x4x3x3xf32>
// CHECK-NEXT: %[[GL:.*]] = cleave.cast %[[G]] {to = bf16}
// CHECK-NEXT: %[[DX:.*]] = cleave.conv_grad_input %[[GL]], %[[WL]] {{.*}} -> tensor<1x2x5x5xf32>
// CHECK-NEXT: %[[DW:.*]] = cleave.conv_grad_weight %[[GL]], %[[XL]] {{.*}} -> tensor<4x2x3x3xf32>
// CHECK-NEXT: return %[[Y]], %[[DX]], %[[DW]]
// FP16-LABEL: func.func @conv
// FP16: %[[XL:.*]] = cleave.cast %{{.*}} {to = f16}
// FP16-NEXT: cleave.cast %[[XL]] {to = f32}
// FP32-LABEL: func.func @conv
// FP32-NOT: cleave.cast
func.func @conv(%x: tensor<1x2x5x5xf32>, %w: tensor<4x2x3x3xf32>, %b: tensor<4xf32>, %g: tensor<1x4x3x3xf32>) -> (tensor<1x4x3x3xf32>, tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>) {
  %y = cleave.conv %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>, tensor<4xf32>) -> tensor<1x4x3x3xf32>
  %dx = cleave.conv_grad_input %g, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64, shape = array<i64: 1, 2, 5, 5>} : (tensor<1x4x3x3xf32>, tensor<4x2x3x3xf32>) -> tensor<1x2x5x5xf32>
  %dw = cleave.conv_grad_weight %g, %x {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64, shape = array<i64: 4, 2, 3, 3>} : (tensor<1x4x3x3xf32>, tensor<1x2x5x5xf32>) -> tensor<4x2x3x3xf32>
  return %y, %dx, %dw : tensor<1x4x3x3xf32>, tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>
}

// -----

// A parameter's copy is state of the weights blob that @narrow_weights makes
// once a step; the step's functions read the copy (the ZeRO 3 slice's too,
// which is then gathered in bf16), an activation is still cast where it is
// read, and a parameter no product reads gets no copy.
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<8x4xf32>, %[[W:[^:]*]]: tensor<4x3xf32> {cleave.kind = "param", cleave.name = "W"}, %[[S:[^:]*]]: tensor<4xf32> {cleave.kind = "param", cleave.name = "S", cleave.zero3_elements = 3 : i64}, %[[B:[^:]*]]: tensor<3xf32> {cleave.kind = "param", cleave.name = "B"}, %[[WC:[^:]*]]: tensor<4x3xbf16> {cleave.kind = "state", cleave.name = "bf16:W", cleave.state_of = "W", cleave.weight_copy}, %[[SC:[^:]*]]: tensor<4xbf16> {cleave.kind = "state", cleave.name = "bf16:S", cleave.state_of = "S", cleave.weight_copy})
// CHECK-NEXT: %[[XL:.*]] = cleave.cast %[[X]] {to = bf16}
// CHECK-NEXT: %[[Y:.*]] = cleave.gemm %[[XL]], %[[WC]], %[[B]] : (tensor<8x4xbf16>, tensor<4x3xbf16>, tensor<3xf32>) -> tensor<8x3xf32>
// CHECK-NEXT: %[[Z:.*]] = cleave.cast %[[Y]] {to = bf16}
// CHECK-NEXT: %[[G:.*]] = shard.all_gather %[[SC]] {{.*}} : tensor<4xbf16> -> tensor<8xbf16>
// CHECK-NEXT: %[[P:.*]] = cleave.slice %[[G]] {{.*}} -> tensor<3xbf16>
// CHECK-NEXT: %[[V:.*]] = cleave.reshape %[[P]] {{.*}} -> tensor<3x1xbf16>
// CHECK-NEXT: cleave.matmul %[[Z]], %[[V]]
// CHECK-NOT: cleave.cast
// CHECK-LABEL: func.func @narrow_weights
// CHECK-SAME: (%[[PW:[^:]*]]: tensor<4x3xf32> {cleave.kind = "param", cleave.name = "W"}, %[[CW:[^:]*]]: tensor<4x3xbf16> {cleave.kind = "state", cleave.name = "bf16:W", cleave.state_of = "W", cleave.weight_copy}, %[[PS:[^:]*]]: tensor<4xf32> {cleave.kind = "param", cleave.name = "S", cleave.zero3_elements = 3 : i64}, %[[CS:[^:]*]]: tensor<4xbf16> {cleave.kind = "state", cleave.name = "bf16:S", cleave.state_of = "S", cleave.weight_copy})
// CHECK-NEXT: %[[RW:.*]] = cleave.cast %[[PW]] {to = bf16} : (tensor<4x3xf32>) -> tensor<4x3xbf16>
// CHECK-NEXT: cleave.assign %[[RW]] to %[[CW]]
// CHECK-NEXT: %[[RS:.*]] = cleave.cast %[[PS]] {to = bf16} : (tensor<4xf32>) -> tensor<4xbf16>
// CHECK-NEXT: cleave.assign %[[RS]] to %[[CS]]
// CHECK-NEXT: return
// FP32-LABEL: func.func @step
// FP32-NOT: narrow_weights
shard.grid @mesh(shape = 2)
func.func @step(%x: tensor<8x4xf32>, %w: tensor<4x3xf32> {cleave.kind = "param", cleave.name = "W"}, %s: tensor<4xf32> {cleave.kind = "param", cleave.name = "S", cleave.zero3_elements = 3 : i64}, %b: tensor<3xf32> {cleave.kind = "param", cleave.name = "B"}) -> tensor<8x1xf32> {
  %y = cleave.gemm %x, %w, %b : (tensor<8x4xf32>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<8x3xf32>
  %flat = shard.all_gather %s on @mesh grid_axes = [0] gather_axis = 0 : tensor<4xf32> -> tensor<8xf32>
  %unpadded = cleave.slice %flat {starts = array<i64: 0>, ends = array<i64: 3>, steps = array<i64: 1>} : (tensor<8xf32>) -> tensor<3xf32>
  %v = cleave.reshape %unpadded {shape = array<i64: 3, 1>} : (tensor<3xf32>) -> tensor<3x1xf32>
  %z = cleave.matmul %y, %v : (tensor<8x3xf32>, tensor<3x1xf32>) -> tensor<8x1xf32>
  return %z : tensor<8x1xf32>
}

// -----

// ZeRO 1/2's master slices under mixed precision (cleave-build-train-step's
// sliced-masters): a gather marked cleave.gather_once is made once a step in
// @narrow_weights, of the slice's bf16 copy where a product reads it and in
// f32 where another op does; the step reads the whole copies and gathers
// nothing. Without a narrow precision the gathers stay where they are.
// CHECK-LABEL: func.func @masters
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x3xf32>, %{{[^:]*}}: tensor<4xf32> {{.*}}, %{{[^:]*}}: tensor<1xf32> {{.*}}, %[[SC:[^:]*]]: tensor<3x2xbf16> {cleave.kind = "state", cleave.name = "bf16:S", cleave.state_of = "S", cleave.weight_copy, cleave.whole_state}, %[[TC:[^:]*]]: tensor<1x2xf32> {cleave.kind = "state", cleave.name = "f32:T", cleave.state_of = "T", cleave.weight_copy, cleave.whole_state})
// CHECK-NEXT: %[[XL:.*]] = cleave.cast %[[X]] {to = bf16}
// CHECK-NEXT: %[[Y:.*]] = cleave.matmul %[[XL]], %[[SC]] : (tensor<2x3xbf16>, tensor<3x2xbf16>) -> tensor<2x2xf32>
// CHECK-NEXT: %[[Z:.*]] = cleave.add %[[Y]], %[[TC]]
// CHECK-NEXT: return %[[Z]]
// CHECK-LABEL: func.func @narrow_weights
// CHECK-SAME: (%[[PS:[^:]*]]: tensor<4xf32> {cleave.kind = "param", cleave.name = "S", cleave.zero3_elements = 6 : i64}, %[[CS:[^:]*]]: tensor<3x2xbf16> {{.*}}, %[[PT:[^:]*]]: tensor<1xf32> {cleave.kind = "param", cleave.name = "T", cleave.zero3_elements = 2 : i64}, %[[CT:[^:]*]]: tensor<1x2xf32> {{.*}})
// CHECK-NEXT: %[[RS:.*]] = cleave.cast %[[PS]] {to = bf16} : (tensor<4xf32>) -> tensor<4xbf16>
// CHECK-NEXT: %[[G:.*]] = shard.all_gather %[[RS]] on @mesh grid_axes = [0] gather_axis = 0 : tensor<4xbf16> -> tensor<8xbf16>
// CHECK-NEXT: %[[U:.*]] = cleave.slice %[[G]] {{.*}} : (tensor<8xbf16>) -> tensor<6xbf16>
// CHECK-NEXT: %[[W:.*]] = cleave.reshape %[[U]] {{.*}} : (tensor<6xbf16>) -> tensor<3x2xbf16>
// CHECK-NEXT: cleave.assign %[[W]] to %[[CS]]
// CHECK-NEXT: %[[GT:.*]] = shard.all_gather %[[PT]] on @mesh grid_axes = [0] gather_axis = 0 : tensor<1xf32> -> tensor<2xf32>
// CHECK-NEXT: %[[WT:.*]] = cleave.reshape %[[GT]] {{.*}} : (tensor<2xf32>) -> tensor<1x2xf32>
// CHECK-NEXT: cleave.assign %[[WT]] to %[[CT]]
// CHECK-NEXT: return
// CHECK-NOT: cleave.gather_once
// FP32-LABEL: func.func @masters
// FP32: shard.all_gather {{.*}} {cleave.gather_once}
// FP32-NOT: narrow_weights
shard.grid @mesh(shape = 2)
func.func @masters(%x: tensor<2x3xf32>, %s: tensor<4xf32> {cleave.kind = "param", cleave.name = "S", cleave.zero3_elements = 6 : i64}, %t: tensor<1xf32> {cleave.kind = "param", cleave.name = "T", cleave.zero3_elements = 2 : i64}) -> tensor<2x2xf32> {
  %flat = shard.all_gather %s on @mesh grid_axes = [0] gather_axis = 0 {cleave.gather_once} : tensor<4xf32> -> tensor<8xf32>
  %unpadded = cleave.slice %flat {cleave.gather_once, starts = array<i64: 0>, ends = array<i64: 6>, steps = array<i64: 1>} : (tensor<8xf32>) -> tensor<6xf32>
  %w = cleave.reshape %unpadded {cleave.gather_once, shape = array<i64: 3, 2>} : (tensor<6xf32>) -> tensor<3x2xf32>
  %tflat = shard.all_gather %t on @mesh grid_axes = [0] gather_axis = 0 {cleave.gather_once} : tensor<1xf32> -> tensor<2xf32>
  %b = cleave.reshape %tflat {cleave.gather_once, shape = array<i64: 1, 2>} : (tensor<2xf32>) -> tensor<1x2xf32>
  %y = cleave.matmul %x, %w : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
  %z = cleave.add %y, %b : (tensor<2x2xf32>, tensor<1x2xf32>) -> tensor<2x2xf32>
  return %z : tensor<2x2xf32>
}
