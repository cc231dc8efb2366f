# Import of Conv, MaxPool, AveragePool and GlobalAveragePool.
# Output dim (ONNX spec): floor or, with ceil_mode, ceil of
#   (in + pad_begin + pad_end - ((k - 1) * dilation + 1)) / stride + 1
# (with ceil_mode a window that would start in the end padding is dropped).
# auto_pad is resolved to explicit pads (all begins, then all ends):
#   SAME_*: out = ceil(in / stride), total = max(0, (out - 1) * stride + (k - 1) * d + 1 - in),
#   SAME_UPPER puts the odd pad at the end, SAME_LOWER at the beginning;
#   VALID: no pads.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s --all %t
# RUN: cleave import %t/conv_13_basic.onnx | FileCheck %s --check-prefix=CVBASIC
# RUN: cleave import %t/conv_13_pads_strides.onnx | FileCheck %s --check-prefix=CVPADS
# RUN: cleave import %t/conv_13_asymmetric_pads.onnx | FileCheck %s --check-prefix=CVASYM
# RUN: cleave import %t/conv_13_same_upper.onnx | FileCheck %s --check-prefix=CVSU
# RUN: cleave import %t/conv_17_same_lower.onnx | FileCheck %s --check-prefix=CVSL
# RUN: cleave import %t/conv_13_valid.onnx | FileCheck %s --check-prefix=CVVALID
# RUN: cleave import %t/conv_13_dilations.onnx | FileCheck %s --check-prefix=CVDIL
# RUN: cleave import %t/conv_13_same_upper_dilated.onnx | FileCheck %s --check-prefix=CVSUDIL
# RUN: cleave import %t/conv_13_group2.onnx | FileCheck %s --check-prefix=CVGROUP
# RUN: cleave import %t/conv_transpose_13.onnx | FileCheck %s --check-prefix=CVT
# RUN: cleave import %t/conv_21_depthwise.onnx | FileCheck %s --check-prefix=CVDW
# RUN: cleave import %t/conv_13_1d.onnx | FileCheck %s --check-prefix=CV1D
# RUN: cleave import %t/conv_13_3d.onnx | FileCheck %s --check-prefix=CV3D
# RUN: cleave import %t/max_pool_13_basic.onnx | FileCheck %s --check-prefix=MPBASIC
# RUN: cleave import %t/max_pool_13_ceil.onnx | FileCheck %s --check-prefix=MPCEIL
# RUN: cleave import %t/max_pool_22_ceil_drop_last.onnx | FileCheck %s --check-prefix=MPCEILDROP
# RUN: cleave import %t/max_pool_13_ceil_drop_last.onnx | FileCheck %s --check-prefix=MPCEILDROP
# RUN: cleave import %t/max_pool_13_pads.onnx | FileCheck %s --check-prefix=MPPADS
# RUN: cleave import %t/max_pool_17_same_upper.onnx | FileCheck %s --check-prefix=MPSU
# RUN: cleave import %t/max_pool_13_dilations.onnx | FileCheck %s --check-prefix=MPDIL
# RUN: cleave import %t/max_pool_21_1d.onnx | FileCheck %s --check-prefix=MP1D
# RUN: cleave import %t/avg_pool_13_basic.onnx | FileCheck %s --check-prefix=APBASIC
# RUN: cleave import %t/avg_pool_13_pads_count_include.onnx | FileCheck %s --check-prefix=APPADS
# RUN: cleave import %t/avg_pool_17_ceil.onnx | FileCheck %s --check-prefix=APCEIL
# RUN: cleave import %t/avg_pool_13_same_lower.onnx | FileCheck %s --check-prefix=APSL
# RUN: cleave import %t/avg_pool_19_1d.onnx | FileCheck %s --check-prefix=AP1D
# RUN: cleave import %t/avg_pool_19_unit_dilations.onnx | FileCheck %s --check-prefix=APDIL1
# RUN: cleave import %t/global_avg_pool_13.onnx | FileCheck %s --check-prefix=GAP
# RUN: cleave import %t/global_avg_pool_13_1d.onnx | FileCheck %s --check-prefix=GAP1D
# RUN: cleave import %t/global_avg_pool_21_3d.onnx | FileCheck %s --check-prefix=GAP3D

import numpy as np

from onnx_models import F32, Cases, single_node

cases = Cases()


def conv(x, w, opset=13, bias=False, **attrs):
    inputs = [("x", F32, x), ("w", F32, w)] + ([("b", F32, [w[0]])] if bias else [])
    return single_node("Conv", inputs, ["y"], opset=opset, attrs=attrs)


# Weight and bias as parameters, all attributes defaulted.
# CVBASIC-LABEL: func.func @forward(%arg0: tensor<1x2x5x5xf32> {cleave.kind = "input", cleave.name = "x"}, %arg1: tensor<4x2x3x3xf32> {cleave.kind = "param", cleave.name = "conv.weight"}, %arg2: tensor<4xf32> {cleave.kind = "param", cleave.name = "conv.bias"}) -> (tensor<1x4x3x3xf32> {cleave.name = "y"})
# CVBASIC: cleave.conv %arg0, %arg1, %arg2 {
# CVBASIC-SAME: dilations = array<i64: 1, 1>
# CVBASIC-SAME: pads = array<i64: 0, 0, 0, 0>
# CVBASIC-SAME: strides = array<i64: 1, 1>
# CVBASIC-SAME: : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>, tensor<4xf32>) -> tensor<1x4x3x3xf32>
cases.add("conv_13_basic")(lambda: single_node(
    "Conv", [("x", F32, [1, 2, 5, 5])], ["y"], opset=13,
    initializers={"conv.weight": np.ones((4, 2, 3, 3), np.float32),
                  "conv.bias": np.zeros(4, np.float32)}))

# (5 + 2 - 3) / 2 + 1 = 3
# CVPADS-LABEL: func.func @forward(%arg0: tensor<1x2x5x5xf32> {{.*}}, %arg1: tensor<4x2x3x3xf32> {{.*}}) -> (tensor<1x4x3x3xf32> {cleave.name = "y"})
# CVPADS: cleave.conv %arg0, %arg1 {
# CVPADS-SAME: pads = array<i64: 1, 1, 1, 1>
# CVPADS-SAME: strides = array<i64: 2, 2>
# CVPADS-SAME: : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x3x3xf32>
cases.add("conv_13_pads_strides")(lambda: conv([1, 2, 5, 5], [4, 2, 3, 3], kernel_shape=[3, 3],
                                               pads=[1, 1, 1, 1], strides=[2, 2]))

# pads [H begin 0, W begin 1, H end 2, W end 0]: H 4 + 2 - 2 + 1 = 5, W 4 + 1 - 2 + 1 = 4.
# CVASYM-LABEL: func.func @forward(%arg0: tensor<1x1x4x4xf32> {{.*}}, %arg1: tensor<1x1x2x2xf32> {{.*}}) -> (tensor<1x1x5x4xf32> {cleave.name = "y"})
# CVASYM: cleave.conv %arg0, %arg1 {
# CVASYM-SAME: pads = array<i64: 0, 1, 2, 0>
# CVASYM-SAME: : (tensor<1x1x4x4xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x5x4xf32>
cases.add("conv_13_asymmetric_pads")(lambda: conv([1, 1, 4, 4], [1, 1, 2, 2], pads=[0, 1, 2, 0]))

# 6x7, k 3, stride 2: out 3x4; total pads H 1 (0 + 1), W 2 (1 + 1).
# CVSU-LABEL: func.func @forward(%arg0: tensor<1x2x6x7xf32> {{.*}}, %arg1: tensor<4x2x3x3xf32> {{.*}}) -> (tensor<1x4x3x4xf32> {cleave.name = "y"})
# CVSU: cleave.conv %arg0, %arg1 {
# CVSU-NOT: auto_pad
# CVSU-SAME: pads = array<i64: 0, 1, 1, 1>
# CVSU-SAME: strides = array<i64: 2, 2>
# CVSU-SAME: : (tensor<1x2x6x7xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x3x4xf32>
cases.add("conv_13_same_upper")(lambda: conv([1, 2, 6, 7], [4, 2, 3, 3], auto_pad="SAME_UPPER",
                                             strides=[2, 2]))

# CVSL-LABEL: func.func @forward(%arg0: tensor<1x2x6x7xf32> {{.*}}, %arg1: tensor<4x2x3x3xf32> {{.*}}) -> (tensor<1x4x3x4xf32> {cleave.name = "y"})
# CVSL: cleave.conv %arg0, %arg1 {
# CVSL-SAME: pads = array<i64: 1, 1, 0, 1>
# CVSL-SAME: strides = array<i64: 2, 2>
# CVSL-SAME: : (tensor<1x2x6x7xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x3x4xf32>
cases.add("conv_17_same_lower")(lambda: conv([1, 2, 6, 7], [4, 2, 3, 3], opset=17,
                                             auto_pad="SAME_LOWER", strides=[2, 2]))

# (6 - 3) / 2 + 1 = 2, (7 - 3) / 2 + 1 = 3
# CVVALID-LABEL: func.func @forward(%arg0: tensor<1x2x6x7xf32> {{.*}}, %arg1: tensor<4x2x3x3xf32> {{.*}}) -> (tensor<1x4x2x3xf32> {cleave.name = "y"})
# CVVALID: cleave.conv %arg0, %arg1 {
# CVVALID-SAME: pads = array<i64: 0, 0, 0, 0>
# CVVALID-SAME: : (tensor<1x2x6x7xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x2x3xf32>
cases.add("conv_13_valid")(lambda: conv([1, 2, 6, 7], [4, 2, 3, 3], auto_pad="VALID",
                                        strides=[2, 2]))

# Dilation 2 makes the 3x3 kernel span 5: 7 - 5 + 1 = 3.
# CVDIL-LABEL: func.func @forward(%arg0: tensor<1x2x7x7xf32> {{.*}}, %arg1: tensor<4x2x3x3xf32> {{.*}}) -> (tensor<1x4x3x3xf32> {cleave.name = "y"})
# CVDIL: cleave.conv %arg0, %arg1 {
# CVDIL-SAME: dilations = array<i64: 2, 2>
# CVDIL-SAME: : (tensor<1x2x7x7xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x3x3xf32>
cases.add("conv_13_dilations")(lambda: conv([1, 2, 7, 7], [4, 2, 3, 3], dilations=[2, 2]))

# SAME_UPPER, stride 1, span 5: total pad 4 on each spatial dim.
# CVSUDIL-LABEL: func.func @forward(%arg0: tensor<1x1x5x5xf32> {{.*}}, %arg1: tensor<1x1x3x3xf32> {{.*}}) -> (tensor<1x1x5x5xf32> {cleave.name = "y"})
# CVSUDIL: cleave.conv %arg0, %arg1 {
# CVSUDIL-SAME: dilations = array<i64: 2, 2>
# CVSUDIL-SAME: pads = array<i64: 2, 2, 2, 2>
# CVSUDIL-SAME: : (tensor<1x1x5x5xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x5x5xf32>
cases.add("conv_13_same_upper_dilated", ort=False,
          why="onnxruntime 1.22: 'Dilation not supported for AutoPadType::SAME_UPPER'; "
              "the shape was checked with onnx.reference")(lambda: conv([1, 1, 5, 5], [1, 1, 3, 3],
                                                     auto_pad="SAME_UPPER", dilations=[2, 2]))

# CVGROUP-LABEL: func.func @forward(%arg0: tensor<1x4x5x5xf32> {{.*}}, %arg1: tensor<6x2x3x3xf32> {{.*}}, %arg2: tensor<6xf32> {{.*}}) -> (tensor<1x6x3x3xf32> {cleave.name = "y"})
# CVGROUP: cleave.conv %arg0, %arg1, %arg2 {
# CVGROUP-SAME: group = 2 : i64
# CVGROUP-SAME: : (tensor<1x4x5x5xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<1x6x3x3xf32>
# ConvTranspose is conv_grad_input of the input through the weights:
# 2 (3 - 1) + 1 + 3 - 1 - 0 = 7 rows, 1 (3 - 1) + 2 - 0 - 1 = 3 columns,
# then the bias.
# CVT-LABEL: func.func @forward(%arg0: tensor<1x4x3x3xf32> {{.*}}, %arg1: tensor<4x1x3x2xf32> {{.*}}, %arg2: tensor<2xf32> {{.*}}) -> (tensor<1x2x7x3xf32> {cleave.name = "y"})
# CVT: cleave.conv_grad_input %arg0, %arg1 {dilations = array<i64: 1, 1>, group = 2 : i64, pads = array<i64: 1, 0, 0, 1>, shape = array<i64: 1, 2, 7, 3>, strides = array<i64: 2, 1>}
# CVT: cleave.add
cases.add("conv_transpose_13")(lambda: single_node(
    "ConvTranspose", [("x", F32, [1, 4, 3, 3]), ("w", F32, [4, 1, 3, 2]), ("b", F32, [2])], ["y"],
    opset=13, attrs={"strides": [2, 1], "pads": [1, 0, 0, 1], "output_padding": [1, 0],
                     "group": 2}))
cases.add("conv_13_group2")(lambda: conv([1, 4, 5, 5], [6, 2, 3, 3], bias=True, group=2))

# CVDW-LABEL: func.func @forward(%arg0: tensor<1x3x4x4xf32> {{.*}}, %arg1: tensor<3x1x2x2xf32> {{.*}}) -> (tensor<1x3x3x3xf32> {cleave.name = "y"})
# CVDW: cleave.conv %arg0, %arg1 {
# CVDW-SAME: group = 3 : i64
# CVDW-SAME: : (tensor<1x3x4x4xf32>, tensor<3x1x2x2xf32>) -> tensor<1x3x3x3xf32>
cases.add("conv_21_depthwise")(lambda: conv([1, 3, 4, 4], [3, 1, 2, 2], opset=21, group=3))

# (10 + 1 + 2 - 3) / 3 + 1 = 4
# CV1D-LABEL: func.func @forward(%arg0: tensor<2x3x10xf32> {{.*}}, %arg1: tensor<5x3x3xf32> {{.*}}) -> (tensor<2x5x4xf32> {cleave.name = "y"})
# CV1D: cleave.conv %arg0, %arg1 {
# CV1D-SAME: dilations = array<i64: 1>
# CV1D-SAME: pads = array<i64: 1, 2>
# CV1D-SAME: strides = array<i64: 3>
# CV1D-SAME: : (tensor<2x3x10xf32>, tensor<5x3x3xf32>) -> tensor<2x5x4xf32>
cases.add("conv_13_1d")(lambda: conv([2, 3, 10], [5, 3, 3], strides=[3], pads=[1, 2]))

# CV3D-LABEL: func.func @forward(%arg0: tensor<1x1x4x4x4xf32> {{.*}}, %arg1: tensor<2x1x2x2x2xf32> {{.*}}) -> (tensor<1x2x3x3x3xf32> {cleave.name = "y"})
# CV3D: cleave.conv %arg0, %arg1 {
# CV3D-SAME: pads = array<i64: 0, 0, 0, 0, 0, 0>
# CV3D-SAME: : (tensor<1x1x4x4x4xf32>, tensor<2x1x2x2x2xf32>) -> tensor<1x2x3x3x3xf32>
cases.add("conv_13_3d")(lambda: conv([1, 1, 4, 4, 4], [2, 1, 2, 2, 2]))


def pool(op, x, opset=13, **attrs):
    return single_node(op, [("x", F32, x)], ["y"], opset=opset, attrs=attrs)


# MPBASIC-LABEL: func.func @forward(%arg0: tensor<1x2x6x6xf32> {{.*}}) -> (tensor<1x2x3x3xf32> {cleave.name = "y"})
# MPBASIC: cleave.max_pool %arg0 {
# MPBASIC-SAME: kernel_shape = array<i64: 2, 2>
# MPBASIC-SAME: pads = array<i64: 0, 0, 0, 0>
# MPBASIC-SAME: strides = array<i64: 2, 2>
# MPBASIC-SAME: : (tensor<1x2x6x6xf32>) -> tensor<1x2x3x3xf32>
cases.add("max_pool_13_basic")(lambda: pool("MaxPool", [1, 2, 6, 6], kernel_shape=[2, 2],
                                            strides=[2, 2]))

# ceil((5 - 2) / 2) + 1 = 3 (floor would give 2)
# MPCEIL-LABEL: func.func @forward(%arg0: tensor<1x1x5x5xf32> {{.*}}) -> (tensor<1x1x3x3xf32> {cleave.name = "y"})
# MPCEIL: cleave.max_pool %arg0 {
# MPCEIL-SAME: ceil_mode = {{1 : i64|true}}
# MPCEIL-SAME: : (tensor<1x1x5x5xf32>) -> tensor<1x1x3x3xf32>
cases.add("max_pool_13_ceil")(lambda: pool("MaxPool", [1, 1, 5, 5], kernel_shape=[2, 2],
                                           strides=[2, 2], ceil_mode=1))

# ceil((4 + 1 - 2) / 2) + 1 = 3, but the third window would start at 4, in
# the end padding, so it is dropped: 2. MaxPool-22's text says so; MaxPool-12's
# formula (and ONNX's shape inference for it) gives 3, but onnxruntime and
# PyTorch give 2 at every opset, so the opset-13 model declares its output's
# rank only.
# MPCEILDROP-LABEL: func.func @forward(%arg0: tensor<1x1x4x4xf32> {{.*}}) -> (tensor<1x1x2x2xf32> {cleave.name = "y"})
# MPCEILDROP: cleave.max_pool %arg0 {{.*}}: (tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf32>
def max_pool_ceil_drop(opset, output_shapes):
    return single_node("MaxPool", [("x", F32, [1, 1, 4, 4])], ["y"], opset=opset,
                       output_shapes=output_shapes,
                       attrs=dict(kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1],
                                  ceil_mode=1))


cases.add("max_pool_22_ceil_drop_last")(lambda: max_pool_ceil_drop(22, True))
cases.add("max_pool_13_ceil_drop_last")(lambda: max_pool_ceil_drop(13, False))

# MPPADS-LABEL: func.func @forward(%arg0: tensor<1x2x6x6xf32> {{.*}}) -> (tensor<1x2x6x6xf32> {cleave.name = "y"})
# MPPADS: cleave.max_pool %arg0 {
# MPPADS-SAME: kernel_shape = array<i64: 3, 3>
# MPPADS-SAME: pads = array<i64: 1, 1, 1, 1>
# MPPADS-SAME: strides = array<i64: 1, 1>
# MPPADS-SAME: : (tensor<1x2x6x6xf32>) -> tensor<1x2x6x6xf32>
cases.add("max_pool_13_pads")(lambda: pool("MaxPool", [1, 2, 6, 6], kernel_shape=[3, 3],
                                           pads=[1, 1, 1, 1]))

# 5x6, k 3, stride 2: out 3x3; total pads H 2 (1 + 1), W 1 (0 + 1).
# MPSU-LABEL: func.func @forward(%arg0: tensor<1x2x5x6xf32> {{.*}}) -> (tensor<1x2x3x3xf32> {cleave.name = "y"})
# MPSU: cleave.max_pool %arg0 {
# MPSU-SAME: pads = array<i64: 1, 0, 1, 1>
# MPSU-SAME: : (tensor<1x2x5x6xf32>) -> tensor<1x2x3x3xf32>
cases.add("max_pool_17_same_upper")(lambda: pool("MaxPool", [1, 2, 5, 6], opset=17,
                                                 kernel_shape=[3, 3], strides=[2, 2],
                                                 auto_pad="SAME_UPPER"))

# MPDIL-LABEL: func.func @forward(%arg0: tensor<1x1x5x5xf32> {{.*}}) -> (tensor<1x1x3x3xf32> {cleave.name = "y"})
# MPDIL: cleave.max_pool %arg0 {
# MPDIL-SAME: dilations = array<i64: 2, 2>
# MPDIL-SAME: : (tensor<1x1x5x5xf32>) -> tensor<1x1x3x3xf32>
cases.add("max_pool_13_dilations")(lambda: pool("MaxPool", [1, 1, 5, 5], kernel_shape=[2, 2],
                                                dilations=[2, 2]))

# MP1D-LABEL: func.func @forward(%arg0: tensor<1x3x8xf32> {{.*}}) -> (tensor<1x3x3xf32> {cleave.name = "y"})
# MP1D: cleave.max_pool %arg0 {
# MP1D-SAME: kernel_shape = array<i64: 3>
# MP1D-SAME: strides = array<i64: 2>
# MP1D-SAME: : (tensor<1x3x8xf32>) -> tensor<1x3x3xf32>
cases.add("max_pool_21_1d")(lambda: pool("MaxPool", [1, 3, 8], opset=21, kernel_shape=[3],
                                         strides=[2]))

# APBASIC-LABEL: func.func @forward(%arg0: tensor<1x2x5x5xf32> {{.*}}) -> (tensor<1x2x3x3xf32> {cleave.name = "y"})
# APBASIC: cleave.average_pool %arg0 {
# APBASIC-SAME: kernel_shape = array<i64: 3, 3>
# APBASIC-SAME: pads = array<i64: 0, 0, 0, 0>
# APBASIC-SAME: strides = array<i64: 1, 1>
# APBASIC-SAME: : (tensor<1x2x5x5xf32>) -> tensor<1x2x3x3xf32>
cases.add("avg_pool_13_basic")(lambda: pool("AveragePool", [1, 2, 5, 5], kernel_shape=[3, 3]))

# APPADS-LABEL: func.func @forward(%arg0: tensor<1x2x6x6xf32> {{.*}}) -> (tensor<1x2x3x3xf32> {cleave.name = "y"})
# APPADS: cleave.average_pool %arg0 {
# APPADS-SAME: count_include_pad = {{1 : i64|true}}
# APPADS-SAME: pads = array<i64: 1, 1, 1, 1>
# APPADS-SAME: strides = array<i64: 2, 2>
# APPADS-SAME: : (tensor<1x2x6x6xf32>) -> tensor<1x2x3x3xf32>
cases.add("avg_pool_13_pads_count_include")(lambda: pool(
    "AveragePool", [1, 2, 6, 6], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
    count_include_pad=1))

# APCEIL-LABEL: func.func @forward(%arg0: tensor<1x1x5x5xf32> {{.*}}) -> (tensor<1x1x3x3xf32> {cleave.name = "y"})
# APCEIL: cleave.average_pool %arg0 {
# APCEIL-SAME: ceil_mode = {{1 : i64|true}}
# APCEIL-SAME: : (tensor<1x1x5x5xf32>) -> tensor<1x1x3x3xf32>
cases.add("avg_pool_17_ceil")(lambda: pool("AveragePool", [1, 1, 5, 5], opset=17,
                                           kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1))

# k 2, stride 1: total pad 1, at the beginning for SAME_LOWER.
# APSL-LABEL: func.func @forward(%arg0: tensor<1x1x4x4xf32> {{.*}}) -> (tensor<1x1x4x4xf32> {cleave.name = "y"})
# APSL: cleave.average_pool %arg0 {
# APSL-SAME: pads = array<i64: 1, 1, 0, 0>
# APSL-SAME: : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
cases.add("avg_pool_13_same_lower")(lambda: pool("AveragePool", [1, 1, 4, 4], kernel_shape=[2, 2],
                                                 auto_pad="SAME_LOWER"))

# AP1D-LABEL: func.func @forward(%arg0: tensor<1x1x6xf32> {{.*}}) -> (tensor<1x1x3xf32> {cleave.name = "y"})
# AP1D: cleave.average_pool %arg0 {
# AP1D-SAME: kernel_shape = array<i64: 2>
# AP1D-SAME: strides = array<i64: 2>
# AP1D-SAME: : (tensor<1x1x6xf32>) -> tensor<1x1x3xf32>
cases.add("avg_pool_19_1d")(lambda: pool("AveragePool", [1, 1, 6], opset=19, kernel_shape=[2],
                                         strides=[2]))

# AveragePool-19 added `dilations`; all ones is the plain pool.
# APDIL1-LABEL: func.func @forward(%arg0: tensor<1x2x5x5xf32> {{.*}}) -> (tensor<1x2x4x4xf32> {cleave.name = "y"})
# APDIL1: cleave.average_pool %arg0 {{.*}}: (tensor<1x2x5x5xf32>) -> tensor<1x2x4x4xf32>
cases.add("avg_pool_19_unit_dilations")(lambda: pool("AveragePool", [1, 2, 5, 5], opset=19,
                                                     kernel_shape=[2, 2], dilations=[1, 1]))

# GAP-LABEL: func.func @forward(%arg0: tensor<2x3x4x5xf32> {{.*}}) -> (tensor<2x3x1x1xf32> {cleave.name = "y"})
# GAP: cleave.global_average_pool %arg0 : (tensor<2x3x4x5xf32>) -> tensor<2x3x1x1xf32>
cases.add("global_avg_pool_13")(lambda: pool("GlobalAveragePool", [2, 3, 4, 5]))

# GAP1D-LABEL: func.func @forward(%arg0: tensor<2x3x7xf32> {{.*}}) -> (tensor<2x3x1xf32> {cleave.name = "y"})
# GAP1D: cleave.global_average_pool %arg0 : (tensor<2x3x7xf32>) -> tensor<2x3x1xf32>
cases.add("global_avg_pool_13_1d")(lambda: pool("GlobalAveragePool", [2, 3, 7]))

# GAP3D-LABEL: func.func @forward(%arg0: tensor<1x2x3x4x5xf32> {{.*}}) -> (tensor<1x2x1x1x1xf32> {cleave.name = "y"})
# GAP3D: cleave.global_average_pool %arg0 : (tensor<1x2x3x4x5xf32>) -> tensor<1x2x1x1x1xf32>
cases.add("global_avg_pool_21_3d")(lambda: pool("GlobalAveragePool", [1, 2, 3, 4, 5], opset=21))

if __name__ == "__main__":
    cases.main()
