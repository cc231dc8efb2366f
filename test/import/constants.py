# Import of Constant (all its value forms), integer initializers,
# ConstantOfShape, Shape and Range, and the folding of shape arithmetic at
# import (docs/ops.md "Folding at import"): an op whose operands are all
# constant becomes a cleave.constant when its result has at most 65536
# elements; cleave.shape always folds (static shapes).
# docs/ops.md writes an op without operands as `cleave.constant {...} : () -> T`;
# the checks also accept `: T`.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s --all %t
# RUN: cleave import %t/constant_13_tensor_add.onnx | FileCheck %s --check-prefix=CTENSOR
# RUN: cleave import %t/constant_13_value_int.onnx | FileCheck %s --check-prefix=CINT
# RUN: cleave import %t/constant_13_value_ints.onnx | FileCheck %s --check-prefix=CINTS
# RUN: cleave import %t/constant_13_value_float.onnx | FileCheck %s --check-prefix=CFLOAT
# RUN: cleave import %t/constant_13_value_floats.onnx | FileCheck %s --check-prefix=CFLOATS
# RUN: cleave import %t/constant_17_bool.onnx | FileCheck %s --check-prefix=CBOOL
# RUN: cleave import %t/initializer_13_i64.onnx | FileCheck %s --check-prefix=INITI64
# RUN: cleave import %t/initializer_17_i32_2d.onnx | FileCheck %s --check-prefix=INITI32
# RUN: cleave import %t/constant_of_shape_13_default.onnx | FileCheck %s --check-prefix=COSDEF
# RUN: cleave import %t/constant_of_shape_13_int_value.onnx | FileCheck %s --check-prefix=COSINT
# RUN: cleave import %t/constant_of_shape_17_large.onnx | FileCheck %s --check-prefix=COSLARGE
# RUN: cleave import %t/constant_of_shape_21_bool.onnx | FileCheck %s --check-prefix=COSBOOL
# RUN: cleave import %t/constant_of_shape_13_scalar.onnx | FileCheck %s --check-prefix=COSSCALAR
# RUN: cleave import %t/shape_13.onnx | FileCheck %s --check-prefix=SHAPE13
# RUN: cleave import %t/shape_15_start.onnx | FileCheck %s --check-prefix=SHAPESTART
# RUN: cleave import %t/shape_15_neg_end.onnx | FileCheck %s --check-prefix=SHAPEEND
# RUN: cleave import %t/shape_15_clamped.onnx | FileCheck %s --check-prefix=SHAPECLAMP
# RUN: cleave import %t/shape_15_empty.onnx | FileCheck %s --check-prefix=SHAPEEMPTY
# RUN: cleave import %t/range_13_i64.onnx | FileCheck %s --check-prefix=RANGEI64
# RUN: cleave import %t/range_13_f32.onnx | FileCheck %s --check-prefix=RANGEF32
# RUN: cleave import %t/range_17_neg_delta.onnx | FileCheck %s --check-prefix=RANGENEG
# RUN: cleave import %t/range_13_empty.onnx | FileCheck %s --check-prefix=RANGEEMPTY
# RUN: cleave import %t/range_13_large.onnx | FileCheck %s --check-prefix=RANGELARGE
# RUN: cleave import %t/fold_17_reshape_from_shape.onnx | FileCheck %s --check-prefix=FOLDRESHAPE
# RUN: cleave import %t/fold_17_reshape_mul_cast.onnx | FileCheck %s --check-prefix=FOLDRESHAPE
# RUN: cleave import %t/fold_17_expand_where.onnx | FileCheck %s --check-prefix=FOLDEXPAND
# RUN: cleave import %t/fold_13_range_axes.onnx | FileCheck %s --check-prefix=FOLDRANGE
# RUN: cleave import %t/fold_13_float_scalar.onnx | FileCheck %s --check-prefix=FOLDFLOAT

import numpy as np
from onnx import helper

from onnx_models import (BOOL, F32, I32, I64, Cases, constant_node, i64, model, single_node)

cases = Cases()


def const_only(opset=13, **attrs):
    """A graph whose single output is one Constant node's."""
    return model([helper.make_node("Constant", [], ["y"], name="c", **attrs)], [], ["y"],
                 opset=opset)


# CTENSOR-LABEL: func.func @forward(%arg0: tensor<4xf32> {{.*}}) -> (tensor<4xf32> {cleave.name = "y"})
# CTENSOR: %[[C:[0-9]+]] = cleave.constant {value = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>} : {{(\(\) -> )?}}tensor<4xf32>
# CTENSOR: cleave.add %arg0, %[[C]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
cases.add("constant_13_tensor_add")(lambda: single_node(
    "Add", [("x", F32, [4])], ["y"], opset=13,
    const_inputs={"c": np.array([1, 2, 3, 4], np.float32)}, const_style="constant"))

# CINT-LABEL: func.func @forward() -> (tensor<i64> {cleave.name = "y"})
# CINT: %[[C:[0-9]+]] = cleave.constant {value = dense<7> : tensor<i64>} : {{(\(\) -> )?}}tensor<i64>
# CINT: return %[[C]] : tensor<i64>
cases.add("constant_13_value_int")(lambda: const_only(value_int=7))

# CINTS-LABEL: func.func @forward() -> (tensor<3xi64> {cleave.name = "y"})
# CINTS: cleave.constant {value = dense<[1, -2, 3]> : tensor<3xi64>} : {{(\(\) -> )?}}tensor<3xi64>
cases.add("constant_13_value_ints")(lambda: const_only(value_ints=[1, -2, 3]))

# CFLOAT-LABEL: func.func @forward() -> (tensor<f32> {cleave.name = "y"})
# CFLOAT: cleave.constant {value = dense<2.500000e+00> : tensor<f32>} : {{(\(\) -> )?}}tensor<f32>
cases.add("constant_13_value_float")(lambda: const_only(value_float=2.5))

# CFLOATS-LABEL: func.func @forward() -> (tensor<2xf32> {cleave.name = "y"})
# CFLOATS: cleave.constant {value = dense<[5.000000e-01, 1.500000e+00]> : tensor<2xf32>} : {{(\(\) -> )?}}tensor<2xf32>
cases.add("constant_13_value_floats")(lambda: const_only(value_floats=[0.5, 1.5]))

# CBOOL-LABEL: func.func @forward() -> (tensor<3xi1> {cleave.name = "y"})
# CBOOL: cleave.constant {value = dense<[true, false, true]> : tensor<3xi1>} : {{(\(\) -> )?}}tensor<3xi1>
cases.add("constant_17_bool")(lambda: const_only(
    opset=17, value=helper.make_tensor("v", BOOL, [3], [True, False, True])))

# Integer initializers are constants, not parameters.
# INITI64-LABEL: func.func @forward(%arg0: tensor<3xi64> {cleave.kind = "input", cleave.name = "x"}) -> (tensor<3xi64> {cleave.name = "y"})
# INITI64: %[[C:[0-9]+]] = cleave.constant {value = dense<[10, 20, 30]> : tensor<3xi64>} : {{(\(\) -> )?}}tensor<3xi64>
# INITI64: cleave.add %arg0, %[[C]] : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
cases.add("initializer_13_i64")(lambda: single_node(
    "Add", [("x", I64, [3])], ["y"], opset=13, initializers={"k": i64([10, 20, 30])}))

# INITI32-LABEL: func.func @forward(%arg0: tensor<2x2xi32> {cleave.kind = "input", cleave.name = "x"}) -> (tensor<2x2xi32> {cleave.name = "y"})
# INITI32: %[[C:[0-9]+]] = cleave.constant {value = dense<{{\[\[}}1, 2], [3, 4]]> : tensor<2x2xi32>} : {{(\(\) -> )?}}tensor<2x2xi32>
# INITI32: cleave.mul %arg0, %[[C]] : (tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<2x2xi32>
cases.add("initializer_17_i32_2d")(lambda: single_node(
    "Mul", [("x", I32, [2, 2])], ["y"], opset=17,
    initializers={"k": np.array([[1, 2], [3, 4]], np.int32)}))


def constant_of_shape(shape, value=None, opset=13, style="initializer"):
    attrs = {} if value is None else {"value": value}
    return single_node("ConstantOfShape", [], ["y"], opset=opset, attrs=attrs,
                       const_inputs={"shape": i64(shape)}, const_style=style)


# The default value is float 0; 6 elements: folded.
# COSDEF-LABEL: func.func @forward() -> (tensor<2x3xf32> {cleave.name = "y"})
# COSDEF-NOT: cleave.constant_of_shape
# COSDEF: cleave.constant {value = dense<0.000000e+00> : tensor<2x3xf32>} : {{(\(\) -> )?}}tensor<2x3xf32>
cases.add("constant_of_shape_13_default")(lambda: constant_of_shape([2, 3], style="constant"))

# COSINT-LABEL: func.func @forward() -> (tensor<4xi64> {cleave.name = "y"})
# COSINT: cleave.constant {value = dense<7> : tensor<4xi64>} : {{(\(\) -> )?}}tensor<4xi64>
cases.add("constant_of_shape_13_int_value")(lambda: constant_of_shape(
    [4], helper.make_tensor("value", I64, [1], [7])))

# 300 x 300 = 90000 elements > 65536, but a splat stays one value in the IR,
# so it folds whatever its size (docs/ops.md).
# COSLARGE-LABEL: func.func @forward() -> (tensor<300x300xf32> {cleave.name = "y"})
# COSLARGE-NOT: cleave.constant_of_shape
# COSLARGE: cleave.constant {value = dense<1.500000e+00> : tensor<300x300xf32>} : {{(\(\) -> )?}}tensor<300x300xf32>
cases.add("constant_of_shape_17_large")(lambda: constant_of_shape(
    [300, 300], helper.make_tensor("value", F32, [1], [1.5]), opset=17))

# COSBOOL-LABEL: func.func @forward() -> (tensor<2xi1> {cleave.name = "y"})
# COSBOOL: cleave.constant {value = dense<true> : tensor<2xi1>} : {{(\(\) -> )?}}tensor<2xi1>
cases.add("constant_of_shape_21_bool")(lambda: constant_of_shape(
    [2], helper.make_tensor("value", BOOL, [1], [True]), opset=21, style="constant"))

# An empty shape gives a scalar.
# COSSCALAR-LABEL: func.func @forward() -> (tensor<f32> {cleave.name = "y"})
# COSSCALAR: cleave.constant {value = dense<0.000000e+00> : tensor<f32>} : {{(\(\) -> )?}}tensor<f32>
cases.add("constant_of_shape_13_scalar")(lambda: constant_of_shape(np.zeros(0, np.int64)))


def shape(opset=13, **attrs):
    return single_node("Shape", [("x", F32, [2, 3, 4])], ["y"], opset=opset, attrs=attrs)


# SHAPE13-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<3xi64> {cleave.name = "y"})
# SHAPE13-NOT: cleave.shape
# SHAPE13: cleave.constant {value = dense<[2, 3, 4]> : tensor<3xi64>} : {{(\(\) -> )?}}tensor<3xi64>
cases.add("shape_13")(lambda: shape())

# SHAPESTART-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<2xi64> {cleave.name = "y"})
# SHAPESTART: cleave.constant {value = dense<[3, 4]> : tensor<2xi64>} : {{(\(\) -> )?}}tensor<2xi64>
cases.add("shape_15_start")(lambda: shape(15, start=1))

# SHAPEEND-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<2xi64> {cleave.name = "y"})
# SHAPEEND: cleave.constant {value = dense<[2, 3]> : tensor<2xi64>} : {{(\(\) -> )?}}tensor<2xi64>
cases.add("shape_15_neg_end")(lambda: shape(15, end=-1))

# Out-of-range start/end are clamped.
# SHAPECLAMP-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<3xi64> {cleave.name = "y"})
# SHAPECLAMP: cleave.constant {value = dense<[2, 3, 4]> : tensor<3xi64>} : {{(\(\) -> )?}}tensor<3xi64>
cases.add("shape_15_clamped")(lambda: shape(15, start=-10, end=10))

# SHAPEEMPTY-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<0xi64> {cleave.name = "y"})
# SHAPEEMPTY: cleave.constant {value = dense<> : tensor<0xi64>} : {{(\(\) -> )?}}tensor<0xi64>
cases.add("shape_15_empty")(lambda: shape(15, start=2, end=1))


def range_(start, limit, delta, dtype=np.int64, opset=13, style="constant"):
    return single_node("Range", [], ["y"], opset=opset, const_style=style,
                       const_inputs={"start": np.array(start, dtype),
                                     "limit": np.array(limit, dtype),
                                     "delta": np.array(delta, dtype)})


# RANGEI64-LABEL: func.func @forward() -> (tensor<5xi64> {cleave.name = "y"})
# RANGEI64: cleave.constant {value = dense<[0, 1, 2, 3, 4]> : tensor<5xi64>} : {{(\(\) -> )?}}tensor<5xi64>
cases.add("range_13_i64")(lambda: range_(0, 5, 1))

# RANGEF32-LABEL: func.func @forward() -> (tensor<4xf32> {cleave.name = "y"})
# RANGEF32: cleave.constant {value = dense<[1.000000e+00, 1.250000e+00, 1.500000e+00, 1.750000e+00]> : tensor<4xf32>} : {{(\(\) -> )?}}tensor<4xf32>
cases.add("range_13_f32")(lambda: range_(1.0, 2.0, 0.25, dtype=np.float32))

# ceil((4 - 10) / -3) = 2 elements: 10, 7.
# RANGENEG-LABEL: func.func @forward() -> (tensor<2xi64> {cleave.name = "y"})
# RANGENEG: cleave.constant {value = dense<[10, 7]> : tensor<2xi64>} : {{(\(\) -> )?}}tensor<2xi64>
cases.add("range_17_neg_delta")(lambda: range_(10, 4, -3, opset=17, style="initializer"))

# RANGEEMPTY-LABEL: func.func @forward() -> (tensor<0xi64> {cleave.name = "y"})
# RANGEEMPTY: cleave.constant {value = dense<> : tensor<0xi64>} : {{(\(\) -> )?}}tensor<0xi64>
cases.add("range_13_empty")(lambda: range_(5, 5, 1))

# 70000 elements > 65536: not folded.
# RANGELARGE-LABEL: func.func @forward() -> (tensor<70000xi32> {cleave.name = "y"})
# RANGELARGE: cleave.range {
# RANGELARGE-SAME: delta = 1
# RANGELARGE-SAME: limit = 70000
# RANGELARGE-SAME: start = 0
# RANGELARGE-SAME: : {{(\(\) -> )?}}tensor<70000xi32>
cases.add("range_13_large")(lambda: range_(0, 70000, 1, dtype=np.int32))


# What exporters emit for x.view(x.size(0), -1): Shape -> Gather -> Unsqueeze
# -> Concat -> Reshape. All of it folds; the reshape gets shape [2, 12].
# FOLDRESHAPE-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<2x12xf32> {cleave.name = "y"})
# FOLDRESHAPE-NOT: cleave.{{shape|gather|unsqueeze|concat|mul|cast}}
# FOLDRESHAPE: cleave.reshape %arg0 {shape = array<i64: 2, 12>} : (tensor<2x3x4xf32>) -> tensor<2x12xf32>
# FOLDRESHAPE-NOT: cleave.{{shape|gather|unsqueeze|concat|mul|cast}}
@cases.add("fold_17_reshape_from_shape")
def _():
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        constant_node("zero", i64(0)),
        helper.make_node("Gather", ["s", "zero"], ["d0"], axis=0),
        constant_node("ax0", i64([0])),
        helper.make_node("Unsqueeze", ["d0", "ax0"], ["d0_1"]),
        constant_node("minus_one", i64([-1])),
        helper.make_node("Concat", ["d0_1", "minus_one"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    return model(nodes, [("x", F32, [2, 3, 4])], ["y"], opset=17)


# The same shape from x.size(1) * x.size(2) through integer Mul and Casts.
@cases.add("fold_17_reshape_mul_cast")
def _():
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        constant_node("one", i64(1)),
        constant_node("two", i64(2)),
        helper.make_node("Gather", ["s", "one"], ["d1"]),
        helper.make_node("Gather", ["s", "two"], ["d2"]),
        helper.make_node("Mul", ["d1", "d2"], ["prod"]),
        helper.make_node("Cast", ["prod"], ["prod_f"], to=F32),
        helper.make_node("Cast", ["prod_f"], ["prod_i"], to=I64),
        constant_node("ax0", i64([0])),
        helper.make_node("Unsqueeze", ["prod_i", "ax0"], ["prod_1"]),
        constant_node("first", i64([2])),
        helper.make_node("Concat", ["first", "prod_1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    return model(nodes, [("x", F32, [2, 3, 4])], ["y"], opset=17)


# What exporters emit for x.expand(2, -1, 4): Where(Equal(shape, -1), ones, shape).
# FOLDEXPAND-LABEL: func.func @forward(%arg0: tensor<3x1xf32> {{.*}}) -> (tensor<2x3x4xf32> {cleave.name = "y"})
# FOLDEXPAND-NOT: cleave.{{equal|where|constant_of_shape}}
# FOLDEXPAND: cleave.expand %arg0 {shape = array<i64: 2, 3, 4>} : (tensor<3x1xf32>) -> tensor<2x3x4xf32>
# FOLDEXPAND-NOT: cleave.{{equal|where|constant_of_shape}}
@cases.add("fold_17_expand_where")
def _():
    nodes = [
        constant_node("req", i64([2, -1, 4])),
        constant_node("minus_one", i64(-1)),
        helper.make_node("Equal", ["req", "minus_one"], ["is_keep"]),
        constant_node("three", i64([3])),
        helper.make_node("ConstantOfShape", ["three"], ["ones"],
                         value=helper.make_tensor("value", I64, [1], [1])),
        helper.make_node("Where", ["is_keep", "ones", "req"], ["shape"]),
        helper.make_node("Expand", ["x", "shape"], ["y"]),
    ]
    return model(nodes, [("x", F32, [3, 1])], ["y"], opset=17)


# ReduceSum's axes from Range(0, 3, 1).
# FOLDRANGE-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<f32> {cleave.name = "y"})
# FOLDRANGE: cleave.reduce_sum %arg0 {axes = array<i64: 0, 1, 2>, keepdims = {{0 : i64|false}}} : (tensor<2x3x4xf32>) -> tensor<f32>
@cases.add("fold_13_range_axes")
def _():
    nodes = [
        constant_node("start", i64(0)),
        constant_node("limit", i64(3)),
        constant_node("delta", i64(1)),
        helper.make_node("Range", ["start", "limit", "delta"], ["axes"]),
        helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0),
    ]
    # ONNX's shape inference cannot see through Range: declare the output.
    return model(nodes, [("x", F32, [2, 3, 4])], ["y"], opset=13, output_types={"y": (F32, [])})


# Scalar float arithmetic folds: 1 / 4.
# FOLDFLOAT-LABEL: func.func @forward(%arg0: tensor<2x2xf32> {{.*}}) -> (tensor<2x2xf32> {cleave.name = "y"})
# FOLDFLOAT-NOT: cleave.div
# FOLDFLOAT: %[[C:[0-9]+]] = cleave.constant {value = dense<2.500000e-01> : tensor<f32>} : {{(\(\) -> )?}}tensor<f32>
# FOLDFLOAT-NOT: cleave.div
# FOLDFLOAT: cleave.mul %arg0, %[[C]] : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
@cases.add("fold_13_float_scalar")
def _():
    nodes = [
        constant_node("one", np.array(1.0, np.float32)),
        constant_node("four", np.array(4.0, np.float32)),
        helper.make_node("Div", ["one", "four"], ["q"]),
        helper.make_node("Mul", ["x", "q"], ["y"]),
    ]
    return model(nodes, [("x", F32, [2, 2])], ["y"], opset=13)


if __name__ == "__main__":
    cases.main()
