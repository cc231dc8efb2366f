"""The pipeline schedules' bubble as the simulator predicts it, past this machine.

For each schedule (gpipe, 1f1b, interleaved with V = 2, zb-h1) and pipeline
sizes P up to 64 with M up to 512 microbatches, prints the bubble that
`cleave schedule` simulates (the same simulator that builds and verifies a
compiled pipeline's action lists) beside the bubble each schedule's paper
derives for uniform stages, and their ratio. Stages cost F = I = W = 1 (a
backward of 2), divided by V for the interleaved schedule's smaller stages.

With --measure, it also trains a pipeline on this machine and measures its
bubble: an MLP of 8 equal layers (Linear(512, 512) and tanh) cut into P = 2
stages by the balanced cut (2 x 2 stages for the interleaved schedule, V = 2),
gpipe, 1f1b, interleaved and zb-h1 with M = 2 ... 16 microbatches
of 128 samples, 12 steps each (the first 2 left out). Each rank's
--log-json step times give its busy fraction (compute_seconds / seconds:
the program's calls less the receives that wait for the other stage); the
measured bubble is 1 minus the ranks' mean busy fraction, set beside each
schedule's formula for uniform stages with the F, I and W the run's trace
measured (each stage's median call, averaged over the stages; the formula
leaves the optimizer's apply and the messages out).

    .venv/bin/python bench/pipeline_bubble.py [--cleave build/bin/cleave] [--measure]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np


def simulated(cleave, schedule, P, M, V, costs):
    out = subprocess.run(
        [cleave, "schedule", "--schedule", schedule, "--pp", str(P), "--microbatches", str(M),
         "--virtual-stages", str(V), "--costs", ",".join(map(str, costs))],
        check=True, capture_output=True, text=True).stdout
    return float(re.search(r"^bubble: ([0-9.]+)", out, re.M).group(1))


def theory(schedule, P, M, V, costs):
    F, I, W = costs
    if schedule == "interleaved":
        return (P - 1) / (V * M + P - 1)
    if schedule == "zb-h1":
        return (P - 1) * (F + I - W) / (M * (F + I + W) + (P - 1) * (F + I - W))
    return (P - 1) / (M + P - 1)


def export_mlp(path, layers, width, micro, classes=16):
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test",
                                    "lib"))
    from torch_export import export_with_loss

    class DeepMLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(*[m for _ in range(layers) for m in (
                torch.nn.Linear(width, width), torch.nn.Tanh())])
            self.head = torch.nn.Linear(width, classes)

        def forward(self, x, labels):
            return torch.nn.functional.cross_entropy(self.head(self.net(x)), labels)

    torch.manual_seed(0)
    export_with_loss(DeepMLP(), (torch.randn(micro, width), torch.randint(0, classes, (micro,))),
                     path, ["x", "labels"])


def stage_costs(trace, stages):
    """Each stage's median forward, input-gradient (the whole backward,
    without zb-h1) and weight-gradient call in ms, less the sends and
    receives inside it, and each rank's median optimizer call."""
    events = [e for e in json.load(open(trace))["traceEvents"] if e.get("ph") == "X"]
    messages = [e for e in events if e["name"] in ("send pp", "recv pp")]
    calls, applies = {}, {}
    for e in events:
        end = e["ts"] + e["dur"]
        inside = sum(m["dur"] for m in messages
                     if m["pid"] == e["pid"] and e["ts"] <= m["ts"] and m["ts"] + m["dur"] <= end)
        if e["name"] in ("forward", "backward", "backward_weight"):
            calls.setdefault((e["args"]["stage"], e["name"]), []).append((e["dur"] - inside) / 1e3)
        elif e["name"] == "optimizer":
            applies.setdefault(e["pid"], []).append(e["dur"] / 1e3)
    costs = [[float(np.median(calls.get((stage, name), [0])))
              for name in ("forward", "backward", "backward_weight")] for stage in range(stages)]
    return costs, [float(np.median(applies[rank])) for rank in sorted(applies)]


def simulated_step(cleave, schedule, P, M, V, costs, applies):
    """The bubble of `schedule` simulated with each stage's measured costs,
    each rank's optimizer run after its last action and the step ending
    with the last of them (the loss's sum over pp waits for every rank)."""
    out = subprocess.run(
        [cleave, "schedule", "--schedule", schedule, "--pp", str(P), "--microbatches", str(M),
         "--virtual-stages", str(V), "--costs", ",".join(f"{c:.6f}" for s in costs for c in s)],
        check=True, capture_output=True, text=True).stdout
    busy, ends = ([float(v) for v in re.search(rf"^{key}: (.*) \(", out, re.M).group(1).split()]
                  for key in ("busy", "ends"))
    step = max(e + a for e, a in zip(ends, applies))
    return 1 - sum(b + a for b, a in zip(busy, applies)) / (P * step)


def measured(cleave, work, model, schedule, P, M, micro, steps, data):
    """The run's bubble, its stage costs (stage_costs) and the bubble
    simulated from them."""
    out = os.path.join(work, f"{schedule}-p{P}-m{M}")
    V = 2 if schedule == "interleaved" else 1
    subprocess.run([cleave, "compile", model, "-o", out, "--train", "--mesh", f"pp={P}",
                    "--grad-accum", str(M), "--batch-size", str(M * micro), "--schedule",
                    schedule, "--virtual-stages", str(V)], check=True, capture_output=True)
    log, trace = out + ".json", out + ".trace.json"
    subprocess.run([cleave, "run", "-n", str(P), out, "--data", data, "--steps", str(steps),
                    "--log-json", log, "--trace", trace, "--quiet"], check=True,
                   capture_output=True)
    busy = [[r["compute_seconds"] / r["seconds"] for r in step["ranks"]]
            for step in json.load(open(log))["step_times"][2:]]
    costs, applies = stage_costs(trace, P * V)
    if schedule != "zb-h1":  # B is I + W: the simulator takes it as I
        costs = [[f, b + w, 0.0] for f, b, w in costs]
    return (1 - float(np.mean(busy)), costs,
            simulated_step(cleave, schedule, P, M, V, costs, applies))


def measure(cleave):
    P, micro, width, layers, steps = 2, 128, 512, 8, 12
    print(f"\nmeasured on this machine: P = {P}, an MLP of {layers} Linear({width}, {width}) "
          f"layers, {micro} samples a microbatch")
    print(f"{'schedule':<12} {'P':>3} {'M':>4} {'F ms':>11} {'B/I ms':>11} {'W ms':>11} "
          f"{'measured':>9} {'theory':>7} {'points':>6} {'formula':>8}")
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "mlp.onnx")
        export_mlp(model, layers, width, micro)
        rng = np.random.default_rng(0)
        samples = 16 * micro
        np.save(os.path.join(work, "x.npy"), rng.standard_normal((samples, width), np.float32))
        np.save(os.path.join(work, "labels.npy"), rng.integers(0, 16, samples))
        data = f"x={work}/x.npy,labels={work}/labels.npy"
        for schedule in ("gpipe", "1f1b", "interleaved", "zb-h1"):
            for M in (2, 4, 8, 16):
                got, costs, theory_bubble = measured(cleave, work, model, schedule, P, M, micro,
                                                     steps, data)
                # The papers' formulas for uniform stages, zb-h1's with the
                # stages' mean F, I and W.
                V = 2 if schedule == "interleaved" else 1
                mean = [float(np.mean(c)) for c in zip(*costs)]
                formula = theory(schedule, P, M, V, mean if schedule == "zb-h1" else (1, 1, 1))
                columns = ["/".join(f"{s[i]:.2f}" for s in costs) for i in range(3)]
                print(f"{schedule:<12} {P:>3} {M:>4} {columns[0]:>11} {columns[1]:>11} "
                      f"{columns[2]:>11} {got:>9.4f} {theory_bubble:>7.4f} "
                      f"{100 * (got - theory_bubble):>6.1f} {formula:>8.4f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cleave", default="build/bin/cleave")
    parser.add_argument("--measure", action="store_true",
                        help="also train pipelines here and measure their bubble")
    args = parser.parse_args()
    print(f"{'schedule':<12} {'P':>3} {'M':>4} {'simulated':>10} {'theory':>8} {'ratio':>6}")
    for schedule in ("gpipe", "1f1b", "interleaved", "zb-h1"):
        V = 2 if schedule == "interleaved" else 1
        costs = (1 / V, 1 / V, 1 / V)
        for P in (4, 8, 16, 32, 64):
            for M in (P, 4 * P, 512):
                if M < P or M > 512:
                    continue
                got = simulated(args.cleave, schedule, P, M, V, costs)
                want = theory(schedule, P, M, V, costs)
                print(f"{schedule:<12} {P:>3} {M:>4} {got:>10.4f} {want:>8.4f} {got / want:>6.3f}")
    if args.measure:
        measure(args.cleave)


if __name__ == "__main__":
    main()
