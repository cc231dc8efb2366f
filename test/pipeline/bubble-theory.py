# The simulator behind every pipeline schedule (cleave schedule, and the
# passes that build and verify a compiled pipeline's lists) against the
# bubble each schedule's paper derives, for uniform stages:
#   GPipe (Huang et al.) and 1F1B (Narayanan et al., PipeDream-Flush):
#       (P - 1) / (M + P - 1)
#   interleaved 1F1B over V stages per rank (Narayanan et al. 2021),
#   each stage 1/V of the work:  (P - 1) / (V M + P - 1)
#   ZB-H1 (Qi et al., zero bubble), backward split into I and W:
#       (P - 1)(F + I - W) / (M (F + I + W) + (P - 1)(F + I - W))
# and the step's length: (M + P - 1)(F + B) for GPipe and 1F1B. Also the
# published ordering of 1F1B on rank 0 (Megatron's: P - 1 warmup forwards,
# then a forward and a backward in turn, then the last backwards), and the
# refusals of shapes a schedule does not take.
#
# RUN: %python %s

import re
import subprocess
import sys


def schedule(*args):
    run = subprocess.run(["cleave", "schedule", *args], capture_output=True, text=True)
    return run


def simulated(*args):
    run = schedule(*args)
    assert run.returncode == 0, (args, run.stderr)
    bubble = float(re.search(r"^bubble: ([0-9.]+)", run.stdout, re.M).group(1))
    step = float(re.search(r"^step: ([0-9.e+]+)", run.stdout, re.M).group(1))
    return bubble, step, run.stdout


failures = []


def expect(what, got, want, tolerance=1e-6):
    if abs(got - want) > tolerance:
        failures.append(f"{what}: simulated {got}, theory {want}")


for P in (2, 3, 4, 8, 16):
    for M in (P, 2 * P, 4 * P, 8 * P):
        for kind in ("gpipe", "1f1b"):
            bubble, step, _ = simulated("--schedule", kind, "--pp", str(P),
                                        "--microbatches", str(M), "--costs", "1,1,1")
            expect(f"{kind} P={P} M={M} bubble", bubble, (P - 1) / (M + P - 1))
            expect(f"{kind} P={P} M={M} step", step, (M + P - 1) * 3)
        for V in (2, 4):
            c = 1 / V
            bubble, _, _ = simulated("--schedule", "interleaved", "--pp", str(P),
                                     "--virtual-stages", str(V), "--microbatches", str(M),
                                     "--costs", f"{c},{c},{c}")
            expect(f"interleaved P={P} V={V} M={M}", bubble, (P - 1) / (V * M + P - 1))
        for F, I, W in ((1, 1, 1), (1, 1, 0.5), (2, 1, 1)):
            bubble, _, _ = simulated("--schedule", "zb-h1", "--pp", str(P), "--microbatches",
                                     str(M), "--costs", f"{F},{I},{W}")
            theory = (P - 1) * (F + I - W) / (M * (F + I + W) + (P - 1) * (F + I - W))
            expect(f"zb-h1 P={P} M={M} F,I,W={F},{I},{W}", bubble, theory)

# Past this machine: 64 ranks, 512 microbatches.
bubble, _, _ = simulated("--schedule", "zb-h1", "--pp", "64", "--microbatches", "512")
expect("zb-h1 P=64 M=512", bubble, 63 / (3 * 512 + 63))

# Stages of different costs (F, I, W of each stage in turn). With the last
# of P = 2 stages the slower (F1 + B1 >= F0 + B0), it never waits after its
# first forward, whichever the schedule: the step is F0 + M (F1 + B1) + B0
# for gpipe and 1f1b, each rank busy M times its stage's F + B. zb-h1 hides
# rank 0's last backward (B0 = 1.5) behind rank 1's last two W (2, run
# after its last I: one held back, P - 1 = 1, and the last), so its step is
# F0 + M (F1 + B1).
for kind in ("gpipe", "1f1b", "zb-h1"):
    for M in (2, 4, 8):
        F0, I0, W0, F1, I1, W1 = 1, 0, 1.5, 1, 2, 1
        bubble, step, out = simulated("--schedule", kind, "--pp", "2", "--microbatches", str(M),
                                      "--costs", f"{F0},{I0},{W0},{F1},{I1},{W1}")
        want = F0 + M * (F1 + I1 + W1) + (I0 + W0 if kind != "zb-h1" else 0)
        expect(f"{kind} M={M} stages (1,0,1.5) and (1,2,1): step", step, want)
        busy = [float(b) for b in re.search(r"^busy: (.*) \(", out, re.M).group(1).split()]
        expect(f"{kind} M={M}: rank 0 busy", busy[0], M * (F0 + I0 + W0))
        expect(f"{kind} M={M}: rank 1 busy", busy[1], M * (F1 + I1 + W1))
        expect(f"{kind} M={M}: bubble", bubble, 1 - sum(busy) / (2 * want))
        ends = [float(e) for e in re.search(r"^ends: (.*) \(", out, re.M).group(1).split()]
        last = 1 if kind == "zb-h1" else 0
        expect(f"{kind} M={M}: rank {last} ends the step", ends[last], want)
# One triple per stage, all alike, is the uniform pipeline.
for kind in ("1f1b", "zb-h1"):
    same = simulated("--schedule", kind, "--pp", "4", "--microbatches", "8", "--costs",
                     ",".join(["1,1,1"] * 4), "--actions")[2]
    uniform = simulated("--schedule", kind, "--pp", "4", "--microbatches", "8", "--costs",
                        "1,1,1", "--actions")[2]
    if same.splitlines()[1:] != uniform.splitlines()[1:]:
        failures.append(f"{kind}: per-stage costs of 1,1,1 give {same}, uniform {uniform}")

# Megatron's 1F1B order on rank 0 of 4, 8 microbatches.
_, _, out = simulated("--schedule", "1f1b", "--pp", "4", "--microbatches", "8", "--actions")
rank0 = re.search(r"^rank 0: (.*)$", out, re.M).group(1).split()
megatron = (["F0@0", "F1@0", "F2@0"]
            + [a for m in range(3, 8) for a in (f"F{m}@0", f"B{m - 3}@0")]
            + ["B5@0", "B6@0", "B7@0"])
if rank0 != megatron:
    failures.append(f"1f1b rank 0: {rank0}, Megatron's {megatron}")
# GPipe: every forward, then every backward, on every rank.
_, _, out = simulated("--schedule", "gpipe", "--pp", "2", "--microbatches", "3", "--actions")
for rank in (0, 1):
    got = re.search(rf"^rank {rank}: (.*)$", out, re.M).group(1).split()
    want = [f"F{m}@{rank}" for m in range(3)] + [f"B{m}@{rank}" for m in range(3)]
    if got != want:
        failures.append(f"gpipe rank {rank}: {got}, expected {want}")

# Shapes a schedule does not take: one line each, exit 2.
for args, message in [
    (["--schedule", "1f1b", "--pp", "4", "--microbatches", "3"],
     "needs at least as many microbatches (3) as pipeline ranks (4)"),
    (["--schedule", "interleaved", "--pp", "4", "--virtual-stages", "2", "--microbatches", "6"],
     "needs the microbatches (6) to be a multiple of the pipeline ranks (4)"),
    (["--schedule", "gpipe", "--pp", "2", "--virtual-stages", "2"],
     "virtual stages need the interleaved one"),
    (["--schedule", "2f2b"], "unknown pipeline schedule"),
    (["--costs", "1,-1,1"], "takes three non-negative costs"),
    (["--pp", "2", "--costs", "1,1,1,1"], "or three for each of the 2 stages"),
    (["--pp", "2", "--costs", "0,0,0,0,0,0"], "not all zero"),
]:
    run = schedule(*args)
    lines = run.stderr.strip().splitlines()
    if run.returncode != 2 or message not in run.stderr or not lines or \
            not lines[0].startswith("cleave: error:") or run.stdout:
        failures.append(f"{args}: exit {run.returncode}, stderr {run.stderr!r}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("every schedule's simulated bubble equals its theory")
