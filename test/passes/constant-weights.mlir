// RUN: cleave-opt %s --split-input-file --cleave-constant-weights | FileCheck %s
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-constant-weights,cleave-memory-plan,cleave-lower-to-emitc)' | FileCheck %s --check-prefix=LOWERED

// A forward program (nothing assigned): a gemm and a matmul whose second
// factor is a parameter matrix are marked; a product of two activations, a
// parameter as the first factor, a batch of weights (3-D) and an f64
// product are not.
// CHECK-LABEL: func.func @forward
// CHECK: cleave.gemm %{{.*}}, %{{.*}} {cleave.constant_weights, trans_b = true}
// CHECK: cleave.matmul %{{.*}}, %{{.*}} {cleave.constant_weights}
// CHECK: cleave.matmul %{{.*}}, %{{.*}} :
// CHECK: cleave.gemm %{{.*}}, %{{.*}} {trans_a = true} :
// CHECK: cleave.matmul %{{.*}}, %{{.*}} :
// CHECK: cleave.gemm %{{.*}}, %{{.*}} :
// CHECK-NOT: constant_weights
// The kernels are told (their last argument).
// LOWERED-LABEL: emitc.func @cleave_forward
// LOWERED: call_opaque "cleave::rt::cpu::gemm"({{.*}}) {args = [{{.*}}#emitc.opaque<"cleave::rt::Activation::None">, #emitc.opaque<"true">, #emitc.opaque<"false">]}
// LOWERED: call_opaque "cleave::rt::cpu::matmul"({{.*}}) {args = [{{.*}}#emitc.opaque<"true">]}
// LOWERED: call_opaque "cleave::rt::cpu::matmul"({{.*}}) {args = [{{.*}}#emitc.opaque<"false">]}
func.func @forward(%x: tensor<6x4xf32> {cleave.kind = "input"},
                   %w: tensor<5x4xf32> {cleave.kind = "param"},
                   %v: tensor<5x3xf32> {cleave.kind = "param"},
                   %u: tensor<2x3x3xf32> {cleave.kind = "param"},
                   %xt: tensor<4x6xf32> {cleave.kind = "input"},
                   %x64: tensor<2x2xf64> {cleave.kind = "input"},
                   %w64: tensor<2x2xf64> {cleave.kind = "param"})
    -> (tensor<2x6x3xf32>, tensor<5x5xf32>, tensor<5x6xf32>, tensor<2x2xf64>) {
  %h = cleave.gemm %x, %w {trans_b = true} : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
  %y = cleave.matmul %h, %v : (tensor<6x5xf32>, tensor<5x3xf32>) -> tensor<6x3xf32>
  %z = cleave.matmul %y, %u : (tensor<6x3xf32>, tensor<2x3x3xf32>) -> tensor<2x6x3xf32>
  %hh = cleave.gemm %h, %h {trans_a = true} : (tensor<6x5xf32>, tensor<6x5xf32>) -> tensor<5x5xf32>
  %wx = cleave.matmul %w, %xt : (tensor<5x4xf32>, tensor<4x6xf32>) -> tensor<5x6xf32>
  %d = cleave.gemm %x64, %w64 : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
  return %z, %hh, %wx, %d : tensor<2x6x3xf32>, tensor<5x5xf32>, tensor<5x6xf32>, tensor<2x2xf64>
}

// -----

// A convolution whose weights are a parameter is marked; one whose weights
// are an input (computed) is not. The kernel is told (its last argument).
// CHECK-LABEL: func.func @forward
// CHECK: cleave.conv %{{.*}}, %{{.*}}, %{{.*}} {cleave.constant_weights,
// CHECK: cleave.conv %{{.*}}, %{{.*}} {dilations
// CHECK-NOT: constant_weights
// LOWERED-LABEL: emitc.func @cleave_forward
// LOWERED: call_opaque "cleave::rt::cpu::conv"({{.*}}) {args = [{{.*}}#emitc.opaque<"cleave::rt::Activation::None">, #emitc.opaque<"true">]}
// LOWERED: call_opaque "cleave::rt::cpu::conv"({{.*}}) {args = [{{.*}}#emitc.opaque<"cleave::rt::Activation::None">, #emitc.opaque<"false">]}
func.func @forward(%x: tensor<1x2x5x5xf32> {cleave.kind = "input"},
                   %w: tensor<4x2x3x3xf32> {cleave.kind = "param"},
                   %b: tensor<4xf32> {cleave.kind = "param"},
                   %v: tensor<4x2x3x3xf32> {cleave.kind = "input"})
    -> (tensor<1x4x3x3xf32>, tensor<1x4x3x3xf32>) {
  %y = cleave.conv %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>, tensor<4xf32>) -> tensor<1x4x3x3xf32>
  %z = cleave.conv %x, %v {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x3x3xf32>
  return %y, %z : tensor<1x4x3x3xf32>, tensor<1x4x3x3xf32>
}

// -----

// A training step changes its parameters (it assigns them): nothing is
// marked, in any of its functions.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: constant_weights
// CHECK-LABEL: func.func @apply
// CHECK-NOT: constant_weights
func.func @forward(%x: tensor<6x4xf32> {cleave.kind = "input"},
                   %w: tensor<5x4xf32> {cleave.kind = "param"}) -> tensor<6x5xf32> {
  %h = cleave.gemm %x, %w {trans_b = true} : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
  return %h : tensor<6x5xf32>
}
func.func @apply(%w: tensor<5x4xf32> {cleave.kind = "param"},
                 %g: tensor<5x4xf32> {cleave.kind = "state"}) {
  %n = cleave.sub %w, %g : (tensor<5x4xf32>, tensor<5x4xf32>) -> tensor<5x4xf32>
  cleave.assign %n to %w : tensor<5x4xf32>
  return
}
