# Import of the broadcasting binary operators (Add, Sub, Mul, Div, Pow), the
# comparisons (Equal, Less, Greater) and Where.
# Expected types: ONNX multidirectional broadcasting (align trailing dims; each
# pair equal or one of them 1); arithmetic keeps lhs's element type (Pow too,
# whatever the exponent's type), comparisons give bool (i1).
#
# RUN: rm -rf %t && mkdir -p %t && %python %s --all %t
# RUN: cleave import %t/add_13_same.onnx | FileCheck %s --check-prefix=ADDSAME
# RUN: cleave import %t/mod_13_fmod.onnx | FileCheck %s --check-prefix=FMOD
# RUN: cleave import %t/max_13_three.onnx | FileCheck %s --check-prefix=MAX3
# RUN: cleave import %t/min_13_one.onnx | FileCheck %s --check-prefix=MIN1
# RUN: cleave import %t/add_14_bcast.onnx | FileCheck %s --check-prefix=ADDBC
# RUN: cleave import %t/sub_13_scalar.onnx | FileCheck %s --check-prefix=SUBSCALAR
# RUN: cleave import %t/sub_14_lower_rank_lhs.onnx | FileCheck %s --check-prefix=SUBRANK
# RUN: cleave import %t/mul_14_i64.onnx | FileCheck %s --check-prefix=MULI64
# RUN: cleave import %t/mul_13_param.onnx | FileCheck %s --check-prefix=MULPARAM
# RUN: cleave import %t/div_13_bcast.onnx | FileCheck %s --check-prefix=DIVBC
# RUN: cleave import %t/div_14_i32.onnx | FileCheck %s --check-prefix=DIVI32
# RUN: cleave import %t/pow_13.onnx | FileCheck %s --check-prefix=POW13
# RUN: cleave import %t/pow_15_i64_exponent.onnx | FileCheck %s --check-prefix=POWI64EXP
# RUN: cleave import %t/pow_15_const_int_exponent.onnx | FileCheck %s --check-prefix=POWCONST
# RUN: cleave import %t/pow_15_i32_base.onnx | FileCheck %s --check-prefix=POWI32BASE
# RUN: cleave import %t/equal_13_bcast.onnx | FileCheck %s --check-prefix=EQ13
# RUN: cleave import %t/equal_19_i64.onnx | FileCheck %s --check-prefix=EQ19
# RUN: cleave import %t/less_13_outer.onnx | FileCheck %s --check-prefix=LESS
# RUN: cleave import %t/greater_13_i32_scalar.onnx | FileCheck %s --check-prefix=GREATER
# RUN: cleave import %t/where_16.onnx | FileCheck %s --check-prefix=WHERE
# RUN: cleave import %t/where_16_i64.onnx | FileCheck %s --check-prefix=WHEREI64

import numpy as np

from onnx_models import BOOL, F32, I32, I64, Cases, i64, single_node

cases = Cases()


def binary(op, lhs, rhs, opset=13):
    return single_node(op, [lhs, rhs], ["y"], opset=opset)


# ADDSAME-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {cleave.kind = "input", cleave.name = "a"}, %arg1: tensor<2x3xf32> {cleave.kind = "input", cleave.name = "b"}) -> (tensor<2x3xf32> {cleave.name = "y"})
# ADDSAME: cleave.add %arg0, %arg1 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
cases.add("add_13_same")(lambda: binary("Add", ("a", F32, [2, 3]), ("b", F32, [2, 3])))

# 2x1x4 + 3x1 -> 2x3x4
# ADDBC-LABEL: func.func @forward(%arg0: tensor<2x1x4xf32> {{.*}}, %arg1: tensor<3x1xf32> {{.*}}) -> (tensor<2x3x4xf32> {cleave.name = "y"})
# ADDBC: cleave.add %arg0, %arg1 : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
cases.add("add_14_bcast")(lambda: binary("Add", ("a", F32, [2, 1, 4]), ("b", F32, [3, 1]), opset=14))

# SUBSCALAR-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}, %arg1: tensor<f32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y"})
# SUBSCALAR: cleave.sub %arg0, %arg1 : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
cases.add("sub_13_scalar")(lambda: binary("Sub", ("a", F32, [2, 3]), ("b", F32, [])))

# 4 - 3x1 -> 3x4 (the lhs has the lower rank)
# SUBRANK-LABEL: func.func @forward(%arg0: tensor<4xf32> {{.*}}, %arg1: tensor<3x1xf32> {{.*}}) -> (tensor<3x4xf32> {cleave.name = "y"})
# SUBRANK: cleave.sub %arg0, %arg1 : (tensor<4xf32>, tensor<3x1xf32>) -> tensor<3x4xf32>
cases.add("sub_14_lower_rank_lhs")(lambda: binary("Sub", ("a", F32, [4]), ("b", F32, [3, 1]), opset=14))

# MULI64-LABEL: func.func @forward(%arg0: tensor<2x3xi64> {{.*}}, %arg1: tensor<3xi64> {{.*}}) -> (tensor<2x3xi64> {cleave.name = "y"})
# MULI64: cleave.mul %arg0, %arg1 : (tensor<2x3xi64>, tensor<3xi64>) -> tensor<2x3xi64>
cases.add("mul_14_i64")(lambda: binary("Mul", ("a", I64, [2, 3]), ("b", I64, [3]), opset=14))

# A float initializer operand is a parameter argument after the inputs.
# MULPARAM-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {cleave.kind = "input", cleave.name = "a"}, %arg1: tensor<3xf32> {cleave.kind = "param", cleave.name = "w"}) -> (tensor<2x3xf32> {cleave.name = "y"})
# MULPARAM: cleave.mul %arg0, %arg1 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
cases.add("mul_13_param")(lambda: single_node(
    "Mul", [("a", F32, [2, 3])], ["y"], opset=13,
    initializers={"w": np.array([1.0, 2.0, 3.0], np.float32)}))

# 5x1x3 / 1x4x1 -> 5x4x3
# DIVBC-LABEL: func.func @forward(%arg0: tensor<5x1x3xf32> {{.*}}, %arg1: tensor<1x4x1xf32> {{.*}}) -> (tensor<5x4x3xf32> {cleave.name = "y"})
# DIVBC: cleave.div %arg0, %arg1 : (tensor<5x1x3xf32>, tensor<1x4x1xf32>) -> tensor<5x4x3xf32>
cases.add("div_13_bcast")(lambda: binary("Div", ("a", F32, [5, 1, 3]), ("b", F32, [1, 4, 1])))

# DIVI32-LABEL: func.func @forward(%arg0: tensor<4xi32> {{.*}}, %arg1: tensor<1xi32> {{.*}}) -> (tensor<4xi32> {cleave.name = "y"})
# DIVI32: cleave.div %arg0, %arg1 : (tensor<4xi32>, tensor<1xi32>) -> tensor<4xi32>
cases.add("div_14_i32", feeds=lambda: {"a": np.array([7, -8, 9, 10], np.int32),
                                       "b": np.array([3], np.int32)})(
    lambda: binary("Div", ("a", I32, [4]), ("b", I32, [1]), opset=14))

# Mod with fmod = 1 is cleave.fmod, broadcasting.
# FMOD-LABEL: func.func @forward(%arg0: tensor<5x1x3xf32> {{.*}}, %arg1: tensor<1x4x1xf32> {{.*}}) -> (tensor<5x4x3xf32> {cleave.name = "y"})
# FMOD: cleave.fmod %arg0, %arg1 : (tensor<5x1x3xf32>, tensor<1x4x1xf32>) -> tensor<5x4x3xf32>
# FMOD-NOT: cleave.where
cases.add("mod_13_fmod")(lambda: single_node(
    "Mod", [("a", F32, [5, 1, 3]), ("b", F32, [1, 4, 1])], ["y"], opset=13, attrs={"fmod": 1}))

# POW13-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}, %arg1: tensor<2x3xf32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y"})
# POW13: cleave.pow %arg0, %arg1 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
cases.add("pow_13")(lambda: binary("Pow", ("a", F32, [2, 3]), ("b", F32, [2, 3])))

# Pow's result has the base's type, not the exponent's.
# POWI64EXP-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}, %arg1: tensor<i64> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y"})
# POWI64EXP: cleave.pow %arg0, %arg1 : (tensor<2x3xf32>, tensor<i64>) -> tensor<2x3xf32>
cases.add("pow_15_i64_exponent")(lambda: binary("Pow", ("a", F32, [2, 3]), ("b", I64, []), opset=15))

# An integer initializer exponent is a cleave.constant.
# POWCONST-LABEL: func.func @forward(%arg0: tensor<3x4xf32> {{.*}}) -> (tensor<3x4xf32> {cleave.name = "y"})
# POWCONST: %[[E:[0-9]+]] = cleave.constant {value = dense<2> : tensor<i64>} : {{(\(\) -> )?}}tensor<i64>
# POWCONST: cleave.pow %arg0, %[[E]] : (tensor<3x4xf32>, tensor<i64>) -> tensor<3x4xf32>
cases.add("pow_15_const_int_exponent")(lambda: single_node(
    "Pow", [("a", F32, [3, 4])], ["y"], opset=15, const_inputs={"e": i64(2)}))

# POWI32BASE-LABEL: func.func @forward(%arg0: tensor<3xi32> {{.*}}, %arg1: tensor<3xf32> {{.*}}) -> (tensor<3xi32> {cleave.name = "y"})
# POWI32BASE: cleave.pow %arg0, %arg1 : (tensor<3xi32>, tensor<3xf32>) -> tensor<3xi32>
cases.add("pow_15_i32_base")(lambda: binary("Pow", ("a", I32, [3]), ("b", F32, [3]), opset=15))

# EQ13-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}, %arg1: tensor<3xf32> {{.*}}) -> (tensor<2x3xi1> {cleave.name = "y"})
# EQ13: cleave.equal %arg0, %arg1 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
cases.add("equal_13_bcast")(lambda: binary("Equal", ("a", F32, [2, 3]), ("b", F32, [3])))

# EQ19-LABEL: func.func @forward(%arg0: tensor<4x1xi64> {{.*}}, %arg1: tensor<1x2xi64> {{.*}}) -> (tensor<4x2xi1> {cleave.name = "y"})
# EQ19: cleave.equal %arg0, %arg1 : (tensor<4x1xi64>, tensor<1x2xi64>) -> tensor<4x2xi1>
cases.add("equal_19_i64")(lambda: binary("Equal", ("a", I64, [4, 1]), ("b", I64, [1, 2]), opset=19))

# LESS-LABEL: func.func @forward(%arg0: tensor<4x1xf32> {{.*}}, %arg1: tensor<1x5xf32> {{.*}}) -> (tensor<4x5xi1> {cleave.name = "y"})
# LESS: cleave.less %arg0, %arg1 : (tensor<4x1xf32>, tensor<1x5xf32>) -> tensor<4x5xi1>
cases.add("less_13_outer")(lambda: binary("Less", ("a", F32, [4, 1]), ("b", F32, [1, 5])))

# GREATER-LABEL: func.func @forward(%arg0: tensor<i32> {{.*}}, %arg1: tensor<2x2xi32> {{.*}}) -> (tensor<2x2xi1> {cleave.name = "y"})
# GREATER: cleave.greater %arg0, %arg1 : (tensor<i32>, tensor<2x2xi32>) -> tensor<2x2xi1>
cases.add("greater_13_i32_scalar")(lambda: binary("Greater", ("a", I32, []), ("b", I32, [2, 2])))

# Where broadcasts all three operands: 2x1, 1x3, scalar -> 2x3.
# WHERE-LABEL: func.func @forward(%arg0: tensor<2x1xi1> {{.*}}, %arg1: tensor<1x3xf32> {{.*}}, %arg2: tensor<f32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y"})
# WHERE: cleave.where %arg0, %arg1, %arg2 : (tensor<2x1xi1>, tensor<1x3xf32>, tensor<f32>) -> tensor<2x3xf32>
cases.add("where_16")(lambda: single_node(
    "Where", [("c", BOOL, [2, 1]), ("x", F32, [1, 3]), ("z", F32, [])], ["y"], opset=16))

# 3 (condition), 2x3, 2x1 -> 2x3
# WHEREI64-LABEL: func.func @forward(%arg0: tensor<3xi1> {{.*}}, %arg1: tensor<2x3xi64> {{.*}}, %arg2: tensor<2x1xi64> {{.*}}) -> (tensor<2x3xi64> {cleave.name = "y"})
# WHEREI64: cleave.where %arg0, %arg1, %arg2 : (tensor<3xi1>, tensor<2x3xi64>, tensor<2x1xi64>) -> tensor<2x3xi64>
cases.add("where_16_i64")(lambda: single_node(
    "Where", [("c", BOOL, [3]), ("x", I64, [2, 3]), ("z", I64, [2, 1])], ["y"], opset=16))

# Variadic Max and Min: a chain of the binary op, broadcasting; one input is itself.
# MAX3-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}, %arg1: tensor<3xf32> {{.*}}, %arg2: tensor<2x1xf32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y"})
# MAX3: %[[M:.*]] = cleave.max %arg0, %arg1 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
# MAX3: cleave.max %[[M]], %arg2 : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
cases.add("max_13_three")(lambda: single_node(
    "Max", [("a", F32, [2, 3]), ("b", F32, [3]), ("c", F32, [2, 1])], ["y"], opset=13))
# MIN1-LABEL: func.func @forward(%arg0: tensor<4xi64> {{.*}}) -> (tensor<4xi64> {cleave.name = "y"})
# MIN1-NEXT: return %arg0 : tensor<4xi64>
cases.add("min_13_one")(lambda: single_node("Min", [("a", I64, [4])], ["y"], opset=13))

if __name__ == "__main__":
    cases.main()
