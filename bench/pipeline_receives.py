"""A pipeline's receives expected an action early, against a build that
receives each message when its action asks for it.

    .venv/bin/python bench/pipeline_receives.py --baseline OLD/build/bin/cleave
        [--model gpt|mlp] [--steps N] [--rounds R]

For bench/layouts_vs_one_rank.py's GPT (or MLP) on pp=2 with 1f1b and four
microbatches (AdamW, the same global batch, 1 thread a rank), compiles the
step with this build's cleave and with --baseline's (a build of a commit
before the receives were expected, e.g. a clean clone of 129a343 built by
scripts/setup.sh: its cleave links its own runtime), then runs the two in
turn for R rounds of N steps with --trace. Prints for each: the median
step (the slowest rank's, steps 3 on), and per step and rank the medians
of the receives' `wait` (until the message had arrived) and `transfer`
(its copy) spans; then this build's step over the baseline's.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "test", "lib"))

import chrome_trace  # noqa: E402
from forward_vs_onnxruntime import CLEAVE  # noqa: E402
from layouts_vs_one_rank import bench_cases  # noqa: E402
from plan_vs_measured import export_dynamic  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="an older build's bin/cleave")
    parser.add_argument("--model", choices=["gpt", "mlp"], default="gpt")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    _, model, example, _ = bench_cases()[1 if args.model == "gpt" else 0]
    builds = {"baseline": args.baseline, "expected": CLEAVE}
    results = {name: {"step": [], "wait": [], "transfer": []} for name in builds}
    with tempfile.TemporaryDirectory() as work:
        onnx_path = os.path.join(work, "model.onnx")
        export_dynamic(model, example, onnx_path)
        data = []
        for key, value in zip(["a", "b"], example):
            path = os.path.join(work, f"{key}.npy")
            np.save(path, torch.cat([value] * 4).numpy())
            data += ["--data", f"{key}={path}"]
        flags = ["--train", "--optimizer", "adamw", "--lr", "1e-3", "--batch-size",
                 str(example[0].shape[0]), "--mesh", "pp=2", "--grad-accum", "4", "--schedule",
                 "1f1b"]
        for name, cleave in builds.items():
            subprocess.run([cleave, "compile", onnx_path, "-o", os.path.join(work, name), *flags],
                           check=True, stderr=subprocess.DEVNULL)
        for _ in range(args.rounds):
            for name, cleave in builds.items():
                log, trace = os.path.join(work, "metrics.json"), os.path.join(work, "trace.json")
                subprocess.run([cleave, "run", "-n", "2", os.path.join(work, name), *data,
                                "--steps", str(args.steps), "--no-shuffle", "--log-json", log,
                                "--trace", trace, "--quiet"], check=True)
                with open(log) as f:
                    steps = json.load(f)["step_times"][2:]
                results[name]["step"] += [max(r["seconds"] for r in s["ranks"]) for s in steps]
                timeline = chrome_trace.load(trace)
                for rank in range(2):
                    spans = timeline.track(rank, "communication")
                    for part in ("wait", "transfer"):
                        results[name][part].append(
                            sum(s.dur for s in spans if s.name == part) * 1e-3 / args.steps)
    print(f"{args.model}, pp=2, 1f1b, 4 microbatches, {args.rounds} rounds of {args.steps} steps")
    for name, r in results.items():
        print(f"{name:9} step {statistics.median(r['step']) * 1e3:7.3f} ms; receives a step and "
              f"rank: wait {statistics.median(r['wait']):.3f} ms, transfer "
              f"{statistics.median(r['transfer']):.3f} ms")
    ratio = statistics.median(results["expected"]["step"]) / statistics.median(
        results["baseline"]["step"])
    print(f"step, expected / baseline: {ratio:.3f}")


if __name__ == "__main__":
    main()
