"""Strong and weak scaling of each parallel layout over 1, 2 and 4 ranks.

    .venv/bin/python bench/scaling.py [--steps N] [--plots DIR]

For bench/layouts_vs_one_rank.py's MLP and GPT (AdamW, lr 1e-3), trains each
layout N steps on the same data: one rank; dp=2 and dp=4; ZeRO 1, 2 and 3 on
dp=2; tp=2 and dp=2 x tp=2 (Megatron plans); pp=2 (1f1b, 4 microbatches).
The machine's cores are shared among the ranks (--threads cores / ranks, at
least 1: 4 ranks on 2 cores take turns), and one rank has them all, so every
row runs on the same cores. Strong scaling keeps the global batch (the
model's: MLP 64, GPT 8); weak scaling multiplies it by the ranks. For each
it prints the median step time over steps 2..N, the speedup over one rank
(strong: T1 / TN; weak: N T1 / TN, samples per second), the efficiency
against the cores the ranks use (speedup / (cores used / cores): on one
machine the ideal speedup is 1, whatever the ranks), where the time goes
(the ranks' means of
--log-json's compute, exposed communication and input wait over the step;
the rest is idle: a pipeline's bubble, or waiting on the other ranks), and
the cost per sample in rank-seconds (N TN / batch) and in core-seconds
(cores used x TN / batch: here a rank is a share of one machine, not a
device of its own).

With --plots DIR (matplotlib) it writes DIR/scaling-loss-MODEL.png (every
strong-scaling layout's loss per step over one rank's: the same samples, so
the curves lie on each other), DIR/scaling-time-MODEL.png (the strong
scaling shares as stacked bars) and DIR/scaling-timeline.png (the GPT's
dp=2 x tp=2 step 5, each rank's compute and communication spans from its
--trace).
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
from layouts_vs_one_rank import bench_cases, export  # noqa: E402
from overlap_dp import median  # noqa: E402

# label, dp, tp, pp, microbatches, extra compile flags
LAYOUTS = (("1 rank", 1, 1, 1, 1, []),
           ("dp=2", 2, 1, 1, 1, []),
           ("dp=4", 4, 1, 1, 1, []),
           ("dp=2 zero=1", 2, 1, 1, 1, ["--zero", "1"]),
           ("dp=2 zero=2", 2, 1, 1, 1, ["--zero", "2"]),
           ("dp=2 zero=3", 2, 1, 1, 1, ["--zero", "3"]),
           ("tp=2", 1, 2, 1, 1, []),
           ("dp=2 tp=2", 2, 2, 1, 1, []),
           ("pp=2 1f1b", 1, 1, 2, 4, ["--schedule", "1f1b"]))
TIMELINE = ("gpt", "dp=2 tp=2", 5)


def threads(ranks):
    """Each rank's share of the machine's cores, at least one."""
    return max(1, (os.cpu_count() or 1) // ranks)


def run_layout(workdir, name, model, args, plan, batch, layout, steps, trace=None):
    """Compiles and trains one layout at global batch `batch`: its metrics."""
    label, dp, tp, pp, accum, extra = layout
    micro = batch // (dp * accum)
    tag = f"{name}-b{batch}-{label}".replace(" ", "_").replace("=", "")
    onnx_path = os.path.join(workdir, f"{name}-m{micro}.onnx")
    if not os.path.exists(onnx_path):
        repeats = -(-micro // args[0].shape[0])
        export(model, tuple(torch.cat([a] * repeats)[:micro] for a in args), onnx_path)
    flags = []
    for key, value in zip(["a", "b"], args):
        path = os.path.join(workdir, f"{name}-data{batch}-{key}.npy")
        if not os.path.exists(path):
            repeats = -(-4 * batch // value.shape[0])
            np.save(path, torch.cat([value] * repeats)[:4 * batch].numpy())
        flags += ["--data", f"{key}={path}"]
    axes = [f"{a}={n}" for a, n in (("dp", dp), ("tp", tp), ("pp", pp)) if n > 1]
    mesh = ["--mesh", ",".join(axes)] if axes else []
    if tp > 1:
        mesh += ["--plan", plan]
    out = os.path.join(workdir, tag)
    subprocess.run([CLEAVE, "compile", onnx_path, "-o", out, "--train", "--optimizer", "adamw",
                    "--lr", "1e-3", "--batch-size", str(batch), "--grad-accum", str(accum),
                    *mesh, *extra], check=True, capture_output=True)
    ranks = dp * tp * pp
    log = out + ".json"
    tracing = ["--trace", trace] if trace else []
    subprocess.run([CLEAVE, "run", *(["-n", str(ranks)] if ranks > 1 else []), out, *flags,
                    "--steps", str(steps), "--no-shuffle", "--threads", str(threads(ranks)),
                    "--log-json", log, "--quiet", *tracing], check=True, stderr=subprocess.DEVNULL)
    return ranks, json.load(open(log))


def summarize(ranks, metrics, batch):
    """Median step seconds, the shares of compute, exposed communication and
    input wait (ranks' means over steps 2..N), cost per sample, losses."""
    rows = metrics["step_times"][1:]
    step = median([max(r["seconds"] for r in s["ranks"]) for s in rows])
    shares = {}
    for key in ("compute_seconds", "exposed_communication_seconds", "input_wait_seconds"):
        shares[key] = float(np.mean([r[key] / r["seconds"] for s in rows for r in s["ranks"]]))
    return {"step": step, "shares": shares, "cost": ranks * step / batch,
            "losses": [s["loss"] for s in metrics["steps"]]}


def plot(results, plots, trace):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(plots, exist_ok=True)
    for name, rows in results.items():
        strong = [(label, r) for (kind, label), r in rows.items() if kind == "strong"]
        fig, ax = plt.subplots(figsize=(7, 4))
        for label, r in strong:
            ax.plot(range(1, len(r["losses"]) + 1), r["losses"], label=label,
                    linewidth=3 if label == "1 rank" else 1,
                    linestyle="-" if label == "1 rank" else "--")
        ax.set(xlabel="step", ylabel="loss", title=f"{name}: every layout over one rank")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(plots, f"scaling-loss-{name}.png"), dpi=100)
        plt.close(fig)
        fig, ax = plt.subplots(figsize=(8, 4))
        labels = [label for label, _ in strong]
        bottom = np.zeros(len(strong))
        parts = (("compute", "compute_seconds"), ("exposed communication",
                                                  "exposed_communication_seconds"),
                 ("input wait", "input_wait_seconds"))
        for part, key in parts:
            values = np.array([r["shares"][key] * r["step"] * 1e3 for _, r in strong])
            ax.bar(labels, values, bottom=bottom, label=part)
            bottom += values
        steps = np.array([r["step"] * 1e3 for _, r in strong])
        ax.bar(labels, steps - bottom, bottom=bottom, label="idle (bubble, waiting)")
        ax.set(ylabel="ms per step (rank mean)", title=f"{name}: where a step's time goes")
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(plots, f"scaling-time-{name}.png"), dpi=100)
        plt.close(fig)
    events = [e for e in json.load(open(trace))["traceEvents"] if e.get("ph") == "X"]
    step = next(e for e in events if e["name"] == f"step {TIMELINE[2]}" and e["pid"] == 0)
    start, end = step["ts"], step["ts"] + step["dur"]
    fig, ax = plt.subplots(figsize=(9, 3))
    colors = {"compute": "tab:blue", "communication": "tab:red",
              "communication (background)": "tab:orange", "input": "tab:green"}
    ranks = sorted({e["pid"] for e in events})
    for track, color in colors.items():
        for rank in ranks:
            spans = [(e["ts"] - start, e["dur"]) for e in events
                     if e["pid"] == rank and e["cat"] == track and start <= e["ts"] < end
                     and not e["name"].startswith("step ")]
            offset = {"compute": 0.0, "input": 0.0}.get(track, 0.4)
            ax.broken_barh([(s / 1e3, d / 1e3) for s, d in spans], (rank + offset, 0.4),
                           color=color, label=track if rank == 0 and spans else None)
    ax.set(xlabel="ms into step", yticks=[r + 0.4 for r in ranks],
           yticklabels=[f"rank {r}" for r in ranks],
           title=f"{TIMELINE[0]} {TIMELINE[1]}: step {TIMELINE[2]}, per rank")
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(os.path.join(plots, "scaling-timeline.png"), dpi=100)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--plots", help="write PNG plots (matplotlib) into this directory")
    options = parser.parse_args()
    print(f"{os.cpu_count()} cpus; median step over steps 2..{options.steps}; shares are the "
          "ranks' means")
    print(f"{'model':5} {'scaling':7} {'layout':12} {'ranks':>5} {'cores':>5} {'batch':>5} "
          f"{'step ms':>8} "
          f"{'speedup':>7} {'effic.':>6} {'compute':>7} {'comm':>6} {'input':>6} {'idle':>6} "
          f"{'rank-ms/sample':>14} {'core-ms/sample':>14}")
    results = {}
    with tempfile.TemporaryDirectory() as workdir, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = os.path.join(workdir, "timeline.json")
        for (name, model, args, plan_globs), short in zip(bench_cases(), ("mlp", "gpt")):
            plan = os.path.join(workdir, f"{short}-plan.json")
            json.dump({"format_version": 1, "parameters": plan_globs}, open(plan, "w"))
            base = args[0].shape[0]
            rows = results.setdefault(short, {})
            for kind in ("strong", "weak"):
                single = None
                for layout in LAYOUTS:
                    ranks = layout[1] * layout[2] * layout[3]
                    batch = base * (ranks if kind == "weak" else 1)
                    traced = trace if (short, layout[0]) == TIMELINE[:2] and kind == "strong" \
                        else None
                    n, metrics = run_layout(workdir, short, model, args, plan, batch, layout,
                                            options.steps, traced)
                    r = summarize(n, metrics, batch)
                    rows[(kind, layout[0])] = r
                    single = single or r["step"]
                    speedup = single / r["step"] * (n if kind == "weak" else 1)
                    cpus = os.cpu_count() or 1
                    cores = min(cpus, n * threads(n))
                    s = r["shares"]
                    idle = 1 - sum(s.values())
                    print(f"{short:5} {kind:7} {layout[0]:12} {n:>5} {cores:>5} {batch:>5} "
                          f"{r['step'] * 1e3:>8.3f} {speedup:>7.2f} "
                          f"{speedup * cpus / cores:>6.2f} "
                          f"{s['compute_seconds']:>7.1%} {s['exposed_communication_seconds']:>6.1%} "
                          f"{s['input_wait_seconds']:>6.1%} {idle:>6.1%} {r['cost'] * 1e3:>14.4f} "
                          f"{cores * r['step'] / batch * 1e3:>14.4f}")
        if options.plots:
            plot(results, options.plots, trace)


if __name__ == "__main__":
    main()
