"""What profiling costs a training step.

    .venv/bin/python bench/trace_overhead.py [--runs R] [--steps N] [--ranks 1|2]
                                             [--baseline DIR]

Compiles the example MLP (examples/mlp/model.onnx, Adam: about 120 kernels
and 10 us a step on one core, the worst case for costs per step and per
kernel) and trains it N steps R times with each of: no profiling flags,
--log-json, --trace, --trace --trace-ops, one after another in every round,
so that a machine's changing load falls on all alike. Prints, per variant,
the minimum and median over the runs of the process's wall time per step
(everything: start, the loop, writing the files). With --baseline DIR (a
directory another build of cleave compiled from the same model, e.g. before
a change) its program runs first in every round too. Nothing is written but
a temporary directory.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLEAVE = os.path.join(ROOT, "build", "bin", "cleave")
MODEL = os.path.join(ROOT, "examples", "mlp", "model.onnx")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--ranks", type=int, choices=(1, 2), default=1)
    parser.add_argument("--baseline", help="a compiled directory of another build")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        rng = np.random.default_rng(0)
        np.save(f"{work}/x.npy", rng.standard_normal((64, 32)).astype(np.float32))
        np.save(f"{work}/labels.npy", rng.integers(0, 10, 64))
        mesh = ["--mesh", f"dp={args.ranks}"] if args.ranks > 1 else []
        subprocess.run([CLEAVE, "compile", MODEL, "-o", f"{work}/mlp", "--train", "--optimizer",
                        "adam"] + mesh, check=True)
        launch = [] if args.ranks == 1 else [
            "mpirun", "-n", str(args.ranks), "--oversubscribe", "--bind-to", "none"] + (
            ["--allow-run-as-root"] if os.geteuid() == 0 else [])
        variants = {"no flags": [], "--log-json": ["--log-json", f"{work}/log.json"],
                    "--trace": ["--trace", f"{work}/trace.json"],
                    "--trace --trace-ops": ["--trace", f"{work}/trace.json", "--trace-ops"]}
        dirs = {name: f"{work}/mlp" for name in variants}
        if args.baseline:
            variants = {"baseline": [], **variants}
            dirs["baseline"] = args.baseline
        times = {name: [] for name in variants}
        for _ in range(args.runs):
            for name, flags in variants.items():
                command = launch + [f"{dirs[name]}/program", "--dir", dirs[name], "--data",
                                    f"x={work}/x.npy,labels={work}/labels.npy", "--steps",
                                    str(args.steps)] + flags
                start = time.perf_counter()
                subprocess.run(command, check=True, capture_output=True)
                times[name].append((time.perf_counter() - start) / args.steps * 1e6)
        print(f"{args.ranks} rank(s), {args.steps} steps, {args.runs} runs: us per step "
              "(process wall time / steps)")
        for name, values in times.items():
            print(f"  {name:22s} min {min(values):8.2f}  median {statistics.median(values):8.2f}")


if __name__ == "__main__":
    sys.exit(main())
