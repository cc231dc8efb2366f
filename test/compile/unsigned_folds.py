# Integer constants fold in int64, where a ui64 value from 2^63 up would turn
# negative: comparisons, Max and Min of such constants are left to the
# kernels, and the program's results equal numpy's on the same uint64 values.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

A = np.array([2**63 + 1, 5, 2**64 - 1], dtype=np.uint64)
B = np.array([1, 2**63, 2**64 - 2], dtype=np.uint64)
CASES = {
    "Greater": (np.greater, TensorProto.BOOL),
    "Less": (np.less, TensorProto.BOOL),
    "Max": (np.maximum, TensorProto.UINT64),
    "Min": (np.minimum, TensorProto.UINT64),
}


def model(op, elem):
    nodes = [helper.make_node("Constant", [], ["a"], value=numpy_helper.from_array(A)),
             helper.make_node("Constant", [], ["b"], value=numpy_helper.from_array(B)),
             helper.make_node(op, ["a", "b"], ["y"], name=op.lower())]
    graph = helper.make_graph(nodes, op, [], [helper.make_tensor_value_info("y", elem, [3])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def main():
    work = sys.argv[1]
    problems = []
    for op, (reference, elem) in CASES.items():
        path = os.path.join(work, f"{op}.onnx")
        onnx.save(model(op, elem), path)
        out, results = os.path.join(work, op), os.path.join(work, f"{op}-results")
        subprocess.run(["cleave", "compile", path, "-o", out], check=True)
        subprocess.run(["cleave", "run", out, "--output-dir", results], check=True,
                       stdout=subprocess.DEVNULL)
        got = np.load(os.path.join(results, "y.npy"))
        want = reference(A, B)
        if got.dtype != want.dtype or not np.array_equal(got, want):
            problems.append(f"{op}: cleave {got!r}, numpy {want!r}")
    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
