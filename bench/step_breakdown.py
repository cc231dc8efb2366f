"""Where a training step's time goes against the machine's GEMM peak.

    .venv/bin/python bench/step_breakdown.py [--steps N] [--threads T ...]

For bench/train_step_vs_pytorch.py's compiled steps (the MLP, GPT-style
decoder and CNN, AdamW), runs N steps with `cleave run --trace-ops` and
splits the kernels' time (the trace's spans, the median step's share, the
first 3 steps left out) into the products (gemm, matmul, conv and its
gradients: plan.json's product FLOPs) and everything else, the largest kinds
of it named. Prints, per model and thread count: the step; the products'
time, their rate and that rate over the GEMM peak measured in the same run
(bench/gemm_peak.py, oneDNN f32 1024^3); the other kernels' time; the step's
FLOPs per second over the peak (train_step_vs_pytorch.py's "of peak"); and
the largest fraction of the peak the step could reach with its products at
their measured rate and nothing else taking any time ("products alone": the
step's FLOPs over the products' time).
What stands between a step and a fraction of the peak is then the products'
own rate on the model's shapes, or the other kernels.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from forward_vs_onnxruntime import CLEAVE, models  # noqa: E402
from gemm_peak import measured_peaks  # noqa: E402
from train_step_vs_pytorch import compile_step  # noqa: E402

PRODUCTS = {"gemm", "matmul", "conv", "conv_grad_input", "conv_grad_weight"}


def traced_step(out, files, steps, threads, workdir):
    """The median step's seconds and each kernel kind's seconds a step (the
    trace's kernel spans, steps 4..N)."""
    trace, metrics = os.path.join(workdir, "trace.json"), os.path.join(workdir, "metrics.json")
    subprocess.run([CLEAVE, "run", out, "--data", f"a={files[0]}", "--data", f"b={files[1]}",
                    "--steps", str(steps), "--no-shuffle", "--threads", str(threads),
                    "--trace", trace, "--trace-ops", "--log-json", metrics],
                   check=True, stderr=subprocess.DEVNULL)
    events = json.load(open(trace))
    events = events["traceEvents"] if isinstance(events, dict) else events
    spans = [e for e in events if e.get("ph") == "X"]
    step_spans = sorted((e for e in spans if e["name"].startswith("step ")),
                        key=lambda e: e["ts"])[3:]
    kinds = collections.Counter()
    for step in step_spans:
        begin, end = step["ts"], step["ts"] + step["dur"]
        for e in spans:
            # A kernel's span, "<kernel> <node>", is in the "ops" category.
            if e.get("cat") == "ops" and begin <= e["ts"] < end:
                kinds[e["name"].split(" ")[0]] += e["dur"] / 1e6 / len(step_spans)
    seconds = np.median([s["ranks"][0]["seconds"]
                         for s in json.load(open(metrics))["step_times"][3:]])
    return seconds, kinds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=23)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    options = parser.parse_args()
    peaks = measured_peaks(options.threads)
    print(f"{'model':42} {'threads':>7} {'step ms':>8} {'products ms':>11} {'GFLOP/s':>8} "
          f"{'of peak':>8} {'other ms':>9} {'step of peak':>12} {'products alone':>14}  "
          f"largest other kernels (ms)")
    for name, model, args in models():
        with tempfile.TemporaryDirectory() as workdir:
            out, files = compile_step(model, args, workdir, ["--optimizer", "adamw", "--lr",
                                                             "1e-3", "--weight-decay", "0.01"],
                                      copies=4)
            plan = json.load(open(os.path.join(out, "plan.json")))
            flops = plan["flops"]
            product_flops = sum((c["product_flops"] + c["low_precision_product_flops"])
                                * c["calls_per_step"] for c in plan["cost"])
            for t in options.threads:
                step, kinds = traced_step(out, files, options.steps, t, workdir)
                products = sum(v for k, v in kinds.items() if k in PRODUCTS)
                other = {k: v for k, v in kinds.items() if k not in PRODUCTS}
                largest = ", ".join(f"{k} {v * 1e3:.2f}" for k, v in
                                    sorted(other.items(), key=lambda kv: -kv[1])[:4])
                rate = product_flops / products
                print(f"{name:42} {t:>7} {step * 1e3:>8.3f} {products * 1e3:>11.3f} "
                      f"{rate / 1e9:>8.1f} {rate / peaks[t]:>8.1%} "
                      f"{sum(other.values()) * 1e3:>9.3f} {flops / step / peaks[t]:>12.1%} "
                      f"{flops / products / peaks[t]:>14.1%}  {largest}")
                print(f"{'':42} {'':>7} product FLOPs {product_flops / 1e6:.0f} M of the step's "
                      f"{flops / 1e6:.0f} M")


if __name__ == "__main__":
    main()
