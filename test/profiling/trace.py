# The timeline of a training run (`cleave run --trace`) and the per-rank step
# figures of --log-json, on one rank, on dp=2 and on dp=2 x tp=2 (the example
# MLP, Megatron's plan for its fc1 and fc2):
#   - the file is trace-event JSON a viewer takes (test/lib/chrome_trace.py:
#     every event well formed, every process and track named, the spans of a
#     track nested), one process per rank named "rank R (dp=..,tp=..)" with
#     the coordinates of R in the mesh's row-major order, and the tracks
#     each run must have;
#   - each step is one "step N" span holding forward, backward and optimizer
#     (one forward and backward per microbatch: also with --grad-accum 2)
#     and each microbatch's read,
#     whose durations add up to the step's wall time in --log-json (within
#     15% + 100 us: the rest is the learning-rate copy and the loss read);
#   - with --trace-ops every kernel is a span inside its phase, and the
#     forward's last kernel is the loss (the backward begins after it);
#   - every collective is a span holding "wait" then "transfer", inside the
#     program's call that made it; per step its calls and bytes per kind and
#     axis equal plan.json's `collectives` and the byte counts computed here
#     from the model's initializer shapes with numpy (the accumulators at
#     64-byte offsets for the dp all-reduce, the row-parallel fc2's output
#     for the tp one), and bytes_sent the ring's 2(n-1)/n of them;
#   - the ranks' clocks are aligned (here all share rank 0's machine's, which
#     each process's labels say): the transfers of one call of a group
#     overlap (none can end before the group's last rank has arrived);
#   - --log-json has, per step and rank, compute, communication, exposed
#     communication and input wait seconds, compute + exposed communication +
#     input <= the step's seconds; the communication seconds are the step's
#     collective spans (with --bucket-mb 0, the dp and tp layouts above: all
#     of it exposed);
#   - with gradient buckets (dp=2, --grad-accum 2, 1 KiB buckets): each step's
#     sums are spans of the "communication (background)" track, one per
#     bucket of plan.json in its order (several, covering the accumulators'
#     bytes computed here from the shapes: at least their own, at most with
#     the padding between them), inside the last microbatch's backward and
#     the optimizer; the optimizer's "wait for background all_reduce" spans,
#     one per accumulator (before the first reader of its sum), are the
#     exposed part: communication = the background spans, exposed = the
#     waits, compute = the phases less the waits;
#   - checkpoint writes are spans of the checkpoint track with the bytes the
#     metrics report.
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
from expectations import expect, finish, problems, run  # noqa: E402

MODEL = os.path.join(ROOT, "examples", "mlp", "model.onnx")
PLAN = os.path.join(ROOT, "plans", "megatron-mlp.json")
STEPS = 6
ALIGN = 64  # the weights blob's alignment of each accumulator


def initializer_shapes():
    model = onnx.load(MODEL)
    return {t.name: numpy_helper.to_array(t).shape for t in model.graph.initializer}


def shard_shapes(shapes, tp):
    """Each parameter's shape on one rank, split over tp as PLAN says."""
    with open(PLAN) as f:
        split = {key.lstrip("*"): dims for key, dims in json.load(f)["parameters"].items()}
    parts = {}
    for name, shape in shapes.items():
        shape = list(shape)
        for dim, axis in enumerate(split.get(name, [])):
            if axis == "tp":
                shape[dim] //= tp
        parts[name] = tuple(shape)
    return parts


def accumulator_bytes(shapes):
    """The dp all-reduce's buffer: the accumulators, first in the weights
    blob in the order the backward finishes them, each at a 64-byte aligned
    offset, from the first one's start to the last one's end: the loss sum
    and count (f32 scalars), then the gradients of the layers (weight, bias)
    from the last layer to the first."""
    names = list(shapes)
    layers = [names[i:i + 2] for i in range(0, len(names), 2)]
    order = [name for layer in reversed(layers) for name in layer]
    sizes = [4, 4] + [int(np.prod(shapes[name], dtype=np.int64)) * 4 for name in order]
    padded = [-(-size // ALIGN) * ALIGN for size in sizes[:-1]]
    return int(np.sum(padded)) + sizes[-1]


def rank_names(shape, names):
    """"rank R (dp=i,tp=j)" for each rank R, coordinates in row-major order."""
    if not shape:
        return {0: "rank 0"}
    result = {}
    for rank, at in enumerate(np.ndindex(*shape)):
        result[rank] = f"rank {rank} (" + ",".join(
            f"{n}={c}" for n, c in zip(names, at)) + ")"
    return result


def payload_bytes(shapes):
    """The accumulators' own bytes: the loss count and sum and every
    gradient, without the padding between them."""
    return 8 + sum(int(np.prod(shape, dtype=np.int64)) * 4 for shape in shapes.values())


def check_background(where, sums, waits, phases, buckets, bounds):
    """One step's background sums and the optimizer's wait for them."""
    expect([c.args.get("buffer_bytes") for c in sums] == buckets,
           f"{where}: background sums of {[c.args.get('buffer_bytes') for c in sums]} bytes, "
           f"plan.json's buckets {buckets}")
    # The buckets cover every accumulator once: at least their own bytes, at
    # most the whole span with the padding between them.
    expect(len(buckets) >= 2 and bounds[0] <= sum(buckets) <= bounds[1],
           f"{where}: plan.json's buckets {buckets}, want several adding up to "
           f"{bounds[0]}..{bounds[1]} bytes")
    expect(all(c.name == "all_reduce dp" and c.args.get("axis") == "dp" for c in sums),
           f"{where}: background spans {[(c.name, c.args) for c in sums]}")
    last_backward = [p for p in phases if p.name == "backward"][-1]
    optimizer = phases[-1]
    expect(all(c.ts >= last_backward.ts - chrome_trace.NS and
               c.end <= optimizer.end + chrome_trace.NS for c in sums),
           f"{where}: a background sum outside the last backward and the optimizer")
    # The optimizer waits, before each sum's first reader, for the bucket
    # that holds it: one wait per accumulator.
    expect(len(waits) == bounds[2] and all(optimizer.holds(w, chrome_trace.NS) for w in waits),
           f"{where}: waits {waits}, not {bounds[2]} inside the optimizer")


def check_run(label, workdir, mesh, ranks, accum, expected_bytes, ops, checkpoints,
              bucket_bounds=None):
    trace_path = os.path.join(workdir, f"{label}.trace.json")
    metrics_path = os.path.join(workdir, f"{label}.metrics.json")
    plan = json.load(open(os.path.join(workdir, label, "plan.json")))
    try:
        trace = chrome_trace.load(trace_path)
    except chrome_trace.TraceError as error:
        problems.append(f"{label}: {error}")
        return
    metrics = json.load(open(metrics_path))

    shape = [int(p.split("=")[1]) for p in mesh.split(",")] if mesh else []
    names = [p.split("=")[0] for p in mesh.split(",")] if mesh else []
    expect(trace.processes == rank_names(shape, names),
           f"{label}: processes {trace.processes}, want {rank_names(shape, names)}")
    buckets = plan["training"].get("gradient_buckets", {}).get("bytes", [])
    want_tracks = {"compute", "input"}
    if ranks > 1:
        want_tracks.add("communication")
    if buckets:
        want_tracks.add("communication (background)")
    if ops:
        want_tracks.add("ops")
    for rank in range(ranks):
        tracks = trace.track_names(rank)
        want = want_tracks | ({"checkpoint"} if checkpoints else set())
        expect(tracks == want, f"{label}: rank {rank} tracks {sorted(tracks)}, want {sorted(want)}")

    expect(len(metrics["steps"]) == STEPS, f"{label}: {len(metrics['steps'])} steps in the metrics")
    for record in metrics["step_times"]:
        expect(len(record.get("ranks", [])) == ranks,
               f"{label}: step {record['step']} has {len(record.get('ranks', []))} ranks")

    planned = {(c["kind"], c["axis"]): c for c in plan.get("collectives", [])}
    if bucket_bounds:
        # A call a bucket, of its span's bytes; none on the training thread.
        want = {("all_reduce", "dp"): (len(buckets), sum(buckets))}
        got = {key: (c["calls_per_step"], c["buffer_bytes"]) for key, c in planned.items()}
        expect(got == want, f"{label}: plan.json's collectives {got}, want {want}")
        planned = {}
    expect(set(planned) == set(expected_bytes),
           f"{label}: plan.json's collectives {sorted(planned)}, want {sorted(expected_bytes)}")
    for key, size in expected_bytes.items():
        if key in planned:
            expect(planned[key]["buffer_bytes"] == size,
                   f"{label}: plan.json's {key} buffer_bytes {planned[key]['buffer_bytes']}, "
                   f"the shapes make {size}")

    collectives = {}  # (step, kind, axis, call) -> per-rank spans
    for rank in range(ranks):
        compute = trace.track(rank, "compute")
        steps = [s for s in compute if s.name.startswith("step ")]
        expect([s.args.get("step") for s in steps] == list(range(1, STEPS + 1)),
               f"{label}: rank {rank} step spans {[s.name for s in steps]}")
        phases = [s for s in compute if not s.name.startswith("step ")]
        inputs = trace.track(rank, "input")
        comm = trace.track(rank, "communication")
        waited = [s for s in comm if s.name == "wait for background all_reduce"]
        calls = [s for s in comm if s not in waited and s.name not in ("wait", "transfer")]
        parts = [s for s in comm if s.name in ("wait", "transfer")]
        background = trace.track(rank, "communication (background)") if buckets else []
        kernels = trace.track(rank, "ops")
        # Per step: how far the phases and input reads fall short of covering
        # it, less 15%. Work the trace leaves out shows in every step; the
        # scheduler taking a core from a 0.7 ms step on a loaded machine shows
        # in some, so the best step must be covered.
        uncovered = []
        for step in steps:
            n = step.args["step"]
            record = metrics["step_times"][n - 1]["ranks"][rank]
            mine = [p for p in phases if step.holds(p, chrome_trace.NS)]
            expect([p.name for p in mine] == ["forward", "backward"] * accum + ["optimizer"],
                   f"{label}: rank {rank} step {n} phases {[p.name for p in mine]}")
            expect([p.args.get("microbatch") for p in mine] ==
                   [k for k in range(accum) for _ in (0, 1)] + [None],
                   f"{label}: rank {rank} step {n} microbatches {[p.args for p in mine]}")
            expect(all(p.args.get("step") == n for p in mine),
                   f"{label}: rank {rank} step {n}: a phase names another step")
            reads = [s for s in inputs if step.holds(s, chrome_trace.NS)]
            expect([s.name for s in reads] == [f"read microbatch {k}" for k in range(accum)],
                   f"{label}: rank {rank} step {n} reads {[s.name for s in reads]}")
            covered = sum(p.dur for p in mine) + sum(s.dur for s in reads)
            wall = record["seconds"] * 1e6
            expect(abs(step.dur - wall) <= 2 * chrome_trace.NS,
                   f"{label}: rank {rank} step {n}: span {step.dur} us, metrics {wall} us")
            expect(covered <= wall + chrome_trace.NS,
                   f"{label}: rank {rank} step {n}: phases and input {covered:.3f} us exceed "
                   f"a {wall:.3f} us step")
            uncovered.append((wall - covered - 0.15 * wall, covered, wall))
            # The step figures against the trace.
            keys = ("seconds", "compute_seconds", "communication_seconds",
                    "exposed_communication_seconds", "input_wait_seconds", "input_read_seconds")
            if not expect(all(isinstance(record.get(k), float) and record[k] >= 0 for k in keys),
                          f"{label}: rank {rank} step {n}: fields {record}"):
                continue
            expect(record["compute_seconds"] + record["exposed_communication_seconds"] +
                   record["input_wait_seconds"] <= record["seconds"] + 1e-9,
                   f"{label}: rank {rank} step {n}: compute + exposed communication + input "
                   f"exceed the step: {record}")
            stepped = [c for c in calls if step.holds(c, chrome_trace.NS)]
            spent = sum(c.dur for c in stepped) / 1e6
            sums = [c for c in background if step.holds(c, chrome_trace.NS)]
            waits = [w for w in waited if step.holds(w, chrome_trace.NS)]
            summed, wait = sum(c.dur for c in sums) / 1e6, sum(w.dur for w in waits) / 1e6
            tolerance = 1e-8 * (len(stepped) + len(sums) + len(waits) + 1)
            expect(abs(record["communication_seconds"] - spent - summed) <= tolerance,
                   f"{label}: rank {rank} step {n}: communication {record['communication_seconds']}"
                   f" s, its collective spans {spent} s and background sums {summed} s")
            expect(abs(record["exposed_communication_seconds"] - spent - wait) <= tolerance,
                   f"{label}: rank {rank} step {n}: exposed communication "
                   f"{record['exposed_communication_seconds']} s, its collective spans {spent} s "
                   f"and waits {wait} s")
            if buckets:
                check_background(f"{label}: rank {rank} step {n}", sums, waits, mine, buckets,
                                 bucket_bounds)
            in_calls = sum(p.dur for p in mine) / 1e6 - spent - wait
            expect(abs(record["compute_seconds"] - in_calls) <= tolerance + 3e-8,
                   f"{label}: rank {rank} step {n}: compute {record['compute_seconds']} s, "
                   f"the phases less the collectives {in_calls} s")
            if ranks == 1:
                expect(record["communication_seconds"] == 0,
                       f"{label}: step {n}: one rank communicated")
            per_kind = {}
            for index, call in enumerate(stepped):
                key = (call.args.get("kind"), call.args.get("axis"))
                expect(call.name == f"{key[0]} {key[1]}" and call.args.get("step") == n,
                       f"{label}: rank {rank} step {n}: collective {call.name} {call.args}")
                expect(any(p.holds(call, chrome_trace.NS) for p in mine),
                       f"{label}: rank {rank} step {n}: {call} outside the program's calls")
                count, total = per_kind.get(key, (0, 0))
                per_kind[key] = (count + 1, total + call.args.get("buffer_bytes", 0))
                group = call.args.get("group_size", 0)
                expect(call.args.get("bytes_sent") == 2 * (group - 1) * call.args["buffer_bytes"]
                       // group, f"{label}: {call}: bytes_sent {call.args.get('bytes_sent')}")
                inner = [p for p in parts if call.holds(p, chrome_trace.NS)]
                ok = [p.name for p in inner] == ["wait", "transfer"]
                if expect(ok, f"{label}: {call} holds {[p.name for p in inner]}"):
                    wait, transfer = inner
                    expect(abs(wait.ts - call.ts) <= chrome_trace.NS and
                           abs(wait.end - transfer.ts) <= chrome_trace.NS and
                           abs(transfer.end - call.end) <= chrome_trace.NS,
                           f"{label}: {call}: wait and transfer do not tile it")
                    # One call of the group along the axis: the ranks that
                    # share the other coordinates.
                    coords = list(np.ndindex(*shape))[rank] if shape else ()
                    others = tuple(c for c, a in zip(coords, names) if a != key[1])
                    slot = (n, key, others, sum(1 for c in stepped[:index]
                                                if (c.args.get("kind"), c.args.get("axis")) == key))
                    collectives.setdefault(slot, {})[rank] = transfer
            for key, (count, total) in per_kind.items():
                want = planned.get(key)
                expect(want and count == want["calls_per_step"] and
                       total == want["buffer_bytes"] == expected_bytes.get(key),
                       f"{label}: rank {rank} step {n}: {key} {count} calls of {total} bytes, "
                       f"plan {want}, shapes {expected_bytes.get(key)}")
            expect(set(per_kind) == set(expected_bytes),
                   f"{label}: rank {rank} step {n}: collectives {sorted(per_kind)}")
            if ops:
                for phase in mine:
                    inside = [k for k in kernels if phase.holds(k, chrome_trace.NS)]
                    expect(inside, f"{label}: rank {rank} step {n}: no kernels in {phase.name}")
                    if phase.name == "forward" and inside:
                        expect(inside[-1].name.startswith("softmax_cross_entropy_loss"),
                               f"{label}: rank {rank} step {n}: the forward ends with "
                               f"{inside[-1].name}, not the loss")
                        expect(any(k.name.startswith("gemm ") for k in inside),
                               f"{label}: rank {rank} step {n}: no gemm in the forward")
                expect(all(any(p.holds(k, chrome_trace.NS) for p in phases) for k in kernels
                           if step.holds(k, chrome_trace.NS)),
                       f"{label}: rank {rank} step {n}: a kernel outside every phase")
        if uncovered:
            short, covered, wall = min(uncovered)
            expect(short <= 100, f"{label}: rank {rank}: in its best-covered step, phases and "
                   f"input {covered:.3f} us of a {wall:.3f} us step")
        if checkpoints:
            # Every rank writes; rank 0 knows the bytes of all ranks' files.
            written = trace.track(rank, "checkpoint")
            want = [(c["step"], c["bytes"] if rank == 0 else None)
                    for c in metrics["checkpoints"]]
            expect([(s.args.get("step"), s.args.get("bytes")) for s in written] == want,
                   f"{label}: rank {rank} checkpoint spans {written}, metrics {want}")
            expect(all(not step.holds(s) and not s.holds(step) for s in written
                       for step in steps if s.dur > 0),
                   f"{label}: rank {rank}: a checkpoint inside a step")
    # Aligned clocks: no rank's transfer of a call ends before another rank
    # of its group began its own (the call needs every rank's part).
    for slot, spans in collectives.items():
        if len(spans) < 2:
            continue
        last_start = max(s.ts for s in spans.values())
        first_end = min(s.end for s in spans.values())
        expect(first_end >= last_start - 50,
               f"{label}: collective {slot}: a rank's transfer ended {last_start - first_end:.3f}"
               f" us before another's began")
    # All ranks run on this machine: each shares rank 0's clock.
    want = {rank: "clock: rank 0's (the same machine)" for rank in range(1, ranks)}
    expect(trace.labels == want, f"{label}: process labels {trace.labels}, want {want}")


def main():
    workdir = sys.argv[1]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 32)).astype(np.float32)
    np.save(os.path.join(workdir, "x.npy"), x)
    np.save(os.path.join(workdir, "labels.npy"), rng.integers(0, 10, 64).astype(np.int64))
    data = ["--data", f"x={workdir}/x.npy,labels={workdir}/labels.npy"]
    shapes = initializer_shapes()
    micro = 8  # the model's batch dim: each rank's microbatch

    layouts = [
        # label, mesh, ranks, microbatches, extra compile flags, run flags,
        # bytes per (kind, axis)
        ("one", "", 1, 1, [], ["--trace-ops", "--checkpoint-dir", f"{workdir}/ckpt-one",
                               "--checkpoint-every", "3"], {}),
        ("accum2", "", 1, 2, ["--grad-accum", "2"], ["--trace-ops"], {}),
        ("dp2", "dp=2", 2, 1, ["--bucket-mb", "0"],
         ["--checkpoint-dir", f"{workdir}/ckpt-dp2", "--checkpoint-every", "3"],
         {("all_reduce", "dp"): accumulator_bytes(shapes)}),
        ("dp2tp2", "dp=2,tp=2", 4, 1, ["--plan", PLAN, "--bucket-mb", "0"], ["--trace-ops"],
         {("all_reduce", "dp"): accumulator_bytes(shard_shapes(shapes, 2)),
          ("all_reduce", "tp"): micro * shapes["fc2.weight"][0] * 4}),
        ("dp2buckets", "dp=2", 2, 2, ["--grad-accum", "2", "--bucket-mb", "0.001"], [], {}),
    ]
    for label, mesh, ranks, accum, compile_flags, run_flags, expected in layouts:
        out = os.path.join(workdir, label)
        run(["cleave", "compile", MODEL, "-o", out, "--train", "--optimizer", "adam",
             "--lr", "0.01"] + (["--mesh", mesh] if mesh else []) + compile_flags)
        run(["cleave", "run", out, "-n", str(ranks)] + data +
            ["--steps", str(STEPS), "--quiet", "--trace", f"{workdir}/{label}.trace.json",
             "--log-json", f"{workdir}/{label}.metrics.json"] + run_flags)
        flags = dict(zip(compile_flags, compile_flags[1:]))
        bucketed = flags.get("--bucket-mb", "0") != "0"
        # The accumulators' bytes without and with padding, and how many they
        # are: the gradients and the loss's count and sum.
        bounds = ((payload_bytes(shapes), accumulator_bytes(shapes), len(shapes) + 2)
                  if bucketed else None)
        check_run(label, workdir, mesh, ranks, accum, expected, "--trace-ops" in run_flags,
                  "--checkpoint-dir" in run_flags, bounds)
    finish()


if __name__ == "__main__":
    main()
