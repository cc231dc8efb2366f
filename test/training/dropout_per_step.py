# Dropout masks in training: each step and each microbatch draws a new mask,
# the same one on every run. The model is y = Dropout(x @ w) (ratio 0.5,
# seed 7) and loss = mean(y * y); with a learning rate so small that w cannot
# change in f32, every step sees the same single batch, so only the mask
# moves the loss. The expected losses come from the generator's definition
# (docs/training.md, "Dropout"), evaluated here with Python integers:
#   key = mix64(seed ^ mix64(stream)), stream = step * 2^32 + microbatch,
#   element i kept when (mix64(key + 0x9e3779b97f4a7c15 (i + 1)) >> 11) 2^-53 >= ratio.
# A second run must log the same losses bit for bit, and with --grad-accum 2
# the two microbatches' masks differ (the step's loss is their mean); on dp=2
# rank r draws microbatch r's mask (stream step * 2^32 + r), as one device
# with --grad-accum 2 does.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper

from onnx_models import constant_node, model, save

MASK = (1 << 64) - 1
SEED, RATIO, STEPS = 7, 0.5, 4


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & MASK
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & MASK
    return z ^ (z >> 31)


def kept(stream, count):
    key = mix64(SEED ^ mix64(stream))
    draws = [(mix64((key + 0x9e3779b97f4a7c15 * (i + 1)) & MASK) >> 11) * 2.0 ** -53
             for i in range(count)]
    return np.array(draws) >= RATIO


def build(path, batch):
    w = np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32)
    nodes = [constant_node("ratio", np.array(RATIO, np.float32)),
             constant_node("training", np.array(True)),
             helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Dropout", ["h", "ratio", "training"], ["y"], seed=SEED),
             helper.make_node("Mul", ["y", "y"], ["sq"]),
             helper.make_node("ReduceMean", ["sq"], ["loss"], keepdims=0)]
    save(model(nodes, [("x", TensorProto.FLOAT, [batch, 6])], ["loss"],
               initializers={"w": w}), path)
    return w


def train(workdir, name, flags, data, ranks=1):
    out = os.path.join(workdir, name)
    subprocess.run(["cleave", "compile", os.path.join(workdir, "m.onnx"), "-o", out, "--train",
                    "--lr", "1e-30", *flags], check=True)
    losses = []
    for run in range(2):
        log = os.path.join(workdir, f"{name}-{run}.json")
        launch = ["cleave", "run"] + (["-n", str(ranks)] if ranks > 1 else [])
        subprocess.run(launch + [out, "--data", f"x={data}", "--steps", str(STEPS),
                                 "--no-shuffle", "--log-json", log], check=True,
                       stderr=subprocess.DEVNULL)
        losses.append([s["loss"] for s in json.load(open(log))["steps"]])
    return losses


def main():
    workdir = sys.argv[1]
    batch = 4
    w = build(os.path.join(workdir, "m.onnx"), batch)
    x = np.random.default_rng(1).standard_normal((batch * 2, 6)).astype(np.float32)
    data = os.path.join(workdir, "x.npy")
    np.save(data, x)
    problems = []

    # One microbatch a step: the first `batch` samples, always (the data
    # holds two batches, so steps alternate between them).
    first, second = train(workdir, "k1", [], data)
    if first != second:
        problems.append(f"two runs differ: {first} vs {second}")
    h = x.astype(np.float64) @ w.astype(np.float64)
    for step in range(1, STEPS + 1):
        rows = h[((step - 1) % 2) * batch:((step - 1) % 2 + 1) * batch]
        mask = kept(step << 32, rows.size).reshape(rows.shape)
        expected = np.mean((rows * mask / (1 - RATIO)) ** 2)
        if abs(first[step - 1] - expected) > 1e-5 * expected:
            problems.append(f"step {step}: loss {first[step - 1]}, expected {expected}")
    if len(set(first)) != STEPS:
        problems.append(f"losses repeat across steps: {first}")

    # Two microbatches a step (the model's batch each): microbatch k draws
    # from stream step * 2^32 + k, and the loss is the mean over both.
    accumulated, _ = train(workdir, "k2", ["--grad-accum", "2"], data)
    # On dp=2 rank r's microbatch is the step's r-th: it draws from stream
    # step * 2^32 + r, so the run equals the one above.
    parallel, _ = train(workdir, "dp2", ["--mesh", "dp=2", "--batch-size", str(2 * batch)],
                        data, ranks=2)
    for label, losses in (("grad-accum 2", accumulated), ("dp=2", parallel)):
        for step in range(1, STEPS + 1):
            total = 0.0
            for k in range(2):
                rows = h[k * batch:(k + 1) * batch]
                mask = kept((step << 32) + k, rows.size).reshape(rows.shape)
                total += np.sum((rows * mask / (1 - RATIO)) ** 2)
            expected = total / h.size
            if abs(losses[step - 1] - expected) > 1e-5 * expected:
                problems.append(f"{label}, step {step}: loss {losses[step - 1]}, "
                                f"expected {expected}")
    for p in problems:
        print("FAIL:", p)
    print(f"losses {first}, accumulated {accumulated}, dp=2 {parallel}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
