// RUN: cleave-opt %s -split-input-file --pass-pipeline='builtin.module(cleave-memory-plan,cleave-lower-to-emitc)' | FileCheck %s
// RUN: cleave-opt %s -split-input-file --pass-pipeline='builtin.module(cleave-memory-plan,cleave-lower-to-emitc{target=cuda})' | FileCheck %s --check-prefix=CUDA
// RUN: not cleave-opt %s -split-input-file --pass-pipeline='builtin.module(cleave-lower-to-emitc)' 2>&1 | FileCheck %s --check-prefix=UNPLANNED

// Each tensor is a view at its planned offset and each op one kernel call
// with inputs, outputs, then attributes (runtime/Kernels.def). On the CPU the
// entry points, straight-line calls, are compiled at -O0 (GCC's pragma).

// CHECK: emitc.include "runtime/cpu/Program.h"
// CHECK-NEXT: emitc.verbatim "#if defined(__GNUC__) && !defined(__clang__)\0A#pragma GCC optimize(\22O0\22)\0A#endif"
// CHECK-NOT: FusedChain.h
// CHECK-LABEL: emitc.func @cleave_forward
// CHECK-SAME: (%[[CTX:.*]]: !emitc.opaque<"cleave::rt::cpu::Context&">, %[[ARENA:.*]]: !emitc.ptr<!emitc.opaque<"char">>, %[[WEIGHTS:.*]]: !emitc.ptr<!emitc.opaque<"char">>, %[[IN:.*]]: !emitc.ptr<!emitc.opaque<"const cleave::rt::Tensor">>, %[[OUT:.*]]: !emitc.ptr<!emitc.opaque<"cleave::rt::Tensor">>)
// CHECK: %[[X:.*]] = call_opaque "cleave::rt::load"(%[[IN]]) {args = [0 : index, #emitc.opaque<"0">]}
// CHECK: %[[W:.*]] = call_opaque "cleave::rt::view"(%[[WEIGHTS]]) {args = [0 : index, #emitc.opaque<"0">, #emitc.opaque<"cleave::rt::DType::F32">, #emitc.opaque<"cleave::rt::Dims{4, 3}">]}
// CHECK: %[[B:.*]] = call_opaque "cleave::rt::view"(%[[WEIGHTS]]) {args = [0 : index, #emitc.opaque<"64">, #emitc.opaque<"cleave::rt::DType::F32">, #emitc.opaque<"cleave::rt::Dims{3}">]}
// CHECK: %[[G:.*]] = call_opaque "cleave::rt::view"(%[[ARENA]]) {args = [0 : index, #emitc.opaque<"0">, #emitc.opaque<"cleave::rt::DType::F32">, #emitc.opaque<"cleave::rt::Dims{2, 3}">]}
// CHECK: %[[BP:.*]] = call_opaque "cleave::rt::some"(%[[B]])
// CHECK: call_opaque "cleave::rt::cpu::gemm"(%[[CTX]], %[[X]], %[[W]], %[[BP]], %[[G]]) {args = [0 : index, 1 : index, 2 : index, 3 : index, 4 : index, #emitc.opaque<"1.0f">, #emitc.opaque<"0.5f">, #emitc.opaque<"false">, #emitc.opaque<"false">, #emitc.opaque<"cleave::rt::Activation::None">, #emitc.opaque<"false">, #emitc.opaque<"false">]}
// CHECK: %[[R:.*]] = call_opaque "cleave::rt::reshaped"(%[[G]]) {args = [0 : index, #emitc.opaque<"cleave::rt::Dims{6}">]}
// CHECK: %[[S:.*]] = call_opaque "cleave::rt::view"(%[[ARENA]]) {args = [0 : index, #emitc.opaque<"64">, #emitc.opaque<"cleave::rt::DType::F32">, #emitc.opaque<"cleave::rt::Dims{6}">]}
// CHECK: call_opaque "cleave::rt::cpu::softmax"(%[[CTX]], %[[R]], %[[S]]) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"0">]}
// CHECK: call_opaque "cleave::rt::store"(%[[OUT]], %[[S]]) {args = [0 : index, #emitc.opaque<"0">, 1 : index]}
// CHECK: return
// CHECK-NOT: func.func

// CUDA: emitc.include "runtime/cuda/Program.h"
// CUDA-NOT: emitc.verbatim
// CUDA: !emitc.opaque<"cleave::rt::cuda::Context&">
// CUDA: call_opaque "cleave::rt::cuda::gemm"
// CUDA: call_opaque "cleave::rt::cuda::softmax"

// UNPLANNED: error: has no memory plan: run cleave-memory-plan first

func.func @forward(%x: tensor<2x4xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<4x3xf32> {cleave.kind = "param", cleave.name = "w"},
                   %b: tensor<3xf32> {cleave.kind = "param", cleave.name = "b"})
    -> (tensor<6xf32> {cleave.name = "y"}) {
  %g = cleave.gemm %x, %w, %b {beta = 0.5 : f32} : (tensor<2x4xf32>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %r = cleave.reshape %g {shape = array<i64: 6>} : (tensor<2x3xf32>) -> tensor<6xf32>
  %s = cleave.softmax %r {axis = 0 : i64} : (tensor<6xf32>) -> tensor<6xf32>
  return %s : tensor<6xf32>
}

// -----

// A gemm that writes its accumulator on its function's first call in a step
// (cleave.first_call_writes) passes true as the kernel's last argument.
// CHECK-LABEL: emitc.func @cleave_forward
// CHECK: call_opaque "cleave::rt::cpu::gemm"({{.*}}) {args = [{{.*}}#emitc.opaque<"cleave::rt::Activation::None">, #emitc.opaque<"false">, #emitc.opaque<"true">]}
func.func @forward(%x: tensor<2x4xf32> {cleave.kind = "input", cleave.name = "x"},
                   %dy: tensor<2x3xf32> {cleave.kind = "input", cleave.name = "dy"},
                   %acc: tensor<4x3xf32> {cleave.kind = "state", cleave.name = "grad:w"}) {
  %g = cleave.gemm %x, %dy, %acc {trans_a = true, cleave.first_call_writes} : (tensor<2x4xf32>, tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  cleave.assign %g to %acc : tensor<4x3xf32>
  return
}

// -----

// An accumulator's add marked cleave.first_call_writes (the slot its lhs):
// on its function's first call in a step a copy of its rhs into the slot
// (written in place), else the add, on either backend.
// CHECK-LABEL: emitc.func @cleave_forward
// CHECK: call_opaque "cleave::rt::cpu::reduce_sum"
// CHECK-NEXT: %[[SLOT:.*]] = call_opaque "cleave::rt::view"(%arg2) {args = [0 : index, #emitc.opaque<"0">
// CHECK-NEXT: %[[FIRST:.*]] = call_opaque "cleave::rt::isFirstCall"(%arg0)
// CHECK-NEXT: if %[[FIRST]] {
// CHECK-NEXT: call_opaque "cleave::rt::markOp"
// CHECK-NEXT: call_opaque "cleave::rt::cpu::copy"(%arg0, %[[SUM:.*]], %[[SLOT]])
// CHECK-NEXT: } else {
// CHECK-NEXT: call_opaque "cleave::rt::markOp"
// CHECK-NEXT: call_opaque "cleave::rt::cpu::add"(%arg0, %{{.*}}, %[[SUM]], %[[SLOT]])
// CHECK-NEXT: {{^ *}}}{{$}}
// CHECK-NEXT: return
// CUDA: call_opaque "cleave::rt::isFirstCall"
// CUDA-NEXT: if
// CUDA-NEXT: call_opaque "cleave::rt::markOp"
// CUDA-NEXT: call_opaque "cleave::rt::cuda::copy"
// CUDA-NEXT: } else {
// CUDA-NEXT: call_opaque "cleave::rt::markOp"
// CUDA-NEXT: call_opaque "cleave::rt::cuda::add"
func.func @forward(%x: tensor<2x4xf32> {cleave.kind = "input", cleave.name = "x"},
                   %acc: tensor<4xf32> {cleave.kind = "state", cleave.name = "grad:b"}) {
  %columns = cleave.reduce_sum %x {axes = array<i64: 0>, keepdims = false} : (tensor<2x4xf32>) -> tensor<4xf32>
  %sum = cleave.add %acc, %columns {cleave.first_call_writes} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  cleave.assign %sum to %acc : tensor<4xf32>
  return
}

// -----

// A reduce-scatter that a first-call add alone reads (ZeRO 2 and 3's
// gradients): on the first call it scatters into the slot itself and
// nothing is copied; later, into its own buffer, which the add adds.
// CHECK-LABEL: emitc.func @cleave_forward
// CHECK: %[[SLOT:.*]] = call_opaque "cleave::rt::view"(%arg2) {args = [0 : index, #emitc.opaque<"0">
// CHECK: %[[FIRST:.*]] = call_opaque "cleave::rt::isFirstCall"(%arg0)
// CHECK-NEXT: if %[[FIRST]] {
// CHECK-NEXT: call_opaque "cleave::rt::markOp"
// CHECK-NEXT: call_opaque "cleave::rt::cpu::reduce_scatter"(%arg0, %[[GRAD:[^,]*]], %[[SLOT]])
// CHECK-NEXT: } else {
// CHECK-NEXT: call_opaque "cleave::rt::markOp"
// CHECK-NEXT: call_opaque "cleave::rt::cpu::reduce_scatter"(%arg0, %[[GRAD]], %[[PART:[^)]*]])
// CHECK-NEXT: {{^ *}}}{{$}}
// CHECK: %[[AGAIN:.*]] = call_opaque "cleave::rt::isFirstCall"(%arg0)
// CHECK-NEXT: if %[[AGAIN]] {
// CHECK-NEXT: } else {
// CHECK-NEXT: call_opaque "cleave::rt::markOp"
// CHECK-NEXT: call_opaque "cleave::rt::cpu::add"(%arg0, %[[SLOT]], %[[PART]], %{{.*}})
// CHECK-NEXT: {{^ *}}}{{$}}
// CHECK-NOT: copy
// CHECK: return
// CUDA: call_opaque "cleave::rt::cuda::reduce_scatter"
// CUDA-NEXT: } else {
// CUDA-NEXT: call_opaque "cleave::rt::markOp"
// CUDA-NEXT: call_opaque "cleave::rt::cuda::reduce_scatter"
// CUDA-NOT: cleave::rt::cuda::copy
// CUDA: call_opaque "cleave::rt::cuda::add"
shard.grid @mesh(shape = 2) {cleave.axes = ["dp"]}
func.func @forward(%x: tensor<8x4xf32> {cleave.kind = "input", cleave.name = "x"},
                   %dy: tensor<8x4xf32> {cleave.kind = "input", cleave.name = "dy"},
                   %acc: tensor<8xf32> {cleave.kind = "state", cleave.name = "grad:w.slice"}) {
  %g = cleave.gemm %x, %dy {trans_a = true} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %flat = cleave.reshape %g {shape = array<i64: 16>} : (tensor<4x4xf32>) -> tensor<16xf32>
  %part = shard.reduce_scatter %flat on @mesh grid_axes = [0] scatter_axis = 0 : tensor<16xf32> -> tensor<8xf32>
  %sum = cleave.add %acc, %part {cleave.first_call_writes} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  cleave.assign %sum to %acc : tensor<8xf32>
  return
}

// -----

// A fused chain is compiled on both backends (runtime/ChainCode.h): the
// template's arguments are the counts of inputs, instructions and outputs;
// how each input is read (0 every f32, 1 one f32 for all, 2 every bf16, 3
// one bf16 for all); each instruction's opcode (add 0, mul 2, exp 7) and
// its three operand slots (those it does not read 0); each output's
// register and type (0 f32, 1 bf16). The chains'
// header comes first, the one a program may read precompiled.
// CHECK: emitc.include "runtime/cpu/FusedChain.h"
// CHECK-NEXT: emitc.include "runtime/cpu/Program.h"
// CHECK-LABEL: emitc.func @cleave_forward
// CHECK: call_opaque "cleave::rt::cpu::fused_elementwise"({{.*}}) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"\22add 0 1;mul 3 2;exp 4>4,5\22">], template_args = [#emitc.opaque<"3">, #emitc.opaque<"3">, #emitc.opaque<"2">, #emitc.opaque<"2">, #emitc.opaque<"0">, #emitc.opaque<"1">, #emitc.opaque<"0">, #emitc.opaque<"0">, #emitc.opaque<"1">, #emitc.opaque<"0">, #emitc.opaque<"2">, #emitc.opaque<"3">, #emitc.opaque<"2">, #emitc.opaque<"0">, #emitc.opaque<"7">, #emitc.opaque<"4">, #emitc.opaque<"0">, #emitc.opaque<"0">, #emitc.opaque<"4">, #emitc.opaque<"1">, #emitc.opaque<"5">, #emitc.opaque<"0">]}
// CUDA: emitc.include "runtime/cuda/FusedChain.cuh"
// CUDA-NEXT: emitc.include "runtime/cuda/Program.h"
// CUDA: call_opaque "cleave::rt::cuda::fused_elementwise"({{.*}}) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"\22add 0 1;mul 3 2;exp 4>4,5\22">], template_args = [#emitc.opaque<"3">, #emitc.opaque<"3">, #emitc.opaque<"2">, #emitc.opaque<"2">, #emitc.opaque<"0">, #emitc.opaque<"1">, #emitc.opaque<"0">, #emitc.opaque<"0">, #emitc.opaque<"1">, #emitc.opaque<"0">, #emitc.opaque<"2">, #emitc.opaque<"3">, #emitc.opaque<"2">, #emitc.opaque<"0">, #emitc.opaque<"7">, #emitc.opaque<"4">, #emitc.opaque<"0">, #emitc.opaque<"0">, #emitc.opaque<"4">, #emitc.opaque<"1">, #emitc.opaque<"5">, #emitc.opaque<"0">]}
func.func @forward(%a: tensor<8xbf16> {cleave.kind = "input", cleave.name = "a"},
                   %b: tensor<8xf32> {cleave.kind = "input", cleave.name = "b"},
                   %s: tensor<f32> {cleave.kind = "input", cleave.name = "s"})
    -> (tensor<8xbf16> {cleave.name = "y"}, tensor<8xf32> {cleave.name = "z"}) {
  %f:2 = cleave.fused_elementwise %a, %b, %s {program = "add 0 1;mul 3 2;exp 4>4,5"} : (tensor<8xbf16>, tensor<8xf32>, tensor<f32>) -> (tensor<8xbf16>, tensor<8xf32>)
  return %f#0, %f#1 : tensor<8xbf16>, tensor<8xf32>
}
