# Import of the shape operators: Reshape, Flatten, Transpose, Squeeze,
# Unsqueeze, Concat, Split, Expand. Shape-deciding inputs (Reshape's shape,
# Squeeze/Unsqueeze axes, Split sizes, Expand's shape) come as int64
# initializers or Constant nodes and must become attributes, resolved:
# Reshape without 0 or -1, axes non-negative, Split sizes explicit, Expand's
# shape the broadcast result.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s --all %t
# RUN: cleave import %t/reshape_13_minus_one.onnx | FileCheck %s --check-prefix=RSM1
# RUN: cleave import %t/reshape_14_copy_zero.onnx | FileCheck %s --check-prefix=RSZERO
# RUN: cleave import %t/reshape_13_zero_and_literals.onnx | FileCheck %s --check-prefix=RSZLIT
# RUN: cleave import %t/reshape_14_allowzero.onnx | FileCheck %s --check-prefix=RSAZ
# RUN: cleave import %t/reshape_14_allowzero_empty.onnx | FileCheck %s --check-prefix=RSAZE
# RUN: cleave import %t/reshape_19_flatten_all.onnx | FileCheck %s --check-prefix=RS19
# RUN: cleave import %t/reshape_21_middle_minus_one.onnx | FileCheck %s --check-prefix=RS21
# RUN: cleave import %t/reshape_13_to_scalar.onnx | FileCheck %s --check-prefix=RSSCALAR
# RUN: cleave import %t/flatten_13_default.onnx | FileCheck %s --check-prefix=FLDEF
# RUN: cleave import %t/flatten_13_axis0.onnx | FileCheck %s --check-prefix=FL0
# RUN: cleave import %t/flatten_21_neg_axis.onnx | FileCheck %s --check-prefix=FLNEG
# RUN: cleave import %t/flatten_13_axis_rank.onnx | FileCheck %s --check-prefix=FLRANK
# RUN: cleave import %t/transpose_13_default.onnx | FileCheck %s --check-prefix=TRDEF
# RUN: cleave import %t/transpose_13_perm.onnx | FileCheck %s --check-prefix=TRPERM
# RUN: cleave import %t/transpose_21_rank4.onnx | FileCheck %s --check-prefix=TR4
# RUN: cleave import %t/squeeze_13_axes_initializer.onnx | FileCheck %s --check-prefix=SQINIT
# RUN: cleave import %t/squeeze_21_axes_constant.onnx | FileCheck %s --check-prefix=SQCONST
# RUN: cleave import %t/squeeze_13_no_axes.onnx | FileCheck %s --check-prefix=SQALL
# RUN: cleave import %t/squeeze_21_to_scalar.onnx | FileCheck %s --check-prefix=SQSCALAR
# RUN: cleave import %t/unsqueeze_13_axes_initializer.onnx | FileCheck %s --check-prefix=USINIT
# RUN: cleave import %t/unsqueeze_21_axes_constant.onnx | FileCheck %s --check-prefix=USCONST
# RUN: cleave import %t/unsqueeze_13_unsorted_axes.onnx | FileCheck %s --check-prefix=USUNSORTED
# RUN: cleave import %t/unsqueeze_13_scalar.onnx | FileCheck %s --check-prefix=USSCALAR
# RUN: cleave import %t/concat_13_axis1.onnx | FileCheck %s --check-prefix=CC1
# RUN: cleave import %t/concat_13_three_neg_axis.onnx | FileCheck %s --check-prefix=CC3
# RUN: cleave import %t/concat_13_i64_axis0.onnx | FileCheck %s --check-prefix=CCI64
# RUN: cleave import %t/concat_13_single.onnx | FileCheck %s --check-prefix=CCSINGLE
# RUN: cleave import %t/split_13_sizes_initializer.onnx | FileCheck %s --check-prefix=SPINIT
# RUN: cleave import %t/split_13_equal.onnx | FileCheck %s --check-prefix=SPEQ
# RUN: cleave import %t/split_13_neg_axis_constant.onnx | FileCheck %s --check-prefix=SPNEG
# RUN: cleave import %t/split_18_num_outputs_uneven.onnx | FileCheck %s --check-prefix=SPNUMU
# RUN: cleave import %t/split_18_num_outputs_even.onnx | FileCheck %s --check-prefix=SPNUME
# RUN: cleave import %t/split_18_sizes.onnx | FileCheck %s --check-prefix=SP18SIZES
# RUN: cleave import %t/expand_13.onnx | FileCheck %s --check-prefix=EXP13
# RUN: cleave import %t/expand_13_constant.onnx | FileCheck %s --check-prefix=EXPCONST
# RUN: cleave import %t/expand_13_smaller_shape.onnx | FileCheck %s --check-prefix=EXPSMALL
# RUN: cleave import %t/expand_13_i64.onnx | FileCheck %s --check-prefix=EXPI64

import numpy as np

from onnx_models import F32, I64, Cases, i64, single_node

cases = Cases()


def reshape(in_shape, shape, opset=13, style="initializer", **attrs):
    return single_node("Reshape", [("x", F32, in_shape)], ["y"], opset=opset, attrs=attrs,
                       const_inputs={"shape": i64(shape)}, const_style=style)


# RSM1-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<4x6xf32> {cleave.name = "y"})
# RSM1: cleave.reshape %arg0 {shape = array<i64: 4, 6>} : (tensor<2x3x4xf32>) -> tensor<4x6xf32>
cases.add("reshape_13_minus_one")(lambda: reshape([2, 3, 4], [4, -1]))

# 0 copies the input dim.
# RSZERO-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<2x12xf32> {cleave.name = "y"})
# RSZERO: cleave.reshape %arg0 {shape = array<i64: 2, 12>} : (tensor<2x3x4xf32>) -> tensor<2x12xf32>
cases.add("reshape_14_copy_zero")(lambda: reshape([2, 3, 4], [0, -1], opset=14, style="constant"))

# RSZLIT-LABEL: func.func @forward(%arg0: tensor<1x6xf32> {{.*}}) -> (tensor<1x3x2xf32> {cleave.name = "y"})
# RSZLIT: cleave.reshape %arg0 {shape = array<i64: 1, 3, 2>} : (tensor<1x6xf32>) -> tensor<1x3x2xf32>
cases.add("reshape_13_zero_and_literals")(lambda: reshape([1, 6], [0, 3, 2]))

# RSAZ-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<6x4xf32> {cleave.name = "y"})
# RSAZ: cleave.reshape %arg0 {shape = array<i64: 6, 4>} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
cases.add("reshape_14_allowzero")(lambda: reshape([2, 3, 4], [6, 4], opset=14, allowzero=1))

# With allowzero=1 a 0 in the shape is a zero-size dim, not a copy.
# RSAZE-LABEL: func.func @forward(%arg0: tensor<0x4xf32> {{.*}}) -> (tensor<4x0xf32> {cleave.name = "y"})
# RSAZE: cleave.reshape %arg0 {shape = array<i64: 4, 0>} : (tensor<0x4xf32>) -> tensor<4x0xf32>
cases.add("reshape_14_allowzero_empty")(lambda: reshape([0, 4], [4, 0], opset=14, allowzero=1))

# RS19-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<24xf32> {cleave.name = "y"})
# RS19: cleave.reshape %arg0 {shape = array<i64: 24>} : (tensor<2x3x4xf32>) -> tensor<24xf32>
cases.add("reshape_19_flatten_all")(lambda: reshape([2, 3, 4], [-1], opset=19))

# RS21-LABEL: func.func @forward(%arg0: tensor<24xf32> {{.*}}) -> (tensor<2x4x3xf32> {cleave.name = "y"})
# RS21: cleave.reshape %arg0 {shape = array<i64: 2, 4, 3>} : (tensor<24xf32>) -> tensor<2x4x3xf32>
cases.add("reshape_21_middle_minus_one")(lambda: reshape([24], [2, -1, 3], opset=21, style="constant"))

# An empty shape tensor gives a scalar.
# RSSCALAR-LABEL: func.func @forward(%arg0: tensor<1x1xf32> {{.*}}) -> (tensor<f32> {cleave.name = "y"})
# RSSCALAR: cleave.reshape %arg0 {shape = array<i64>} : (tensor<1x1xf32>) -> tensor<f32>
cases.add("reshape_13_to_scalar")(lambda: reshape([1, 1], np.zeros(0, np.int64)))


def flatten(axis=None, opset=13):
    attrs = {} if axis is None else {"axis": axis}
    return single_node("Flatten", [("x", F32, [2, 3, 4])], ["y"], opset=opset, attrs=attrs)


# FLDEF-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<2x12xf32> {cleave.name = "y"})
# FLDEF: cleave.flatten %arg0 {{.*}}: (tensor<2x3x4xf32>) -> tensor<2x12xf32>
cases.add("flatten_13_default")(lambda: flatten())

# FL0-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<1x24xf32> {cleave.name = "y"})
# FL0: cleave.flatten %arg0 {axis = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<1x24xf32>
cases.add("flatten_13_axis0")(lambda: flatten(0))

# FLNEG-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<6x4xf32> {cleave.name = "y"})
# FLNEG: cleave.flatten %arg0 {axis = 2 : i64} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
cases.add("flatten_21_neg_axis")(lambda: flatten(-1, opset=21))

# FLRANK-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<24x1xf32> {cleave.name = "y"})
# FLRANK: cleave.flatten %arg0 {axis = 3 : i64} : (tensor<2x3x4xf32>) -> tensor<24x1xf32>
cases.add("flatten_13_axis_rank")(lambda: flatten(3))

# Without perm, Transpose reverses the dims.
# TRDEF-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<4x3x2xf32> {cleave.name = "y"})
# TRDEF: cleave.transpose %arg0 {perm = array<i64: 2, 1, 0>} : (tensor<2x3x4xf32>) -> tensor<4x3x2xf32>
cases.add("transpose_13_default")(lambda: single_node(
    "Transpose", [("x", F32, [2, 3, 4])], ["y"], opset=13))

# TRPERM-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<2x4x3xf32> {cleave.name = "y"})
# TRPERM: cleave.transpose %arg0 {perm = array<i64: 0, 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
cases.add("transpose_13_perm")(lambda: single_node(
    "Transpose", [("x", F32, [2, 3, 4])], ["y"], opset=13, attrs=dict(perm=[0, 2, 1])))

# TR4-LABEL: func.func @forward(%arg0: tensor<1x2x3x4xf32> {{.*}}) -> (tensor<1x3x4x2xf32> {cleave.name = "y"})
# TR4: cleave.transpose %arg0 {perm = array<i64: 0, 2, 3, 1>} : (tensor<1x2x3x4xf32>) -> tensor<1x3x4x2xf32>
cases.add("transpose_21_rank4")(lambda: single_node(
    "Transpose", [("x", F32, [1, 2, 3, 4])], ["y"], opset=21, attrs=dict(perm=[0, 2, 3, 1])))


def squeeze(op, in_shape, axes=None, opset=13, style="initializer"):
    return single_node(op, [("x", F32, in_shape)], ["y"], opset=opset,
                       const_inputs=None if axes is None else {"axes": i64(axes)},
                       const_style=style)


# SQINIT-LABEL: func.func @forward(%arg0: tensor<1x3x1x4xf32> {{.*}}) -> (tensor<3x4xf32> {cleave.name = "y"})
# SQINIT: cleave.squeeze %arg0 {axes = array<i64: 0, 2>} : (tensor<1x3x1x4xf32>) -> tensor<3x4xf32>
cases.add("squeeze_13_axes_initializer")(lambda: squeeze("Squeeze", [1, 3, 1, 4], [0, -2]))

# SQCONST-LABEL: func.func @forward(%arg0: tensor<2x3x1xf32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y"})
# SQCONST: cleave.squeeze %arg0 {axes = array<i64: 2>} : (tensor<2x3x1xf32>) -> tensor<2x3xf32>
cases.add("squeeze_21_axes_constant")(lambda: squeeze("Squeeze", [2, 3, 1], [2], opset=21,
                                                      style="constant"))

# Without axes, every dim of size 1 goes.
# SQALL-LABEL: func.func @forward(%arg0: tensor<1x3x1x4xf32> {{.*}}) -> (tensor<3x4xf32> {cleave.name = "y"})
# SQALL: cleave.squeeze %arg0 {axes = array<i64: 0, 2>} : (tensor<1x3x1x4xf32>) -> tensor<3x4xf32>
cases.add("squeeze_13_no_axes")(lambda: squeeze("Squeeze", [1, 3, 1, 4]))

# SQSCALAR-LABEL: func.func @forward(%arg0: tensor<1x1xf32> {{.*}}) -> (tensor<f32> {cleave.name = "y"})
# SQSCALAR: cleave.squeeze %arg0 {axes = array<i64: 0, 1>} : (tensor<1x1xf32>) -> tensor<f32>
cases.add("squeeze_21_to_scalar")(lambda: squeeze("Squeeze", [1, 1], opset=21))

# Unsqueeze's negative axes count in the output rank (here 4: -1 is 3).
# USINIT-LABEL: func.func @forward(%arg0: tensor<3x4xf32> {{.*}}) -> (tensor<1x3x4x1xf32> {cleave.name = "y"})
# USINIT: cleave.unsqueeze %arg0 {axes = array<i64: 0, 3>} : (tensor<3x4xf32>) -> tensor<1x3x4x1xf32>
cases.add("unsqueeze_13_axes_initializer")(lambda: squeeze("Unsqueeze", [3, 4], [0, -1]))

# USCONST-LABEL: func.func @forward(%arg0: tensor<3x4xf32> {{.*}}) -> (tensor<3x1x4xf32> {cleave.name = "y"})
# USCONST: cleave.unsqueeze %arg0 {axes = array<i64: 1>} : (tensor<3x4xf32>) -> tensor<3x1x4xf32>
cases.add("unsqueeze_21_axes_constant")(lambda: squeeze("Unsqueeze", [3, 4], [1], opset=21,
                                                        style="constant"))

# USUNSORTED-LABEL: func.func @forward(%arg0: tensor<3x4xf32> {{.*}}) -> (tensor<1x3x1x4xf32> {cleave.name = "y"})
# USUNSORTED: cleave.unsqueeze %arg0 {axes = array<i64: {{0, 2|2, 0}}>} : (tensor<3x4xf32>) -> tensor<1x3x1x4xf32>
cases.add("unsqueeze_13_unsorted_axes")(lambda: squeeze("Unsqueeze", [3, 4], [2, 0]))

# USSCALAR-LABEL: func.func @forward(%arg0: tensor<f32> {{.*}}) -> (tensor<1xf32> {cleave.name = "y"})
# USSCALAR: cleave.unsqueeze %arg0 {axes = array<i64: 0>} : (tensor<f32>) -> tensor<1xf32>
cases.add("unsqueeze_13_scalar")(lambda: squeeze("Unsqueeze", [], [0]))


def concat(shapes, axis, elem=F32, opset=13):
    names = "abcdefgh"
    return single_node("Concat", [(names[i], elem, s) for i, s in enumerate(shapes)], ["y"],
                       opset=opset, attrs=dict(axis=axis))


# CC1-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}, %arg1: tensor<2x5xf32> {{.*}}) -> (tensor<2x8xf32> {cleave.name = "y"})
# CC1: cleave.concat %arg0, %arg1 {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
cases.add("concat_13_axis1")(lambda: concat([[2, 3], [2, 5]], 1))

# CC3-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}, %arg1: tensor<2x3x1xf32> {{.*}}, %arg2: tensor<2x3x2xf32> {{.*}}) -> (tensor<2x3x7xf32> {cleave.name = "y"})
# CC3: cleave.concat %arg0, %arg1, %arg2 {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<2x3x1xf32>, tensor<2x3x2xf32>) -> tensor<2x3x7xf32>
cases.add("concat_13_three_neg_axis")(lambda: concat([[2, 3, 4], [2, 3, 1], [2, 3, 2]], -1))

# CCI64-LABEL: func.func @forward(%arg0: tensor<1x2xi64> {{.*}}, %arg1: tensor<3x2xi64> {{.*}}) -> (tensor<4x2xi64> {cleave.name = "y"})
# CCI64: cleave.concat %arg0, %arg1 {{.*}}: (tensor<1x2xi64>, tensor<3x2xi64>) -> tensor<4x2xi64>
cases.add("concat_13_i64_axis0")(lambda: concat([[1, 2], [3, 2]], 0, elem=I64))

# CCSINGLE-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y"})
# CCSINGLE: cleave.concat %arg0 {{.*}}: (tensor<2x3xf32>) -> tensor<2x3xf32>
cases.add("concat_13_single")(lambda: concat([[2, 3]], 0))


def split(in_shape, n_out, opset=13, sizes=None, style="initializer", **attrs):
    outs = [f"y{i}" for i in range(n_out)]
    return single_node("Split", [("x", F32, in_shape)], outs, opset=opset, attrs=attrs,
                       const_inputs=None if sizes is None else {"split": i64(sizes)},
                       const_style=style)


# SPINIT-LABEL: func.func @forward(%arg0: tensor<6x3xf32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y0"}, tensor<4x3xf32> {cleave.name = "y1"})
# SPINIT: cleave.split %arg0 {{.*}}split = array<i64: 2, 4>{{.*}} : (tensor<6x3xf32>) -> (tensor<2x3xf32>, tensor<4x3xf32>)
cases.add("split_13_sizes_initializer")(lambda: split([6, 3], 2, sizes=[2, 4]))

# Without sizes, the outputs are equal.
# SPEQ-LABEL: func.func @forward(%arg0: tensor<6xf32> {{.*}}) -> (tensor<2xf32> {cleave.name = "y0"}, tensor<2xf32> {cleave.name = "y1"}, tensor<2xf32> {cleave.name = "y2"})
# SPEQ: cleave.split %arg0 {{.*}}split = array<i64: 2, 2, 2>{{.*}} : (tensor<6xf32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>)
cases.add("split_13_equal")(lambda: split([6], 3))

# SPNEG-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}) -> (tensor<2x1xf32> {cleave.name = "y0"}, tensor<2x2xf32> {cleave.name = "y1"})
# SPNEG: cleave.split %arg0 {axis = 1 : i64, split = array<i64: 1, 2>} : (tensor<2x3xf32>) -> (tensor<2x1xf32>, tensor<2x2xf32>)
cases.add("split_13_neg_axis_constant")(lambda: split([2, 3], 2, sizes=[1, 2], style="constant",
                                                      axis=-1))

# Split-18 num_outputs: chunks of ceil(7 / 3) = 3, the last one smaller.
# SPNUMU-LABEL: func.func @forward(%arg0: tensor<2x7xf32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y0"}, tensor<2x3xf32> {cleave.name = "y1"}, tensor<2x1xf32> {cleave.name = "y2"})
# SPNUMU: cleave.split %arg0 {axis = 1 : i64, split = array<i64: 3, 3, 1>} : (tensor<2x7xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x1xf32>)
cases.add("split_18_num_outputs_uneven")(lambda: split([2, 7], 3, opset=18, axis=1, num_outputs=3))

# SPNUME-LABEL: func.func @forward(%arg0: tensor<4x2xf32> {{.*}}) -> (tensor<2x2xf32> {cleave.name = "y0"}, tensor<2x2xf32> {cleave.name = "y1"})
# SPNUME: cleave.split %arg0 {{.*}}split = array<i64: 2, 2>{{.*}} : (tensor<4x2xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>)
cases.add("split_18_num_outputs_even")(lambda: split([4, 2], 2, opset=18, num_outputs=2))

# SP18SIZES-LABEL: func.func @forward(%arg0: tensor<4x2xf32> {{.*}}) -> (tensor<3x2xf32> {cleave.name = "y0"}, tensor<1x2xf32> {cleave.name = "y1"})
# SP18SIZES: cleave.split %arg0 {{.*}}split = array<i64: 3, 1>{{.*}} : (tensor<4x2xf32>) -> (tensor<3x2xf32>, tensor<1x2xf32>)
cases.add("split_18_sizes")(lambda: split([4, 2], 2, opset=18, sizes=[3, 1]))


def expand(in_shape, shape, elem=F32, style="initializer"):
    return single_node("Expand", [("x", elem, in_shape)], ["y"], opset=13,
                       const_inputs={"shape": i64(shape)}, const_style=style)


# EXP13-LABEL: func.func @forward(%arg0: tensor<3x1xf32> {{.*}}) -> (tensor<2x3x4xf32> {cleave.name = "y"})
# EXP13: cleave.expand %arg0 {shape = array<i64: 2, 3, 4>} : (tensor<3x1xf32>) -> tensor<2x3x4xf32>
cases.add("expand_13")(lambda: expand([3, 1], [2, 1, 4]))

# EXPCONST-LABEL: func.func @forward(%arg0: tensor<1xf32> {{.*}}) -> (tensor<3xf32> {cleave.name = "y"})
# EXPCONST: cleave.expand %arg0 {shape = array<i64: 3>} : (tensor<1xf32>) -> tensor<3xf32>
cases.add("expand_13_constant")(lambda: expand([1], [3], style="constant"))

# The shape operand may be smaller than the input: the result is the broadcast.
# EXPSMALL-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y"})
# EXPSMALL: cleave.expand %arg0 {shape = array<i64: 2, 3>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
cases.add("expand_13_smaller_shape")(lambda: expand([2, 3], [1, 1]))

# EXPI64-LABEL: func.func @forward(%arg0: tensor<1x4xi64> {{.*}}) -> (tensor<3x4xi64> {cleave.name = "y"})
# EXPI64: cleave.expand %arg0 {shape = array<i64: 3, 4>} : (tensor<1x4xi64>) -> tensor<3x4xi64>
cases.add("expand_13_i64")(lambda: expand([1, 4], [3, 1], elem=I64))

if __name__ == "__main__":
    cases.main()
