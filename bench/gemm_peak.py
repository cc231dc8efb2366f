"""This machine's measured f32 GEMM rate, the benches' "of peak" column.

A 1024 x 1024 x 1024 MatMul compiled by cleave, whose f32 products are
oneDNN matmul primitives (runtime/cpu/ProductPrimitives.h), timed by its
driver (`--stats`, the best of 20 calls) on the given threads: oneDNN's rate
on this CPU, measured in the bench's own run.

    .venv/bin/python bench/gemm_peak.py [--threads T ...]
"""
import argparse
import json
import os
import subprocess
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

CLEAVE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build",
                      "bin", "cleave")
SIZE = 1024


def gemm_peak_flops_per_second(threads, repeat=20):
    with tempfile.TemporaryDirectory() as work:
        shape = [SIZE, SIZE]
        graph = helper.make_graph(
            [helper.make_node("MatMul", ["a", "b"], ["y"])], "gemm_peak",
            [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name in "ab"],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
        model = os.path.join(work, "gemm.onnx")
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
        subprocess.run([CLEAVE, "compile", model, "-o", os.path.join(work, "out")], check=True,
                       capture_output=True)
        rng = np.random.default_rng(0)
        inputs = []
        for name in "ab":
            np.save(os.path.join(work, name + ".npy"),
                    rng.standard_normal(shape).astype(np.float32))
            inputs += ["--input", f"{name}={work}/{name}.npy"]
        run = subprocess.run([CLEAVE, "run", os.path.join(work, "out"), *inputs, "--threads",
                              str(threads), "--repeat", str(repeat), "--stats", "--output-dir",
                              work], check=True, capture_output=True, text=True)
        seconds = json.loads(run.stdout.strip().splitlines()[-1])["seconds_min"]
    return 2 * SIZE ** 3 / seconds


def measured_peaks(threads):
    """The rate on each thread count, printed as a bench's header line."""
    rates = {t: gemm_peak_flops_per_second(t) for t in threads}
    print("GEMM peak (oneDNN f32, 1024^3, bench/gemm_peak.py): " + ", ".join(
        f"{rate / 1e9:.1f} GFLOP/s on {t} thread(s)" for t, rate in rates.items()))
    return rates


def fraction_of_peak(program, seconds, rate):
    """The FLOPs of a compiled `program` (its plan.json's) per second over `rate`."""
    return json.load(open(os.path.join(program, "plan.json")))["flops"] / seconds / rate


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    measured_peaks(parser.parse_args().threads)


if __name__ == "__main__":
    main()
