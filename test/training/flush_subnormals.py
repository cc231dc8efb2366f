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
import sys

import numpy as np
import onnx

import mlp_data
from expectations import expect, finish, run
from onnx_models import F32, single_node

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "..", "examples", "mlp", "model.onnx")
N = 1 << 17
SMALLEST_NORMAL = np.finfo(np.float32).tiny


def main():
    work = sys.argv[1]

    # Products of 1e-20 and 1e-20 (1e-40: subnormal), of the subnormal 1e-40
    # and 1, of 3 and 0.5, and of -1e-20 and 1e-20, in turn.
    a = np.resize(np.array([1e-20, 1e-40, 3.0, -1e-20], np.float32), N)
    b = np.resize(np.array([1e-20, 1.0, 0.5, 1e-20], np.float32), N)
    np.save(f"{work}/a.npy", a)
    np.save(f"{work}/b.npy", b)
    ieee = a * b
    subnormal = (ieee != 0) & (np.abs(ieee) < SMALLEST_NORMAL)
    expect(subnormal.sum() == 3 * N // 4,
           f"numpy gives {subnormal.sum()} subnormal products, not {3 * N // 4}")
    flushed = np.where(subnormal, np.float32(0), ieee)
    onnx.save(single_node("Mul", [("a", F32, [N]), ("b", F32, [N])], ["y"]), f"{work}/mul.onnx")
    run(["cleave", "compile", f"{work}/mul.onnx", "-o", f"{work}/mul"])
    for flags, expected in (([], ieee), (["--flush-subnormals"], flushed)):
        results = f"{work}/mul-results{len(flags)}"
        run(["cleave", "run", f"{work}/mul", "--input", f"a={work}/a.npy", "--input",
             f"b={work}/b.npy", "--threads", "2", "--output-dir", results, *flags])
        got = np.load(f"{results}/y.npy")
        wrong = np.flatnonzero(got != expected)
        i = wrong[0] if wrong.size else 0
        expect(not wrong.size, f"Mul {flags}: {wrong.size} products differ, the first {a[i]!r} x "
                               f"{b[i]!r} = {got[i]!r}, expected {expected[i]!r}")

    mlp_data.save(work, 5)
    run(["cleave", "compile", MODEL, "-o", f"{work}/mlp", "--train", "--batch-size", "8"])
    losses = {}
    for flags in ([], ["--flush-subnormals"]):
        log = f"{work}/mlp{len(flags)}.json"
        run(["cleave", "run", f"{work}/mlp", "--data", f"x={work}/x.npy,labels={work}/labels.npy",
             "--steps", "3", "--quiet", "--log-json", log, *flags])
        losses[len(flags)] = [s["loss"] for s in json.load(open(log))["steps"]]
    expect(losses[0] == losses[1],
           f"the MLP's losses {losses[1]} with --flush-subnormals, {losses[0]} without")
    finish()


if __name__ == "__main__":
    main()
