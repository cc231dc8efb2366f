# Tensor parallelism's sums on the background thread (--overlap-tp-sums on,
# cleave-overlap-tp-sums): the GPT-style test model on tp=2 with Megatron's
# plan, --grad-accum 2, 3 steps, against the same step with every sum where
# its partial sums are made (off):
#   - the losses of every step and the trained parameters are the same bit
#     for bit, and each rank sends the same bytes;
#   - plan.json lists the started sums over tp: one per column-parallel
#     layer whose input needs its gradient (qkv and fc in each of the 2
#     blocks, and the vocabulary-split head), each the layer's input
#     gradient (micro-batch x seq x d_model f32s, from the model's sizes);
#     `collectives` is the same as with off (the same calls, moved);
#   - in the trace, each microbatch's started sums are "all_reduce tp" spans
#     on the "communication (background)" track with plan.json's bytes in
#     its order, each waited for once ("wait for background all_reduce" on
#     the communication track); a step's communication seconds are its
#     collective spans and background spans, its exposed communication the
#     collective spans and the waits;
#   - dp x tp = 2 x 2 with ZeRO 3, its gathers and reduce-scatters over dp
#     and the tp sums all on the one background thread (over both axes),
#     against none started: every loss and every rank's weights bit for bit
#     (each sum adds two ranks' values, the same in either order; not with
#     --deterministic, which leaves no tp sum to start: its products are
#     made whole).
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "models"))

import chrome_trace  # noqa: E402
import export_gpt  # noqa: E402
from background_trace import check_started_collectives  # noqa: E402
from expectations import expect, finish, run  # noqa: E402
from torch_export import export_with_loss  # noqa: E402

PLAN = os.path.join(ROOT, "plans", "megatron-gpt.json")
STEPS, ACCUM, TP, MICRO = 3, 2, 2, 2
SEQ, D_MODEL, VOCAB, BLOCKS = export_gpt.SEQ, export_gpt.D_MODEL, export_gpt.VOCAB, export_gpt.LAYERS


def train(workdir, label, flags, data, model, dp=1):
    """Compiles and trains `model` on dp x tp ranks with `flags`: its plan,
    metrics, every rank's trained weights blob and trace."""
    out = os.path.join(workdir, label)
    run(["cleave", "compile", model, "-o", out, "--train", "--optimizer", "adam", "--lr", "0.01",
         "--mesh", f"dp={dp},tp={TP}", "--plan", PLAN, "--batch-size", str(dp * MICRO * ACCUM),
         "--grad-accum", str(ACCUM), *flags])
    run(["cleave", "run", out, "-n", str(dp * TP), *data, "--steps", str(STEPS), "--no-shuffle",
         "--quiet", "--trace", f"{out}.trace.json", "--log-json", f"{out}.metrics.json",
         "--output-dir", f"{out}.results"])
    names = [f"weights.tp{r}.bin" for r in range(TP)] if dp == 1 else [
        f"weights.dp{d}.tp{r}.bin" for d in range(dp) for r in range(TP)]
    blobs = [np.fromfile(os.path.join(f"{out}.results", name), dtype=np.uint8) for name in names]
    return (json.load(open(os.path.join(out, "plan.json"))),
            json.load(open(f"{out}.metrics.json")), blobs,
            chrome_trace.load(f"{out}.trace.json"))


def every_kind_on_two_axes(workdir, data, model):
    """dp x tp = 2 x 2 with ZeRO 3: its gathers and reduce-scatters over dp
    and the tp sums on the one background thread, all started, against none:
    every loss and every rank's weights bit for bit."""
    started = ["--prefetch-gathers", "on", "--overlap-reduce-scatters", "on",
               "--overlap-tp-sums", "on"]
    common = ["--zero", "3"]
    on = train(workdir, "dp2tp2-z3-all", common + started, data, model, dp=2)
    off = train(workdir, "dp2tp2-z3-none", common, data, model, dp=2)
    kinds = {key: value["axis"] for key, value in on[0]["training"].items()
             if isinstance(value, dict) and "bytes" in value}
    expect(kinds == {"prefetched_gathers": "dp", "overlapped_reduce_scatters": "dp",
                     "overlapped_tp_sums": "tp"}, f"dp x tp ZeRO 3: plan.json starts {kinds}")
    losses = [[s["loss"] for s in r[1]["steps"]] for r in (on, off)]
    expect(len(losses[0]) == STEPS and losses[0] == losses[1],
           f"dp x tp ZeRO 3: losses all started {losses[0]}, none {losses[1]}")
    expect(all(np.array_equal(a, b) for a, b in zip(on[2], off[2])),
           "dp x tp ZeRO 3: the trained weights differ with every collective started")


def main():
    workdir = sys.argv[1]
    model, args = export_gpt.build()
    path = os.path.join(workdir, "gpt.onnx")
    export_with_loss(model, tuple(a[:MICRO] for a in args), path, ["idx", "targets"])
    rng = np.random.default_rng(0)
    batch = 2 * MICRO * ACCUM
    np.save(os.path.join(workdir, "idx.npy"), rng.integers(0, VOCAB, (batch, SEQ)))
    np.save(os.path.join(workdir, "targets.npy"), rng.integers(0, VOCAB, (batch, SEQ)))
    data = ["--data", f"idx={workdir}/idx.npy,targets={workdir}/targets.npy"]

    on = train(workdir, "overlapped", ["--overlap-tp-sums", "on"], data, path)
    off = train(workdir, "in-place", [], data, path)
    losses = [[s["loss"] for s in r[1]["steps"]] for r in (on, off)]
    expect(len(losses[0]) == STEPS and losses[0] == losses[1],
           f"losses overlapped {losses[0]}, in place {losses[1]}")
    expect(all(np.array_equal(a, b) for a, b in zip(on[2], off[2])),
           "the trained weights differ with the sums overlapped")
    expect(on[1]["bytes_sent"] == off[1]["bytes_sent"],
           f"bytes sent overlapped {on[1]['bytes_sent']}, in place {off[1]['bytes_sent']}")
    expect(on[0]["collectives"] == off[0]["collectives"],
           f"collectives overlapped {on[0]['collectives']}, in place {off[0]['collectives']}")
    expect("overlapped_tp_sums" not in off[0]["training"], "with off, plan.json starts tp sums")
    listed = on[0]["training"].get("overlapped_tp_sums")
    gradient = MICRO * SEQ * D_MODEL * 4
    if expect(listed == {"axis": "tp", "bytes": [gradient] * (2 * BLOCKS + 1)},
              f"plan.json's overlapped_tp_sums {listed}, expected {2 * BLOCKS + 1} of "
              f"{gradient} bytes over tp"):
        check_started_collectives(on[3], on[1], TP, ACCUM, "tp", {"all_reduce": listed["bytes"]})
    every_kind_on_two_axes(workdir, data, path)
    finish()
    print(f"a microbatch's started tp sums: {listed}; losses {losses[0]}")


if __name__ == "__main__":
    main()
