# The timeline of a forward program (`cleave run --trace [--trace-ops]` of a
# model compiled without --train), on the example MLP run 3 times:
#   - the file is trace-event JSON a viewer takes (test/lib/chrome_trace.py),
#     one process "rank 0" with its compute and ops tracks;
#   - each run is one "step N" span (N = 1, 2, 3, in order) holding one
#     "forward" span;
#   - with --trace-ops each forward holds a span per kernel: each one names
#     its kernel and, where the kernel comes from one, the ONNX node (the
#     names read from the model with the onnx package), every Gemm node of
#     the model has its "gemm" span, and the three runs have the same spans
#     in the same order; without it there are none;
#   - with --trace-steps 2:3 of 4 runs (and --trace-ops), only runs 2 and 3
#     are in the trace, their kernel spans as above;
#   - the outputs are written as without --trace: the loss equals
#     onnxruntime's on the same inputs within 1e-5;
#   - launched on 2 ranks (each runs the whole forward) rank 0 alone writes
#     the outputs and the trace: 4 runs each exit 0 with both in place (when
#     both ranks wrote them, one run in six or so failed on the race).
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import os
import sys

import numpy as np
import onnx
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(HERE, "..", "lib"))

import chrome_trace  # noqa: E402
from expectations import expect, finish, run  # noqa: E402

MODEL = os.path.join(ROOT, "examples", "mlp", "model.onnx")
RUNS = 3


def check_trace(label, path, ops, nodes, gemms, runs):
    """The trace's checks above; `runs`: the runs it holds."""
    trace = chrome_trace.load(path)
    expect(list(trace.processes.values()) == ["rank 0"],
           f"{label}: processes {trace.processes}, not rank 0 alone")
    track = {name: [s for s in trace.spans if trace.threads[(s.pid, s.tid)] == name]
             for name in ("compute", "ops")}
    steps = sorted((s for s in track["compute"] if s.name.startswith("step ")), key=lambda s: s.ts)
    expect([s.name for s in steps] == [f"step {n}" for n in runs],
           f"{label}: step spans {[s.name for s in steps]}")
    sequences = []
    for step in steps:
        forwards = [s for s in track["compute"] if s.name == "forward" and step.holds(s, chrome_trace.NS)]
        expect(len(forwards) == 1, f"{label}: {step.name} holds {len(forwards)} forward spans")
        kernels = sorted((s for s in track["ops"] if step.holds(s, chrome_trace.NS)), key=lambda s: s.ts)
        expect(all(forwards[0].holds(k, chrome_trace.NS) for k in kernels),
               f"{label}: a kernel of {step.name} lies outside its forward")
        sequences.append([k.name for k in kernels])
    if not ops:
        expect(not track["ops"], f"{label}: {len(track['ops'])} kernel spans without --trace-ops")
        return
    expect(all(seq == sequences[0] for seq in sequences) and sequences[0],
           f"{label}: the runs' kernel spans differ or are empty: {sequences}")
    for name in sequences[0]:
        kernel, _, node = name.partition(" ")
        expect(kernel.isidentifier(), f"{label}: span '{name}' does not start with a kernel")
        expect(not node or node in nodes, f"{label}: span '{name}' names no node of the model")
    for gemm in gemms:
        expect(f"gemm {gemm}" in sequences[0], f"{label}: no span for Gemm node {gemm}")


def main():
    workdir = sys.argv[1]
    model = onnx.load(MODEL)
    nodes = {n.name for n in model.graph.node}
    gemms = [n.name for n in model.graph.node if n.op_type == "Gemm"]
    expect(len(gemms) >= 2, f"the example has {len(gemms)} Gemm nodes")
    session = ort.InferenceSession(MODEL, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds, flags = {}, []
    for spec in session.get_inputs():
        if spec.type == "tensor(float)":
            feeds[spec.name] = rng.standard_normal(spec.shape).astype(np.float32)
        else:
            feeds[spec.name] = rng.integers(0, 10, spec.shape).astype(np.int64)
        np.save(os.path.join(workdir, f"{spec.name}.npy"), feeds[spec.name])
        flags += ["--input", f"{spec.name}={workdir}/{spec.name}.npy"]
    expected = session.run(None, feeds)[0]

    out = os.path.join(workdir, "forward")
    run(["cleave", "compile", MODEL, "-o", out])
    for label, ops, window in (("ops", True, None), ("phases", False, None),
                               ("window", True, (2, 3))):
        results = os.path.join(workdir, f"{label}.results")
        trace = os.path.join(workdir, f"{label}.trace.json")
        repeat = 4 if window else RUNS
        run(["cleave", "run", out, *flags, "--repeat", str(repeat), "--trace", trace,
             "--output-dir", results] + (["--trace-ops"] if ops else []) +
            (["--trace-steps", f"{window[0]}:{window[1]}"] if window else []))
        check_trace(label, trace, ops, nodes, gemms,
                    range(window[0], window[1] + 1) if window else range(1, RUNS + 1))
        loss = np.load(os.path.join(results, "loss.npy"))
        expect(abs(float(loss) - float(expected)) <= 1e-5 * abs(float(expected)),
               f"{label}: loss {float(loss)}, onnxruntime {float(expected)}")
    for attempt in range(4):
        results = os.path.join(workdir, f"ranks2-{attempt}.results")
        trace = os.path.join(workdir, f"ranks2-{attempt}.trace.json")
        run(["cleave", "run", out, "-n", "2", *flags, "--trace", trace, "--output-dir", results])
        expect(list(chrome_trace.load(trace).processes.values()) == ["rank 0"],
               f"2 ranks, run {attempt}: the trace's processes are not rank 0 alone")
        loss = np.load(os.path.join(results, "loss.npy"))
        expect(abs(float(loss) - float(expected)) <= 1e-5 * abs(float(expected)),
               f"2 ranks, run {attempt}: loss {float(loss)}, onnxruntime {float(expected)}")
    finish()


if __name__ == "__main__":
    main()
