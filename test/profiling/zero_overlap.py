# ZeRO 3's collectives on the background thread: each parameter's gather
# started a compute segment early (cleave-prefetch-gathers) and each
# gradient's reduce-scatter waited for where the next one starts
# (cleave-overlap-reduce-scatters), `--prefetch-gathers on
# --overlap-reduce-scatters on`, against the same step with every
# collective where it is read or made (both off, the default): the example
# MLP on dp=2 with --zero 3, adam and --grad-accum 2, 4 steps on the same
# data:
#   - the losses of every step and the trained parameters (--save-onnx) are
#     the same bit for bit: a collective moves and sums the same bytes in
#     the same order wherever it runs;
#   - plan.json lists the prefetched gathers and overlapped reduce-scatters
#     (neither with off), each a parameter's or its gradient's whole buffer
#     (from the model's initializer shapes: its elements padded to a
#     multiple of 16 x 2 ranks, docs/training.md, 4 bytes each); its
#     `collectives` are the same in both (the same calls, moved); each
#     rank's bytes sent are the same;
#   - in the trace, each microbatch's prefetched gathers and overlapped
#     reduce-scatters are "all_gather dp" and "reduce_scatter dp" spans on
#     the "communication (background)" track, with plan.json's bytes in its
#     order, inside the microbatch's forward and backward, and each is
#     waited for once there ("wait for background all_gather" and "...
#     reduce_scatter" on the communication track); a step's communication
#     seconds are its collective spans and background spans, its exposed
#     communication the collective spans and the waits;
#   - with both flags on, dp x tp = 2 x 2 with ZeRO 3 (Megatron's plan),
#     dp=2 with ZeRO 2 in bf16 (sliced masters: the gathers in
#     @narrow_weights, the reduce-scatters in the microbatches) and with
#     ZeRO 3 in bf16 give every loss of the same layout with both off, bit
#     for bit, and start some of each kind;
#   - in bf16 each rank's trace has a `narrow_weights` span in every step
#     with ZeRO 2 (its gathers are a step's work), and in the first step
#     alone with ZeRO 3, whose @apply rounds each updated slice into its
#     copy (plan.json's training.narrow_weights_once).
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
from background_trace import check_started_collectives  # noqa: E402
from expectations import expect, finish, run  # noqa: E402

MODEL = os.path.join(ROOT, "examples", "mlp", "model.onnx")
PLAN = os.path.join(ROOT, "plans", "megatron-mlp.json")
ON = ["--prefetch-gathers", "on", "--overlap-reduce-scatters", "on"]
STEPS, ACCUM, RANKS = 4, 2, 2
KINDS = (("prefetched_gathers", "all_gather"), ("overlapped_reduce_scatters", "reduce_scatter"))


def padded_bytes(shape):
    elements = int(np.prod(shape))
    return -(-elements // (16 * RANKS)) * 16 * RANKS * 4


def train(workdir, label, flags, data, mesh=f"dp={RANKS}", zero="3"):
    out = os.path.join(workdir, label)
    ranks = 1
    for axis in mesh.split(","):
        ranks *= int(axis.split("=")[1])
    run(["cleave", "compile", MODEL, "-o", out, "--train", "--optimizer", "adam", "--lr", "0.01",
         "--mesh", mesh, "--zero", zero, "--grad-accum", str(ACCUM), *flags])
    run(["cleave", "run", out, "-n", str(ranks), *data, "--steps", str(STEPS), "--no-shuffle",
         "--quiet", "--trace", f"{out}.trace.json", "--log-json", f"{out}.metrics.json",
         "--save-onnx", f"{out}.trained.onnx"])
    plan = json.load(open(os.path.join(out, "plan.json")))
    metrics = json.load(open(f"{out}.metrics.json"))
    trained = {t.name: numpy_helper.to_array(t)
               for t in onnx.load(f"{out}.trained.onnx").graph.initializer}
    return plan, metrics, trained, chrome_trace.load(f"{out}.trace.json")


def main():
    workdir = sys.argv[1]
    rng = np.random.default_rng(0)
    np.save(os.path.join(workdir, "x.npy"), rng.standard_normal((64, 32)).astype(np.float32))
    np.save(os.path.join(workdir, "labels.npy"), rng.integers(0, 10, 64).astype(np.int64))
    data = ["--data", f"x={workdir}/x.npy,labels={workdir}/labels.npy"]
    shapes = {t.name: list(t.dims) for t in onnx.load(MODEL).graph.initializer}
    parameters = {padded_bytes(shape) for shape in shapes.values()}

    on = train(workdir, "overlapped", ON, data)
    off = train(workdir, "in-place", [], data)
    losses = [[s["loss"] for s in run[1]["steps"]] for run in (on, off)]
    expect(len(losses[0]) == STEPS and losses[0] == losses[1],
           f"losses overlapped {losses[0]}, in place {losses[1]}")
    for name, value in off[2].items():
        expect(name in on[2] and on[2][name].tobytes() == value.tobytes(),
               f"trained {name} differs with the collectives overlapped")

    started = {}
    for key, kind in KINDS:
        listed = on[0]["training"].get(key)
        expect(key not in off[0]["training"], f"with off, plan.json has {key}")
        if not expect(listed and listed["axis"] == "dp", f"plan.json's {key}: {listed}"):
            continue
        # The first layer's gathers and the last gradient's reduce-scatters
        # have nothing to hide behind; the others each a parameter's whole
        # padded buffer.
        expect(len(listed["bytes"]) >= 2 and set(listed["bytes"]) <= parameters,
               f"{key} of {listed['bytes']} bytes, parameters padded to {sorted(parameters)}")
        started[kind] = listed["bytes"]
    expect(on[0]["collectives"] == off[0]["collectives"],
           f"collectives overlapped {on[0]['collectives']}, in place {off[0]['collectives']}")
    expect(on[1]["bytes_sent"] == off[1]["bytes_sent"],
           f"bytes sent overlapped {on[1]['bytes_sent']}, in place {off[1]['bytes_sent']}")
    if len(started) == len(KINDS):
        check_started_collectives(on[3], on[1], RANKS, ACCUM, "dp", started)

    bf16 = ["--precision", "bf16"]
    for label, mesh, zero, flags in (("dp2tp2-zero3", "dp=2,tp=2", "3", ["--plan", PLAN]),
                                     ("dp2-zero2-bf16", "dp=2", "2", bf16),
                                     ("dp2-zero3-bf16", "dp=2", "3", bf16)):
        runs = [train(workdir, f"{label}-{v}", flags + extra, data, mesh, zero)
                for v, extra in (("on", ON), ("off", []))]
        got = [[s["loss"] for s in r[1]["steps"]] for r in runs]
        expect(len(got[0]) == STEPS and got[0] == got[1],
               f"{label}: losses overlapped {got[0]}, in place {got[1]}")
        for key, _ in KINDS:
            expect(runs[0][0]["training"].get(key, {}).get("bytes"),
                   f"{label}: plan.json has no {key}")
        if flags == bf16:
            once = zero == "3"
            for plan, _, _, trace in runs:
                expect(plan["training"].get("narrow_weights_once", False) == once,
                       f"{label}: plan.json's narrow_weights_once is not {once}")
                for pid in range(RANKS):
                    spans = trace.track(pid, "compute")
                    steps = [s for s in spans if s.name.startswith("step ")]
                    made = [sum(step.holds(s) for s in spans if s.name == "narrow_weights")
                            for step in steps]
                    want = [1] + [0 if once else 1] * (STEPS - 1)
                    expect(made == want, f"{label}: rank {pid}'s narrow_weights spans per "
                           f"step {made}, not {want}")
    finish()
    print(f"a microbatch's started collectives: {started}; losses {losses[0]}")


if __name__ == "__main__":
    main()
