# Every ONNX backend node test (shipped in the onnx package) whose operators
# cleave supports is imported, and the result types cleave infers must equal
# the dims and element types of the test's expected outputs - reference data
# written by the ONNX project, not by us. Tests that use an operator cleave
# does not import are skipped; tests that cleave refuses although all their
# operators are supported are listed as refused with cleave's one-line reason.
# A crash, a malformed error, or a wrong type fails. The run fails if fewer
# than MIN_CHECKED tests were checked, so the suite cannot pass by skipping.
#
# RUN: %python %s

import os
import re
import subprocess
import sys

import onnx
from onnx import numpy_helper

MIN_CHECKED = 250

SUPPORTED = {
    "Neg", "Sqrt", "Reciprocal", "Exp", "Log", "Abs", "Tanh", "Sigmoid", "Relu", "Erf",
    "Not", "Identity", "Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "Greater",
    "Where", "MatMul", "GlobalAveragePool", "LeakyRelu", "Gelu", "Cast", "Softmax",
    "LogSoftmax", "LayerNormalization", "BatchNormalization", "Dropout", "Gemm", "Reshape",
    "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Concat", "Split", "Slice", "Gather",
    "Expand", "ReduceSum", "ReduceMean", "ReduceMax", "Conv", "MaxPool", "AveragePool",
    "SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss", "Trilu", "Constant",
    "ConstantOfShape", "Shape", "Range",
}

MLIR_TYPES = {
    onnx.TensorProto.FLOAT: "f32", onnx.TensorProto.DOUBLE: "f64",
    onnx.TensorProto.FLOAT16: "f16", onnx.TensorProto.BFLOAT16: "bf16",
    onnx.TensorProto.INT8: "i8", onnx.TensorProto.INT16: "i16",
    onnx.TensorProto.INT32: "i32", onnx.TensorProto.INT64: "i64",
    onnx.TensorProto.UINT8: "ui8", onnx.TensorProto.UINT16: "ui16",
    onnx.TensorProto.UINT32: "ui32", onnx.TensorProto.UINT64: "ui64",
    onnx.TensorProto.BOOL: "i1",
}


def node_test_root():
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")


def expected_types(case_dir, model):
    data_dir = os.path.join(case_dir, "test_data_set_0")
    types = []
    for i, _ in enumerate(model.graph.output):
        tensor = onnx.TensorProto()
        path = os.path.join(data_dir, f"output_{i}.pb")
        if not os.path.exists(path):
            return None
        with open(path, "rb") as f:
            tensor.ParseFromString(f.read())
        element = MLIR_TYPES.get(tensor.data_type)
        if element is None:
            return None
        dims = "x".join(str(d) for d in tensor.dims)
        types.append(f"tensor<{dims + 'x' if dims else ''}{element}>")
    return types


def result_types(ir):
    # The IR's @forward signature: -> (tensor<..> {cleave.name = ".."}, ...)
    signature = re.search(r"func\.func @forward\(.*?\) -> \((.*)\) \{$|func\.func @forward\(.*?\) -> (tensor<[^ ]*>)",
                          ir, re.M)
    if not signature:
        return None
    text = signature.group(1) or signature.group(2)
    return re.findall(r"tensor<[^>]*>", text)


def main():
    root = node_test_root()
    checked, skipped, refused, failed = 0, 0, [], []
    for name in sorted(os.listdir(root)):
        case_dir = os.path.join(root, name)
        model_path = os.path.join(case_dir, "model.onnx")
        if not os.path.exists(model_path):
            continue
        model = onnx.load(model_path)
        if any(n.domain not in ("", "ai.onnx") or n.op_type not in SUPPORTED
               for n in model.graph.node):
            skipped += 1
            continue
        expected = expected_types(case_dir, model)
        run = subprocess.run(["cleave", "import", model_path], capture_output=True, text=True,
                             errors="replace")
        lines = run.stderr.splitlines()
        if run.returncode == 1 and 1 <= len(lines) <= 2 and lines[0].startswith("cleave: error: "):
            refused.append(f"{name}: {lines[0].split(': ', 3)[-1]}")
            continue
        if run.returncode != 0:
            failed.append(f"{name}: exit {run.returncode}: {run.stderr[:300]!r}")
            continue
        got = result_types(run.stdout)
        if expected is None:
            skipped += 1
            continue
        if got != expected:
            failed.append(f"{name}: cleave infers {got}, the test expects {expected}")
            continue
        checked += 1
    for line in refused:
        print("refused:", line)
    for line in failed:
        print("FAIL:", line)
    print(f"{len(refused)} refused (listed above), {skipped} skipped (unsupported operators)")
    print(f"{checked} passed, {len(failed)} failed")
    if checked < MIN_CHECKED:
        print(f"only {checked} node tests checked, expected at least {MIN_CHECKED}")
        sys.exit(1)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
