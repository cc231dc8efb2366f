# `cleave run --flush-subnormals`: the CPU kernels flush subnormal numbers
# to zero, results (FTZ) and operands (DAZ), on every thread of the run.
# A forward Mul over 2^17 elements on two threads (its loop vectorised and
# split in halves, the second on an OpenMP worker: a kernel splits loops
# from 2^16 elements) whose products are normal, subnormal from normal
# factors, and subnormal from a subnormal factor: without the flag every
# product is numpy's (IEEE float32 keeps the subnormals, so the test is not
# vacuous), with it the subnormal ones are zero and the others numpy's. A
# training program takes the flag too: examples/mlp/model.onnx trained 3
# steps, where no value is that small, gives the same losses with it.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

import mlp_data

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "..", "examples", "mlp", "model.onnx")
N = 1 << 17
SMALLEST_NORMAL = np.finfo(np.float32).tiny


def mul_model():
    inputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [N]) for name in "ab"]
    graph = helper.make_graph([helper.make_node("Mul", ["a", "b"], ["y"], name="mul")], "mul",
                              inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def main():
    work = sys.argv[1]
    problems = []

    # Products of 1e-20 and 1e-20 (1e-40: subnormal), of the subnormal 1e-40
    # and 1, of 3 and 0.5, and of -1e-20 and 1e-20, in turn.
    a = np.resize(np.array([1e-20, 1e-40, 3.0, -1e-20], np.float32), N)
    b = np.resize(np.array([1e-20, 1.0, 0.5, 1e-20], np.float32), N)
    np.save(f"{work}/a.npy", a)
    np.save(f"{work}/b.npy", b)
    ieee = a * b
    subnormal = (ieee != 0) & (np.abs(ieee) < SMALLEST_NORMAL)
    if subnormal.sum() != 3 * N // 4:
        problems.append(f"numpy gives {subnormal.sum()} subnormal products, not {3 * N // 4}")
    flushed = np.where(subnormal, np.float32(0), ieee)
    onnx.save(mul_model(), f"{work}/mul.onnx")
    subprocess.run(["cleave", "compile", f"{work}/mul.onnx", "-o", f"{work}/mul"], check=True)
    for flags, expected in (([], ieee), (["--flush-subnormals"], flushed)):
        results = f"{work}/mul-results{len(flags)}"
        subprocess.run(["cleave", "run", f"{work}/mul", "--input", f"a={work}/a.npy", "--input",
                        f"b={work}/b.npy", "--threads", "2", "--output-dir", results, *flags],
                       check=True, stdout=subprocess.DEVNULL)
        got = np.load(f"{results}/y.npy")
        wrong = np.flatnonzero(got != expected)
        if wrong.size:
            i = wrong[0]
            problems.append(f"Mul {flags}: {wrong.size} products differ, the first {a[i]!r} x "
                            f"{b[i]!r} = {got[i]!r}, expected {expected[i]!r}")

    mlp_data.save(work, 5)
    subprocess.run(["cleave", "compile", MODEL, "-o", f"{work}/mlp", "--train", "--batch-size",
                    "8"], check=True)
    losses = {}
    for flags in ([], ["--flush-subnormals"]):
        log = f"{work}/mlp{len(flags)}.json"
        subprocess.run(["cleave", "run", f"{work}/mlp", "--data",
                        f"x={work}/x.npy,labels={work}/labels.npy", "--steps", "3", "--quiet",
                        "--log-json", log, *flags], check=True)
        losses[len(flags)] = [s["loss"] for s in json.load(open(log))["steps"]]
    if losses[0] != losses[1]:
        problems.append(f"the MLP's losses {losses[1]} with --flush-subnormals, {losses[0]} "
                        f"without")

    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
