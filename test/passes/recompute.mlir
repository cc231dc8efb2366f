// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-split-loss,cleave-autodiff{loss=loss.sum}),cleave-build-train-step{optimizer=sgd},cleave-recompute{mode=selective})' | FileCheck %s --check-prefix=SELECTIVE
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-split-loss,cleave-autodiff{loss=loss.sum}),cleave-build-train-step{optimizer=sgd},cleave-recompute{mode=full})' | FileCheck %s --check-prefix=FULL
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-split-loss,cleave-autodiff{loss=loss.sum}),cleave-build-train-step{optimizer=sgd},cleave-recompute{mode=none})' | FileCheck %s --check-prefix=NONE

// The backward of this step reads three forward values: the relu's result
// (its adjoint gates on it), the tanh (fc2's weight gradient and its own
// adjoint) and the exp (its adjoint).
//
// Selective makes the tanh again from the relu's result, which the backward
// keeps anyway, just before the backward first reads it; the products and
// the exp, whose operand (fc2's product) the backward does not keep, stay.
// SELECTIVE-LABEL: func.func @forward
// SELECTIVE: %[[H:.*]] = cleave.matmul %arg0, %arg1
// SELECTIVE-NEXT: %[[R:.*]] = cleave.relu %[[H]]
// SELECTIVE-NEXT: %[[T:.*]] = cleave.tanh %[[R]]
// SELECTIVE-NEXT: cleave.matmul %[[T]], %arg2
// SELECTIVE: %[[T2:.*]] = cleave.transpose %arg2
// SELECTIVE-NEXT: %[[DY:.*]] = cleave.matmul %{{.*}}, %[[T2]]
// SELECTIVE-NEXT: %[[T_AGAIN:.*]] = cleave.tanh %[[R]]
// SELECTIVE-NEXT: cleave.transpose %[[T_AGAIN]]
// SELECTIVE: cleave.mul %[[T_AGAIN]], %[[T_AGAIN]]
// SELECTIVE: cleave.greater %[[R]],
// SELECTIVE-NOT: cleave.tanh

// Full keeps each block's inputs: fc1's tanh (read by fc2) and fc2's exp
// (read by the top-level sum); fc1's product and relu, read only inside fc1
// by the forward, are made again from x and the weight.
// FULL-LABEL: func.func @forward
// FULL: %[[T:.*]] = cleave.tanh
// FULL: %[[E:.*]] = cleave.exp
// FULL: cleave.mul %{{.*}}, %[[E]]
// FULL: cleave.transpose %[[T]]
// FULL: %[[H_AGAIN:.*]] = cleave.matmul %arg0, %arg1
// FULL-NEXT: %[[R_AGAIN:.*]] = cleave.relu %[[H_AGAIN]]
// FULL-NEXT: cleave.greater %[[R_AGAIN]],
// FULL-NOT: cleave.tanh

// NONE-LABEL: func.func @forward
// NONE-COUNT-1: cleave.relu
// NONE-COUNT-1: cleave.tanh
// NONE-NOT: cleave.relu
// NONE-NOT: cleave.tanh

func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "fc1.weight"},
                   %w2: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "fc2.weight"})
    -> (tensor<f32> {cleave.name = "loss"}) {
  %h = cleave.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("/fc1/MatMul")
  %r = cleave.relu %h : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("/fc1/Relu")
  %t = cleave.tanh %r : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("/fc1/Tanh")
  %y = cleave.matmul %t, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("/fc2/MatMul")
  %e = cleave.exp %y : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("/fc2/Exp")
  %l = cleave.reduce_sum %e {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32> loc("/ReduceSum")
  return %l : tensor<f32>
}
