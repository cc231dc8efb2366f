// RUN: cleave-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(cleave-index-ranges))' | FileCheck %s

// Token ids reach a lookup through a reshape: [-rows, rows) of its table.
// Targets reach the loss: [0, classes) or its ignore_index. A parameter and
// an input no op indexes with get nothing.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg0: tensor<2x3xi64> {cleave.index_range = {high = 7 : i64, low = -7 : i64, reader = "the indices of gather (a table of 7 rows)"}, cleave.kind = "input", cleave.name = "ids"}
// CHECK-SAME: %arg1: tensor<6xi64> {cleave.index_range = {high = 4 : i64, ignored = -100 : i64, low = 0 : i64, reader = "the targets of softmax_cross_entropy_loss (4 classes)"}, cleave.kind = "input", cleave.name = "labels"}
// CHECK-SAME: %arg2: tensor<6xf32> {cleave.kind = "input", cleave.name = "weights"}
// CHECK-SAME: %arg3: tensor<7x4xf32> {cleave.kind = "param", cleave.name = "table"}
func.func @forward(%ids: tensor<2x3xi64> {cleave.kind = "input", cleave.name = "ids"},
                   %labels: tensor<6xi64> {cleave.kind = "input", cleave.name = "labels"},
                   %w: tensor<6xf32> {cleave.kind = "input", cleave.name = "weights"},
                   %table: tensor<7x4xf32> {cleave.kind = "param", cleave.name = "table"})
    -> (tensor<f32> {cleave.name = "loss"}) {
  %flat = cleave.reshape %ids {shape = array<i64: 6>} : (tensor<2x3xi64>) -> tensor<6xi64>
  %rows = cleave.gather %table, %flat {axis = 0 : i64} : (tensor<7x4xf32>, tensor<6xi64>) -> tensor<6x4xf32> loc("lookup")
  %loss, %logp = cleave.softmax_cross_entropy_loss %rows, %labels {ignore_index = -100 : i64, reduction = "mean"} : (tensor<6x4xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6x4xf32>) loc("loss")
  return %loss : tensor<f32>
}

// -----

// One input indexing two tables and a loss: the values all of them take,
// and the ignored value dropped where a table does not take it.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg0: tensor<6xi64> {cleave.index_range = {high = 4 : i64, low = 0 : i64, reader = "the indices of gather (a table of 9 rows) and the indices of gather (a table of 5 rows) and the targets of softmax_cross_entropy_loss (4 classes)"}
func.func @forward(%ids: tensor<6xi64> {cleave.kind = "input", cleave.name = "ids"},
                   %big: tensor<9x4xf32> {cleave.kind = "param", cleave.name = "big"},
                   %small: tensor<5x4xf32> {cleave.kind = "param", cleave.name = "small"})
    -> (tensor<f32> {cleave.name = "loss"}) {
  %a = cleave.gather %big, %ids {axis = 0 : i64} : (tensor<9x4xf32>, tensor<6xi64>) -> tensor<6x4xf32> loc("big")
  %b = cleave.gather %small, %ids {axis = 0 : i64} : (tensor<5x4xf32>, tensor<6xi64>) -> tensor<6x4xf32> loc("small")
  %s = cleave.add %a, %b : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
  %loss, %logp = cleave.softmax_cross_entropy_loss %s, %ids {ignore_index = -100 : i64, reduction = "mean"} : (tensor<6x4xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6x4xf32>)
  return %loss : tensor<f32>
}
