"""Resharding on load, checked against the uninterrupted one-device run.

For each (writer, reader) pair of layouts of the example MLP (Adam, a cosine
schedule, shuffled epochs, the same global batch on every layout): the
writer trains HALF steps and checkpoints; the reader resumes that
checkpoint on its own layout and trains to STEPS. The writer's losses, the
reader's losses (steps HALF+1 .. STEPS) and the reader's trained
parameters (--save-onnx) must equal the uninterrupted one-device run's
within 1e-5 (relative, per step; parameters also 1e-6 absolute). The
writer's checkpoint, put together by the safetensors package and
docs/formats.md's layouts (checkpoints.py), must hold the one-device
checkpoint's tensors (parameters and Adam moments) within the same bounds.
"""
import json
import os
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper

from checkpoints import global_tensors

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
MODEL = os.path.join(ROOT, "examples", "mlp", "model.onnx")
PLAN = os.path.join(ROOT, "plans", "megatron-mlp.json")
STEPS, HALF = 6, 3
TRAIN = ["--train", "--optimizer", "adam", "--lr", "0.01", "--lr-schedule", "cosine"]
# name: (ranks, compile flags). The model's micro-batch is 8: every layout
# accumulates microbatches up to a global batch of 32.
LAYOUTS = {
    "single": (1, ["--grad-accum", "4"]),
    "dp4": (4, ["--mesh", "dp=4"]),
    "tp2": (2, ["--mesh", "tp=2", "--plan", PLAN, "--grad-accum", "4"]),
    "dp2tp2-zero3": (4, ["--mesh", "dp=2,tp=2", "--plan", PLAN, "--zero", "3",
                         "--grad-accum", "2"]),
    "dp2-zero1": (2, ["--mesh", "dp=2", "--zero", "1", "--grad-accum", "2"]),
    "dp2-zero2": (2, ["--mesh", "dp=2", "--zero", "2", "--grad-accum", "2"]),
}
RTOL, ATOL = 1e-5, 1e-6


def run(work, layout, *flags):
    ranks = LAYOUTS[layout][0]
    data = f"x={work}/x.npy,labels={work}/labels.npy"
    command = ["cleave", "run", "-n", str(ranks), f"{work}/{layout}", "--data", data,
               "--total-steps", str(STEPS), *flags]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed: {done.stderr}")


def initializers(path):
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


def close(a, b):
    return np.allclose(a, b, rtol=RTOL, atol=ATOL)


def main(work, pairs, precision="fp32"):
    """`precision`: every layout's, the reference's too."""
    start = time.time()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((80, 32)).astype(np.float32)
    np.save(f"{work}/x.npy", x)
    np.save(f"{work}/labels.npy", np.argmax(x[:, :10], axis=1).astype(np.int64))
    for layout in {"single"} | {name for pair in pairs for name in pair}:
        subprocess.run(["cleave", "compile", MODEL, "-o", f"{work}/{layout}", *TRAIN,
                        "--precision", precision, *LAYOUTS[layout][1]],
                       check=True, stderr=subprocess.DEVNULL)
    # The reference: the uninterrupted one-device run, and its checkpoint
    # after HALF steps.
    run(work, "single", "--steps", str(STEPS), "--log-json", f"{work}/reference.json",
        "--save-onnx", f"{work}/reference.onnx", "--checkpoint-dir", f"{work}/reference-ckpt",
        "--checkpoint-every", str(HALF))
    losses = [s["loss"] for s in json.load(open(f"{work}/reference.json"))["steps"]]
    trained = initializers(f"{work}/reference.onnx")
    at_half = global_tensors(f"{work}/reference-ckpt/step-{HALF}")
    problems = []
    written = set()
    for writer, reader in pairs:
        ckpt = f"{work}/{writer}-ckpt"
        if writer not in written:
            run(work, writer, "--steps", str(HALF), "--checkpoint-dir", ckpt,
                "--log-json", f"{work}/{writer}-half.json")
            written.add(writer)
            got = [s["loss"] for s in json.load(open(f"{work}/{writer}-half.json"))["steps"]]
            if not np.allclose(got, losses[:HALF], rtol=RTOL, atol=0):
                problems.append(f"{writer}: losses {got} are not {losses[:HALF]}")
            saved = global_tensors(f"{ckpt}/step-{HALF}")
            if set(saved) != set(at_half):
                problems.append(f"{writer}: checkpoint holds {sorted(saved)}, one device "
                                f"{sorted(at_half)}")
            for name in set(saved) & set(at_half):
                if not close(saved[name], at_half[name]):
                    problems.append(f"{writer}: checkpoint's {name} differs from one device's "
                                    f"by {np.abs(saved[name] - at_half[name]).max():.3g}")
        out = f"{work}/{writer}-to-{reader}"
        run(work, reader, "--steps", str(STEPS), "--resume", ckpt, "--log-json", f"{out}.json",
            "--save-onnx", f"{out}.onnx")
        steps = json.load(open(f"{out}.json"))["steps"]
        got = [s["loss"] for s in steps]
        if [s["step"] for s in steps] != list(range(HALF + 1, STEPS + 1)):
            problems.append(f"{writer} -> {reader}: ran steps {[s['step'] for s in steps]}")
        elif not np.allclose(got, losses[HALF:], rtol=RTOL, atol=0):
            problems.append(f"{writer} -> {reader}: losses {got} are not {losses[HALF:]}")
        final = initializers(f"{out}.onnx")
        worst = max(float(np.abs(final[k] - v).max()) for k, v in trained.items())
        for name, value in trained.items():
            if not close(final[name], value):
                problems.append(f"{writer} -> {reader}: trained {name} differs by "
                                f"{np.abs(final[name] - value).max():.3g}")
        loss_error = max(abs(a - b) / abs(b) for a, b in zip(got, losses[HALF:]))
        print(f"{writer} -> {reader}: losses within {loss_error:.2g} relative, parameters "
              f"within {worst:.2g}")
    for p in problems:
        print("FAIL:", p)
    print(f"{len(pairs)} pairs in {time.time() - start:.0f} s")
    sys.exit(1 if problems else 0)
