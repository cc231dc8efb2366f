# A pipeline's checkpoints hold the whole model: each stage's ranks write
# their stage's tensors, rank 0 the index of every stage's (a tied weight
# once). The MLP on pp=2 (1f1b, M = 4) against one device with --grad-accum 4,
# 6 steps in file order with momentum, checkpointed at step 3:
#   - pp=2 resumed from its own step-3 checkpoint runs steps 4-6 with the
#     uninterrupted pp=2 run's losses and ends with its parameters, bit for
#     bit;
#   - one device resumed from the pp=2 checkpoint, and pp=2 resumed from one
#     device's, both end with the uninterrupted one-device run's losses and
#     parameters bit for bit (pp=2 equals one device bit for bit);
#   - the checkpoint's tensors (test/lib/checkpoints.py reads its shards
#     with safetensors) are the pp=2 run's parameters at step 3;
#   - dp=2 x pp=2 with ZeRO 1 and 2 (each stage's flat buffer and its
#     optimizer slots carry the stage in their names): resumed from its own
#     step-3 checkpoint it ends bit for bit as its uninterrupted run; the
#     checkpoint holds every parameter as the run had it at step 3 and a
#     momentum slot for each; one device resumed from it ends within 1e-5
#     of the uninterrupted one-device run (dp sums its ranks' gradients in
#     another order);
#   - pp=2 with the interleaved schedule (V = 2, each rank writing the
#     tensors of its two stages): resumed from its own step-3 checkpoint,
#     one device resumed from it, and it resumed from one device's, each
#     ends with the uninterrupted one-device run's losses and parameters bit
#     for bit;
#   - --init-from a file of the whole model's parameters: pp=2 and the
#     interleaved run (each stage reading its own) run the one-device run's
#     losses and end with its parameters bit for bit;
#   - --max-restarts: a pp=2 run of 3000 steps whose second stage's rank is
#     killed (kill -9) after its first checkpoint restarts from its latest
#     checkpoint, says so in one warning line, and ends with the
#     uninterrupted run's parameters bit for bit.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
sys.path.insert(0, os.path.join(HERE, "..", "distributed"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))

import export_mlp  # noqa: E402
from checkpoints import global_tensors  # noqa: E402
from dp_vs_single import MOMENTUM, Model, parameters  # noqa: E402

STEPS = 6


def run(work, out, label, extra, ranks):
    log, results = f"{work}/{label}.json", f"{work}/{label}.results"
    os.makedirs(results, exist_ok=True)
    launch = ["-n", str(ranks)] if ranks > 1 else []
    subprocess.run(["cleave", "run", *launch, out, "--data",
                    f"x={work}/mlp.x.npy,labels={work}/mlp.labels.npy", "--no-shuffle",
                    "--log-json", log, "--output-dir", results, *extra],
                   check=True, stderr=subprocess.DEVNULL)
    losses = [s["loss"] for s in json.load(open(log))["steps"]]
    params = {}
    for stage in ([""] if ranks == 1 else sorted(d for d in os.listdir(out) if d.startswith("stage"))):
        plan = json.load(open(os.path.join(out, stage, "plan.json")))
        params.update(parameters(plan, os.path.join(results, stage), 1))
    return losses, params


def same(label, got, want, problems):
    (losses, params), (want_losses, want_params) = got, want
    if losses != want_losses[-len(losses):]:
        problems.append(f"{label}: losses {losses}, expected {want_losses[-len(losses):]}")
    for name, value in want_params.items():
        if params[name].tobytes() != value.tobytes():
            problems.append(f"{label}: {name} is not bit for bit the uninterrupted run's")
            return


def near(label, got, want, problems, tolerance=1e-5):
    (losses, params), (want_losses, want_params) = got, want
    want_losses = want_losses[-len(losses):]
    if not np.allclose(losses, want_losses, rtol=tolerance, atol=0):
        problems.append(f"{label}: losses {losses}, expected {want_losses}")
    for name, value in want_params.items():
        if np.abs(params[name] - value).max() > tolerance:
            problems.append(f"{label}: {name} is more than {tolerance} from the reference")


def zero_checkpoints(work, model, one, whole_one, problems):
    """dp=2 x pp=2 with ZeRO 1 and 2, checkpointed at step 3 and resumed."""
    for zero in (1, 2):
        label, out = f"dp=2 x pp=2 ZeRO {zero}", f"{work}/z{zero}"
        subprocess.run(["cleave", "compile", model, "-o", out, "--train", *MOMENTUM,
                        "--batch-size", "16", "--grad-accum", "2", "--mesh", "dp=2,pp=2",
                        "--zero", str(zero)], check=True)
        whole = run(work, out, f"z{zero}", ["--steps", str(STEPS)], 4)
        near(f"{label} uninterrupted", whole, whole_one, problems)
        at3 = run(work, out, f"z{zero}-first",
                  ["--steps", "3", "--checkpoint-dir", f"{work}/z{zero}-ck"], 4)
        saved = global_tensors(f"{work}/z{zero}-ck/step-3")
        for name, value in at3[1].items():
            if name not in saved or not np.array_equal(saved[name], value):
                problems.append(f"{label} checkpoint: {name} is not the run's at step 3")
            if f"momentum.velocity:{name}" not in saved:
                problems.append(f"{label} checkpoint: no momentum slot for {name}")
        for resumer, target, ranks, want, check in (
                ("itself", out, 4, whole, same), ("one device", one, 1, whole_one, near)):
            resumed = f"{work}/z{zero}-{ranks}-ck"
            shutil.copytree(f"{work}/z{zero}-ck", resumed)
            got = run(work, target, f"z{zero}-{ranks}",
                      ["--steps", str(STEPS), "--resume", resumed], ranks)
            check(f"{label}, {resumer} resumed from it", got, want, problems)
            print(f"{label}, {resumer} resumed from it: losses {got[0]}")


def interleaved_checkpoints(work, model, one, whole_one, problems):
    """pp=2 with the interleaved schedule, V=2 (each rank writes the tensors
    of its two stages): equal to one device uninterrupted, and resumed from
    its own step-3 checkpoint, one device from it, and it from one
    device's, all bit for bit."""
    out = f"{work}/interleaved"
    subprocess.run(["cleave", "compile", model, "-o", out, "--train", *MOMENTUM,
                    "--batch-size", "16", "--grad-accum", "4", "--mesh", "pp=2",
                    "--schedule", "interleaved", "--virtual-stages", "2"], check=True)
    same("interleaved uninterrupted", run(work, out, "il", ["--steps", str(STEPS)], 2), whole_one,
         problems)
    run(work, out, "il-first", ["--steps", "3", "--checkpoint-dir", f"{work}/il-ck"], 2)
    for label, target, ranks, checkpoint in (
            ("interleaved from interleaved", out, 2, "il-ck"),
            ("one device from interleaved", one, 1, "il-ck"),
            ("interleaved from one device", out, 2, "one-ck")):
        resumed = f"{work}/{label.replace(' ', '_')}-ck"
        shutil.copytree(f"{work}/{checkpoint}", resumed)
        got = run(work, target, label.replace(" ", "_"),
                  ["--steps", str(STEPS), "--resume", resumed], ranks)
        same(label, got, whole_one, problems)
        print(f"{label}: losses {got[0]}")
    # --init-from: every stage takes its parameters from the whole model's file.
    start = f"{work}/step3.safetensors"
    save_file(run(work, one, "one-3", ["--steps", "3"], 1)[1], start)
    first = ["--steps", "3", "--init-from", start]
    from_file = run(work, one, "one-init", first, 1)
    for label, target in (("pp=2", f"{work}/pp"), ("interleaved", out)):
        same(f"{label} --init-from", run(work, target, f"{label}-init", first, 2), from_file,
             problems)


def killed_once(work, pp, problems):
    """Kills the second stage's rank once the run has a checkpoint."""
    steps, ckpt = 3000, f"{work}/restart-ck"
    base = ["cleave", "run", "-n", "2", pp, "--data",
            f"x={work}/mlp.x.npy,labels={work}/mlp.labels.npy", "--steps", str(steps),
            "--no-shuffle", "--quiet"]
    subprocess.run(base + ["--output-dir", f"{work}/restart-ref"], check=True,
                   stderr=subprocess.DEVNULL)
    job = subprocess.Popen(base + ["--output-dir", f"{work}/restart-out", "--checkpoint-dir", ckpt,
                                   "--checkpoint-every", "500", "--max-restarts", "1"],
                           stderr=subprocess.PIPE, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(job.stderr), daemon=True)
    reader.start()
    victim, deadline = None, time.time() + 300
    while job.poll() is None and time.time() < deadline and victim is None:
        if os.path.exists(f"{ckpt}/latest"):
            for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
                try:
                    args = open(cmdline, "rb").read().split(b"\0")
                except OSError:
                    continue
                if args and args[0].decode(errors="replace") == f"{pp}/stage1/program":
                    victim = int(cmdline.split("/")[2])
                    os.kill(victim, signal.SIGKILL)
        time.sleep(0.01)
    job.wait(timeout=max(1, deadline - time.time()))
    reader.join(timeout=10)
    warning = re.compile(r"^cleave: warning: cleave run: rank 1 was killed by SIGKILL.*: "
                         r"restarting from the latest checkpoint in \S+ \(restart 1 of 1\)$")
    if victim is None or job.returncode != 0:
        problems.append(f"restart: killed {victim}, exit {job.returncode}: {''.join(lines)!r}")
    elif not any(warning.match(line.strip()) for line in lines):
        problems.append(f"restart: no restart warning in {''.join(lines)!r}")
    for stage in ("stage0", "stage1"):
        a = open(f"{work}/restart-ref/{stage}/weights.bin", "rb").read()
        b = open(f"{work}/restart-out/{stage}/weights.bin", "rb").read()
        if a != b:
            problems.append(f"restart: {stage}'s weights differ from the uninterrupted run's")
    print(f"restart: killed rank 1 (pid {victim}), exit {job.returncode}")


def main():
    work = sys.argv[1]
    problems = []
    m = Model("mlp", export_mlp, ["x", "labels"], 16, work)
    model = m.export(4)
    one, pp = f"{work}/one", f"{work}/pp"
    common = ["--train", *MOMENTUM, "--batch-size", "16", "--grad-accum", "4"]
    subprocess.run(["cleave", "compile", model, "-o", one, *common], check=True)
    subprocess.run(["cleave", "compile", model, "-o", pp, *common, "--mesh", "pp=2"], check=True)

    whole_one = run(work, one, "one", ["--steps", str(STEPS)], 1)
    whole_pp = run(work, pp, "pp", ["--steps", str(STEPS)], 2)
    same("pp=2 uninterrupted", whole_pp, whole_one, problems)

    for label, out, ranks in (("pp", pp, 2), ("one", one, 1)):
        run(work, out, f"{label}-first", ["--steps", "3", "--checkpoint-dir", f"{work}/{label}-ck"],
            ranks)
    # The pipeline's checkpoint holds every parameter as the run had it at step 3.
    at3 = run(work, pp, "pp-3", ["--steps", "3"], 2)
    saved = global_tensors(f"{work}/pp-ck/step-3")
    for name, value in at3[1].items():
        if name not in saved or not np.array_equal(saved[name], value):
            problems.append(f"pp=2 checkpoint: {name} is not the run's parameter at step 3")

    for label, out, ranks, checkpoint, want in (
            ("pp=2 from pp=2", pp, 2, "pp-ck", whole_pp),
            ("one device from pp=2", one, 1, "pp-ck", whole_one),
            ("pp=2 from one device", pp, 2, "one-ck", whole_one)):
        resumed = f"{work}/{label.replace(' ', '_')}-ck"
        shutil.copytree(f"{work}/{checkpoint}", resumed)
        got = run(work, out, label.replace(" ", "_"),
                  ["--steps", str(STEPS), "--resume", resumed, "--checkpoint-dir", resumed], ranks)
        same(label, got, want, problems)
        print(f"{label}: losses {got[0]}")

    zero_checkpoints(work, model, one, whole_one, problems)
    interleaved_checkpoints(work, model, one, whole_one, problems)
    killed_once(work, pp, problems)
    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
