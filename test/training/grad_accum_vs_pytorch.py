# Gradient accumulation equals the step on the whole batch. Each model is
# exported at the micro-batch (the global batch / K), compiled with
# --train --grad-accum K --batch-size B, and trained STEPS steps; PyTorch
# takes each global batch of B samples in one step. Every step's loss must
# equal PyTorch's within 1e-4 relative and the final parameters within 1e-4
# of their largest element. The GPT's targets have ignore_index positions
# spread unevenly over the microbatches (one sample in three has most of its
# targets ignored), so a mean of per-microbatch means would differ: the loss
# and gradients must be sums divided by the global count of counted targets.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))

import export_gpt  # noqa: E402
import export_mlp  # noqa: E402
from torch_export import export_with_loss  # noqa: E402
from train_vs_pytorch import ADAMW_LR_1E3, OPTIMIZERS, compare, pytorch_steps  # noqa: E402

STEPS = 8
BATCHES = 3  # global batches in the dataset; file order wraps around


def dataset(args, names, batch, generator):
    data = {}
    for name, value in zip(names, args):
        shape = (batch * BATCHES,) + tuple(value.shape[1:])
        if value.dtype == torch.int64:
            array = generator.integers(0, int(value.max()) + 1, shape).astype(np.int64)
            if name == "targets":
                array[::3, 3:] = -100  # most targets of every third sample
                array.reshape(-1)[::7] = -100
            data[name] = array
        else:
            data[name] = generator.standard_normal(shape).astype(np.float32)
    return data


def check(model_name, module, names, accum, micro, optimizer, workdir):
    flags, make_optimizer = {**OPTIMIZERS, "adamw-lr1e-3": ADAMW_LR_1E3}[optimizer]
    batch = accum * micro
    model, args = module.build()
    micro_args = tuple(a[:micro] for a in args)
    path = os.path.join(workdir, f"{model_name}-micro{micro}.onnx")
    if not os.path.exists(path):
        export_with_loss(model, micro_args, path, names)
    data = dataset(args, names, batch, np.random.default_rng(1))
    out = os.path.join(workdir, f"{model_name}-{optimizer}-k{accum}")
    subprocess.run(["cleave", "compile", path, "-o", out, "--train", *flags,
                    "--grad-accum", str(accum), "--batch-size", str(batch)], check=True)
    data_flags = []
    for name, array in data.items():
        file = os.path.join(workdir, f"{model_name}-b{batch}.{name}.npy")
        np.save(file, array)
        data_flags += ["--data", f"{name}={file}"]
    metrics = out + ".json"
    results = out + ".results"
    subprocess.run(["cleave", "run", out, *data_flags, "--steps", str(STEPS), "--no-shuffle",
                    "--log-json", metrics, "--output-dir", results], check=True,
                   stderr=subprocess.DEVNULL)
    log = json.load(open(metrics))
    ours = [s["loss"] for s in log["steps"]]

    theirs, largest_grad = pytorch_steps(model, make_optimizer, data, names, batch, STEPS)
    problems = compare(ours, theirs, os.path.join(out, "plan.json"),
                       os.path.join(results, "weights.bin"), model, largest_grad)
    if (log["batch_size"], log["grad_accum"]) != (batch, accum):
        problems.append(f"log says batch {log['batch_size']} x accum {log['grad_accum']}")
    print(f"{model_name} {optimizer} K={accum} micro={micro}: losses {ours[0]:.6f} -> "
          f"{ours[-1]:.6f} (pytorch {theirs[0]:.6f} -> {theirs[-1]:.6f})")
    return [f"{model_name} {optimizer} K={accum}: {p}" for p in problems]


CASES = (("mlp", export_mlp, ["x", "labels"], 4, 2, "adam"),
         ("mlp", export_mlp, ["x", "labels"], 2, 4, "momentum"),
         # At lr 1e-2 PyTorch's own float32 run ends 1.05e-4 from float64.
         ("gpt", export_gpt, ["idx", "targets"], 2, 1, "adamw-lr1e-3"),
         ("gpt", export_gpt, ["idx", "targets"], 4, 1, "sgd"))


def main():
    workdir = sys.argv[1]
    problems = []
    for case in CASES:
        problems += check(*case, workdir)
    for p in problems:
        print("FAIL:", p)
    failed = len({p.split(":")[0] for p in problems})
    print(f"{len(CASES) - failed} passed, {failed} failed")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
