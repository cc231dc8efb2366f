"""cleave plan's predictions against every layout run on this machine.

    .venv/bin/python bench/plan_vs_measured.py [--ranks N] [--steps S] [--rounds R]
                                               [--models mlp gpt] [--precision P]

For the MLP and GPT of bench/layouts_vs_one_rank.py (exported with a dynamic
batch; AdamW, lr 1e-3, the same global batch as there: 64 and 8; --precision
fp32, bf16 or fp16, default fp32, for the plan and every layout), runs
`cleave plan --ranks N --json` (--device cpu: this machine measured, and the
model timed once on its first layout), then compiles every layout it
predicted and trains it S steps (default 12) on random data, R rounds
(default 5: this machine's step times move by a tenth to a fifth between
runs, which three rounds of 8 steps underestimate) with the layouts in
turn, each round after a plan of its own (the same command: the model timed
again, since this machine's speed drifts over minutes). Per layout it
prints the predicted step time (the median of the rounds' plans') and the
measured (the median over steps 2..S and the rounds of the slowest rank's
step), the noise (half the range of the rounds' medians) and their ratio,
and rank 0's predicted and measured peak bytes (its stage's plan.json in a
pipeline; with the interleaved schedule the sum of its stages', the largest
scratch once, test/lib/rank_memory.py). Then: how many predictions fall within 25% of the
measurement, how many pairs of layouts the predictions order as the
measurements do (or whose measured times lie within their noise of each
other), the Spearman rank correlation of predicted and measured times,
and the measured time of the layout ranked first against the fastest
measured (1.00: the planner chose the fastest).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from forward_vs_onnxruntime import CLEAVE  # noqa: E402
from layouts_vs_one_rank import bench_cases  # noqa: E402
from overlap_dp import median  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "lib"))
from rank_memory import rank_peak  # noqa: E402


def export_dynamic(model, args, path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, path, opset_version=17, do_constant_folding=False,
                          input_names=["a", "b"], output_names=["loss"],
                          dynamic_axes={"a": {0: "batch"}, "b": {0: "batch"}},
                          training=torch.onnx.TrainingMode.EVAL)


def spearman(xs, ys):
    """Spearman's rank correlation (ties get their mean rank)."""
    def ranks(values):
        order = sorted(range(len(values)), key=lambda i: values[i])
        result = [0.0] * len(values)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
                j += 1
            for k in range(i, j + 1):
                result[order[k]] = (i + j) / 2
            i = j + 1
        return np.array(result)
    return float(np.corrcoef(ranks(xs), ranks(ys))[0, 1])


def step_seconds(metrics):
    """Each step's slowest rank, steps 2 on."""
    return [max(r["seconds"] for r in s["ranks"]) for s in metrics["step_times"][1:]]


def bench_model(name, model, args, plan, ranks, steps, rounds, precision, workdir):
    onnx_path = os.path.join(workdir, f"{name}.onnx")
    export_dynamic(model, args, onnx_path)
    batch = args[0].shape[0]
    common = ["--train", "--optimizer", "adamw", "--lr", "1e-3", "--batch-size", str(batch),
              "--precision", precision]
    plan_file = os.path.join(workdir, f"{name}-megatron.json")
    json.dump({"format_version": 1, "parameters": plan}, open(plan_file, "w"))
    predictions = os.path.join(workdir, f"{name}-plan.json")

    def plan():
        subprocess.run([CLEAVE, "plan", onnx_path, "--ranks", str(ranks), "--json", predictions,
                        "--plan", plan_file, *common[1:]], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        return json.load(open(predictions))

    planned = plan()
    data = []
    for key, value in zip(["a", "b"], args):
        path = os.path.join(workdir, f"{name}-{key}.npy")
        np.save(path, torch.cat([value] * 4).numpy())
        data += ["--data", f"{key}={path}"]
    layouts = [entry for entry in planned["layouts"] if entry.get("fits")]
    compiled = []
    for i, entry in enumerate(layouts):
        out = os.path.join(workdir, f"{name}-layout{i}")
        megatron = ["--plan", plan_file] if entry["tp"] > 1 else []
        subprocess.run([CLEAVE, "compile", onnx_path, "-o", out, *common, *megatron,
                        *entry["flags"].split()], check=True, stderr=subprocess.DEVNULL)
        compiled.append((entry, out))
    measured = {i: [] for i in range(len(compiled))}
    round_medians = {i: [] for i in range(len(compiled))}
    # Each round plans again (the model timed anew) before its runs: this
    # machine's speed drifts over minutes, and the plan's timing and the
    # measurements then sample the same stretches of it.
    predicted = {i: [] for i in range(len(compiled))}
    scales = []
    peaks = {}
    for round_index in range(rounds):
        round_plan = planned if round_index == 0 else plan()
        scales.append(round_plan["compute_scale"]["products"])
        seconds = {entry["flags"]: entry["step_seconds"] for entry in round_plan["layouts"]}
        for i, (entry, out) in enumerate(compiled):
            predicted[i].append(seconds[entry["flags"]])
            log = os.path.join(workdir, "metrics.json")
            subprocess.run([CLEAVE, "run", *(["-n", str(ranks)] if ranks > 1 else []), out,
                            *data, "--steps", str(steps), "--no-shuffle", "--log-json", log,
                            "--quiet"], check=True, stderr=subprocess.DEVNULL)
            metrics = json.load(open(log))
            measured[i] += step_seconds(metrics)
            round_medians[i].append(median(step_seconds(metrics)))
            peaks[i] = metrics["peak_bytes_allocated"]
    print(f"\n{name} ({precision}): {ranks} ranks, batch {batch}; {planned['device']['name']}, "
          f"products' compute scale in the rounds' plans: "
          f"{', '.join(f'{scale:.2f}' for scale in scales)}")
    print(f"{'layout':44} {'pred ms':>8} {'meas ms':>8} {'noise':>6} {'ratio':>6} "
          f"{'pred peak':>10} {'meas peak':>10} {'diff':>6}")
    predicted_ms, measured_ms, noise_ms, within, memory_ok = [], [], [], 0, 0
    for i, (entry, out) in enumerate(compiled):
        # Rank 0 runs stage 0, and with the interleaved schedule stages pp,
        # 2 pp, ... too.
        stages = sorted((int(d[5:]) for d in os.listdir(out) if d.startswith("stage")))
        plan_paths = ([os.path.join(out, "plan.json")] if not stages else
                      [os.path.join(out, f"stage{s}", "plan.json") for s in stages[::entry["pp"]]])
        rank0_peak = rank_peak([json.load(open(path))["memory"] for path in plan_paths])
        p, m = median(predicted[i]) * 1e3, median(measured[i]) * 1e3
        noise = (max(round_medians[i]) - min(round_medians[i])) / 2 * 1e3
        predicted_ms.append(p)
        measured_ms.append(m)
        noise_ms.append(noise)
        within += abs(p / m - 1) <= 0.25
        diff = peaks[i] / rank0_peak - 1
        memory_ok += abs(diff) <= 0.02
        label = entry["flags"] or "one rank"
        print(f"{label:44} {p:8.3f} {m:8.3f} {noise:6.3f} {p / m:6.2f} {rank0_peak:10d} "
              f"{peaks[i]:10d} {100 * diff:5.1f}%")
    # A pair is in order when the predictions order it as the measurements
    # do, or its measured times lie within their rounds' noise of each other.
    pairs = [(i, j) for i in range(len(compiled)) for j in range(i + 1, len(compiled))]
    in_order = sum((predicted_ms[i] - predicted_ms[j]) * (measured_ms[i] - measured_ms[j]) >= 0
                   or abs(measured_ms[i] - measured_ms[j]) <= noise_ms[i] + noise_ms[j]
                   for i, j in pairs)
    best = measured_ms[0] / min(measured_ms)
    print(f"within 25%: {within} of {len(compiled)}; peak within 2%: {memory_ok} of "
          f"{len(compiled)}; pairs in order or within noise: {in_order} of {len(pairs)}; "
          f"Spearman rank correlation {spearman(predicted_ms, measured_ms):.2f}; "
          f"the first-ranked layout's measured time / the fastest measured: {best:.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--models", nargs="+", choices=["mlp", "gpt"], default=["mlp", "gpt"])
    parser.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        for tag, (_, model, example, plan) in zip(["mlp", "gpt"], bench_cases()):
            if tag in args.models:
                bench_model(tag, model, example, plan, args.ranks, args.steps, args.rounds,
                            args.precision, workdir)


if __name__ == "__main__":
    main()
