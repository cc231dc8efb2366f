# What cleave compile refuses, rather than leave it for a kernel to refuse
# (exit 3) when the program runs: exit 1 and one line naming the type.
#
# An op on an element type its constraint does not admit, at import:
# RUN: %python %s exp_f16 %t.exp.onnx
# RUN: not cleave compile %t.exp.onnx -o %t.exp --emit cpp 2>&1 | FileCheck %s --check-prefix=F16
# F16: cleave: error: {{.*}}: node 'exp' (Exp, domain 'ai.onnx', opset 17): 'cleave.exp' op operand #0 must be statically shaped tensor of 32-bit float or 64-bit float values, but got 'tensor<2x3xf16>'
#
# A bf16 input or output, which has no .npy form:
# RUN: %python %s cast_to_bf16 %t.bf16.onnx
# RUN: not cleave compile %t.bf16.onnx -o %t.bf16 --emit cpp 2>&1 | FileCheck %s --check-prefix=BF16
# BF16: cleave: error: {{.*}}: output 'y': unsupported element type bf16: it has no .npy form to write it to
#
# With --target cuda, an op whose CUDA kernel takes fewer types, on f64 (the CPU
# target takes it):
# RUN: %python %s matmul_f64 %t.matmul.onnx
# RUN: not cleave compile %t.matmul.onnx -o %t.cuda --target cuda --emit cpp 2>&1 | FileCheck %s --check-prefix=CUDA
# CUDA: cleave: error: {{.*}}: node 'matmul': unsupported with --target cuda: cleave.matmul on f64 (its CUDA kernel takes f32, bf16 or f16 only)
# CUDA-NEXT: note: compile for --target cpu, or cast the data to f32
# RUN: cleave compile %t.matmul.onnx -o %t.cpu --emit cpp
#
# Integer arithmetic of every width on either target:
# RUN: %python %s add_u16 %t.add.onnx
# RUN: cleave compile %t.add.onnx -o %t.add --target cuda --emit cpp
# RUN: FileCheck %s --check-prefix=ADD < %t.add/program.cu
# ADD: cleave::rt::cuda::add(

from onnx import TensorProto

from onnx_models import BF16, F16, F32, F64, Cases, single_node

cases = Cases()
cases.add("exp_f16")(lambda: single_node("Exp", [("x", F16, [2, 3])], ["y"]))
cases.add("cast_to_bf16")(lambda: single_node("Cast", [("x", F32, [2, 3])], ["y"], attrs={"to": BF16}))
cases.add("matmul_f64")(lambda: single_node("MatMul", [("a", F64, [2, 3]), ("b", F64, [3, 4])], ["y"]))
cases.add("add_u16")(lambda: single_node("Add", [("a", TensorProto.UINT16, [2, 3]),
                                                 ("b", TensorProto.UINT16, [3])], ["y"]))

if __name__ == "__main__":
    cases.main()
