"""Step time and bytes moved of each data-parallel layout against one rank.

    .venv/bin/python bench/layouts_vs_one_rank.py [--steps N] [--precision fp32 bf16]

For an MLP and a GPT-style decoder (bench/forward_vs_onnxruntime.py's), with
the same global batch and AdamW, compiles one rank (2 BLAS threads) and each
layout on 2 ranks of 1 thread (dp=2; ZeRO 1, 2 and 3 on dp=2; tp=2 with a
Megatron plan, and with --deterministic: its partial products made whole),
trains N steps,
and prints the mean step time (the driver's --log-json seconds over the
steps), its ratio to the one-rank step measured in the same run, and per
collective kind the bytes a rank sent per step (counted by the runtime)
against the analytic minimum from plan.json (ring all-reduce 2(n-1)/n of the
gradients, reduce-scatter and all-gather (n-1)/n of the parameters each; the
same amounts without the alignment padding the buffers carry), and a
rank's model state (plan.json's parameters, gradients, optimizer state and
the weights' copies; MB = 10^6 bytes) and its measured peak allocation.
The same total cores in every row: 2. With several --precision values
(cleave compile --precision), each layout is compiled and run in each, and
the rows say how its step time compares with the same layout's in fp32.
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
from forward_vs_onnxruntime import CLEAVE, GPT, MLP  # noqa: E402

LAYOUTS = (("one rank, 2 threads", 1, []),
           ("dp=2", 2, ["--mesh", "dp=2"]),
           ("dp=2 zero=1", 2, ["--mesh", "dp=2", "--zero", "1"]),
           ("dp=2 zero=2", 2, ["--mesh", "dp=2", "--zero", "2"]),
           ("dp=2 zero=3", 2, ["--mesh", "dp=2", "--zero", "3"]),
           ("tp=2", 2, ["--mesh", "tp=2", "--plan", "{plan}"]),
           ("tp=2 deterministic", 2, ["--mesh", "tp=2", "--plan", "{plan}", "--deterministic"]))

# Megatron plans for the models of forward_vs_onnxruntime.py.
MLP_PLAN = {"*fc1.weight": ["tp", "-"], "*fc1.bias": ["tp"], "*fc2.weight": ["-", "tp"]}
GPT_PLAN = {"*.qkv.weight": ["tp:3", "-"], "*.qkv.bias": ["tp:3"],
            "*.proj.weight": ["-", "tp"], "*.fc.weight": ["tp", "-"], "*.fc.bias": ["tp"],
            "*.out.weight": ["-", "tp"], "tok.weight": ["tp", "-"]}


def export(model, args, path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, path, opset_version=17, do_constant_folding=False,
                          input_names=["a", "b"], output_names=["loss"],
                          training=torch.onnx.TrainingMode.EVAL)


def bench_cases():
    """The models the layout benches train, seeded: (name, module, example
    inputs, Megatron plan)."""
    torch.manual_seed(0)
    return [("mlp (256-1024-1024-10, batch 64)", MLP(),
             (torch.randn(64, 256), torch.randint(0, 10, (64,))), MLP_PLAN),
            ("gpt (2 layers, d 128, seq 64, batch 8)", GPT(),
             (torch.randint(0, 512, (8, 64)), torch.randint(0, 512, (8, 64))), GPT_PLAN)]


def flag_value(flags, flag, axis=None):
    """The number `flag` gives in `flags` (with `axis`, that axis's size in
    a mesh such as dp=2,pp=2), or 1."""
    if flag not in flags:
        return 1
    value = flags[flags.index(flag) + 1]
    if axis is None:
        return int(value)
    sizes = dict(part.split("=") for part in value.split(","))
    return int(sizes.get(axis, 1))


def compiled_layouts(cleave, model, args, plan, workdir, layouts=LAYOUTS, extra=()):
    """Each of `layouts` compiled (AdamW, the same global batch) into
    workdir, with data files of 4 batches: yields (label, ranks, program
    directory, the run's --data flags). `extra`: more compile flags."""
    batch = args[0].shape[0]
    plan_file = os.path.join(workdir, "plan.json")
    json.dump({"format_version": 1, "parameters": plan}, open(plan_file, "w"))
    flags = []
    for name, value in zip(["a", "b"], args):
        file = os.path.join(workdir, name + ".npy")
        np.save(file, torch.cat([value] * 4).numpy())
        flags += ["--data", f"{name}={file}"]
    for label, ranks, layout in layouts:
        layout = [plan_file if flag == "{plan}" else flag for flag in layout]
        micro = batch // (flag_value(layout, "--mesh", "dp") * flag_value(layout, "--grad-accum"))
        path = os.path.join(workdir, f"b{micro}.onnx")
        if not os.path.exists(path):
            export(model, tuple(a[:micro] for a in args), path)
        out = os.path.join(workdir, "_".join([label, *extra]).replace(" ", "_").replace("=", "")
                           .replace(",", "").replace("-", ""))
        compiled = subprocess.run([cleave, "compile", path, "-o", out, "--train", "--optimizer",
                                   "adamw", "--lr", "1e-3", "--weight-decay", "0.01",
                                   "--batch-size", str(batch), *layout, *extra],
                                  capture_output=True, text=True)
        if compiled.returncode != 0:
            raise SystemExit(f"{label}: cleave compile: exit {compiled.returncode}\n"
                             f"{compiled.stderr}")
        yield label, ranks, out, flags


def bench(model, args, plan, steps, precision, workdir):
    rows = []
    for label, ranks, out, flags in compiled_layouts(CLEAVE, model, args, plan, workdir,
                                                     extra=("--precision", precision)):
        metrics = os.path.join(workdir, "metrics.json")
        launch = ["-n", str(ranks)] if ranks > 1 else []
        subprocess.run([CLEAVE, "run", *launch, out, *flags, "--steps", str(steps),
                        "--no-shuffle", "--threads", str(2 // ranks), "--log-json", metrics],
                       check=True, stderr=subprocess.DEVNULL)
        log = json.load(open(metrics))
        plan = json.load(open(os.path.join(out, "plan.json")))
        minimum = {c["kind"]: c["analytic_min_bytes_sent"] for c in plan.get("collectives", [])}
        sent = {b["kind"]: b["bytes"] / steps for b in log["bytes_sent"]}
        memory = plan["memory"]
        state = sum(memory[k] for k in ("parameter_bytes", "gradient_bytes",
                                        "optimizer_state_bytes", "weight_copy_bytes"))
        rows.append((label, log["seconds"] / steps, sent, minimum, state,
                     log["peak_bytes_allocated"]))
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--precision", nargs="+", default=["fp32"],
                        choices=["fp32", "bf16", "fp16"])
    options = parser.parse_args()
    print(f"{os.cpu_count()} cpus; mean step time over {options.steps} steps; bytes sent by "
          "one rank per step, and the analytic minimum")
    print(f"{'model':40} {'layout':20} {'prec':5} {'step ms':>8} {'vs 1 rank':>9} "
          f"{'vs fp32':>7} {'state MB':>8} {'peak MB':>7}  bytes sent / minimum")
    for name, model, args, plan in bench_cases():
        fp32 = {}
        for precision in options.precision:
            with tempfile.TemporaryDirectory() as workdir:
                rows = bench(model, args, plan, options.steps, precision, workdir)
            single = rows[0][1]
            for label, seconds, sent, minimum, state, peak in rows:
                if precision == "fp32":
                    fp32[label] = seconds
                against = f"{seconds / fp32[label]:.2f}" if label in fp32 else "-"
                traffic = ", ".join(f"{kind} {sent.get(kind, 0):.0f} / {minimum[kind]} "
                                    f"({sent.get(kind, 0) / max(minimum[kind], 1):.3f})"
                                    for kind in sorted(minimum))
                print(f"{name:40} {label:20} {precision:5} {seconds * 1e3:>8.3f} "
                      f"{seconds / single:>9.2f} {against:>7} {state / 1e6:>8.3f} "
                      f"{peak / 1e6:>7.3f}  {traffic or '-'}", flush=True)


if __name__ == "__main__":
    main()
