# For every single-op case of the import tests in this directory, the result
# types of `cleave import` (the `func.func @forward(...) -> (...)` signature)
# must equal the shapes and element types of onnxruntime's outputs on random
# inputs. The models given to cleave declare only the element type and rank
# of their outputs, so the dims are cleave's own inference.
# Cases that onnxruntime cannot run (each says why where it is registered) are
# checked against onnx's reference evaluator instead.
# It also checks that the catalogue has a case for every ONNX operator in
# docs/ops.md.
#
# RUN: %python %s

import os
import re
import subprocess
import sys
import tempfile

from onnx_models import (load_cases, numpy_mlir_type, random_feeds, run_onnxruntime, save,
                         strip_output_shapes)

HERE = os.path.dirname(os.path.abspath(__file__))
FAMILIES = ["elementwise.py", "broadcast.py", "matmul_gemm.py", "normalization.py",
            "shape_ops.py", "slice_gather.py", "reductions.py", "conv_pool.py", "losses.py",
            "constants.py", "misc.py"]
OPS_DOC = os.path.join(HERE, "..", "..", "docs", "ops.md")


def documented_onnx_ops():
    """The ONNX operator names of the second column of docs/ops.md's table."""
    ops = set()
    for line in open(OPS_DOC):
        if not line.startswith("| `cleave."):
            continue
        column = re.sub(r"\([^)]*\)", "", line.split("|")[2])
        ops.update(n.strip() for n in column.split(",")
                   if re.fullmatch(r"[A-Z][A-Za-z]+", n.strip()))
    return ops


def cleave_result_types(mlir):
    """The result types of @forward, in order."""
    for line in mlir.splitlines():
        if "func.func @forward(" in line:
            if ") -> " not in line:
                return []
            results = line.split(") -> ", 1)[1]
            return re.findall(r"tensor<[^>]*>", results)
    raise ValueError("no func.func @forward in cleave's output")


def reference_types(case, m):
    feeds = case.feeds() if callable(case.feeds) else (case.feeds or random_feeds(m))
    if case.ort:
        return "onnxruntime", [numpy_mlir_type(o) for o in run_onnxruntime(m, feeds)]
    from onnx.reference import ReferenceEvaluator
    return "onnx.reference", [numpy_mlir_type(o) for o in ReferenceEvaluator(m).run(None, feeds)]


def main():
    passed, failures = 0, []
    seen_ops = set()
    with tempfile.TemporaryDirectory() as tmp:
        for family in FAMILIES:
            cases = load_cases(os.path.join(HERE, family))
            for name, case in cases.cases.items():
                label = f"{family[:-3]}/{name}"
                m = case.build()
                seen_ops.update(n.op_type for n in m.graph.node)
                path = os.path.join(tmp, name + ".onnx")
                save(strip_output_shapes(m), path)
                try:
                    ref, want = reference_types(case, m)
                except Exception as e:  # the reference could not run it: a broken case
                    failures.append(f"{label}: the reference failed: {str(e).splitlines()[0]}")
                    continue
                proc = subprocess.run(["cleave", "import", path], capture_output=True, text=True)
                if proc.returncode != 0:
                    failures.append(f"{label}: cleave import exited {proc.returncode}: "
                                    f"{proc.stderr.strip()}")
                    continue
                try:
                    got = cleave_result_types(proc.stdout)
                except ValueError as e:
                    failures.append(f"{label}: {e}")
                    continue
                if got != want:
                    failures.append(f"{label}: cleave {', '.join(got) or '(none)'} vs {ref} "
                                    f"{', '.join(want)}")
                else:
                    passed += 1
    missing = sorted(documented_onnx_ops() - seen_ops)
    if missing:
        failures.append(f"no case for the documented ONNX ops: {', '.join(missing)}")
    for f in failures:
        print("MISMATCH", f)
    print(f"{passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
