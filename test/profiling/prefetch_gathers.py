# ZeRO 3's parameter gathers started a compute segment early on the
# background thread (cleave-prefetch-gathers, `--prefetch-gathers auto`, the
# default) against the same step with every gather where its parameter is
# read (`--prefetch-gathers off`): the example MLP on dp=2 with --zero 3,
# adam and --grad-accum 2, 4 steps on the same data:
#   - the losses of every step and the trained parameters (--save-onnx) are
#     the same bit for bit: a gather moves the same bytes wherever it runs;
#   - plan.json lists the prefetched gathers (none with off), each a
#     parameter's gathered bytes (from the model's initializer shapes: its
#     elements padded to a multiple of 16 x 2 ranks, docs/training.md,
#     4 bytes each), and its
#     `collectives` are the same in both (the same calls, moved); each
#     rank's bytes sent are the same;
#   - in the trace, every prefetched gather of each microbatch is an
#     "all_gather dp" span on the "communication (background)" track with
#     plan.json's bytes, in its order, inside its microbatch's forward and
#     backward, and each is waited for once ("wait for background
#     all_gather" on the communication track, inside the phases); a step's
#     communication seconds are its collective spans and background gathers,
#     its exposed communication the collective spans and the waits.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(HERE, "..", "lib"))

import chrome_trace  # noqa: E402
from expectations import expect, problems, run  # noqa: E402

MODEL = os.path.join(ROOT, "examples", "mlp", "model.onnx")
STEPS, ACCUM, RANKS = 4, 2, 2


def padded_bytes(shape):
    elements = int(np.prod(shape))
    return -(-elements // (16 * RANKS)) * 16 * RANKS * 4


def train(workdir, label, flags, data):
    out = os.path.join(workdir, label)
    run(["cleave", "compile", MODEL, "-o", out, "--train", "--optimizer", "adam", "--lr", "0.01",
         "--mesh", f"dp={RANKS}", "--zero", "3", "--grad-accum", str(ACCUM), *flags])
    run(["cleave", "run", out, "-n", str(RANKS), *data, "--steps", str(STEPS), "--no-shuffle",
         "--quiet", "--trace", f"{out}.trace.json", "--log-json", f"{out}.metrics.json",
         "--save-onnx", f"{out}.trained.onnx"])
    plan = json.load(open(os.path.join(out, "plan.json")))
    metrics = json.load(open(f"{out}.metrics.json"))
    trained = {t.name: numpy_helper.to_array(t)
               for t in onnx.load(f"{out}.trained.onnx").graph.initializer}
    return plan, metrics, trained, chrome_trace.load(f"{out}.trace.json")


def check_trace(trace, metrics, gathered):
    for rank in range(RANKS):
        compute = trace.track(rank, "compute")
        steps = [s for s in compute if s.name.startswith("step ")]
        phases = [s for s in compute if s.name in ("forward", "backward")]
        comm = trace.track(rank, "communication")
        waits = [s for s in comm if s.name == "wait for background all_gather"]
        calls = [s for s in comm if s not in waits and s.name not in ("wait", "transfer")]
        background = trace.track(rank, "communication (background)")
        expect(all(s.name == "all_gather dp" for s in background),
               f"rank {rank}: background spans {sorted({s.name for s in background})}")
        for step in steps:
            n = step.args["step"]
            mine = [p for p in phases if step.holds(p, chrome_trace.NS)]
            for k in range(ACCUM):
                forward, backward = mine[2 * k], mine[2 * k + 1]
                inside = [s for s in background
                          if forward.ts - chrome_trace.NS <= s.ts and
                          s.end <= backward.end + chrome_trace.NS]
                expect([s.args.get("buffer_bytes") for s in inside] == gathered,
                       f"rank {rank} step {n} microbatch {k}: background gathers of "
                       f"{[s.args.get('buffer_bytes') for s in inside]} bytes, plan.json's "
                       f"{gathered}")
                waited = [w for w in waits
                          if forward.ts - chrome_trace.NS <= w.ts and
                          w.end <= backward.end + chrome_trace.NS]
                expect(len(waited) == len(gathered),
                       f"rank {rank} step {n} microbatch {k}: {len(waited)} waits for "
                       f"{len(gathered)} gathers")
            record = metrics["step_times"][n - 1]["ranks"][rank]
            in_step = [c for c in calls if step.holds(c, chrome_trace.NS)]
            spans = sum(c.dur for c in in_step) / 1e6
            gathers = sum(s.dur for s in background if step.holds(s, chrome_trace.NS)) / 1e6
            waited = sum(w.dur for w in waits if step.holds(w, chrome_trace.NS)) / 1e6
            tolerance = 1e-8 * (len(in_step) + 2 * ACCUM * len(gathered) + 1)
            expect(abs(record["communication_seconds"] - spans - gathers) <= tolerance,
                   f"rank {rank} step {n}: communication {record['communication_seconds']} s, "
                   f"its collective spans {spans} s and background gathers {gathers} s")
            expect(abs(record["exposed_communication_seconds"] - spans - waited) <= tolerance,
                   f"rank {rank} step {n}: exposed {record['exposed_communication_seconds']} s, "
                   f"its collective spans {spans} s and waits {waited} s")


def main():
    workdir = sys.argv[1]
    rng = np.random.default_rng(0)
    np.save(os.path.join(workdir, "x.npy"), rng.standard_normal((64, 32)).astype(np.float32))
    np.save(os.path.join(workdir, "labels.npy"), rng.integers(0, 10, 64).astype(np.int64))
    data = ["--data", f"x={workdir}/x.npy,labels={workdir}/labels.npy"]
    shapes = {t.name: list(t.dims) for t in onnx.load(MODEL).graph.initializer}

    on = train(workdir, "prefetched", [], data)
    off = train(workdir, "in-place", ["--prefetch-gathers", "off"], data)
    losses = [[s["loss"] for s in run[1]["steps"]] for run in (on, off)]
    expect(len(losses[0]) == STEPS and losses[0] == losses[1],
           f"losses prefetched {losses[0]}, gathers where read {losses[1]}")
    for name, value in off[2].items():
        expect(name in on[2] and on[2][name].tobytes() == value.tobytes(),
               f"trained {name} differs with the gathers prefetched")

    prefetched = on[0]["training"].get("prefetched_gathers")
    expect("prefetched_gathers" not in off[0]["training"],
           "--prefetch-gathers off: plan.json has prefetched_gathers")
    if not expect(prefetched and prefetched["axis"] == "dp",
                  f"plan.json's prefetched_gathers {prefetched}"):
        sys.exit("\n".join(problems))
    gathered = prefetched["bytes"]
    # The first layer's are gathered where read; every later gather of the
    # forward and the backward is a parameter's padded bytes.
    parameters = {padded_bytes(shape) for shape in shapes.values()}
    expect(len(gathered) >= 2 and set(gathered) <= parameters,
           f"prefetched gathers of {gathered} bytes, parameters padded to {sorted(parameters)}")
    expect(on[0]["collectives"] == off[0]["collectives"],
           f"collectives prefetched {on[0]['collectives']}, gathers where read "
           f"{off[0]['collectives']}")
    expect(on[1]["bytes_sent"] == off[1]["bytes_sent"],
           f"bytes sent prefetched {on[1]['bytes_sent']}, gathers where read "
           f"{off[1]['bytes_sent']}")
    check_trace(on[3], on[1], gathered)
    if problems:
        sys.exit("\n".join(problems[:40]))
    print(f"{len(gathered)} gathers a microbatch prefetched; losses {losses[0]}")


if __name__ == "__main__":
    main()
