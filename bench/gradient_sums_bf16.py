"""What summing the gradients over dp in bf16 saves (--grad-reduce-dtype).

    .venv/bin/python bench/gradient_sums_bf16.py [--steps N] [--rounds R]

For bench/overlap_dp.py's models (the MLP at batch 64 and 512, the GPT),
compiles dp=2 (AdamW, the same global batch, 1 thread a rank) in three
layouts, each with the gradients summed in f32 (the peer, measured in the
same run) and in bf16: every sum after the backward (--bucket-mb 0), the
default buckets started during the backward, and ZeRO 2 (each microbatch's
gradients reduce-scattered). The programs run in turn for R rounds; per run
the medians over both ranks and the steps after the first of --log-json's
figures, then the median run. Prints the bytes one rank sends a step
(plan.json, counted by the ring formula), the step, communication and
exposed communication times, and bf16's ratio to f32 for the bytes, the
communication and the step.
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from forward_vs_onnxruntime import CLEAVE  # noqa: E402
from layouts_vs_one_rank import compiled_layouts  # noqa: E402
from overlap_dp import cases, dp2_options, figures, median, runs_in_turn  # noqa: E402

BF16 = ["--grad-reduce-dtype", "bf16"]
LAYOUTS = (("--bucket-mb 0", ["--mesh", "dp=2", "--bucket-mb", "0"]),
           ("buckets (auto)", ["--mesh", "dp=2"]),
           ("zero=2", ["--mesh", "dp=2", "--zero", "2"]))


def bytes_sent(out):
    plan = json.load(open(os.path.join(out, "plan.json")))
    return sum(c["bytes_sent_per_rank"] for c in plan["collectives"])


def main():
    options = dp2_options()
    print(f"{'model':36} {'layout':16} {'sums':5} {'bytes/step':>10} {'step ms':>8} "
          f"{'comm ms':>8} {'exposed':>8} {'bytes':>6} {'comm':>6} {'step':>6}")
    layouts = [(f"{label} {sums}", 2, flags + (BF16 if sums == "bf16" else []))
               for label, flags in LAYOUTS for sums in ("f32", "bf16")]
    for name, model, args in cases():
        with tempfile.TemporaryDirectory() as workdir:
            compiled = list(compiled_layouts(CLEAVE, model, args, {}, workdir, layouts))
            sent = {label: bytes_sent(out) for label, _, out, _ in compiled}
            runs = runs_in_turn(compiled, ["--threads", "1"], options.steps, options.rounds,
                                workdir, figures)
        rows = {label: tuple(median([r[i] for r in runs[label]]) for i in range(3))
                for label in runs}
        for label, _ in LAYOUTS:
            f32, bf16 = rows[f"{label} f32"], rows[f"{label} bf16"]
            for sums, (step, communication, exposed) in (("f32", f32), ("bf16", bf16)):
                ratios = ""
                if sums == "bf16":
                    ratios = (f" {sent[label + ' bf16'] / sent[label + ' f32']:>6.2f}"
                              f" {communication / f32[1]:>6.2f} {step / f32[0]:>6.2f}")
                print(f"{name:36} {label:16} {sums:5} {sent[f'{label} {sums}']:>10} "
                      f"{step * 1e3:>8.3f} {communication * 1e3:>8.3f} {exposed * 1e3:>8.3f}"
                      f"{ratios}")


if __name__ == "__main__":
    main()
