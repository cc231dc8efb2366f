"""The pipeline schedules' bubble as the simulator predicts it, past this machine.

For each schedule (gpipe, 1f1b, interleaved with V = 2, zb-h1) and pipeline
sizes P up to 64 with M up to 512 microbatches, prints the bubble that
`cleave schedule` simulates (the same simulator that builds and verifies a
compiled pipeline's action lists) beside the bubble each schedule's paper
derives for uniform stages, and their ratio. Stages cost F = I = W = 1 (a
backward of 2), divided by V for the interleaved schedule's smaller stages.

With --measure, it also trains pipelines on this machine and measures their
bubble, on each of --models: an MLP of 8 Linear and tanh layers ("tanh"),
or of 8 Linear layers alone ("linear": each layer's F, I and W one product
each, F = I = W as the zero-bubble paper assumes), 512 wide, whose first layer
takes 768 inputs (so that the first stage, which computes no gradient for
its input, does as much work as the second), or the 8 Linear layers after an
embedding of 1024 tokens ("embedded": the first stage's backward then
computes its layers' input gradients too, all of it W under zb-h1, which
makes the stages' costs F, 0, 2W and F, I, W), cut into P = 2 stages by the
balanced cut (2 x 2 stages for the interleaved schedule, V = 2): gpipe,
1f1b, interleaved and zb-h1 with M = 2 ... 16 microbatches of 128 samples,
12 steps a run (the first 2 left out), 3 runs each (--repeats). Per run:
  - idle: 1 - compute_seconds / seconds of --log-json, the mean over ranks
    and steps (compute: the program's calls less the sends and receives in
    them); input: the part of the step spent waiting for the input thread;
  - F, B (I with zb-h1) and W: each stage's mean call in the run's --trace,
    less the messages inside it: the stage's own work;
  - theory: `cleave schedule` simulating the schedule with those per-stage
    costs, each rank's mean optimizer call after its last action and the
    step ending with the last rank's (the loss's sum over pp); points: idle
    less theory, in points; formula: the paper's bubble for uniform stages
    (zb-h1's with the stages' mean F, I and W);
  - idle ms and theory ms: a rank's idle time a step, measured and simulated.
The run of median idle is shown. Last, zb-h1's idle time over 1f1b's at each
M, measured (the median of the repeats, and their range: the noise) and in
theory (the zero-bubble paper's 1/3 holds for F = I = W).

    .venv/bin/python bench/pipeline_bubble.py [--cleave build/bin/cleave] [--measure]
        [--models tanh,linear,embedded] [--repeats 3]
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


def export_mlp(path, layers, inputs, width, micro, activation, embedded, classes=16):
    """`layers` Linear layers (and `activation`s) of `width`, the first
    taking `inputs` features, or with `embedded` rows of a table of `inputs`
    tokens (an Embedding, whose gradient needs the first layer's input
    gradient), and a head of `classes`."""
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test",
                                    "lib"))
    from torch_export import export_with_loss

    class DeepMLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            first = width if embedded else inputs
            self.embed = torch.nn.Embedding(inputs, width) if embedded else torch.nn.Identity()
            self.net = torch.nn.Sequential(*[m for layer in range(layers) for m in (
                torch.nn.Linear(first if layer == 0 else width, width), activation())])
            self.head = torch.nn.Linear(width, classes)

        def forward(self, x, labels):
            return torch.nn.functional.cross_entropy(self.head(self.net(self.embed(x))), labels)

    torch.manual_seed(0)
    x = torch.randint(0, inputs, (micro,)) if embedded else torch.randn(micro, inputs)
    export_with_loss(DeepMLP(), (x, torch.randint(0, classes, (micro,))), path, ["x", "labels"])


def timeline(trace, first_step=3):
    """From a run's --trace, the steps from `first_step` on: each stage's
    mean forward, input-gradient (the whole backward, without zb-h1) and
    weight-gradient time in ms, each rank's mean optimizer call, and the
    ranks' mean waiting fraction. A call's time is its span less the
    waits inside it (a receive's wait for its message; its transfer is
    the rank's work), and a forward's includes the wait for its input
    before it: each stage's own occupancy. Waiting is every wait span of the
    communication track (the receives', and the barrier before the loss's
    sum over pp) over the step's time."""
    events = [e for e in json.load(open(trace))["traceEvents"]
              if e.get("ph") == "X" and e.get("args", {}).get("step", first_step) >= first_step]

    def spans(name_matches):
        """Per rank, the starts, ends and durations of the spans named so."""
        found = {}
        for e in events:
            if name_matches(e["name"]):
                found.setdefault(e["pid"], []).append((e["ts"], e["ts"] + e["dur"], e["dur"]))
        return {pid: np.array(sorted(rows)).T for pid, rows in found.items()}

    waits = spans(lambda name: name == "wait")
    reads = spans(lambda name: name.startswith("read microbatch"))

    def waited(span):
        if span["pid"] not in waits:
            return 0.0
        starts, ends, durations = waits[span["pid"]]
        inside = (starts >= span["ts"]) & (ends <= span["ts"] + span["dur"])
        return float(durations[inside].sum())

    calls, applies, waiting = {}, {}, []
    for e in events:
        if e["name"] in ("forward", "backward", "backward_weight", "optimizer"):
            work = (e["dur"] - waited(e)) / 1e3
            if e["name"] == "forward":  # and the read of its input just before it
                starts, _, durations = reads[e["pid"]]
                work += durations[np.searchsorted(starts, e["ts"], side="right") - 1] / 1e3
            if e["name"] == "optimizer":
                applies.setdefault(e["pid"], []).append(work)
            else:
                calls.setdefault((e["args"]["stage"], e["name"]), []).append(work)
        elif e["name"].startswith("step "):
            waiting.append(waited(e) / e["dur"])
    stages = 1 + max(stage for stage, _ in calls)
    costs = [[float(np.mean(calls.get((stage, name), [0])))
              for name in ("forward", "backward", "backward_weight")] for stage in range(stages)]
    return costs, [float(np.mean(applies[rank])) for rank in sorted(applies)], float(
        np.mean(waiting))


def simulated_step(cleave, schedule, P, M, V, costs, applies):
    """`schedule` simulated with each stage's measured costs, each rank's
    optimizer run after its last action and the step ending with the last
    of them (the loss's sum over pp waits for every rank): its bubble and
    the ranks' mean idle time."""
    out = subprocess.run(
        [cleave, "schedule", "--schedule", schedule, "--pp", str(P), "--microbatches", str(M),
         "--virtual-stages", str(V), "--costs", ",".join(f"{c:.6f}" for s in costs for c in s)],
        check=True, capture_output=True, text=True).stdout
    busy, ends = ([float(v) for v in re.search(rf"^{key}: (.*) \(", out, re.M).group(1).split()]
                  for key in ("busy", "ends"))
    step = max(e + a for e, a in zip(ends, applies))
    idle = step - float(np.mean([b + a for b, a in zip(busy, applies)]))
    return idle / step, idle


def measured(cleave, work, model, schedule, P, M, micro, steps, data):
    """One run (timeline): its stage costs, its bubble (the ranks' mean
    waiting fraction), its not-computing fraction (1 - compute_seconds /
    seconds of --log-json: the waits, and the input, the messages' transfers
    and the driver's own work), its mean wait ms a rank and step, and the
    bubble and wait ms simulated from its costs."""
    out = os.path.join(work, f"{schedule}-p{P}-m{M}")
    V = 2 if schedule == "interleaved" else 1
    subprocess.run([cleave, "compile", model, "-o", out, "--train", "--mesh", f"pp={P}",
                    "--grad-accum", str(M), "--batch-size", str(M * micro), "--schedule",
                    schedule, "--virtual-stages", str(V)], check=True, capture_output=True)
    log, trace = out + ".json", out + ".trace.json"
    subprocess.run([cleave, "run", "-n", str(P), out, "--data", data, "--steps", str(steps),
                    "--log-json", log, "--trace", trace, "--quiet"], check=True,
                   capture_output=True)
    ranks = [r for step in json.load(open(log))["step_times"][2:] for r in step["ranks"]]
    idle = float(np.mean([1 - r["compute_seconds"] / r["seconds"] for r in ranks]))
    step_ms = float(np.mean([r["seconds"] for r in ranks])) * 1e3
    costs, applies, bubble = timeline(trace)
    if schedule != "zb-h1":  # B is I + W: the simulator takes it as I
        costs = [[f, b + w, 0.0] for f, b, w in costs]
    return (bubble, idle, bubble * step_ms, costs) + simulated_step(cleave, schedule, P, M, V,
                                                                    costs, applies)


SCHEDULES = ("gpipe", "1f1b", "interleaved", "zb-h1")
MICROBATCHES = (2, 4, 8, 16)
MODELS = {
    # name: (what each layer is, its activation, inputs, embedded), as torch
    # modules; the inputs of the first layer, or the rows of an embedding.
    # 768 inputs make the first stage, which computes no gradient for its
    # input, do as much work as the second.
    "tanh": ("Linear and tanh", "Tanh", 768, False),
    # No activation: a layer's forward, input gradient and weight gradient
    # are one product each, F = I = W as the zero-bubble paper assumes.
    "linear": ("Linear", "Identity", 768, False),
    # The same after an embedding of 1024 tokens, as a language model's
    # first stage: its backward then computes every layer's input gradient
    # too, so with zb-h1 (whose first stage sends nothing back: all of its
    # backward is W) the stages cost F, 0, 2W and F, I, W, with F = I = W:
    # the costs for which the simulator gives zb-h1 a third of 1f1b's wait.
    # The embedding's dense gradient (1024 x 512) weighs the first stage as
    # the head and the loss weigh the second (256 tokens left it 2% lighter,
    # a gap that grows with M in both schedules' waits).
    "embedded": ("Linear, after an embedding,", "Identity", 1024, True),
}


def measure(cleave, repeats, model_name):
    import torch
    P, micro, width, layers, steps = 2, 128, 512, 8, 12
    kind, activation, inputs, embedded = MODELS[model_name]
    print(f"\nmeasured on this machine: P = {P}, an MLP of {layers} {kind} layers "
          f"({inputs} {'tokens' if embedded else 'inputs'}, {width} wide), {micro} samples a "
          f"microbatch; of {repeats} runs each, the one of median bubble")
    print(f"{'schedule':<12} {'M':>3} {'F ms':>19} {'B/I ms':>19} {'W ms':>11} {'bubble':>7} "
          f"{'theory':>7} {'points':>6} {'formula':>8} {'idle':>6} {'wait ms':>8} "
          f"{'theory ms':>9}")
    waits = {}
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "mlp.onnx")
        export_mlp(model, layers, inputs, width, micro, getattr(torch.nn, activation), embedded)
        rng = np.random.default_rng(0)
        samples = 16 * micro
        np.save(os.path.join(work, "x.npy"),
                rng.integers(0, inputs, samples) if embedded
                else rng.standard_normal((samples, inputs), np.float32))
        np.save(os.path.join(work, "labels.npy"), rng.integers(0, 16, samples))
        data = f"x={work}/x.npy,labels={work}/labels.npy"
        # Each M's runs take the schedules in turn, so that the runs compared
        # shared the machine's state (it drifts over minutes).
        runs = {}
        for M in MICROBATCHES:
            for _ in range(repeats):
                for schedule in SCHEDULES:
                    runs.setdefault((schedule, M), []).append(
                        measured(cleave, work, model, schedule, P, M, micro, steps, data))
    for schedule in SCHEDULES:
        for M in MICROBATCHES:
            bubble, idle, ms, costs, theory_bubble, theory_ms = sorted(
                runs[schedule, M], key=lambda r: r[0])[repeats // 2]
            # The papers' formulas for uniform stages, zb-h1's with the
            # stages' mean F, I and W.
            V = 2 if schedule == "interleaved" else 1
            mean = [float(np.mean(c)) for c in zip(*costs)]
            formula = theory(schedule, P, M, V, mean if schedule == "zb-h1" else (1, 1, 1))
            columns = ["/".join(f"{s[i]:.2f}" for s in costs) for i in range(3)]
            print(f"{schedule:<12} {M:>3} {columns[0]:>19} {columns[1]:>19} "
                  f"{columns[2]:>11} {bubble:>7.4f} {theory_bubble:>7.4f} "
                  f"{100 * (bubble - theory_bubble):>6.1f} {formula:>8.4f} {idle:>6.3f} "
                  f"{ms:>8.2f} {theory_ms:>9.2f}")
    print(f"\n{model_name}: zb-h1's wait a rank and step over 1f1b's (the zero-bubble "
          "paper's 1/3 for F = I = W), the median over the repeats of each zb-h1 run's over "
          "the 1f1b run beside it")
    for M in MICROBATCHES:
        pairs = list(zip(runs["zb-h1", M], runs["1f1b", M]))
        measured_ratios = [zb[2] / one[2] for zb, one in pairs]
        theory_ratio = np.median([zb[5] / one[5] for zb, one in pairs])
        print(f"M = {M:>2}: measured {np.median(measured_ratios):.3f} (repeats "
              f"{min(measured_ratios):.3f}-{max(measured_ratios):.3f}); theory "
              f"{theory_ratio:.3f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cleave", default="build/bin/cleave")
    parser.add_argument("--measure", action="store_true",
                        help="also train pipelines here and measure their bubble")
    parser.add_argument("--models", default="tanh,linear,embedded",
                        help="the MLPs to measure: tanh (Linear and tanh layers), linear "
                        "(Linear layers alone: F = I = W), embedded (the Linear layers after "
                        "an embedding: the first stage's backward 2W)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs of each measured pipeline (the median is shown)")
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
        for model_name in args.models.split(","):
            measure(args.cleave, args.repeats, model_name)


if __name__ == "__main__":
    main()
