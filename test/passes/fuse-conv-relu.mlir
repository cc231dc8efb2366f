// RUN: cleave-opt %s --split-input-file --cleave-fuse-conv-relu | FileCheck %s
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-fuse-conv-relu,cleave-memory-plan,cleave-lower-to-emitc)' | FileCheck %s --check-prefix=LOWERED

// A ReLU that alone reads a convolution goes into it; the conv's kernel
// gets relu = true.
// CHECK-LABEL: func.func @forward
// CHECK: %[[Y:.*]] = cleave.conv %arg0, %arg1, %arg2 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, relu, strides = array<i64: 1, 1>}
// CHECK-NOT: cleave.relu
// CHECK: return %[[Y]]
// LOWERED-LABEL: emitc.func @cleave_forward
// LOWERED: call_opaque "cleave::rt::cpu::conv"({{.*}}) {args = [{{.*}}#emitc.opaque<"1">, #emitc.opaque<"true">]}

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
// and the kernel gets relu = false.
// CHECK-LABEL: func.func @forward
// CHECK: %[[C:.*]] = cleave.conv %arg0, %arg1 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>}
// CHECK: %[[Y:.*]] = cleave.relu %[[C]]
// CHECK: return %[[C]], %[[Y]]
// LOWERED-LABEL: emitc.func @cleave_forward
// LOWERED: call_opaque "cleave::rt::cpu::conv"({{.*}}) {args = [{{.*}}#emitc.opaque<"1">, #emitc.opaque<"false">]}
// LOWERED: call_opaque "cleave::rt::cpu::relu"

func.func @forward(%x: tensor<1x2x5x5xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<4x2x3x3xf32> {cleave.kind = "param", cleave.name = "w"})
    -> (tensor<1x4x3x3xf32> {cleave.name = "c"}, tensor<1x4x3x3xf32> {cleave.name = "y"}) {
  %c = cleave.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x3x3xf32>
  %y = cleave.relu %c : (tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32>
  return %c, %y : tensor<1x4x3x3xf32>, tensor<1x4x3x3xf32>
}
