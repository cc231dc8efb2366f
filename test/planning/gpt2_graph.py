# examples/gpt2/make_model.py's graph computes a GPT's loss: a small
# configuration (2 blocks of width 64, 4 heads, 128 tokens, 16 positions)
# with its external data written (random weights) gives onnxruntime's loss
# on cleave, within 1e-5 relative, and trains: --train compiles and a few
# SGD steps on one sequence lower the loss. Its parameter count is GPT-2's
# formula: embeddings + per block 12 w^2 + 13 w + final LayerNorm + head.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "gpt2"))
from make_model import build  # noqa: E402

LAYERS, WIDTH, HEADS, VOCAB, SEQ = 2, 64, 4, 128, 16


def main(work):
    problems = []
    model, count = build(LAYERS, WIDTH, HEADS, VOCAB, SEQ, "weights.bin")
    expected = (VOCAB * WIDTH + SEQ * WIDTH + LAYERS * (12 * WIDTH ** 2 + 13 * WIDTH)
                + 2 * WIDTH + VOCAB * WIDTH)
    if count != expected:
        problems.append(f"{count} parameters, GPT-2's formula gives {expected}")
    path = os.path.join(work, "gpt2.onnx")
    onnx.save(model, path)
    rng = np.random.default_rng(0)
    with open(os.path.join(work, "weights.bin"), "wb") as weights:
        for tensor in model.graph.initializer:
            shape = tuple(tensor.dims)
            scale = 1.0 if tensor.name.endswith("ln1.weight") or tensor.name.endswith(
                "ln2.weight") or tensor.name == "ln_f.weight" else 0.02
            value = (np.ones(shape) if scale == 1.0 else rng.standard_normal(shape) * scale)
            weights.write(value.astype(np.float32).tobytes())
    idx = rng.integers(0, VOCAB, (2, SEQ))
    targets = rng.integers(0, VOCAB, (2, SEQ))
    np.save(os.path.join(work, "idx.npy"), idx)
    np.save(os.path.join(work, "targets.npy"), targets)
    reference = onnxruntime.InferenceSession(path).run(None, {"idx": idx, "targets": targets})[0]

    out = os.path.join(work, "forward")
    subprocess.run(["cleave", "compile", path, "-o", out, "--input-shape", f"idx=2x{SEQ}",
                    "--input-shape", f"targets=2x{SEQ}"], check=True)
    subprocess.run(["cleave", "run", out, "--input", f"idx={work}/idx.npy", "--input",
                    f"targets={work}/targets.npy", "--output-dir", work], check=True)
    loss = np.load(os.path.join(work, "loss.npy"))
    print(f"loss: cleave {float(loss):.7f}, onnxruntime {float(reference):.7f}")
    if abs(loss - reference) > 1e-5 * abs(reference):
        problems.append(f"loss {loss}, onnxruntime {reference}")

    train = os.path.join(work, "train")
    subprocess.run(["cleave", "compile", path, "-o", train, "--train", "--lr", "0.5",
                    "--batch-size", "2"], check=True, stderr=subprocess.DEVNULL)
    log = os.path.join(work, "metrics.json")
    subprocess.run(["cleave", "run", train, "--data", f"idx={work}/idx.npy,targets="
                    f"{work}/targets.npy", "--steps", "5", "--quiet", "--log-json", log],
                   check=True)
    losses = [step["loss"] for step in json.load(open(log))["steps"]]
    print("training losses:", " ".join(f"{v:.4f}" for v in losses))
    if not losses[-1] < losses[0]:
        problems.append(f"5 SGD steps on one batch did not lower the loss: {losses}")
    for problem in problems:
        print("FAIL:", problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main(sys.argv[1])
