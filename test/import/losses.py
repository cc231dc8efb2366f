# Import of SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss (opset 13).
# scores/input are N x C x d1..., labels/target N x d1... (int32 or int64);
# loss is a scalar for reduction "mean" (the default, printed or elided) and
# "sum", N x d1... for "none". SoftmaxCrossEntropyLoss's log_prob has the
# scores' shape and is a result of cleave.softmax_cross_entropy_loss whether
# asked for or not.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s --all %t
# RUN: cleave import %t/sce_13_mean.onnx | FileCheck %s --check-prefix=SCEMEAN
# RUN: cleave import %t/sce_13_none_both_outputs.onnx | FileCheck %s --check-prefix=SCENONE
# RUN: cleave import %t/sce_13_sum_weights_ignore.onnx | FileCheck %s --check-prefix=SCESUM
# RUN: cleave import %t/sce_13_none_4d.onnx | FileCheck %s --check-prefix=SCE4D
# RUN: cleave import %t/sce_13_i32_labels.onnx | FileCheck %s --check-prefix=SCEI32
# RUN: cleave import %t/nll_13_mean.onnx | FileCheck %s --check-prefix=NLLMEAN
# RUN: cleave import %t/nll_13_none.onnx | FileCheck %s --check-prefix=NLLNONE
# RUN: cleave import %t/nll_13_sum_weight_ignore.onnx | FileCheck %s --check-prefix=NLLSUM

import numpy as np

from onnx_models import F32, I32, I64, Cases, single_node

cases = Cases()


# SCEMEAN-LABEL: func.func @forward(%arg0: tensor<4x5xf32> {cleave.kind = "input", cleave.name = "scores"}, %arg1: tensor<4xi64> {cleave.kind = "input", cleave.name = "labels"}) -> (tensor<f32> {cleave.name = "loss"})
# SCEMEAN: cleave.softmax_cross_entropy_loss %arg0, %arg1 {{(\{reduction = "mean"\} )?}}: (tensor<4x5xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x5xf32>)
cases.add("sce_13_mean")(lambda: single_node(
    "SoftmaxCrossEntropyLoss", [("scores", F32, [4, 5]), ("labels", I64, [4])], ["loss"],
    opset=13))

# SCENONE-LABEL: func.func @forward(%arg0: tensor<3x4xf32> {{.*}}, %arg1: tensor<3xi64> {{.*}}) -> (tensor<3xf32> {cleave.name = "loss"}, tensor<3x4xf32> {cleave.name = "log_prob"})
# SCENONE: %[[LOSS:.+]], %[[LP:.+]] = cleave.softmax_cross_entropy_loss %arg0, %arg1 {reduction = "none"} : (tensor<3x4xf32>, tensor<3xi64>) -> (tensor<3xf32>, tensor<3x4xf32>)
# SCENONE: return %[[LOSS]], %[[LP]] : tensor<3xf32>, tensor<3x4xf32>
cases.add("sce_13_none_both_outputs")(lambda: single_node(
    "SoftmaxCrossEntropyLoss", [("scores", F32, [3, 4]), ("labels", I64, [3])],
    ["loss", "log_prob"], opset=13, attrs=dict(reduction="none")))

# Class weights as a parameter; N x C x d1 scores with N x d1 labels.
# SCESUM-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {cleave.kind = "input", cleave.name = "scores"}, %arg1: tensor<2x4xi64> {cleave.kind = "input", cleave.name = "labels"}, %arg2: tensor<3xf32> {cleave.kind = "param", cleave.name = "class_weights"}) -> (tensor<f32> {cleave.name = "loss"})
# SCESUM: cleave.softmax_cross_entropy_loss %arg0, %arg1, %arg2 {ignore_index = -1 : i64, reduction = "sum"} : (tensor<2x3x4xf32>, tensor<2x4xi64>, tensor<3xf32>) -> (tensor<f32>, tensor<2x3x4xf32>)
cases.add("sce_13_sum_weights_ignore")(lambda: single_node(
    "SoftmaxCrossEntropyLoss", [("scores", F32, [2, 3, 4]), ("labels", I64, [2, 4])], ["loss"],
    opset=13, attrs=dict(reduction="sum", ignore_index=-1),
    initializers={"class_weights": np.array([1.0, 2.0, 0.5], np.float32)}))

# SCE4D-LABEL: func.func @forward(%arg0: tensor<2x3x4x5xf32> {{.*}}, %arg1: tensor<2x4x5xi64> {{.*}}) -> (tensor<2x4x5xf32> {cleave.name = "loss"})
# SCE4D: cleave.softmax_cross_entropy_loss %arg0, %arg1 {reduction = "none"} : (tensor<2x3x4x5xf32>, tensor<2x4x5xi64>) -> (tensor<2x4x5xf32>, tensor<2x3x4x5xf32>)
cases.add("sce_13_none_4d")(lambda: single_node(
    "SoftmaxCrossEntropyLoss", [("scores", F32, [2, 3, 4, 5]), ("labels", I64, [2, 4, 5])],
    ["loss"], opset=13, attrs=dict(reduction="none")))

# SCEI32-LABEL: func.func @forward(%arg0: tensor<4x5xf32> {{.*}}, %arg1: tensor<4xi32> {{.*}}) -> (tensor<f32> {cleave.name = "loss"})
# SCEI32: cleave.softmax_cross_entropy_loss %arg0, %arg1 {{(\{reduction = "mean"\} )?}}: (tensor<4x5xf32>, tensor<4xi32>) -> (tensor<f32>, tensor<4x5xf32>)
cases.add("sce_13_i32_labels")(lambda: single_node(
    "SoftmaxCrossEntropyLoss", [("scores", F32, [4, 5]), ("labels", I32, [4])], ["loss"],
    opset=13))

# NLLMEAN-LABEL: func.func @forward(%arg0: tensor<4x5xf32> {{.*}}, %arg1: tensor<4xi64> {{.*}}) -> (tensor<f32> {cleave.name = "loss"})
# NLLMEAN: cleave.negative_log_likelihood_loss %arg0, %arg1 {{(\{reduction = "mean"\} )?}}: (tensor<4x5xf32>, tensor<4xi64>) -> tensor<f32>
cases.add("nll_13_mean")(lambda: single_node(
    "NegativeLogLikelihoodLoss", [("input", F32, [4, 5]), ("target", I64, [4])], ["loss"],
    opset=13))

# NLLNONE-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}, %arg1: tensor<2x4xi64> {{.*}}) -> (tensor<2x4xf32> {cleave.name = "loss"})
# NLLNONE: cleave.negative_log_likelihood_loss %arg0, %arg1 {reduction = "none"} : (tensor<2x3x4xf32>, tensor<2x4xi64>) -> tensor<2x4xf32>
cases.add("nll_13_none")(lambda: single_node(
    "NegativeLogLikelihoodLoss", [("input", F32, [2, 3, 4]), ("target", I64, [2, 4])], ["loss"],
    opset=13, attrs=dict(reduction="none")))

# NLLSUM-LABEL: func.func @forward(%arg0: tensor<4x5xf32> {{.*}}, %arg1: tensor<4xi64> {{.*}}, %arg2: tensor<5xf32> {{.*}}) -> (tensor<f32> {cleave.name = "loss"})
# NLLSUM: cleave.negative_log_likelihood_loss %arg0, %arg1, %arg2 {ignore_index = 1 : i64, reduction = "sum"} : (tensor<4x5xf32>, tensor<4xi64>, tensor<5xf32>) -> tensor<f32>
cases.add("nll_13_sum_weight_ignore")(lambda: single_node(
    "NegativeLogLikelihoodLoss", [("input", F32, [4, 5]), ("target", I64, [4]), ("weight", F32, [5])],
    ["loss"], opset=13, attrs=dict(reduction="sum", ignore_index=1)))

if __name__ == "__main__":
    cases.main()
