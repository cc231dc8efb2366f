// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-memory-plan,cleave-lower-to-emitc)' | FileCheck %s
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-memory-plan,cleave-lower-to-emitc{target=cuda})' | FileCheck %s --check-prefix=CUDA

// The adjoints of conv and the pools call their kernels with grad (and w or
// x), the result, then the attributes in Kernels.def's order; the `shape`
// attributes are the result's dims and are not passed.

// CHECK-LABEL: emitc.func @cleave_forward
// CHECK: %[[G:.*]] = call_opaque "cleave::rt::load"(%{{.*}}) {args = [0 : index, #emitc.opaque<"0">]}
// CHECK: %[[X:.*]] = call_opaque "cleave::rt::load"(%{{.*}}) {args = [0 : index, #emitc.opaque<"1">]}
// CHECK: %[[W:.*]] = call_opaque "cleave::rt::load"(%{{.*}}) {args = [0 : index, #emitc.opaque<"2">]}
// CHECK: %[[DX:.*]] = call_opaque "cleave::rt::view"({{.*}}#emitc.opaque<"cleave::rt::Dims{1, 4, 7, 7}">]}
// CHECK: call_opaque "cleave::rt::cpu::conv_grad_input"(%{{.*}}, %[[G]], %[[W]], %[[DX]]) {args = [0 : index, 1 : index, 2 : index, 3 : index, #emitc.opaque<"cleave::rt::Dims{2, 2}">, #emitc.opaque<"cleave::rt::Dims{1, 1, 1, 1}">, #emitc.opaque<"cleave::rt::Dims{1, 1}">, #emitc.opaque<"2">]}
// CHECK: %[[DW:.*]] = call_opaque "cleave::rt::view"({{.*}}#emitc.opaque<"cleave::rt::Dims{6, 2, 3, 3}">]}
// CHECK: call_opaque "cleave::rt::cpu::conv_grad_weight"(%{{.*}}, %[[G]], %[[X]], %[[DW]]) {args = [0 : index, 1 : index, 2 : index, 3 : index, #emitc.opaque<"cleave::rt::Dims{2, 2}">, #emitc.opaque<"cleave::rt::Dims{1, 1, 1, 1}">, #emitc.opaque<"cleave::rt::Dims{1, 1}">, #emitc.opaque<"2">]}
// CHECK: %[[DM:.*]] = call_opaque "cleave::rt::view"({{.*}}#emitc.opaque<"cleave::rt::Dims{1, 4, 7, 7}">]}
// CHECK: call_opaque "cleave::rt::cpu::max_pool_grad"(%{{.*}}, %[[DX]], %[[X]], %[[DM]]) {args = [0 : index, 1 : index, 2 : index, 3 : index, #emitc.opaque<"cleave::rt::Dims{3, 3}">, #emitc.opaque<"cleave::rt::Dims{1, 1}">, #emitc.opaque<"cleave::rt::Dims{1, 1, 1, 1}">, #emitc.opaque<"cleave::rt::Dims{1, 1}">]}
// CHECK: %[[DA:.*]] = call_opaque "cleave::rt::view"({{.*}}#emitc.opaque<"cleave::rt::Dims{1, 6, 4, 4}">]}
// CHECK: call_opaque "cleave::rt::cpu::average_pool_grad"(%{{.*}}, %[[G]], %[[DA]]) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"cleave::rt::Dims{2, 2}">, #emitc.opaque<"cleave::rt::Dims{1, 1}">, #emitc.opaque<"cleave::rt::Dims{0, 0, 1, 1}">, #emitc.opaque<"cleave::rt::Dims{1, 1}">, #emitc.opaque<"true">]}

// CUDA: call_opaque "cleave::rt::cuda::conv_grad_input"
// CUDA: call_opaque "cleave::rt::cuda::conv_grad_weight"
// CUDA: call_opaque "cleave::rt::cuda::max_pool_grad"
// CUDA: call_opaque "cleave::rt::cuda::average_pool_grad"

func.func @forward(%g: tensor<1x6x4x4xf32> {cleave.kind = "input", cleave.name = "g"},
                   %x: tensor<1x4x7x7xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<6x2x3x3xf32> {cleave.kind = "input", cleave.name = "w"})
    -> (tensor<1x4x7x7xf32> {cleave.name = "dx"}, tensor<6x2x3x3xf32> {cleave.name = "dw"},
        tensor<1x4x7x7xf32> {cleave.name = "dm"}, tensor<1x6x4x4xf32> {cleave.name = "da"}) {
  %dx = cleave.conv_grad_input %g, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 2 : i64, shape = array<i64: 1, 4, 7, 7>} : (tensor<1x6x4x4xf32>, tensor<6x2x3x3xf32>) -> tensor<1x4x7x7xf32>
  %dw = cleave.conv_grad_weight %g, %x {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 2 : i64, shape = array<i64: 6, 2, 3, 3>} : (tensor<1x6x4x4xf32>, tensor<1x4x7x7xf32>) -> tensor<6x2x3x3xf32>
  %dm = cleave.max_pool_grad %dx, %x {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x4x7x7xf32>, tensor<1x4x7x7xf32>) -> tensor<1x4x7x7xf32>
  %da = cleave.average_pool_grad %g {kernel_shape = array<i64: 2, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 1, 1>, dilations = array<i64: 1, 1>, count_include_pad = true, shape = array<i64: 1, 6, 4, 4>} : (tensor<1x6x4x4xf32>) -> tensor<1x6x4x4xf32>
  return %dx, %dw, %dm, %da : tensor<1x4x7x7xf32>, tensor<6x2x3x3xf32>, tensor<1x4x7x7xf32>, tensor<1x6x4x4xf32>
}
