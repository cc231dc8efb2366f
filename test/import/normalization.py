# Import of LayerNormalization, BatchNormalization and Dropout. Each cleave op
# has all of the ONNX op's outputs as results, asked for or not:
#   layer_normalization: y, mean, inv_std_dev (mean's dims from `axis` on are 1)
#   batch_normalization: y, running_mean, running_var (C each)
#   dropout:             output, mask (i1, same shape)
# Dropout's ratio and training_mode inputs must be constants and become
# attributes.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s --all %t
# RUN: cleave import %t/layer_norm_17_default.onnx | FileCheck %s --check-prefix=LNDEF
# RUN: cleave import %t/layer_norm_17_axis1_no_bias.onnx | FileCheck %s --check-prefix=LNAX1
# RUN: cleave import %t/layer_norm_17_neg_axis_params.onnx | FileCheck %s --check-prefix=LNNEG
# RUN: cleave import %t/layer_norm_17_axis0.onnx | FileCheck %s --check-prefix=LNAX0
# RUN: cleave import %t/batch_norm_14_inference.onnx | FileCheck %s --check-prefix=BN14
# RUN: cleave import %t/batch_norm_15_training.onnx | FileCheck %s --check-prefix=BN15T
# RUN: cleave import %t/batch_norm_15_rank2.onnx | FileCheck %s --check-prefix=BNR2
# RUN: cleave import %t/batch_norm_14_rank3.onnx | FileCheck %s --check-prefix=BNR3
# RUN: cleave import %t/dropout_13_plain.onnx | FileCheck %s --check-prefix=DOPLAIN
# RUN: cleave import %t/dropout_13_ratio_const.onnx | FileCheck %s --check-prefix=DORATIO
# RUN: cleave import %t/dropout_13_training_const.onnx | FileCheck %s --check-prefix=DOTRAIN
# RUN: cleave import %t/dropout_13_training_initializer.onnx | FileCheck %s --check-prefix=DOTRAIN

import numpy as np

from onnx_models import F32, Cases, single_node

cases = Cases()


# Default axis -1 (here 2), default epsilon 1e-5; all three outputs asked for.
# LNDEF-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}, %arg1: tensor<4xf32> {{.*}}, %arg2: tensor<4xf32> {{.*}}) -> (tensor<2x3x4xf32> {cleave.name = "y"}, tensor<2x3x1xf32> {cleave.name = "mean"}, tensor<2x3x1xf32> {cleave.name = "inv_std"})
# LNDEF: {{.*}} = cleave.layer_normalization %arg0, %arg1, %arg2 {
# LNDEF-SAME: axis = 2 : i64
# LNDEF-SAME: : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
cases.add("layer_norm_17_default")(lambda: single_node(
    "LayerNormalization", [("x", F32, [2, 3, 4]), ("scale", F32, [4]), ("bias", F32, [4])],
    ["y", "mean", "inv_std"]))

# LNAX1-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}, %arg1: tensor<3x4xf32> {{.*}}) -> (tensor<2x3x4xf32> {cleave.name = "y"})
# LNAX1: cleave.layer_normalization %arg0, %arg1 {axis = 1 : i64, epsilon = 1.000000e-03 : f32} : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x1x1xf32>, tensor<2x1x1xf32>)
cases.add("layer_norm_17_axis1_no_bias")(lambda: single_node(
    "LayerNormalization", [("x", F32, [2, 3, 4]), ("scale", F32, [3, 4])], ["y"],
    attrs=dict(axis=1, epsilon=1e-3)))

# axis -2 of a rank-3 input is 1; scale and bias are initializers (parameters).
# LNNEG-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {cleave.kind = "input", cleave.name = "x"}, %arg1: tensor<3x4xf32> {cleave.kind = "param", cleave.name = "ln.weight"}, %arg2: tensor<3x4xf32> {cleave.kind = "param", cleave.name = "ln.bias"}) -> (tensor<2x3x4xf32> {cleave.name = "y"})
# LNNEG: cleave.layer_normalization %arg0, %arg1, %arg2 {{.*}}axis = 1 : i64{{.*}} : (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x1x1xf32>, tensor<2x1x1xf32>)
cases.add("layer_norm_17_neg_axis_params")(lambda: single_node(
    "LayerNormalization", [("x", F32, [2, 3, 4])], ["y"], attrs=dict(axis=-2),
    initializers={"ln.weight": np.ones((3, 4), np.float32),
                  "ln.bias": np.zeros((3, 4), np.float32)}))

# LNAX0-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}, %arg1: tensor<2x3xf32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y"}, tensor<1x1xf32> {cleave.name = "mean"})
# LNAX0: cleave.layer_normalization %arg0, %arg1 {{.*}}axis = 0 : i64{{.*}} : (tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<1x1xf32>, tensor<1x1xf32>)
cases.add("layer_norm_17_axis0")(lambda: single_node(
    "LayerNormalization", [("x", F32, [2, 3]), ("scale", F32, [2, 3])], ["y", "mean"],
    attrs=dict(axis=0)))


def bn_params(c):
    return {"bn.weight": np.ones(c, np.float32), "bn.bias": np.zeros(c, np.float32),
            "bn.running_mean": np.zeros(c, np.float32), "bn.running_var": np.ones(c, np.float32)}


# Inference form as exported from an eval-mode model: the four vectors are
# parameters, only Y is asked for.
# BN14-LABEL: func.func @forward(%arg0: tensor<2x3x4x4xf32> {cleave.kind = "input", cleave.name = "x"}, %arg1: tensor<3xf32> {cleave.kind = "param", cleave.name = "bn.weight"}, %arg2: tensor<3xf32> {{.*}}, %arg3: tensor<3xf32> {{.*}}, %arg4: tensor<3xf32> {{.*}}) -> (tensor<2x3x4x4xf32> {cleave.name = "y"})
# BN14: cleave.batch_normalization %arg0, %arg1, %arg2, %arg3, %arg4
# BN14-NOT: training_mode = {{1|true}}
# BN14-SAME: : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
cases.add("batch_norm_14_inference")(lambda: single_node(
    "BatchNormalization", [("x", F32, [2, 3, 4, 4])], ["y"], opset=14,
    initializers=bn_params(3)))

# BN15T-LABEL: func.func @forward(%arg0: tensor<2x3x4x4xf32> {{.*}}, %arg1: tensor<3xf32> {{.*}}, %arg2: tensor<3xf32> {{.*}}, %arg3: tensor<3xf32> {{.*}}, %arg4: tensor<3xf32> {{.*}}) -> (tensor<2x3x4x4xf32> {cleave.name = "y"}, tensor<3xf32> {cleave.name = "running_mean"}, tensor<3xf32> {cleave.name = "running_var"})
# BN15T: cleave.batch_normalization %arg0, %arg1, %arg2, %arg3, %arg4 {
# BN15T-SAME: epsilon = 1.000000e-03 : f32
# BN15T-SAME: momentum = 8.000000e-01 : f32
# BN15T-SAME: training_mode = {{1 : i64|true}}
# BN15T-SAME: : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
cases.add("batch_norm_15_training")(lambda: single_node(
    "BatchNormalization",
    [("x", F32, [2, 3, 4, 4]), ("s", F32, [3]), ("b", F32, [3]), ("m", F32, [3]), ("v", F32, [3])],
    ["y", "running_mean", "running_var"], opset=15,
    attrs=dict(epsilon=1e-3, momentum=0.8, training_mode=1)))

# N x C input.
# BNR2-LABEL: func.func @forward(%arg0: tensor<4x3xf32> {{.*}}) -> (tensor<4x3xf32> {cleave.name = "y"})
# BNR2: cleave.batch_normalization %arg0, %arg1, %arg2, %arg3, %arg4 {{.*}}: (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>)
cases.add("batch_norm_15_rank2")(lambda: single_node(
    "BatchNormalization", [("x", F32, [4, 3])], ["y"], opset=15, initializers=bn_params(3)))

# BNR3-LABEL: func.func @forward(%arg0: tensor<2x5x3xf32> {{.*}}) -> (tensor<2x5x3xf32> {cleave.name = "y"})
# BNR3: cleave.batch_normalization %arg0, %arg1, %arg2, %arg3, %arg4 {{.*}}: (tensor<2x5x3xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>) -> (tensor<2x5x3xf32>, tensor<5xf32>, tensor<5xf32>)
cases.add("batch_norm_14_rank3")(lambda: single_node(
    "BatchNormalization", [("x", F32, [2, 5, 3])], ["y"], opset=14, initializers=bn_params(5)))

# DOPLAIN-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y"})
# DOPLAIN: cleave.dropout %arg0 {{.*}}: (tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xi1>)
cases.add("dropout_13_plain")(lambda: single_node("Dropout", [("x", F32, [2, 3])], ["y"], opset=13))

# DORATIO-LABEL: func.func @forward(%arg0: tensor<4x5xf32> {{.*}}) -> (tensor<4x5xf32> {cleave.name = "y"}, tensor<4x5xi1> {cleave.name = "mask"})
# DORATIO: cleave.dropout %arg0 {
# DORATIO-SAME: ratio = 3.000000e-01 : f32
# DORATIO-NOT: training_mode = true
# DORATIO-SAME: : (tensor<4x5xf32>) -> (tensor<4x5xf32>, tensor<4x5xi1>)
cases.add("dropout_13_ratio_const")(lambda: single_node(
    "Dropout", [("x", F32, [4, 5])], ["y", "mask"], opset=13,
    const_inputs={"ratio": np.array(0.3, np.float32)}, const_style="constant"))

# Training mode, from Constant nodes or from initializers: the same op.
# DOTRAIN-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y"}, tensor<2x3xi1> {cleave.name = "mask"})
# DOTRAIN: cleave.dropout %arg0 {
# DOTRAIN-SAME: ratio = 2.500000e-01 : f32
# DOTRAIN-SAME: seed = 42 : i64
# DOTRAIN-SAME: training_mode = true
# DOTRAIN-SAME: : (tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xi1>)
def dropout_training(style):
    return single_node(
        "Dropout", [("x", F32, [2, 3])], ["y", "mask"], opset=13, attrs=dict(seed=42),
        const_inputs={"ratio": np.array(0.25, np.float32), "training_mode": np.array(True)},
        const_style=style)


cases.add("dropout_13_training_const")(lambda: dropout_training("constant"))
cases.add("dropout_13_training_initializer")(lambda: dropout_training("initializer"))

if __name__ == "__main__":
    cases.main()
