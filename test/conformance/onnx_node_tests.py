# `cleave conformance` over every ONNX backend node test the onnx package
# ships: each case cleave can import is compiled, run on its data sets and
# compared with the expected outputs (written by the ONNX project) at ONNX's
# tolerances. Nothing may fail, and every case must have the status that
# expected.txt records for it (pass, or skip with the reason's category), so
# a case that newly passes, newly skips or skips for another reason fails
# the test until expected.txt records it:
#   cleave conformance --record test/conformance/expected.txt DIR
# (DIR: the onnx package's onnx/backend/test/data/node; expected.txt is for
# the onnx version of scripts/requirements.txt). The optimizers of the
# training domain ai.onnx.preview.training (REQUIRED) must pass whatever the
# file says. test_adam_multiple passes too, or, with the onnx packages whose
# test data has the defect, is skipped for it: its expected outputs use an
# epsilon its model does not carry (onnx/onnx#7749); onnx_training_tests.py
# runs it with the upstream fix.
#
# RUN: %python %s %S/expected.txt

import os
import re
import subprocess
import sys

import onnx

REQUIRED = ["test_adam", "test_momentum", "test_momentum_multiple", "test_nesterov_momentum",
            "test_adagrad", "test_adagrad_multiple"]


def main():
    expected = sys.argv[1]
    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    run = subprocess.run(["cleave", "conformance", "--expected", expected, root],
                         capture_output=True, text=True)
    print(run.stdout)
    print(run.stderr, file=sys.stderr)
    lines = run.stdout.splitlines()
    if not re.search(r"^\d+ passed, 0 failed, \d+ skipped$", run.stdout, re.M):
        print("a case failed, or there is no summary line")
        sys.exit(1)
    if "0 differ from " + expected not in lines:
        print("statuses differ from " + expected + " (the DIFFERS lines above)")
        sys.exit(1)
    missing = [c for c in REQUIRED if f"PASS {c}" not in lines]
    if missing:
        print("these cases did not pass:", missing)
        sys.exit(1)
    if not re.search(r"^(PASS test_adam_multiple$|SKIP test_adam_multiple: onnx/onnx#7749: )",
                     run.stdout, re.M):
        print("test_adam_multiple neither passes nor is skipped for onnx/onnx#7749")
        sys.exit(1)
    sys.exit(1 if run.returncode else 0)


if __name__ == "__main__":
    main()
