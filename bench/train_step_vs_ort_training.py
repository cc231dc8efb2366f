"""Training-step time of cleave's compiled program against onnxruntime-training.

    .venv/bin/python bench/train_step_vs_ort_training.py [--steps N] [--threads T ...]

onnxruntime-training's on-device training API is the one other system that
trains an ONNX graph. For an MLP and a GPT-style decoder (those of
bench/train_step_vs_pytorch.py), exports each with its loss, trains it with
AdamW in cleave (the median step of its driver's --log-json step_times) and
in onnxruntime-training (`generate_artifacts` with AdamW, then the median of
its module's forward-backward, optimizer step and gradient reset, with the
same thread count), in the same run, on the same batch, and prints the
ratio cleave / onnxruntime-training (below 1: cleave is faster) and the
fraction of this machine's measured GEMM peak the cleave step reaches
(bench/gemm_peak.py).

onnxruntime-training conflicts with the onnxruntime of .venv, so its side
(bench/ort_training_step.py) runs in a venv of its own,
bench/.venv-ort-training, made on first use: Debian's python3 with its
system packages (numpy), onnxruntime-training-cpu 1.19.2 and onnx 1.16.2
(newer onnx writes IR versions 1.19 cannot read).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from forward_vs_onnxruntime import models  # noqa: E402
from gemm_peak import fraction_of_peak, measured_peaks  # noqa: E402
from train_step_vs_pytorch import compile_step, median_step  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
VENV = os.path.join(HERE, ".venv-ort-training")


def ort_python():
    """The ort-training venv's python, made on first use."""
    python = os.path.join(VENV, "bin", "python")
    if not os.path.exists(python):
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", VENV],
                       check=True)
        subprocess.run([python, "-m", "pip", "install", "-q", "numpy<2", "onnx==1.16.2",
                        "onnxruntime-training-cpu==1.19.2"], check=True)
    return python


def bench(name, model, args, steps, threads, workdir, peaks):
    out, files = compile_step(model, args, workdir, ["--optimizer", "adamw", "--lr", "1e-3"])
    params = os.path.join(workdir, "params.txt")
    with open(params, "w") as f:
        f.write("\n".join(n for n, _ in model.named_parameters()))
    rows = []
    for t in threads:
        ours = median_step(out, files, steps, t, workdir)
        run = subprocess.run([ort_python(), os.path.join(HERE, "ort_training_step.py"),
                              os.path.join(workdir, "model.onnx"),
                              params, os.path.join(workdir, f"artifacts-{t}"), str(t),
                              str(steps), *files],
                             check=True, capture_output=True, text=True)
        theirs = json.loads(run.stdout.strip().splitlines()[-1])["median_ms"]
        rows.append((t, ours * 1e3, theirs, fraction_of_peak(out, ours, peaks[t])))
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    options = parser.parse_args()
    print(f"{os.cpu_count()} cpus; median step of {options.steps} (AdamW, one batch)")
    peaks = measured_peaks(options.threads)
    print(f"{'model':42} {'threads':>7} {'cleave ms':>10} {'ort-training ms':>16} {'ratio':>6} "
          f"{'of peak':>8}")
    for name, model, args in models():
        if name.startswith("cnn"):
            continue
        with tempfile.TemporaryDirectory() as workdir:
            for t, ours, theirs, fraction in bench(name, model, args, options.steps,
                                                   options.threads, workdir, peaks):
                print(f"{name:42} {t:>7} {ours:>10.3f} {theirs:>16.3f} {ours / theirs:>6.2f} "
                      f"{fraction:>8.1%}")


if __name__ == "__main__":
    main()
