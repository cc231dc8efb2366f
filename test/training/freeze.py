# --freeze GLOB keeps matching parameters fixed: after training, fc1's weights
# and bias are byte-for-byte their initial values while fc2's have moved; the
# plan has no optimizer state for fc1.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "..", "examples", "mlp", "model.onnx")


def main():
    work = sys.argv[1]
    rng = np.random.default_rng(0)
    np.save(f"{work}/x.npy", rng.standard_normal((32, 32)).astype(np.float32))
    np.save(f"{work}/labels.npy", rng.integers(0, 10, 32).astype(np.int64))
    subprocess.run(["cleave", "compile", MODEL, "-o", f"{work}/out", "--train", "--optimizer",
                    "momentum", "--freeze", "fc1.*"], check=True)
    subprocess.run(["cleave", "run", f"{work}/out", "--data", f"x={work}/x.npy",
                    "--data", f"labels={work}/labels.npy", "--steps", "5", "--output-dir",
                    f"{work}/res"], check=True, stderr=subprocess.DEVNULL)
    plan = json.load(open(f"{work}/out/plan.json"))
    initial = np.fromfile(f"{work}/out/weights.bin", dtype=np.uint8)
    trained = np.fromfile(f"{work}/res/weights.bin", dtype=np.uint8)
    problems = []
    for p in plan["parameters"]:
        window = slice(p["offset"], p["offset"] + p["bytes"])
        same = np.array_equal(initial[window], trained[window])
        if p["name"].startswith("fc1.") and not same:
            problems.append(f"frozen {p['name']} changed")
        if p["name"].startswith("fc2.") and same:
            problems.append(f"trainable {p['name']} did not change")
    if any(":fc1." in s["name"] for s in plan["state"]):
        problems.append("optimizer state for a frozen parameter")
    for p in problems:
        print("FAIL:", p)
    print(f"{0 if problems else 1} passed, {1 if problems else 0} failed")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
