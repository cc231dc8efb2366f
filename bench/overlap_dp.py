"""How much of the data-parallel all-reduce the backward hides.

    .venv/bin/python bench/overlap_dp.py [--steps N]

For bench/layouts_vs_one_rank.py's MLP (at batch 64 and at batch 512, where
its backward takes longer than its all-reduce) and GPT, compiles dp=2 twice
(AdamW, the same global batch, 1 thread a rank): with the gradients summed
in buckets that the last microbatch's backward starts on the background
all-reduce's thread (--bucket-mb auto, the default), and with every sum
after the backward (--bucket-mb 0, the peer, measured in the same run). For
each it prints, as the means over the steps after the first of both ranks'
--log-json figures: the step time, the communication time (the collectives
and the background sums), the exposed part (what the main thread spent in
collectives or waiting for the sums), the share hidden (1 - exposed /
communication), and the step time's ratio to the run without buckets.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from forward_vs_onnxruntime import CLEAVE, MLP  # noqa: E402
from layouts_vs_one_rank import bench_cases, compiled_layouts  # noqa: E402

LAYOUTS = (("dp=2 --bucket-mb 0", 2, ["--mesh", "dp=2", "--bucket-mb", "0"]),
           ("dp=2 buckets (auto)", 2, ["--mesh", "dp=2"]))


def cases():
    """bench_cases() and the MLP at batch 512."""
    listed = [(name, model, args) for name, model, args, _ in bench_cases()]
    torch.manual_seed(0)
    listed.insert(1, ("mlp (256-1024-1024-10, batch 512)", MLP(),
                      (torch.randn(512, 256), torch.randint(0, 10, (512,)))))
    return listed


def figures(metrics):
    """Means over both ranks and the steps after the first: step,
    communication and exposed communication seconds."""
    rows = [rank for step in metrics["step_times"][1:] for rank in step["ranks"]]
    mean = lambda key: sum(r[key] for r in rows) / len(rows)  # noqa: E731
    return (mean("seconds"), mean("communication_seconds"),
            mean("exposed_communication_seconds"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    options = parser.parse_args()
    print(f"{os.cpu_count()} cpus, dp=2 of 1 thread each; means over steps 2..{options.steps}")
    print(f"{'model':36} {'layout':22} {'step ms':>8} {'comm ms':>8} {'exposed':>8} "
          f"{'hidden':>7} {'vs no buckets':>13}")
    for name, model, args in cases():
        with tempfile.TemporaryDirectory() as workdir:
            rows = []
            for label, ranks, out, flags in compiled_layouts(CLEAVE, model, args, {}, workdir,
                                                             LAYOUTS):
                log = os.path.join(workdir, "metrics.json")
                subprocess.run([CLEAVE, "run", "-n", str(ranks), out, *flags, "--steps",
                                str(options.steps), "--no-shuffle", "--threads", "1",
                                "--log-json", log, "--quiet"],
                               check=True, stderr=subprocess.DEVNULL)
                rows.append((label, *figures(json.load(open(log)))))
        baseline = rows[0][1]
        for label, step, communication, exposed in rows:
            hidden = 1 - exposed / communication if communication > 0 else 0.0
            print(f"{name:36} {label:22} {step * 1e3:>8.3f} {communication * 1e3:>8.3f} "
                  f"{exposed * 1e3:>8.3f} {hidden:>7.1%} {step / baseline:>13.2f}")


if __name__ == "__main__":
    main()
