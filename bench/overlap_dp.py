"""How much of the data-parallel all-reduce the backward hides, and of
ZeRO 3's parameter gathers and gradient reduce-scatters the compute hides.

    .venv/bin/python bench/overlap_dp.py [--steps N] [--rounds R]
                                         [--zero1 | --zero2 | --zero3 | --pipeline
                                         | --tp]

For bench/layouts_vs_one_rank.py's MLP (at batch 64 and at batch 512, where
its backward takes longer than its all-reduce) and GPT, and (plain dp
alone) bench/forward_vs_onnxruntime.py's CNN at batch 64 (a backward many
times its small all-reduce), compiles dp=2 twice
(AdamW, the same global batch, 1 thread a rank): with the gradients summed
in buckets that the last microbatch's backward starts on the background
all-reduce's thread (--bucket-mb auto, the default), and with every sum
after the backward (--bucket-mb 0, the peer, measured in the same run, the
two in turn for R rounds). Per run it takes the medians over both ranks and
the steps after the first of --log-json's figures, and prints the median
run's: the step time, the communication time (the collectives and the
background sums), the exposed part (what the training thread spent in
collectives or waiting for the sums), the share hidden (1 - exposed /
communication), the share of the unbucketed all-reduce's time no longer
exposed (1 - exposed / its communication), and the step time's ratio to the
unbucketed run's.

With --pipeline the same for dp x pp = 2 x 2 (4 ranks, 4 microbatches a
step, 1f1b): the buckets started by each stage's backward against every
sum in @apply; the figures of the background sums from the trace as
below, since the communication time holds the stages' messages too.

With --zero1 the same for ZeRO 1's reduce-scatter of its flat gradient
buffer: dp=2 --zero 1 with the buffer's buckets of 1 MiB started by the
last microbatch's backward against the one reduce-scatter in @apply
(--bucket-mb 0, which auto is under ZeRO 1); the background "reduce_scatter dp" spans and the waits
for them from the trace, as below.

With --zero2 the same for ZeRO 2's reduce-scatter of each microbatch's
packed gradients: dp=2 --zero 2 with the packed buffer's buckets of 1 MiB
started as the backward makes them against the one reduce-scatter after
the backward (--bucket-mb 0, which auto is under ZeRO 2).

With --zero3 the same for ZeRO 3's collectives: dp=2 --zero 3 with each
parameter's gather started a compute segment early and each gradient's
reduce-scatter waited for after the next layer's product, on the
background thread (--prefetch-gathers on --overlap-reduce-scatters on),
against both off (the default: every collective where it is read or made,
the peer), and with the gathers alone prefetched. Per kind, from each
run's trace (--trace): per step and rank the background "all_gather dp"
("reduce_scatter dp") spans and the training thread's "wait for background
all_gather" ("... reduce_scatter") spans, their exposed part, medians as
above, and the share hidden.

With --tp the same for tensor parallelism's sums: tp=2 with the Megatron
plans (2 ranks of 1 thread) with each input gradient's sum over tp
started on the background thread and waited for where it is first read
(--overlap-tp-sums on) against every sum where its partial sums are made
(off, the peer); the background "all_reduce tp" spans and the waits for
them from the trace, as above.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from forward_vs_onnxruntime import CLEAVE, CNN, MLP  # noqa: E402
from layouts_vs_one_rank import MLP_PLAN, bench_cases, compiled_layouts  # noqa: E402

LAYOUTS = (("--bucket-mb 0", 2, ["--mesh", "dp=2", "--bucket-mb", "0"]),
           ("buckets (auto)", 2, ["--mesh", "dp=2"]))
PIPELINE_LAYOUTS = (("--bucket-mb 0", 4, ["--mesh", "dp=2,pp=2", "--grad-accum", "4",
                                         "--bucket-mb", "0"]),
                    ("buckets (auto)", 4, ["--mesh", "dp=2,pp=2", "--grad-accum", "4"]))
ZERO1_LAYOUTS = (("--bucket-mb 0", 2, ["--mesh", "dp=2", "--zero", "1", "--bucket-mb", "0"]),
                 ("1 MiB buckets", 2, ["--mesh", "dp=2", "--zero", "1", "--bucket-mb", "1"]))
ZERO2_LAYOUTS = (("--bucket-mb 0", 2, ["--mesh", "dp=2", "--zero", "2", "--bucket-mb", "0"]),
                 ("1 MiB buckets", 2, ["--mesh", "dp=2", "--zero", "2", "--bucket-mb", "1"]))
TP_LAYOUTS = (("tp sums in place", 2, ["--mesh", "tp=2", "--plan", "{plan}"]),
              ("tp sums overlapped", 2, ["--mesh", "tp=2", "--plan", "{plan}",
                                         "--overlap-tp-sums", "on"]))
ZERO3_LAYOUTS = (("both off", 2, ["--mesh", "dp=2", "--zero", "3"]),
                 ("gathers prefetched", 2, ["--mesh", "dp=2", "--zero", "3",
                                            "--prefetch-gathers", "on"]),
                 ("both on", 2, ["--mesh", "dp=2", "--zero", "3", "--prefetch-gathers", "on",
                                 "--overlap-reduce-scatters", "on"]))
BACKGROUND_KINDS = ("all_gather", "reduce_scatter", "all_reduce")


def cases(with_cnn):
    """bench_cases() and the MLP at batch 512; `with_cnn`: the CNN too (it
    has no tensor-parallel plan)."""
    listed = bench_cases()
    torch.manual_seed(0)
    listed.insert(1, ("mlp (256-1024-1024-10, batch 512)", MLP(),
                      (torch.randn(512, 256), torch.randint(0, 10, (512,))), MLP_PLAN))
    if with_cnn:
        listed.append(("cnn (2 conv, 32x32 images, batch 64)", CNN(),
                       (torch.randn(64, 3, 32, 32), torch.randint(0, 10, (64,))), {}))
    return listed


def median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def runs_in_turn(layouts, run_flags, steps, rounds, workdir, take):
    """Runs each compiled layout (label, ranks, directory, data flags) for
    `steps` with `run_flags` and --log-json, `rounds` times, the layouts in
    turn so that a slow spell of the machine falls on all of them: each
    label's take(metrics) of every round."""
    results = {label: [] for label, _, _, _ in layouts}
    for _ in range(rounds):
        for label, ranks, out, flags in layouts:
            log = os.path.join(workdir, "metrics.json")
            subprocess.run([CLEAVE, "run", *(["-n", str(ranks)] if ranks > 1 else []), out,
                            *flags, "--steps", str(steps), "--no-shuffle", "--log-json", log,
                            "--quiet", *run_flags], check=True, stderr=subprocess.DEVNULL)
            results[label].append(take(json.load(open(log))))
    return results


def background_figures(trace_path):
    """Per kind of BACKGROUND_KINDS, medians over the ranks and the steps
    after the first of its background seconds (over any axis) and the
    waits for them."""
    events = json.load(open(trace_path))
    events = events["traceEvents"] if isinstance(events, dict) else events
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    spans = [e for e in events if e.get("ph") == "X"]
    rows = []
    for pid in sorted({p for p, _ in threads}):
        track = {name: [e for e in spans if e["pid"] == pid and threads.get((pid, e["tid"])) == name]
                 for name in ("compute", "communication", "communication (background)")}
        steps = sorted((e for e in track["compute"] if e["name"].startswith("step ")),
                       key=lambda e: e["ts"])[1:]
        for step in steps:
            def within(name, label):
                return sum(e["dur"] for e in track[name] if e["name"].startswith(label) and
                           step["ts"] <= e["ts"] and e["ts"] + e["dur"] <= step["ts"] + step["dur"])
            rows.append(tuple(seconds for kind in BACKGROUND_KINDS for seconds in (
                within("communication (background)", f"{kind} ") / 1e6,
                within("communication", f"wait for background {kind}") / 1e6)))
    return tuple(median([r[i] for r in rows]) for i in range(2 * len(BACKGROUND_KINDS)))


def figures(metrics):
    """Medians over both ranks and the steps after the first: step,
    communication and exposed communication seconds."""
    rows = [rank for step in metrics["step_times"][1:] for rank in step["ranks"]]
    return tuple(median([r[key] for r in rows]) for key in
                 ("seconds", "communication_seconds", "exposed_communication_seconds"))


def dp2_options():
    """--steps and --rounds, said in the first line printed."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--zero1", action="store_true",
                      help="ZeRO 1's bucketed reduce-scatters instead of plain dp's sums")
    kind.add_argument("--zero2", action="store_true",
                      help="ZeRO 2's bucketed reduce-scatters of its packed gradients")
    kind.add_argument("--zero3", action="store_true",
                      help="ZeRO 3's prefetched gathers instead of the gradient buckets")
    kind.add_argument("--pipeline", action="store_true",
                      help="the gradient buckets of dp x pp = 2 x 2's stages")
    kind.add_argument("--tp", action="store_true",
                      help="tp=2's sums of partial sums instead of dp's gradients")
    options = parser.parse_args()
    ranks = 4 if options.pipeline else 2
    print(f"{os.cpu_count()} cpus, {ranks} ranks of 1 thread each; per run the medians over "
          f"the ranks and steps 2..{options.steps}, then the median of {options.rounds} runs")
    return options


def main():
    options = dp2_options()
    print(f"{'model':38} {'layout':20} {'step ms':>8} {'comm ms':>8} {'exposed':>8} "
          f"{'hidden':>7} {'vs 0 comm':>9} {'step vs 0':>8}")
    chosen = next((layouts for flag, layouts in (
        ("zero1", ZERO1_LAYOUTS), ("zero2", ZERO2_LAYOUTS), ("zero3", ZERO3_LAYOUTS),
        ("pipeline", PIPELINE_LAYOUTS), ("tp", TP_LAYOUTS)) if getattr(options, flag)), LAYOUTS)
    for name, model, args, plan in cases(with_cnn=chosen is LAYOUTS):
        with tempfile.TemporaryDirectory() as workdir:
            layouts = list(compiled_layouts(CLEAVE, model, args, plan, workdir, chosen))
            trace = os.path.join(workdir, "trace.json")
            traced = ["--trace", trace] if chosen is not LAYOUTS else []
            runs = runs_in_turn(layouts, ["--threads", "1", *traced], options.steps,
                                options.rounds, workdir,
                                lambda m: figures(m) + (background_figures(trace) if traced
                                                        else ()))
        rows = [(label, *(median([r[i] for r in runs[label]]) for i in range(3)))
                for label in runs]
        baseline_step, baseline_communication = rows[0][1], rows[0][2]
        for label, step, communication, exposed in rows:
            hidden = 1 - exposed / communication if communication > 0 else 0.0
            print(f"{name:38} {label:20} {step * 1e3:>8.3f} {communication * 1e3:>8.3f} "
                  f"{exposed * 1e3:>8.3f} {hidden:>7.1%} {1 - exposed / baseline_communication:>9.1%}"
                  f" {step / baseline_step:>8.2f}")
        for label, *_ in (chosen[1:] if traced else ()):
            for k, kind in enumerate(BACKGROUND_KINDS):
                moved, waited = (median([r[3 + 2 * k + i] for r in runs[label]]) for i in (0, 1))
                if moved > 0:
                    print(f"{name:38} {label:20} background {kind} {moved * 1e3:.3f} ms, waited "
                          f"{waited * 1e3:.3f} ms: {1 - waited / moved:.1%} hidden")


if __name__ == "__main__":
    main()
