# Import of Trilu (opset 14): same type as the input; `upper` and `k` (the k
# input must be a constant: an int64 scalar initializer or Constant node).
#
# RUN: rm -rf %t && mkdir -p %t && %python %s --all %t
# RUN: cleave import %t/trilu_14_upper_default.onnx | FileCheck %s --check-prefix=TRIUP
# RUN: cleave import %t/trilu_14_lower_k_constant.onnx | FileCheck %s --check-prefix=TRILOWK
# RUN: cleave import %t/trilu_14_upper_k_initializer_batched.onnx | FileCheck %s --check-prefix=TRIBATCH
# RUN: cleave import %t/trilu_17_lower.onnx | FileCheck %s --check-prefix=TRILOW
# RUN: cleave import %t/trilu_21_i64_k2.onnx | FileCheck %s --check-prefix=TRII64

from onnx_models import F32, I64, Cases, i64, single_node

cases = Cases()


def trilu(shape, k=None, elem=F32, opset=14, style="initializer", **attrs):
    return single_node("Trilu", [("x", elem, shape)], ["y"], opset=opset, attrs=attrs,
                       const_inputs=None if k is None else {"k": i64(k)}, const_style=style)


# Defaults: upper, k = 0 (both may be elided).
# TRIUP-LABEL: func.func @forward(%arg0: tensor<3x4xf32> {{.*}}) -> (tensor<3x4xf32> {cleave.name = "y"})
# TRIUP: cleave.trilu %arg0 {{(\{(k = 0 : i64(, )?)?(upper = (1 : i64|true))?\} )?}}: (tensor<3x4xf32>) -> tensor<3x4xf32>
cases.add("trilu_14_upper_default")(lambda: trilu([3, 4]))

# TRILOWK-LABEL: func.func @forward(%arg0: tensor<3x4xf32> {{.*}}) -> (tensor<3x4xf32> {cleave.name = "y"})
# TRILOWK: cleave.trilu %arg0 {k = -1 : i64, upper = {{0 : i64|false}}} : (tensor<3x4xf32>) -> tensor<3x4xf32>
cases.add("trilu_14_lower_k_constant")(lambda: trilu([3, 4], k=-1, style="constant", upper=0))

# TRIBATCH-LABEL: func.func @forward(%arg0: tensor<2x3x3xf32> {{.*}}) -> (tensor<2x3x3xf32> {cleave.name = "y"})
# TRIBATCH: cleave.trilu %arg0 {k = 1 : i64{{.*}}} : (tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
cases.add("trilu_14_upper_k_initializer_batched")(lambda: trilu([2, 3, 3], k=1))

# TRILOW-LABEL: func.func @forward(%arg0: tensor<4x4xf32> {{.*}}) -> (tensor<4x4xf32> {cleave.name = "y"})
# TRILOW: cleave.trilu %arg0 {{.*}}upper = {{0 : i64|false}}{{.*}} : (tensor<4x4xf32>) -> tensor<4x4xf32>
cases.add("trilu_17_lower")(lambda: trilu([4, 4], opset=17, upper=0))

# TRII64-LABEL: func.func @forward(%arg0: tensor<3x3xi64> {{.*}}) -> (tensor<3x3xi64> {cleave.name = "y"})
# TRII64: cleave.trilu %arg0 {k = 2 : i64{{.*}}} : (tensor<3x3xi64>) -> tensor<3x3xi64>
cases.add("trilu_21_i64_k2")(lambda: trilu([3, 3], k=2, elem=I64, opset=21, style="constant"))

if __name__ == "__main__":
    cases.main()
