# Import of one-input elementwise operators: the unary math ops, Not, Identity,
# LeakyRelu, Gelu, Cast, Softmax and LogSoftmax.
# Expected types: ONNX spec (same type as the input; Cast: input shape with
# `to`); checked against onnxruntime by shapes_vs_onnxruntime.py.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s --all %t
# RUN: cleave import %t/neg_13.onnx | FileCheck %s --check-prefix=NEG13
# RUN: cleave import %t/neg_17_i64.onnx | FileCheck %s --check-prefix=NEGI64
# RUN: cleave import %t/sqrt_13.onnx | FileCheck %s --check-prefix=SQRT13
# RUN: cleave import %t/sqrt_17_f64.onnx | FileCheck %s --check-prefix=SQRTF64
# RUN: cleave import %t/reciprocal_13.onnx | FileCheck %s --check-prefix=RECIP
# RUN: cleave import %t/exp_13.onnx | FileCheck %s --check-prefix=EXP
# RUN: cleave import %t/log_13.onnx | FileCheck %s --check-prefix=LOG
# RUN: cleave import %t/abs_13.onnx | FileCheck %s --check-prefix=ABS13
# RUN: cleave import %t/abs_17_i32.onnx | FileCheck %s --check-prefix=ABSI32
# RUN: cleave import %t/tanh_13_scalar.onnx | FileCheck %s --check-prefix=TANH
# RUN: cleave import %t/sigmoid_13_rank4.onnx | FileCheck %s --check-prefix=SIGMOID
# RUN: cleave import %t/relu_13.onnx | FileCheck %s --check-prefix=RELU13
# RUN: cleave import %t/relu_14_i32.onnx | FileCheck %s --check-prefix=RELUI32
# RUN: cleave import %t/erf_13.onnx | FileCheck %s --check-prefix=ERF
# RUN: cleave import %t/not_13.onnx | FileCheck %s --check-prefix=NOT
# RUN: cleave import %t/identity_13.onnx | FileCheck %s --check-prefix=IDENT13
# RUN: cleave import %t/identity_21_i64.onnx | FileCheck %s --check-prefix=IDENT21
# RUN: cleave import %t/leaky_relu_13_default.onnx | FileCheck %s --check-prefix=LRELU13
# RUN: cleave import %t/leaky_relu_16_alpha.onnx | FileCheck %s --check-prefix=LRELU16
# RUN: cleave import %t/gelu_20.onnx | FileCheck %s --check-prefix=GELU
# RUN: cleave import %t/gelu_20_tanh.onnx | FileCheck %s --check-prefix=GELUTANH
# RUN: cleave import %t/cast_13_f32_i64.onnx | FileCheck %s --check-prefix=CASTF32I64
# RUN: cleave import %t/cast_13_f32_f16.onnx | FileCheck %s --check-prefix=CASTF32F16
# RUN: cleave import %t/cast_13_bool_f32.onnx | FileCheck %s --check-prefix=CASTBOOLF32
# RUN: cleave import %t/cast_19_i64_f32.onnx | FileCheck %s --check-prefix=CASTI64F32
# RUN: cleave import %t/cast_19_i32_f64.onnx | FileCheck %s --check-prefix=CASTI32F64
# RUN: cleave import %t/cast_21_f32_bool.onnx | FileCheck %s --check-prefix=CASTF32BOOL
# RUN: cleave import %t/cast_21_f32_u8.onnx | FileCheck %s --check-prefix=CASTF32U8
# RUN: cleave import %t/cast_21_i64_i8.onnx | FileCheck %s --check-prefix=CASTI64I8
# RUN: cleave import %t/softmax_13_default_axis.onnx | FileCheck %s --check-prefix=SMDEF
# RUN: cleave import %t/softmax_13_neg_axis.onnx | FileCheck %s --check-prefix=SMNEG
# RUN: cleave import %t/softmax_17_axis0.onnx | FileCheck %s --check-prefix=SM0
# RUN: cleave import %t/log_softmax_13_default_axis.onnx | FileCheck %s --check-prefix=LSMDEF
# RUN: cleave import %t/log_softmax_21_axis1.onnx | FileCheck %s --check-prefix=LSM1
# RUN: cleave import %t/sin_13.onnx | FileCheck %s --check-prefix=SIN
# RUN: cleave import %t/round_13_f64.onnx | FileCheck %s --check-prefix=ROUND
# RUN: cleave import %t/sign_13_i32.onnx | FileCheck %s --check-prefix=SIGN

from onnx_models import BOOL, F16, F32, F64, I8, I32, I64, U8, Cases, single_node

cases = Cases()


def unary(op, elem=F32, shape=(2, 3), opset=13, **attrs):
    return single_node(op, [("x", elem, list(shape))], ["y"], attrs=attrs, opset=opset)


# NEG13-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {cleave.kind = "input", cleave.name = "x"}) -> (tensor<2x3xf32> {cleave.name = "y"})
# NEG13: %[[R:.*]] = cleave.neg %arg0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
# NEG13-NEXT: return %[[R]] : tensor<2x3xf32>
cases.add("neg_13")(lambda: unary("Neg"))

# NEGI64-LABEL: func.func @forward(%arg0: tensor<4xi64> {{.*}}) -> (tensor<4xi64> {cleave.name = "y"})
# NEGI64: cleave.neg %arg0 : (tensor<4xi64>) -> tensor<4xi64>
cases.add("neg_17_i64")(lambda: unary("Neg", I64, [4], opset=17))

# SQRT13-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y"})
# SQRT13: cleave.sqrt %arg0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
cases.add("sqrt_13")(lambda: unary("Sqrt"))

# SQRTF64-LABEL: func.func @forward(%arg0: tensor<3xf64> {{.*}}) -> (tensor<3xf64> {cleave.name = "y"})
# SQRTF64: cleave.sqrt %arg0 : (tensor<3xf64>) -> tensor<3xf64>
cases.add("sqrt_17_f64")(lambda: unary("Sqrt", F64, [3], opset=17))

# RECIP-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y"})
# RECIP: cleave.reciprocal %arg0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
cases.add("reciprocal_13")(lambda: unary("Reciprocal"))

# EXP-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y"})
# EXP: cleave.exp %arg0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
cases.add("exp_13")(lambda: unary("Exp"))

# LOG-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y"})
# LOG: cleave.log %arg0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
cases.add("log_13")(lambda: unary("Log"))

# ABS13-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y"})
# ABS13: cleave.abs %arg0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
cases.add("abs_13")(lambda: unary("Abs"))

# ABSI32-LABEL: func.func @forward(%arg0: tensor<5xi32> {{.*}}) -> (tensor<5xi32> {cleave.name = "y"})
# ABSI32: cleave.abs %arg0 : (tensor<5xi32>) -> tensor<5xi32>
cases.add("abs_17_i32")(lambda: unary("Abs", I32, [5], opset=17))

# A rank-0 tensor stays rank 0.
# TANH-LABEL: func.func @forward(%arg0: tensor<f32> {{.*}}) -> (tensor<f32> {cleave.name = "y"})
# TANH: cleave.tanh %arg0 : (tensor<f32>) -> tensor<f32>
cases.add("tanh_13_scalar")(lambda: unary("Tanh", shape=[]))

# SIGMOID-LABEL: func.func @forward(%arg0: tensor<1x2x3x4xf32> {{.*}}) -> (tensor<1x2x3x4xf32> {cleave.name = "y"})
# SIGMOID: cleave.sigmoid %arg0 : (tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
cases.add("sigmoid_13_rank4")(lambda: unary("Sigmoid", shape=[1, 2, 3, 4]))

# RELU13-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y"})
# RELU13: cleave.relu %arg0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
cases.add("relu_13")(lambda: unary("Relu"))

# Relu-14 accepts signed integers.
# RELUI32-LABEL: func.func @forward(%arg0: tensor<6xi32> {{.*}}) -> (tensor<6xi32> {cleave.name = "y"})
# RELUI32: cleave.relu %arg0 : (tensor<6xi32>) -> tensor<6xi32>
cases.add("relu_14_i32")(lambda: unary("Relu", I32, [6], opset=14))

# ERF-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y"})
# ERF: cleave.erf %arg0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
cases.add("erf_13")(lambda: unary("Erf"))

# NOT-LABEL: func.func @forward(%arg0: tensor<2x3xi1> {{.*}}) -> (tensor<2x3xi1> {cleave.name = "y"})
# NOT: cleave.not %arg0 : (tensor<2x3xi1>) -> tensor<2x3xi1>
cases.add("not_13")(lambda: unary("Not", BOOL))

# Identity is a cleave.identity or is forwarded (the function returns its input).
# IDENT13-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y"})
# IDENT13: {{cleave.identity %arg0 : \(tensor<2x3xf32>\) -> tensor<2x3xf32>|return %arg0 : tensor<2x3xf32>}}
cases.add("identity_13")(lambda: unary("Identity"))

# IDENT21-LABEL: func.func @forward(%arg0: tensor<3xi64> {{.*}}) -> (tensor<3xi64> {cleave.name = "y"})
# IDENT21: {{cleave.identity %arg0 : \(tensor<3xi64>\) -> tensor<3xi64>|return %arg0 : tensor<3xi64>}}
cases.add("identity_21_i64")(lambda: unary("Identity", I64, [3], opset=21))

# LRELU13-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y"})
# LRELU13: cleave.leaky_relu %arg0 {{.*}}: (tensor<2x3xf32>) -> tensor<2x3xf32>
cases.add("leaky_relu_13_default")(lambda: unary("LeakyRelu"))

# LRELU16-LABEL: func.func @forward(%arg0: tensor<4x5xf32> {{.*}}) -> (tensor<4x5xf32> {cleave.name = "y"})
# LRELU16: cleave.leaky_relu %arg0 {alpha = 2.000000e-01 : f32} : (tensor<4x5xf32>) -> tensor<4x5xf32>
cases.add("leaky_relu_16_alpha")(lambda: unary("LeakyRelu", shape=[4, 5], opset=16, alpha=0.2))

# GELU-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y"})
# GELU: cleave.gelu %arg0 {{.*}}: (tensor<2x3xf32>) -> tensor<2x3xf32>
# GELU-NOT: "tanh"
cases.add("gelu_20")(lambda: unary("Gelu", opset=20))

# GELUTANH-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y"})
# GELUTANH: cleave.gelu %arg0 {approximate = "tanh"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
cases.add("gelu_20_tanh")(lambda: unary("Gelu", opset=20, approximate="tanh"))

# Cast: the input shape with the `to` element type.
# CASTF32I64-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}) -> (tensor<2x3xi64> {cleave.name = "y"})
# CASTF32I64: cleave.cast %arg0 {to = i64} : (tensor<2x3xf32>) -> tensor<2x3xi64>
cases.add("cast_13_f32_i64")(lambda: unary("Cast", opset=13, to=I64))

# CASTF32F16-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}) -> (tensor<2x3xf16> {cleave.name = "y"})
# CASTF32F16: cleave.cast %arg0 {to = f16} : (tensor<2x3xf32>) -> tensor<2x3xf16>
cases.add("cast_13_f32_f16")(lambda: unary("Cast", opset=13, to=F16))

# CASTBOOLF32-LABEL: func.func @forward(%arg0: tensor<4xi1> {{.*}}) -> (tensor<4xf32> {cleave.name = "y"})
# CASTBOOLF32: cleave.cast %arg0 {to = f32} : (tensor<4xi1>) -> tensor<4xf32>
cases.add("cast_13_bool_f32")(lambda: unary("Cast", BOOL, [4], opset=13, to=F32))

# CASTI64F32-LABEL: func.func @forward(%arg0: tensor<4xi64> {{.*}}) -> (tensor<4xf32> {cleave.name = "y"})
# CASTI64F32: cleave.cast %arg0 {to = f32} : (tensor<4xi64>) -> tensor<4xf32>
cases.add("cast_19_i64_f32")(lambda: unary("Cast", I64, [4], opset=19, to=F32))

# CASTI32F64-LABEL: func.func @forward(%arg0: tensor<2x2xi32> {{.*}}) -> (tensor<2x2xf64> {cleave.name = "y"})
# CASTI32F64: cleave.cast %arg0 {to = f64} : (tensor<2x2xi32>) -> tensor<2x2xf64>
cases.add("cast_19_i32_f64")(lambda: unary("Cast", I32, [2, 2], opset=19, to=F64))

# CASTF32BOOL-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}) -> (tensor<2x3xi1> {cleave.name = "y"})
# CASTF32BOOL: cleave.cast %arg0 {to = i1} : (tensor<2x3xf32>) -> tensor<2x3xi1>
cases.add("cast_21_f32_bool")(lambda: unary("Cast", opset=21, to=BOOL))

# CASTF32U8-LABEL: func.func @forward(%arg0: tensor<3xf32> {{.*}}) -> (tensor<3xui8> {cleave.name = "y"})
# CASTF32U8: cleave.cast %arg0 {to = ui8} : (tensor<3xf32>) -> tensor<3xui8>
cases.add("cast_21_f32_u8")(lambda: unary("Cast", F32, [3], opset=21, to=U8))

# CASTI64I8-LABEL: func.func @forward(%arg0: tensor<1x5xi64> {{.*}}) -> (tensor<1x5xi8> {cleave.name = "y"})
# CASTI64I8: cleave.cast %arg0 {to = i8} : (tensor<1x5xi64>) -> tensor<1x5xi8>
cases.add("cast_21_i64_i8")(lambda: unary("Cast", I64, [1, 5], opset=21, to=I8))

# Softmax's default axis is -1, normalised to rank - 1.
# SMDEF-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<2x3x4xf32> {cleave.name = "y"})
# SMDEF: cleave.softmax %arg0 {axis = 2 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
cases.add("softmax_13_default_axis")(lambda: unary("Softmax", shape=[2, 3, 4]))

# SMNEG-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<2x3x4xf32> {cleave.name = "y"})
# SMNEG: cleave.softmax %arg0 {axis = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
cases.add("softmax_13_neg_axis")(lambda: unary("Softmax", shape=[2, 3, 4], axis=-2))

# SM0-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y"})
# SM0: cleave.softmax %arg0 {axis = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
cases.add("softmax_17_axis0")(lambda: unary("Softmax", opset=17, axis=0))

# LSMDEF-LABEL: func.func @forward(%arg0: tensor<2x5xf32> {{.*}}) -> (tensor<2x5xf32> {cleave.name = "y"})
# LSMDEF: cleave.log_softmax %arg0 {axis = 1 : i64} : (tensor<2x5xf32>) -> tensor<2x5xf32>
cases.add("log_softmax_13_default_axis")(lambda: unary("LogSoftmax", shape=[2, 5]))

# LSM1-LABEL: func.func @forward(%arg0: tensor<2x3x4xf32> {{.*}}) -> (tensor<2x3x4xf32> {cleave.name = "y"})
# LSM1: cleave.log_softmax %arg0 {axis = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
cases.add("log_softmax_21_axis1")(lambda: unary("LogSoftmax", shape=[2, 3, 4], opset=21, axis=1))

# The C library's functions (floats) and Sign (any number): same type.
# SIN-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}) -> (tensor<2x3xf32> {cleave.name = "y"})
# SIN: cleave.sin %arg0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
# ROUND-LABEL: func.func @forward(%arg0: tensor<4xf64> {{.*}}) -> (tensor<4xf64> {cleave.name = "y"})
# ROUND: cleave.round %arg0 : (tensor<4xf64>) -> tensor<4xf64>
# SIGN-LABEL: func.func @forward(%arg0: tensor<5xi32> {{.*}}) -> (tensor<5xi32> {cleave.name = "y"})
# SIGN: cleave.sign %arg0 : (tensor<5xi32>) -> tensor<5xi32>
for op in ["Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
           "Floor", "Ceil"]:
    cases.add(op.lower() + "_13")(lambda op=op: unary(op))
cases.add("round_13_f64")(lambda: unary("Round", F64, [4]))
cases.add("sign_13_i32")(lambda: unary("Sign", I32, [5]))

if __name__ == "__main__":
    cases.main()
