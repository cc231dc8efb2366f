# ONNX's own training-domain test data that `cleave conformance` cannot take
# as shipped, run with the smallest change that makes it valid, against the
# expected outputs the ONNX project wrote:
# - node/test_adam_multiple: its expected outputs were computed with epsilon
#   1e-2, but the model's Adam node lacks the attribute (onnx/onnx#7749); the
#   upstream fix (onnx/onnx#7763) adds epsilon=0.01 to the node, as here.
# - simple/test_gradient_of_add and test_gradient_of_add_and_mul (Gradient):
#   they import ai.onnx at opset 12, older than cleave's 13; Add and Mul are
#   the same at 13 for float, so the copies import 13.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import os
import shutil
import subprocess
import sys

import onnx
from onnx import helper

DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
CASES = ["node/test_adam_multiple", "simple/test_gradient_of_add",
         "simple/test_gradient_of_add_and_mul"]


def main():
    workdir = sys.argv[1]
    for case in CASES:
        target = os.path.join(workdir, os.path.basename(case))
        shutil.copytree(os.path.join(DATA, case), target)
        path = os.path.join(target, "model.onnx")
        model = onnx.load(path)
        for node in model.graph.node:
            if node.op_type == "Adam" and not any(a.name == "epsilon" for a in node.attribute):
                node.attribute.append(helper.make_attribute("epsilon", 1e-2))
        for opset in model.opset_import:
            if opset.domain in ("", "ai.onnx") and opset.version < 13:
                opset.version = 13
        onnx.checker.check_model(model)
        onnx.save(model, path)
    run = subprocess.run(["cleave", "conformance", workdir], capture_output=True, text=True)
    print(run.stdout)
    print(run.stderr, file=sys.stderr)
    expected = "".join(f"PASS {os.path.basename(c)}\n" for c in sorted(CASES, key=os.path.basename))
    expected += f"{len(CASES)} passed, 0 failed, 0 skipped\n"
    sys.exit(0 if run.returncode == 0 and run.stdout == expected else 1)


if __name__ == "__main__":
    main()
