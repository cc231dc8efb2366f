# --freeze GLOB keeps matching parameters fixed: after training, fc1's weights
# and bias are byte-for-byte their initial values while fc2's have moved; the
# plan has no optimizer state for fc1. The same in bf16, whose @apply rounds
# each weight it updates into its bf16 copy and whose @narrow_weights runs
# before the first step alone (plan.json's narrow_weights_once): after the
# last step every copy in the weights blob is torch's bf16 rounding of its
# trained parameter, the frozen fc1's (made once) and the updated fc2's and
# fc3's alike.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "..", "examples", "mlp", "model.onnx")


def train(work, label, flags):
    """The plan, initial and trained weights blob of 5 steps with fc1 frozen."""
    out, res = f"{work}/{label}", f"{work}/{label}-trained"
    subprocess.run(["cleave", "compile", MODEL, "-o", out, "--train", "--optimizer", "momentum",
                    "--freeze", "fc1.*", *flags], check=True)
    subprocess.run(["cleave", "run", out, "--data", f"x={work}/x.npy", "--data",
                    f"labels={work}/labels.npy", "--steps", "5", "--output-dir", res],
                   check=True, stderr=subprocess.DEVNULL)
    return (json.load(open(f"{out}/plan.json")),
            np.fromfile(f"{out}/weights.bin", dtype=np.uint8),
            np.fromfile(f"{res}/weights.bin", dtype=np.uint8))


def frozen_and_trained(label, plan, initial, trained):
    problems = []
    for p in plan["parameters"]:
        window = slice(p["offset"], p["offset"] + p["bytes"])
        same = np.array_equal(initial[window], trained[window])
        if p["name"].startswith("fc1.") and not same:
            problems.append(f"{label}: frozen {p['name']} changed")
        if p["name"].startswith("fc2.") and same:
            problems.append(f"{label}: trainable {p['name']} did not change")
    if any(":fc1." in s["name"] for s in plan["state"] if s["role"] == "optimizer_state"):
        problems.append(f"{label}: optimizer state for a frozen parameter")
    return problems


def copies_rounded(plan, trained):
    """Each bf16 copy in the trained blob against torch's rounding of its
    trained parameter."""
    problems = []
    if not plan["training"].get("narrow_weights_once"):
        problems.append("bf16: plan.json's narrow_weights_once is not true")
    parameters = {p["name"]: p for p in plan["parameters"]}
    copies = [s for s in plan["state"] if s["role"] == "weight_copy"]
    if sorted(s["state_of"] for s in copies) != ["fc1.weight", "fc2.weight", "fc3.weight"]:
        problems.append(f"bf16: weight copies {[s['name'] for s in copies]}")
    for copy in copies:
        p = parameters[copy["state_of"]]
        weight = trained[p["offset"]:p["offset"] + p["bytes"]].view(np.float32)
        rounded = torch.from_numpy(weight.copy()).to(torch.bfloat16).view(torch.int16).numpy()
        held = trained[copy["offset"]:copy["offset"] + copy["bytes"]].view(np.int16)
        if not np.array_equal(held, rounded):
            problems.append(f"bf16: {copy['name']} is not {p['name']} rounded to bf16 "
                            f"({np.count_nonzero(held != rounded)} of {held.size} differ)")
    return problems


def main():
    work = sys.argv[1]
    rng = np.random.default_rng(0)
    np.save(f"{work}/x.npy", rng.standard_normal((32, 32)).astype(np.float32))
    np.save(f"{work}/labels.npy", rng.integers(0, 10, 32).astype(np.int64))
    problems = frozen_and_trained("fp32", *train(work, "fp32", []))
    plan, initial, trained = train(work, "bf16", ["--precision", "bf16"])
    problems += frozen_and_trained("bf16", plan, initial, trained)
    problems += copies_rounded(plan, trained)
    for p in problems:
        print("FAIL:", p)
    print(f"{0 if problems else 1} passed, {1 if problems else 0} failed")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
