# Flag values that would wrap around or mean nothing are refused, by
# `cleave run` and by the program alike, with exit 2 and one error line
# naming the flag: a negative --seed (which would equal 2^64 - 1), a --seed,
# --steps or --total-steps past its type, --epochs so large that the steps
# do not fit (or infinite), and an input or data set given twice.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "..", "examples", "mlp", "model.onnx")


def main():
    work = sys.argv[1]
    rng = np.random.default_rng(0)
    np.save(f"{work}/x.npy", rng.standard_normal((16, 32)).astype(np.float32))
    np.save(f"{work}/x8.npy", rng.standard_normal((8, 32)).astype(np.float32))
    np.save(f"{work}/labels.npy", rng.integers(0, 10, 16).astype(np.int64))
    np.save(f"{work}/labels8.npy", rng.integers(0, 10, 8).astype(np.int64))
    subprocess.run(["cleave", "compile", MODEL, "-o", f"{work}/train", "--train",
                    "--batch-size", "8"], check=True)
    subprocess.run(["cleave", "compile", MODEL, "-o", f"{work}/fwd"], check=True)
    data = ["--data", f"x={work}/x.npy,labels={work}/labels.npy"]
    training = [
        ("--seed", ["--steps", "1", "--seed", "-1"]),
        ("--seed", ["--steps", "1", "--seed", "18446744073709551616"]),
        ("--steps", ["--steps", "18446744073709551616"]),
        ("--steps", ["--steps", "-1"]),
        ("--steps", ["--steps", "1.5"]),
        ("--total-steps", ["--steps", "1", "--total-steps", "18446744073709551617"]),
        ("--epochs", ["--epochs", "1e30"]),
        ("--epochs", ["--epochs", "inf"]),
        ("--data", ["--steps", "1", "--data", f"x={work}/x.npy"]),
    ]
    problems = []

    def expect(name, flag, args):
        result = subprocess.run(args, capture_output=True, text=True)
        lines = [l for l in result.stderr.splitlines() if not l.startswith("note: ")]
        if result.returncode != 2 or len(lines) != 1 or \
                not lines[0].startswith("cleave: error: ") or flag not in lines[0]:
            problems.append(f"{name}: exit {result.returncode}, stderr {result.stderr!r}, "
                            f"expected exit 2 and one line naming {flag}")

    for flag, args in training:
        expect(f"cleave run {' '.join(args)}", flag,
               ["cleave", "run", f"{work}/train", *data, *args])
        expect(f"program {' '.join(args)}", flag,
               [f"{work}/train/program", "--dir", f"{work}/train", *data, *args])
    twice = ["--input", f"x={work}/x8.npy", "--input", f"x={work}/x8.npy",
             "--input", f"labels={work}/labels8.npy"]
    expect("cleave run --input x twice", "--input", ["cleave", "run", f"{work}/fwd", *twice])
    expect("program --input x twice", "--input",
           [f"{work}/fwd/program", "--dir", f"{work}/fwd", *twice])

    # The largest values are taken: a seed of 2^64 - 1 trains.
    result = subprocess.run(["cleave", "run", f"{work}/train", *data, "--steps", "1",
                             "--seed", "18446744073709551615"], capture_output=True, text=True)
    if result.returncode != 0:
        problems.append(f"--seed 2^64 - 1: exit {result.returncode}, {result.stderr!r}")

    for problem in problems:
        print("FAIL:", problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
