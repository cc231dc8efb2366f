# The timeline and step figures of a pipeline run (`cleave run --trace
# --log-json`), on the example MLP with pp = 2 and 2 microbatches a step,
# for 1f1b, zb-h1 and the interleaved schedule (V = 2, two stages a rank):
#   - each rank's compute spans of a step, forward, backward (zb-h1's
#     backward_weight too) and optimizer, are its actions of plan.json in
#     order: each span's kind, args.microbatch and args.stage are the
#     action's (on the interleaved schedule each rank's two programs take
#     turns), then the optimizer, which names no stage;
#   - compute_seconds is the calls less the communication inside them: the
#     sends and receives a call makes. The loss's sum over pp and the wait
#     for the step's sends come after the optimizer, outside every call, and
#     are exposed communication but not taken off compute;
#   - exposed communication is every communication span of the step, and
#     compute + exposed communication + input wait is at most the step;
#   - each receive (MPI) holds a "wait", from its start until its message
#     had arrived, then a "transfer" to its end; a send holds neither;
#   - each stage's plan.json lists what each entry point an action runs
#     receives (which the driver expects while the action before computes):
#     the peers and tags of its program's pipeline_recv calls, in order.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(HERE, "..", "lib"))

import chrome_trace  # noqa: E402
from expectations import expect, finish, run  # noqa: E402

MODEL = os.path.join(ROOT, "examples", "mlp", "model.onnx")
STEPS = 4
US = 1e-6  # seconds in a microsecond


def actions_of(out, rank):
    """Rank `rank`'s actions of plan.json as (span name, microbatch, stage)."""
    with open(os.path.join(out, f"stage{rank}", "plan.json")) as f:
        pipeline = json.load(f)["training"]["pipeline"]
    names = {"F": "forward", "B": "backward", "I": "backward", "W": "backward_weight"}
    result = []
    for action in pipeline["actions"]:
        kind, rest = action[0], action[1:]
        microbatch, _, stage = rest.partition("@")
        result.append((names[kind], int(microbatch), int(stage) if stage else rank))
    return result


def check_receives(label, out):
    """Each stage's plan.json receives against its program.cpp's calls."""
    stages = sorted(d for d in os.listdir(out) if d.startswith("stage"))
    for stage in stages:
        with open(os.path.join(out, stage, "plan.json")) as f:
            listed = json.load(f)["training"]["pipeline"]["receives"]
        called, function = {}, None
        with open(os.path.join(out, stage, "program.cpp")) as f:
            for line in f:
                # cleave_forward, or on a rank of several stages cleave_stage1_forward.
                start = re.match(r"void cleave_(?:stage\d+_)?(\w+)\(", line)
                if start:
                    function = start.group(1)
                recv = re.search(r"pipeline_recv\(v\d+, v\d+, \d+, (\d+), (\d+)\)", line)
                if recv and function in ("forward", "backward", "backward_weight"):
                    called.setdefault(function, []).append((int(recv.group(1)),
                                                            int(recv.group(2))))
        plan = {name: [(r["peer"], r["tag"]) for r in entries] for name, entries in listed.items()}
        expect(called and plan == called,
               f"{label}: {stage}: plan.json receives {plan}, program.cpp {called}")


def check(label, out, trace_path, metrics_path):
    trace = chrome_trace.load(trace_path)
    with open(metrics_path) as f:
        metrics = json.load(f)
    for rank in range(2):
        compute = trace.track(rank, "compute")
        track = trace.track(rank, "communication")
        communication = [s for s in track if s.name not in ("wait", "transfer")]
        parts = [s for s in track if s.name in ("wait", "transfer")]
        for message in communication:
            if message.name not in ("recv pp", "send pp"):
                continue
            inner = [p for p in parts if message.holds(p, chrome_trace.NS)]
            want = ["wait", "transfer"] if message.name == "recv pp" else []
            if expect([p.name for p in inner] == want,
                       f"{label}: rank {rank}: {message} holds {inner}") and inner:
                wait, transfer = inner
                expect(abs(wait.ts - message.ts) <= chrome_trace.NS and
                       abs(wait.end - transfer.ts) <= chrome_trace.NS and
                       abs(transfer.end - message.end) <= chrome_trace.NS,
                       f"{label}: rank {rank}: {message}: {wait} then {transfer}")
        steps = [s for s in compute if s.name.startswith("step ")]
        expect(len(steps) == STEPS, f"{label}: rank {rank}: {len(steps)} step spans")
        want = actions_of(out, rank) + [("optimizer", None, None)]
        for step in steps:
            n = step.args["step"]
            record = metrics["step_times"][n - 1]["ranks"][rank]
            calls = [s for s in compute if s is not step and step.holds(s, chrome_trace.NS)]
            got = [(s.name, s.args.get("microbatch"), s.args.get("stage")) for s in calls]
            expect(got == want, f"{label}: rank {rank} step {n}: calls {got}, actions {want}")
            mine = [s for s in communication if step.holds(s, chrome_trace.NS)]
            inside = [s for s in mine if any(c.holds(s, chrome_trace.NS) for c in calls)]
            outside = [s for s in mine if s not in inside]
            expect(any(s.name == "all_reduce pp" for s in outside),
                   f"{label}: rank {rank} step {n}: no loss sum after the optimizer: {outside}")
            tolerance = 1e-8 * (len(calls) + len(mine) + 1)
            spent = sum(s.dur for s in calls) * US
            taken = sum(s.dur for s in inside) * US
            expect(abs(record["compute_seconds"] - (spent - taken)) <= tolerance,
                   f"{label}: rank {rank} step {n}: compute {record['compute_seconds']} s, the "
                   f"calls {spent} s less their communication {taken} s")
            exposed = sum(s.dur for s in mine) * US
            expect(abs(record["exposed_communication_seconds"] - exposed) <= tolerance,
                   f"{label}: rank {rank} step {n}: exposed communication "
                   f"{record['exposed_communication_seconds']} s, its spans {exposed} s")
            expect(record["compute_seconds"] + record["exposed_communication_seconds"] +
                   record["input_wait_seconds"] <= record["seconds"] + 1e-9,
                   f"{label}: rank {rank} step {n}: compute + exposed communication + input "
                   f"exceed the step: {record}")


def main():
    workdir = sys.argv[1]
    rng = np.random.default_rng(0)
    np.save(os.path.join(workdir, "x.npy"), rng.standard_normal((64, 32)).astype(np.float32))
    np.save(os.path.join(workdir, "labels.npy"), rng.integers(0, 10, 64).astype(np.int64))
    data = f"x={workdir}/x.npy,labels={workdir}/labels.npy"
    for label, flags in [("1f1b", ["--schedule", "1f1b"]),
                         ("zb-h1", ["--schedule", "zb-h1"]),
                         ("interleaved", ["--schedule", "interleaved", "--virtual-stages", "2"])]:
        out = os.path.join(workdir, label)
        run(["cleave", "compile", MODEL, "-o", out, "--train", "--mesh", "pp=2",
             "--grad-accum", "2"] + flags)
        trace, metrics = out + ".trace.json", out + ".metrics.json"
        run(["cleave", "run", out, "-n", "2", "--data", data, "--steps", str(STEPS), "--quiet",
             "--trace", trace, "--log-json", metrics])
        check(label, out, trace, metrics)
        check_receives(label, out)
    finish()
    print("each pipeline rank's calls are its actions, and compute leaves out only the "
          "communication inside them")


if __name__ == "__main__":
    main()
