# Import of MatMul (numpy matmul shapes: 1-D operands get a dim prepended /
# appended and removed again, batch dims broadcast) and Gemm (M x N; trans_a,
# trans_b, alpha, beta; optional C).
#
# RUN: rm -rf %t && mkdir -p %t && %python %s --all %t
# RUN: cleave import %t/matmul_13_2d.onnx | FileCheck %s --check-prefix=MM2D
# RUN: cleave import %t/matmul_13_batched.onnx | FileCheck %s --check-prefix=MMBATCH
# RUN: cleave import %t/matmul_13_batch_bcast.onnx | FileCheck %s --check-prefix=MMBCAST
# RUN: cleave import %t/matmul_13_vec_mat.onnx | FileCheck %s --check-prefix=MMVM
# RUN: cleave import %t/matmul_13_mat_vec.onnx | FileCheck %s --check-prefix=MMMV
# RUN: cleave import %t/matmul_13_vec_vec.onnx | FileCheck %s --check-prefix=MMVV
# RUN: cleave import %t/matmul_13_vec_batch.onnx | FileCheck %s --check-prefix=MMVB
# RUN: cleave import %t/matmul_17_param.onnx | FileCheck %s --check-prefix=MMPARAM
# RUN: cleave import %t/gemm_13_basic.onnx | FileCheck %s --check-prefix=GEMM
# RUN: cleave import %t/gemm_13_trans_alpha_beta.onnx | FileCheck %s --check-prefix=GEMMT
# RUN: cleave import %t/gemm_13_no_c.onnx | FileCheck %s --check-prefix=GEMMNOC
# RUN: cleave import %t/gemm_13_scalar_c.onnx | FileCheck %s --check-prefix=GEMMSC
# RUN: cleave import %t/gemm_17_linear.onnx | FileCheck %s --check-prefix=GEMMLIN

import numpy as np

from onnx_models import F32, Cases, single_node

cases = Cases()


def matmul(a, b, opset=13):
    return single_node("MatMul", [("a", F32, a), ("b", F32, b)], ["y"], opset=opset)


# MM2D-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}, %arg1: tensor<3x4xf32> {{.*}}) -> (tensor<2x4xf32> {cleave.name = "y"})
# MM2D: cleave.matmul %arg0, %arg1 : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
cases.add("matmul_13_2d")(lambda: matmul([2, 3], [3, 4]))

# MMBATCH-LABEL: func.func @forward(%arg0: tensor<5x2x3xf32> {{.*}}, %arg1: tensor<3x4xf32> {{.*}}) -> (tensor<5x2x4xf32> {cleave.name = "y"})
# MMBATCH: cleave.matmul %arg0, %arg1 : (tensor<5x2x3xf32>, tensor<3x4xf32>) -> tensor<5x2x4xf32>
cases.add("matmul_13_batched")(lambda: matmul([5, 2, 3], [3, 4]))

# Batch dims 2x1 and 3 broadcast to 2x3.
# MMBCAST-LABEL: func.func @forward(%arg0: tensor<2x1x2x3xf32> {{.*}}, %arg1: tensor<3x3x4xf32> {{.*}}) -> (tensor<2x3x2x4xf32> {cleave.name = "y"})
# MMBCAST: cleave.matmul %arg0, %arg1 : (tensor<2x1x2x3xf32>, tensor<3x3x4xf32>) -> tensor<2x3x2x4xf32>
cases.add("matmul_13_batch_bcast")(lambda: matmul([2, 1, 2, 3], [3, 3, 4]))

# MMVM-LABEL: func.func @forward(%arg0: tensor<3xf32> {{.*}}, %arg1: tensor<3x4xf32> {{.*}}) -> (tensor<4xf32> {cleave.name = "y"})
# MMVM: cleave.matmul %arg0, %arg1 : (tensor<3xf32>, tensor<3x4xf32>) -> tensor<4xf32>
cases.add("matmul_13_vec_mat")(lambda: matmul([3], [3, 4]))

# MMMV-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}, %arg1: tensor<3xf32> {{.*}}) -> (tensor<2xf32> {cleave.name = "y"})
# MMMV: cleave.matmul %arg0, %arg1 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2xf32>
cases.add("matmul_13_mat_vec")(lambda: matmul([2, 3], [3]))

# MMVV-LABEL: func.func @forward(%arg0: tensor<3xf32> {{.*}}, %arg1: tensor<3xf32> {{.*}}) -> (tensor<f32> {cleave.name = "y"})
# MMVV: cleave.matmul %arg0, %arg1 : (tensor<3xf32>, tensor<3xf32>) -> tensor<f32>
cases.add("matmul_13_vec_vec")(lambda: matmul([3], [3]))

# MMVB-LABEL: func.func @forward(%arg0: tensor<3xf32> {{.*}}, %arg1: tensor<5x3x4xf32> {{.*}}) -> (tensor<5x4xf32> {cleave.name = "y"})
# MMVB: cleave.matmul %arg0, %arg1 : (tensor<3xf32>, tensor<5x3x4xf32>) -> tensor<5x4xf32>
cases.add("matmul_13_vec_batch")(lambda: matmul([3], [5, 3, 4]))

# MMPARAM-LABEL: func.func @forward(%arg0: tensor<2x4xf32> {cleave.kind = "input", cleave.name = "x"}, %arg1: tensor<4x3xf32> {cleave.kind = "param", cleave.name = "w"}) -> (tensor<2x3xf32> {cleave.name = "y"})
# MMPARAM: cleave.matmul %arg0, %arg1 : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
cases.add("matmul_17_param")(lambda: single_node(
    "MatMul", [("x", F32, [2, 4])], ["y"], opset=17,
    initializers={"w": np.arange(12, dtype=np.float32).reshape(4, 3)}))

# GEMM-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}, %arg1: tensor<3x4xf32> {{.*}}, %arg2: tensor<4xf32> {{.*}}) -> (tensor<2x4xf32> {cleave.name = "y"})
# GEMM: cleave.gemm %arg0, %arg1, %arg2 {{.*}}: (tensor<2x3xf32>, tensor<3x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
cases.add("gemm_13_basic")(lambda: single_node(
    "Gemm", [("a", F32, [2, 3]), ("b", F32, [3, 4]), ("c", F32, [4])], ["y"], opset=13))

# A is 3x2 transposed (M = 2), B is 4x3 transposed (N = 4).
# GEMMT-LABEL: func.func @forward(%arg0: tensor<3x2xf32> {{.*}}, %arg1: tensor<4x3xf32> {{.*}}, %arg2: tensor<2x4xf32> {{.*}}) -> (tensor<2x4xf32> {cleave.name = "y"})
# GEMMT: cleave.gemm %arg0, %arg1, %arg2 {
# GEMMT-SAME: alpha = 5.000000e-01 : f32
# GEMMT-SAME: beta = 2.000000e+00 : f32
# GEMMT-SAME: trans_a = {{1 : i64|true}}
# GEMMT-SAME: trans_b = {{1 : i64|true}}
# GEMMT-SAME: : (tensor<3x2xf32>, tensor<4x3xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
cases.add("gemm_13_trans_alpha_beta")(lambda: single_node(
    "Gemm", [("a", F32, [3, 2]), ("b", F32, [4, 3]), ("c", F32, [2, 4])], ["y"], opset=13,
    attrs=dict(alpha=0.5, beta=2.0, transA=1, transB=1)))

# GEMMNOC-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}, %arg1: tensor<3x4xf32> {{.*}}) -> (tensor<2x4xf32> {cleave.name = "y"})
# GEMMNOC: cleave.gemm %arg0, %arg1 {{.*}}: (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
cases.add("gemm_13_no_c")(lambda: single_node(
    "Gemm", [("a", F32, [2, 3]), ("b", F32, [3, 4])], ["y"], opset=13))

# GEMMSC-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {{.*}}, %arg1: tensor<3x4xf32> {{.*}}, %arg2: tensor<f32> {{.*}}) -> (tensor<2x4xf32> {cleave.name = "y"})
# GEMMSC: cleave.gemm %arg0, %arg1, %arg2 {{.*}}: (tensor<2x3xf32>, tensor<3x4xf32>, tensor<f32>) -> tensor<2x4xf32>
cases.add("gemm_13_scalar_c")(lambda: single_node(
    "Gemm", [("a", F32, [2, 3]), ("b", F32, [3, 4]), ("c", F32, [])], ["y"], opset=13))

# What exporters emit for a linear layer: weight (out x in) and bias are
# initializers, so parameters.
# GEMMLIN-LABEL: func.func @forward(%arg0: tensor<2x3xf32> {cleave.kind = "input", cleave.name = "x"}, %arg1: tensor<4x3xf32> {cleave.kind = "param", cleave.name = "fc.weight"}, %arg2: tensor<4xf32> {cleave.kind = "param", cleave.name = "fc.bias"}) -> (tensor<2x4xf32> {cleave.name = "y"})
# GEMMLIN: cleave.gemm %arg0, %arg1, %arg2 {
# GEMMLIN-NOT: trans_a = {{1|true}}
# GEMMLIN-SAME: trans_b = {{1 : i64|true}}
# GEMMLIN-SAME: : (tensor<2x3xf32>, tensor<4x3xf32>, tensor<4xf32>) -> tensor<2x4xf32>
cases.add("gemm_17_linear")(lambda: single_node(
    "Gemm", [("x", F32, [2, 3])], ["y"], opset=17, attrs=dict(transB=1),
    initializers={"fc.weight": np.ones((4, 3), np.float32),
                  "fc.bias": np.zeros(4, np.float32)}))


if __name__ == "__main__":
    cases.main()
