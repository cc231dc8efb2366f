"""Mixed precision's step time and memory: cleave --precision bf16 (and
fp16) against cleave in fp32, and against PyTorch eager under torch.autocast
(CPU, bf16).

    .venv/bin/python bench/precision_step.py [--steps N] [--threads T ...]

For bench/forward_vs_onnxruntime.py's MLP, GPT-style decoder and CNN (whose
convolutions round their factors to bf16 for the f32 kernels: docs/training.md)
and a wider GPT (d 512: products large enough for the bf16 kernels to matter), compiles
one AdamW step in fp32, bf16 and fp16 (dynamic loss scaling), trains N steps
of each on the same data in file order, and times PyTorch doing the same
steps in fp32 and under torch.autocast("cpu", bfloat16) with the same thread
count, in the same run. Prints each median step, the ratios cleave bf16 /
cleave fp32 and cleave bf16 / torch autocast (below 1: the first is faster),
how far the bf16 run's losses stray from the fp32 run's (the largest
difference over the steps, relative to the first step's loss: the MLP fits
its one batch, and a relative difference of losses near 1e-7 says nothing),
and each cleave program's predicted
peak memory (plan.json; test/compile/peak-memory.py checks that measured
peaks equal the predictions).
"""
import argparse
import json
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from forward_vs_onnxruntime import GPT, models  # noqa: E402
from train_step_vs_pytorch import compile_step, median_step, torch_step  # noqa: E402

ADAMW = ["--optimizer", "adamw", "--lr", "1e-3", "--weight-decay", "0.01"]


def losses(workdir):
    """The losses of the run median_step last made in `workdir`."""
    return [s["loss"] for s in json.load(open(os.path.join(workdir, "metrics.json")))["steps"]]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    options = parser.parse_args()
    print(f"torch {torch.__version__}, {os.cpu_count()} cpus; median step of {options.steps}; "
          f"loss: the largest difference of a bf16 step's loss from fp32's, over the first "
          f"step's loss")
    print(f"{'model':40} {'thr':>3} {'fp32 ms':>8} {'bf16 ms':>8} {'fp16 ms':>8} "
          f"{'bf16/fp32':>9} {'loss':>7} {'torch ms':>8} {'autocast':>8} {'bf16/autocast':>13} "
          f"{'peak fp32':>10} {'peak bf16':>10}")
    cases = list(models())
    torch.manual_seed(0)
    cases.append(("gpt (2 layers, d 512, seq 128, batch 8)", GPT(vocab=2048, d=512, heads=8,
                                                                  seq=128),
                  (torch.randint(0, 2048, (8, 128)), torch.randint(0, 2048, (8, 128)))))
    precisions = ("fp32", "bf16", "fp16")
    for name, model, args in cases:
        with tempfile.TemporaryDirectory() as root:
            programs = {}
            for precision in precisions:
                workdir = os.path.join(root, precision)
                os.makedirs(workdir)
                out, files = compile_step(model, args, workdir,
                                          ADAMW + ["--precision", precision], copies=4)
                peak = json.load(open(os.path.join(out, "plan.json")))["memory"]
                programs[precision] = (out, files, workdir, peak["predicted_peak_bytes"])
            for t in options.threads:
                ours, curves = {}, {}
                for p, (out, files, workdir, _) in programs.items():
                    ours[p] = median_step(out, files, options.steps, t, workdir)
                    curves[p] = losses(workdir)
                first = abs(curves["fp32"][0])
                drift = max(abs(a - b) / first for a, b in zip(curves["bf16"], curves["fp32"]))
                fp32 = torch_step(model, args, options.steps, t, autocast=False)
                autocast = torch_step(model, args, options.steps, t, autocast=True)
                print(f"{name:40} {t:>3} {ours['fp32'] * 1e3:>8.2f} {ours['bf16'] * 1e3:>8.2f} "
                      f"{ours['fp16'] * 1e3:>8.2f} {ours['bf16'] / ours['fp32']:>9.2f} "
                      f"{drift:>7.0e} {fp32 * 1e3:>8.2f} {autocast * 1e3:>8.2f} "
                      f"{ours['bf16'] / autocast:>13.2f} {programs['fp32'][3] / 2**20:>8.1f}Mi "
                      f"{programs['bf16'][3] / 2**20:>8.1f}Mi")


if __name__ == "__main__":
    main()
