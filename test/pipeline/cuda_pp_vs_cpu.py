# A pipeline on CUDA equals one CPU device. The torch-exported MLP and
# GPT-style models, compiled with --target cuda on pp=2 (gpipe, 1f1b,
# zb-h1, and the interleaved schedule with two stages a rank) and trained
# with `cleave run -n 2` (each stage a process; both may share one GPU, as
# the pipeline's messages go through the host: runtime/comm/HostStaged.h),
# against the CPU's one device accumulating the same microbatches
# (--grad-accum 2): every step's loss and the final parameters within 1e-4
# (cuBLAS and the CUDA reductions add in another order than the CPU's
# kernels: scripts/gpu-check/pack.py's fp32 tolerance).
#
# REQUIRES: cuda, gpu
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
sys.path.insert(0, os.path.join(HERE, "..", "distributed"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))

import export_gpt  # noqa: E402
import export_mlp  # noqa: E402
from dp_vs_single import ADAMW, Model, close  # noqa: E402

TOLERANCE = 1e-4
SCHEDULES = [["--schedule", "gpipe"], ["--schedule", "1f1b"], ["--schedule", "zb-h1"],
             ["--schedule", "interleaved", "--virtual-stages", "2"]]


def main():
    workdir = sys.argv[1]
    problems = []
    for model in (Model("mlp", export_mlp, ["x", "labels"], 16, workdir),
                  Model("gpt", export_gpt, ["idx", "targets"], 8, workdir)):
        one = model.train("one-k2", 1, 2, ADAMW)
        for schedule in SCHEDULES:
            label = f"{model.name} cuda pp2 {schedule[1]}"
            run = model.train(f"cuda-pp2-{schedule[1]}", 1, 2, ADAMW,
                              schedule + ["--target", "cuda"], pp=2)
            close(label, run, one, problems, TOLERANCE)
        print(f"{model.name}: checked against {one[0][0]:.6f} -> {one[0][-1]:.6f}")
    for problem in problems:
        print("FAIL:", problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
