# Import of ReduceSum (axes input, opset 13), ReduceMean and ReduceMax (axes
# attribute at opsets 13 and 17, axes input from opset 18; ReduceMax-20 takes
# bool). Whatever the form, the cleave op has `axes` as a non-empty,
# non-negative attribute (all dims when ONNX gives none) and `keepdims`.
# The attribute and the input forms of one reduction must give the same op:
# those cases share a check prefix.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s --all %t
# RUN: cleave import %t/reduce_sum_13_axes_initializer.onnx | FileCheck %s --check-prefix=RSUMAX
# RUN: cleave import %t/reduce_sum_13_axes_constant.onnx | FileCheck %s --check-prefix=RSUMAX
# RUN: cleave import %t/reduce_sum_13_neg_axes_nokeep.onnx | FileCheck %s --check-prefix=RSUMNEG
# RUN: cleave import %t/reduce_sum_13_all_nokeep.onnx | FileCheck %s --check-prefix=RSUMALL
# RUN: cleave import %t/reduce_sum_18_all_keep.onnx | FileCheck %s --check-prefix=RSUMALLKEEP
# RUN: cleave import %t/reduce_sum_13_noop_empty_axes.onnx | FileCheck %s --check-prefix=RSUMNOOP
# RUN: cleave import %t/reduce_sum_13_noop_no_axes.onnx | FileCheck %s --check-prefix=RSUMNOOP
# RUN: cleave import %t/reduce_sum_13_i64.onnx | FileCheck %s --check-prefix=RSUMI64
# RUN: cleave import %t/reduce_mean_13_axes_attr.onnx | FileCheck %s --check-prefix=RMEANAX
# RUN: cleave import %t/reduce_mean_18_axes_input.onnx | FileCheck %s --check-prefix=RMEANAX
# RUN: cleave import %t/reduce_mean_17_attr_nokeep.onnx | FileCheck %s --check-prefix=RMEANNOKEEP
# RUN: cleave import %t/reduce_mean_18_input_nokeep.onnx | FileCheck %s --check-prefix=RMEANNOKEEP
# RUN: cleave import %t/reduce_mean_13_all_attr.onnx | FileCheck %s --check-prefix=RMEANALL
# RUN: cleave import %t/reduce_mean_18_all_input.onnx | FileCheck %s --check-prefix=RMEANALL
# RUN: cleave import %t/reduce_max_13_axes_attr.onnx | FileCheck %s --check-prefix=RMAXAX
# RUN: cleave import %t/reduce_max_18_axes_input.onnx | FileCheck %s --check-prefix=RMAXAX
# RUN: cleave import %t/reduce_max_20_axes_input.onnx | FileCheck %s --check-prefix=RMAXAX
# RUN: cleave import %t/reduce_max_20_bool.onnx | FileCheck %s --check-prefix=RMAXBOOL
# RUN: cleave import %t/reduce_max_18_i64.onnx | FileCheck %s --check-prefix=RMAXI64
# RUN: cleave import %t/reduce_prod_18_axes_input.onnx | FileCheck %s --check-prefix=RPROD
# RUN: cleave import %t/top_k_11.onnx | FileCheck %s --check-prefix=TOPK

import numpy as np

from onnx_models import BOOL, F32, I64, Cases, i64, single_node

cases = Cases()


def reduce_input(op, axes, opset, shape=(2, 3, 4), elem=F32, style="initializer", **attrs):
    """The opset-18 form (ReduceSum: 13): axes as an input."""
    return single_node(op, [("x", elem, list(shape))], ["y"], opset=opset, attrs=attrs,
                       const_inputs=None if axes is None else {"axes": i64(axes)},
                       const_style=style)


def reduce_attr(op, axes, opset, shape=(2, 3, 4), elem=F32, **attrs):
    """The opset-13 form: axes as an attribute."""
    if axes is not None:
        attrs["axes"] = axes
    return single_node(op, [("x", elem, list(shape))], ["y"], opset=opset, attrs=attrs)


# RSUMAX-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<2x1x4xf32> {cleave.name = "y"})
# RSUMAX: cleave.reduce_sum %arg0 {axes = array<i64: 1>{{.*}}} : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
cases.add("reduce_sum_13_axes_initializer")(lambda: reduce_input("ReduceSum", [1], 13))
cases.add("reduce_sum_13_axes_constant")(lambda: reduce_input("ReduceSum", [1], 13,
                                                              style="constant"))

# RSUMNEG-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<3xf32> {cleave.name = "y"})
# RSUMNEG: cleave.reduce_sum %arg0 {axes = array<i64: {{0, 2|2, 0}}>, keepdims = {{0 : i64|false}}} : (tensor<2x3x4xf32>) -> tensor<3xf32>
cases.add("reduce_sum_13_neg_axes_nokeep")(lambda: reduce_input("ReduceSum", [-1, 0], 13,
                                                                keepdims=0))

# No axes: reduce all.
# RSUMALL-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<f32> {cleave.name = "y"})
# RSUMALL: cleave.reduce_sum %arg0 {axes = array<i64: 0, 1, 2>, keepdims = {{0 : i64|false}}} : (tensor<2x3x4xf32>) -> tensor<f32>
cases.add("reduce_sum_13_all_nokeep")(lambda: reduce_input("ReduceSum", None, 13, keepdims=0))

# RSUMALLKEEP-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<1x1x1xf32> {cleave.name = "y"})
# RSUMALLKEEP: cleave.reduce_sum %arg0 {axes = array<i64: 0, 1, 2>{{.*}}} : (tensor<2x3x4xf32>) -> tensor<1x1x1xf32>
cases.add("reduce_sum_18_all_keep")(lambda: reduce_input("ReduceSum", None, 18))

# noop_with_empty_axes with empty or absent axes: the output is the input; there is no
# reduce_sum with empty axes to make.
# RSUMNOOP-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<2x3x4xf32> {cleave.name = "y"})
# RSUMNOOP-NOT: cleave.reduce_sum
# RSUMNOOP: return
cases.add("reduce_sum_13_noop_empty_axes")(lambda: reduce_input(
    "ReduceSum", np.zeros(0, np.int64), 13, noop_with_empty_axes=1))
cases.add("reduce_sum_13_noop_no_axes", ort=False,
          why="onnxruntime 1.22 fails on it (ValidateNoTransposeReduce: 'Reduction on all axes, "
              "output size should be 1'); the spec says the output is the input")(
    lambda: reduce_input("ReduceSum", None, 13, noop_with_empty_axes=1))

# RSUMI64-LABEL: func.func @forward(%arg0: tensor<3x4xi64> {{.*}}) -> (tensor<3xi64> {cleave.name = "y"})
# RSUMI64: cleave.reduce_sum %arg0 {axes = array<i64: 1>, keepdims = {{0 : i64|false}}} : (tensor<3x4xi64>) -> tensor<3xi64>
cases.add("reduce_sum_13_i64")(lambda: reduce_input("ReduceSum", [1], 13, shape=(3, 4), elem=I64,
                                                    keepdims=0))

# axes [1, -1] of a rank-3 input, attribute (13) or input (18).
# RMEANAX-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<2x1x1xf32> {cleave.name = "y"})
# RMEANAX: cleave.reduce_mean %arg0 {axes = array<i64: 1, 2>{{.*}}} : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
cases.add("reduce_mean_13_axes_attr")(lambda: reduce_attr("ReduceMean", [1, -1], 13))
cases.add("reduce_mean_18_axes_input")(lambda: reduce_input("ReduceMean", [1, -1], 18,
                                                            style="constant"))

# RMEANNOKEEP-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<3x4xf32> {cleave.name = "y"})
# RMEANNOKEEP: cleave.reduce_mean %arg0 {axes = array<i64: 0>, keepdims = {{0 : i64|false}}} : (tensor<2x3x4xf32>) -> tensor<3x4xf32>
cases.add("reduce_mean_17_attr_nokeep")(lambda: reduce_attr("ReduceMean", [0], 17, keepdims=0))
cases.add("reduce_mean_18_input_nokeep")(lambda: reduce_input("ReduceMean", [0], 18, keepdims=0))

# RMEANALL-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<f32> {cleave.name = "y"})
# RMEANALL: cleave.reduce_mean %arg0 {axes = array<i64: 0, 1, 2>, keepdims = {{0 : i64|false}}} : (tensor<2x3x4xf32>) -> tensor<f32>
cases.add("reduce_mean_13_all_attr")(lambda: reduce_attr("ReduceMean", None, 13, keepdims=0))
cases.add("reduce_mean_18_all_input")(lambda: reduce_input("ReduceMean", None, 18, keepdims=0))

# RMAXAX-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<2x4xf32> {cleave.name = "y"})
# RMAXAX: cleave.reduce_max %arg0 {axes = array<i64: 1>, keepdims = {{0 : i64|false}}} : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
cases.add("reduce_max_13_axes_attr")(lambda: reduce_attr("ReduceMax", [-2], 13, keepdims=0))
cases.add("reduce_max_18_axes_input")(lambda: reduce_input("ReduceMax", [-2], 18, keepdims=0))
cases.add("reduce_max_20_axes_input")(lambda: reduce_input("ReduceMax", [-2], 20, keepdims=0,
                                                           style="constant"))

# RMAXBOOL-LABEL: func.func @forward(%arg0: tensor<2x3xi1> {{.*}}) -> (tensor<2x1xi1> {cleave.name = "y"})
# RMAXBOOL: cleave.reduce_max %arg0 {axes = array<i64: 1>{{.*}}} : (tensor<2x3xi1>) -> tensor<2x1xi1>
cases.add("reduce_max_20_bool")(lambda: reduce_input("ReduceMax", [1], 20, shape=(2, 3), elem=BOOL))

# RMAXI64-LABEL: func.func @forward(%arg0: tensor<3x4xi64> {{.*}}) -> (tensor<1x1xi64> {cleave.name = "y"})
# RMAXI64: cleave.reduce_max %arg0 {axes = array<i64: 0, 1>{{.*}}} : (tensor<3x4xi64>) -> tensor<1x1xi64>
cases.add("reduce_max_18_i64")(lambda: reduce_input("ReduceMax", [0, 1], 18, shape=(3, 4),
                                                    elem=I64))

# RPROD-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<2x4xf32> {cleave.name = "y"})
# RPROD: cleave.reduce_prod %arg0 {axes = array<i64: 1>, keepdims = false}
cases.add("reduce_prod_18_axes_input")(lambda: reduce_input("ReduceProd", [-2], 18, keepdims=0))
# TOPK-LABEL: func.func @forward(%arg0: tensor<2x5xf32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "values"}, tensor<2x3xi64> {cleave.name = "indices"})
# TOPK: cleave.top_k %arg0 {axis = 1 : i64, k = 3 : i64, largest = false}
cases.add("top_k_11")(lambda: single_node(
    "TopK", [("x", F32, [2, 5])], ["values", "indices"], opset=13, attrs={"largest": 0},
    const_inputs={"k": i64([3])}))

if __name__ == "__main__":
    cases.main()
