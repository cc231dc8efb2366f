# Import of Slice and Gather.
# Slice's starts/ends/axes/steps inputs must be constants; cleave.slice has one
# start, end and step per dim, clamped as the ONNX spec does it:
#   dims not in `axes`: start 0, end dim, step 1;
#   negative start/end: += dim;
#   step > 0: start and end clamped to [0, dim];
#   step < 0: start clamped to [0, dim - 1], end to [-1, dim - 1].
# Result dim: max(0, ceil((end - start) / step)).
# Gather: data[:axis] + indices.shape + data[axis+1:].
#
# RUN: rm -rf %t && mkdir -p %t && %python %s --all %t
# RUN: cleave import %t/slice_13_basic.onnx | FileCheck %s --check-prefix=SLBASIC
# RUN: cleave import %t/slice_13_negative_bounds.onnx | FileCheck %s --check-prefix=SLNEG
# RUN: cleave import %t/slice_13_int64_max_end.onnx | FileCheck %s --check-prefix=SLMAX
# RUN: cleave import %t/slice_13_step2.onnx | FileCheck %s --check-prefix=SLSTEP
# RUN: cleave import %t/slice_13_reverse.onnx | FileCheck %s --check-prefix=SLREV
# RUN: cleave import %t/slice_13_no_axes.onnx | FileCheck %s --check-prefix=SLNOAXES
# RUN: cleave import %t/slice_13_start_past_end.onnx | FileCheck %s --check-prefix=SLEMPTY
# RUN: cleave import %t/slice_13_unordered_axes.onnx | FileCheck %s --check-prefix=SLUNORD
# RUN: cleave import %t/slice_13_neg_step2.onnx | FileCheck %s --check-prefix=SLNEGSTEP
# RUN: cleave import %t/slice_13_neg_step_big_start.onnx | FileCheck %s --check-prefix=SLNEGBIG
# RUN: cleave import %t/slice_13_int32_constants.onnx | FileCheck %s --check-prefix=SLI32
# RUN: cleave import %t/gather_13_const_indices.onnx | FileCheck %s --check-prefix=GACONST
# RUN: cleave import %t/gather_13_axis1.onnx | FileCheck %s --check-prefix=GAAX1
# RUN: cleave import %t/gather_13_neg_axis.onnx | FileCheck %s --check-prefix=GANEG
# RUN: cleave import %t/gather_13_scalar_index.onnx | FileCheck %s --check-prefix=GASCALAR
# RUN: cleave import %t/gather_13_i32_indices.onnx | FileCheck %s --check-prefix=GAI32
# RUN: cleave import %t/gather_13_negative_index_values.onnx | FileCheck %s --check-prefix=GANEGIDX

import numpy as np

from onnx_models import F32, I32, I64, INT64_MAX, INT64_MIN, Cases, i64, single_node

cases = Cases()


def slice_(starts, ends, axes=None, steps=None, shape=(4, 5, 6), style="initializer",
           dtype=np.int64):
    consts = {"starts": np.array(starts, dtype), "ends": np.array(ends, dtype)}
    if axes is not None:
        consts["axes"] = np.array(axes, dtype)
    if steps is not None:
        consts["steps"] = np.array(steps, dtype)
    return single_node("Slice", [("x", F32, list(shape))], ["y"], opset=13,
                       const_inputs=consts, const_style=style)


# SLBASIC-LABEL: func.func @forward(%arg0: tensor<4x5x6xf32> {{.*}}) -> (tensor<2x5x6xf32> {cleave.name = "y"})
# SLBASIC: cleave.slice %arg0 {ends = array<i64: 3, 5, 6>, starts = array<i64: 1, 0, 0>, steps = array<i64: 1, 1, 1>} : (tensor<4x5x6xf32>) -> tensor<2x5x6xf32>
cases.add("slice_13_basic")(lambda: slice_([1], [3], axes=[0]))

# Axis 2 (dim 6): [-3, -1) is [3, 5).
# SLNEG-LABEL: func.func @forward(%arg0: tensor<4x5x6xf32> {{.*}}) -> (tensor<4x5x2xf32> {cleave.name = "y"})
# SLNEG: cleave.slice %arg0 {ends = array<i64: 4, 5, 5>, starts = array<i64: 0, 0, 3>, steps = array<i64: 1, 1, 1>} : (tensor<4x5x6xf32>) -> tensor<4x5x2xf32>
cases.add("slice_13_negative_bounds")(lambda: slice_([-3], [-1], axes=[2], style="constant"))

# Exporters write INT64_MAX for "to the end"; axis -1 is 2.
# SLMAX-LABEL: func.func @forward(%arg0: tensor<4x5x6xf32> {{.*}}) -> (tensor<4x5x4xf32> {cleave.name = "y"})
# SLMAX: cleave.slice %arg0 {ends = array<i64: 4, 5, 6>, starts = array<i64: 0, 0, 2>, steps = array<i64: 1, 1, 1>} : (tensor<4x5x6xf32>) -> tensor<4x5x4xf32>
cases.add("slice_13_int64_max_end")(lambda: slice_([2], [INT64_MAX], axes=[-1]))

# Dim 5, [0, 5) step 2: 0, 2, 4.
# SLSTEP-LABEL: func.func @forward(%arg0: tensor<4x5x6xf32> {{.*}}) -> (tensor<4x3x6xf32> {cleave.name = "y"})
# SLSTEP: cleave.slice %arg0 {ends = array<i64: 4, 5, 6>, starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 2, 1>} : (tensor<4x5x6xf32>) -> tensor<4x3x6xf32>
cases.add("slice_13_step2")(lambda: slice_([0], [5], axes=[1], steps=[2]))

# The whole of dim 0 reversed: start -1 -> 3, end INT64_MIN -> clamped to -1.
# SLREV-LABEL: func.func @forward(%arg0: tensor<4x5x6xf32> {{.*}}) -> (tensor<4x5x6xf32> {cleave.name = "y"})
# SLREV: cleave.slice %arg0 {ends = array<i64: -1, 5, 6>, starts = array<i64: 3, 0, 0>, steps = array<i64: -1, 1, 1>} : (tensor<4x5x6xf32>) -> tensor<4x5x6xf32>
cases.add("slice_13_reverse")(lambda: slice_([-1], [INT64_MIN], axes=[0], steps=[-1]))

# Without axes, starts/ends apply to dims 0, 1, ...
# SLNOAXES-LABEL: func.func @forward(%arg0: tensor<4x5xf32> {{.*}}) -> (tensor<2x2xf32> {cleave.name = "y"})
# SLNOAXES: cleave.slice %arg0 {ends = array<i64: 3, 2>, starts = array<i64: 1, 0>, steps = array<i64: 1, 1>} : (tensor<4x5xf32>) -> tensor<2x2xf32>
cases.add("slice_13_no_axes")(lambda: slice_([1, 0], [3, 2], shape=(4, 5)))

# A start past the dim clamps to the dim: an empty result.
# SLEMPTY-LABEL: func.func @forward(%arg0: tensor<4x5x6xf32> {{.*}}) -> (tensor<4x0x6xf32> {cleave.name = "y"})
# SLEMPTY: cleave.slice %arg0 {ends = array<i64: 4, 5, 6>, starts = array<i64: 0, 5, 0>, steps = array<i64: 1, 1, 1>} : (tensor<4x5x6xf32>) -> tensor<4x0x6xf32>
cases.add("slice_13_start_past_end")(lambda: slice_([10], [20], axes=[1]))

# axes [2, 0]: dim 2 [1, 6) step 2 -> 1, 3, 5; dim 0 [1, 3) -> 1, 2.
# SLUNORD-LABEL: func.func @forward(%arg0: tensor<4x5x6xf32> {{.*}}) -> (tensor<2x5x3xf32> {cleave.name = "y"})
# SLUNORD: cleave.slice %arg0 {ends = array<i64: 3, 5, 6>, starts = array<i64: 1, 0, 1>, steps = array<i64: 1, 1, 2>} : (tensor<4x5x6xf32>) -> tensor<2x5x3xf32>
cases.add("slice_13_unordered_axes")(lambda: slice_([1, 1], [6, 3], axes=[2, 0], steps=[2, 1]))

# Dim 5 from 4 down to (not including) 0 step -2: 4, 2.
# SLNEGSTEP-LABEL: func.func @forward(%arg0: tensor<4x5x6xf32> {{.*}}) -> (tensor<4x2x6xf32> {cleave.name = "y"})
# SLNEGSTEP: cleave.slice %arg0 {ends = array<i64: 4, 0, 6>, starts = array<i64: 0, 4, 0>, steps = array<i64: 1, -2, 1>} : (tensor<4x5x6xf32>) -> tensor<4x2x6xf32>
cases.add("slice_13_neg_step2")(lambda: slice_([4], [0], axes=[1], steps=[-2], style="constant"))

# Step -1 with start 100 on dim 6: start clamps to 5; 5, 4, 3, 2.
# SLNEGBIG-LABEL: func.func @forward(%arg0: tensor<4x5x6xf32> {{.*}}) -> (tensor<4x5x4xf32> {cleave.name = "y"})
# SLNEGBIG: cleave.slice %arg0 {ends = array<i64: 4, 5, 1>, starts = array<i64: 0, 0, 5>, steps = array<i64: 1, 1, -1>} : (tensor<4x5x6xf32>) -> tensor<4x5x4xf32>
cases.add("slice_13_neg_step_big_start")(lambda: slice_([100], [1], axes=[2], steps=[-1]))

# Slice's index inputs may be int32.
# SLI32-LABEL: func.func @forward(%arg0: tensor<4x5x6xf32> {{.*}}) -> (tensor<4x3x6xf32> {cleave.name = "y"})
# SLI32: cleave.slice %arg0 {ends = array<i64: 4, 4, 6>, starts = array<i64: 0, 1, 0>, steps = array<i64: 1, 1, 1>} : (tensor<4x5x6xf32>) -> tensor<4x3x6xf32>
cases.add("slice_13_int32_constants")(lambda: slice_([1], [-1], axes=[1], style="constant",
                                                     dtype=np.int32))


# Integer initializer indices are a cleave.constant operand.
# GACONST-LABEL: func.func @forward(%arg0: tensor<5x4xf32> {{.*}}) -> (tensor<2x4xf32> {cleave.name = "y"})
# GACONST: %[[IDX:[0-9]+]] = cleave.constant {value = dense<[0, 3]> : tensor<2xi64>} : {{(\(\) -> )?}}tensor<2xi64>
# GACONST: cleave.gather %arg0, %[[IDX]] {{.*}}: (tensor<5x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
cases.add("gather_13_const_indices")(lambda: single_node(
    "Gather", [("x", F32, [5, 4])], ["y"], opset=13, initializers={"idx": i64([0, 3])}))

# GAAX1-LABEL: func.func @forward(%arg0: tensor<5x4xf32> {{.*}}, %arg1: tensor<2x3xi64> {{.*}}) -> (tensor<5x2x3xf32> {cleave.name = "y"})
# GAAX1: cleave.gather %arg0, %arg1 {axis = 1 : i64} : (tensor<5x4xf32>, tensor<2x3xi64>) -> tensor<5x2x3xf32>
cases.add("gather_13_axis1")(lambda: single_node(
    "Gather", [("x", F32, [5, 4]), ("i", I64, [2, 3])], ["y"], opset=13, attrs=dict(axis=1)))

# GANEG-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}, %arg1: tensor<5xi64> {{.*}}) -> (tensor<2x3x5xf32> {cleave.name = "y"})
# GANEG: cleave.gather %arg0, %arg1 {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<5xi64>) -> tensor<2x3x5xf32>
cases.add("gather_13_neg_axis")(lambda: single_node(
    "Gather", [("x", F32, [2, 3, 4]), ("i", I64, [5])], ["y"], opset=13, attrs=dict(axis=-1)))

# A scalar index removes the axis.
# GASCALAR-LABEL: func.func @forward(%arg0: tensor<5x4xf32> {{.*}}) -> (tensor<4xf32> {cleave.name = "y"})
# GASCALAR: cleave.gather %arg0, %{{.*}} : (tensor<5x4xf32>, tensor<i64>) -> tensor<4xf32>
cases.add("gather_13_scalar_index")(lambda: single_node(
    "Gather", [("x", F32, [5, 4])], ["y"], opset=13, const_inputs={"idx": i64(1)},
    const_style="constant"))

# GAI32-LABEL: func.func @forward(%arg0: tensor<5x4xf32> {{.*}}, %arg1: tensor<3xi32> {{.*}}) -> (tensor<3x4xf32> {cleave.name = "y"})
# GAI32: cleave.gather %arg0, %arg1 {{.*}}: (tensor<5x4xf32>, tensor<3xi32>) -> tensor<3x4xf32>
cases.add("gather_13_i32_indices")(lambda: single_node(
    "Gather", [("x", F32, [5, 4]), ("i", I32, [3])], ["y"], opset=13))

# Negative index values are valid (counted from the end); they change no type.
# GANEGIDX-LABEL: func.func @forward(%arg0: tensor<5x4xf32> {{.*}}) -> (tensor<2x4xf32> {cleave.name = "y"})
# GANEGIDX: cleave.gather %arg0, %{{.*}} : (tensor<5x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
cases.add("gather_13_negative_index_values")(lambda: single_node(
    "Gather", [("x", F32, [5, 4])], ["y"], opset=13, initializers={"idx": i64([-1, 0])}))

if __name__ == "__main__":
    cases.main()
