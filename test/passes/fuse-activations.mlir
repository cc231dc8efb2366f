// RUN: cleave-opt %s --split-input-file --cleave-fuse-activations | FileCheck %s
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-fuse-activations,cleave-memory-plan,cleave-lower-to-emitc)' | FileCheck %s --check-prefix=LOWERED

// A ReLU that alone reads a convolution goes into it.
// CHECK-LABEL: func.func @forward
// CHECK: %[[Y:.*]] = cleave.conv %arg0, %arg1, %arg2 {activation = "relu", dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>}
// CHECK-NOT: cleave.relu
// CHECK: return %[[Y]]
// LOWERED-LABEL: emitc.func @cleave_forward
// LOWERED: call_opaque "cleave::rt::cpu::conv"({{.*}}) {args = [{{.*}}#emitc.opaque<"1">, #emitc.opaque<"cleave::rt::Activation::Relu">, #emitc.opaque<"false">]}

func.func @forward(%x: tensor<1x2x5x5xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<4x2x3x3xf32> {cleave.kind = "param", cleave.name = "w"},
                   %b: tensor<4xf32> {cleave.kind = "param", cleave.name = "b"})
    -> (tensor<1x4x3x3xf32> {cleave.name = "y"}) {
  %c = cleave.conv %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>, tensor<4xf32>) -> tensor<1x4x3x3xf32>
  %y = cleave.relu %c : (tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32>
  return %y : tensor<1x4x3x3xf32>
}

// -----

// The convolution is read beside the ReLU (here: returned too): both stay,
// and the kernel applies nothing.
// CHECK-LABEL: func.func @forward
// CHECK: %[[C:.*]] = cleave.conv %arg0, %arg1 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>}
// CHECK: %[[Y:.*]] = cleave.relu %[[C]]
// CHECK: return %[[C]], %[[Y]]
// LOWERED-LABEL: emitc.func @cleave_forward
// LOWERED: call_opaque "cleave::rt::cpu::conv"({{.*}}) {args = [{{.*}}#emitc.opaque<"1">, #emitc.opaque<"cleave::rt::Activation::None">, #emitc.opaque<"false">]}
// LOWERED: call_opaque "cleave::rt::cpu::relu"

func.func @forward(%x: tensor<1x2x5x5xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<4x2x3x3xf32> {cleave.kind = "param", cleave.name = "w"})
    -> (tensor<1x4x3x3xf32> {cleave.name = "c"}, tensor<1x4x3x3xf32> {cleave.name = "y"}) {
  %c = cleave.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x3x3xf32>
  %y = cleave.relu %c : (tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32>
  return %c, %y : tensor<1x4x3x3xf32>, tensor<1x4x3x3xf32>
}

// -----

// An MLP as torch exports it: Linear, ReLU, Linear, GELU (erf form). Both
// activations go into their gemms; the constants GELU read stay, unread.
// CHECK-LABEL: func.func @forward
// CHECK: %[[H:.*]] = cleave.gemm %arg0, %arg1, %arg2 {activation = "relu", trans_b = true}
// CHECK: %[[Y:.*]] = cleave.gemm %[[H]], %arg3 {activation = "gelu"}
// CHECK-NOT: cleave.relu
// CHECK-NOT: cleave.erf
// CHECK-NOT: cleave.mul
// CHECK: return %[[Y]]
// LOWERED-LABEL: emitc.func @cleave_forward
// LOWERED: call_opaque "cleave::rt::cpu::gemm"({{.*}}) {args = [{{.*}}#emitc.opaque<"cleave::rt::Activation::Relu">, #emitc.opaque<"false">, #emitc.opaque<"false">]}
// LOWERED: call_opaque "cleave::rt::cpu::gemm"({{.*}}) {args = [{{.*}}#emitc.opaque<"cleave::rt::Activation::Gelu">, #emitc.opaque<"false">, #emitc.opaque<"false">]}
// LOWERED-NOT: cleave::rt::cpu::erf

func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w1: tensor<16x8xf32> {cleave.kind = "param", cleave.name = "fc1.weight"},
                   %b1: tensor<16xf32> {cleave.kind = "param", cleave.name = "fc1.bias"},
                   %w2: tensor<16x16xf32> {cleave.kind = "param", cleave.name = "fc2.weight"})
    -> (tensor<4x16xf32> {cleave.name = "y"}) {
  %h = cleave.gemm %x, %w1, %b1 {trans_b = true} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %r = cleave.relu %h : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %g = cleave.gemm %r, %w2 : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  %sqrt2 = cleave.constant {value = dense<1.41421354> : tensor<f32>} : tensor<f32>
  %one = cleave.constant {value = dense<1.0> : tensor<f32>} : tensor<f32>
  %half = cleave.constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %d = cleave.div %g, %sqrt2 : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %e = cleave.erf %d : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %a = cleave.add %e, %one : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %m = cleave.mul %g, %a : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = cleave.mul %m, %half : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// The GELU's erf is read elsewhere too (as a training step's backward
// would): nothing goes.
// CHECK-LABEL: func.func @forward
// CHECK: %[[G:.*]] = cleave.gemm %arg0, %arg1 :
// CHECK: cleave.erf
// CHECK: cleave.mul %[[G]],
// LOWERED-LABEL: emitc.func @cleave_forward
// LOWERED: call_opaque "cleave::rt::cpu::gemm"({{.*}}) {args = [{{.*}}#emitc.opaque<"cleave::rt::Activation::None">, #emitc.opaque<"false">, #emitc.opaque<"false">]}

func.func @forward(%x: tensor<4x16xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<16x16xf32> {cleave.kind = "param", cleave.name = "w"})
    -> (tensor<4x16xf32> {cleave.name = "y"}, tensor<4x16xf32> {cleave.name = "e"}) {
  %g = cleave.gemm %x, %w : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  %sqrt2 = cleave.constant {value = dense<1.41421354> : tensor<f32>} : tensor<f32>
  %one = cleave.constant {value = dense<1.0> : tensor<f32>} : tensor<f32>
  %half = cleave.constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %d = cleave.div %g, %sqrt2 : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %e = cleave.erf %d : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %a = cleave.add %e, %one : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %m = cleave.mul %g, %a : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = cleave.mul %m, %half : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  return %y, %e : tensor<4x16xf32>, tensor<4x16xf32>
}
