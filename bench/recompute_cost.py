"""What activation recomputation saves and costs.

    .venv/bin/python bench/recompute_cost.py [--steps N] [--rounds R]

For bench/layouts_vs_one_rank.py's MLP and GPT, compiles one device (AdamW,
2 threads) with --recompute none, selective and full, and prints plan.json's
predicted arena (the activations and every other intermediate) and peak,
the measured peak (--log-json's peak_bytes_allocated, which equals the
prediction), and the median step time over steps 2..N of the median of R
runs (the modes in turn), with its ratio to no recomputation measured in
the same run.
"""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from forward_vs_onnxruntime import CLEAVE  # noqa: E402
from layouts_vs_one_rank import bench_cases, compiled_layouts  # noqa: E402
from overlap_dp import median, runs_in_turn  # noqa: E402

LAYOUTS = tuple((mode, 1, ["--recompute", mode]) for mode in ("none", "selective", "full"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    print(f"{os.cpu_count()} cpus, one device of 2 threads; median step over steps "
          f"2..{options.steps}, median of {options.rounds} runs")
    print(f"{'model':38} {'recompute':10} {'arena KB':>9} {'peak KB':>9} {'measured':>9} "
          f"{'step ms':>8} {'vs none':>8}")
    for name, model, args, _ in bench_cases():
        with tempfile.TemporaryDirectory() as workdir:
            layouts = list(compiled_layouts(CLEAVE, model, args, {}, workdir, LAYOUTS))
            runs = runs_in_turn(layouts, ["--threads", "2"], options.steps, options.rounds,
                                workdir, lambda metrics: (
                                    median([s["ranks"][0]["seconds"]
                                            for s in metrics["step_times"][1:]]),
                                    metrics["peak_bytes_allocated"]))
            rows = []
            for label, _, out, _ in layouts:
                memory = json.load(open(os.path.join(out, "plan.json")))["memory"]
                rows.append((label, memory["activation_bytes"], memory["predicted_peak_bytes"],
                             runs[label][-1][1], median([r[0] for r in runs[label]])))
        base = rows[0][4]
        for label, arena, peak, measured, step in rows:
            print(f"{name:38} {label:10} {arena / 1024:>9.1f} {peak / 1024:>9.1f} "
                  f"{measured / 1024:>9.1f} {step * 1e3:>8.3f} {step / base:>8.2f}")


if __name__ == "__main__":
    main()
