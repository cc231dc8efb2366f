"""Training-step time of cleave's compiled program against PyTorch eager.

    .venv/bin/python bench/train_step_vs_pytorch.py [--steps N] [--threads T ...]

For bench/forward_vs_onnxruntime.py's MLP, GPT-style decoder and CNN, compiles
one AdamW step with `cleave compile --train`, trains N steps on random data in
file order, and times PyTorch doing the same steps (forward, backward,
optimizer) on the same module with the same thread count, in the same run
(PyTorch's own threads and those of the OpenBLAS it multiplies f32 matrices
with, which torch.set_num_threads does not set: set_torch_threads).
Prints the median time per step of each and the ratio cleave / pytorch
(below 1: cleave is faster), and the fraction of this machine's measured
GEMM peak the cleave step reaches (plan.json's FLOPs per second over
oneDNN's f32 rate on 1024 x 1024 x 1024 with the same threads, measured in
the same run: bench/gemm_peak.py).
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from forward_vs_onnxruntime import CLEAVE, export, models  # noqa: E402
from gemm_peak import fraction_of_peak, measured_peaks  # noqa: E402


def compile_step(model, args, workdir, flags, copies=1):
    """Exports `model` with its loss to WORKDIR/model.onnx, compiles its
    training step with the optimizer `flags`, and saves `copies` copies of its
    example batch as the data; returns the program's folder and the data
    files (inputs a and b)."""
    model.train()
    path = os.path.join(workdir, "model.onnx")
    export(model, args, path, training=torch.onnx.TrainingMode.EVAL)
    out = os.path.join(workdir, "train")
    subprocess.run([CLEAVE, "compile", path, "-o", out, "--train", *flags], check=True,
                   stderr=subprocess.DEVNULL)
    files = []
    for input_name, value in zip(["a", "b"], args):
        file = os.path.join(workdir, input_name + ".npy")
        np.save(file, torch.cat([value] * copies).numpy())
        files.append(file)
    return out, files


def median_step(out, files, steps, threads, workdir):
    """cleave's median step in seconds over `steps` steps on `threads`
    threads, from its driver's --log-json step_times (the first steps touch
    the arena and the weights for the first time)."""
    metrics = os.path.join(workdir, "metrics.json")
    subprocess.run([CLEAVE, "run", out, "--data", f"a={files[0]}", "--data", f"b={files[1]}",
                    "--steps", str(steps), "--no-shuffle", "--threads", str(threads),
                    "--log-json", metrics], check=True, stderr=subprocess.DEVNULL)
    return float(np.median([step["ranks"][0]["seconds"]
                            for step in json.load(open(metrics))["step_times"]]))


def set_torch_threads(threads):
    """PyTorch on `threads` threads: its own (OpenMP), and those of the
    OpenBLAS it runs its f32 products on where it is built with one
    (Debian's torch: openblas-pthread), which torch.set_num_threads leaves
    at every core. Measured on 2 cores: a 512 x 512 x 128 product on
    "one thread" ran at 255-262 GFLOP/s, 164 with OpenBLAS on one. (numpy's
    own OpenBLAS, its symbols suffixed, times nothing here.)"""
    torch.set_num_threads(threads)
    with open("/proc/self/maps") as maps:
        loaded = {line.split()[-1] for line in maps if "libopenblas" in line}
    for library in loaded:
        set_threads = getattr(ctypes.CDLL(library), "openblas_set_num_threads", None)
        if set_threads:
            set_threads(threads)


def torch_step(model, args, steps, threads, autocast=False):
    """PyTorch's median AdamW step (lr 1e-3, weight decay 0.01) of `model`
    on `args`, on `threads` threads, under torch.autocast (CPU, bf16) or not."""
    set_torch_threads(threads)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = model(*args)
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def bench(name, model, args, steps, threads, workdir, peaks):
    out, files = compile_step(model, args, workdir,
                              ["--optimizer", "adamw", "--lr", "1e-3", "--weight-decay", "0.01"],
                              copies=4)
    rows = []
    for t in threads:
        ours = median_step(out, files, steps, t, workdir)
        theirs = torch_step(model, args, steps, t)
        rows.append((t, ours, theirs, fraction_of_peak(out, ours, peaks[t])))
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    options = parser.parse_args()
    print(f"torch {torch.__version__}, {os.cpu_count()} cpus; median step of {options.steps}: "
          f"cleave's from its driver's --log-json step_times, pytorch's timed here")
    peaks = measured_peaks(options.threads)
    print(f"{'model':42} {'threads':>7} {'cleave ms':>10} {'torch ms':>9} {'ratio':>6} "
          f"{'of peak':>8}")
    # The forward bench's models, with the same seeded weights and data.
    for name, model, args in models():
        with tempfile.TemporaryDirectory() as workdir:
            for t, ours, theirs, fraction in bench(name, model, args, options.steps,
                                                   options.threads, workdir, peaks):
                print(f"{name:42} {t:>7} {ours * 1e3:>10.3f} {theirs * 1e3:>9.3f} "
                      f"{ours / theirs:>6.2f} {fraction:>8.1%}")


if __name__ == "__main__":
    main()
