# A damaged plan.json, and a rank's missing weights blob, are one error line
# each, never a crash:
#   - each tampered field of a training program's plan.json (a string offset,
#     a negative one, one past the blob, bytes that do not match the shape, a
#     split that does not fit the mesh, gradient buckets, prefetched gathers
#     or overlapped reduce-scatters over an axis the mesh lacks or not an
#     object, and on dp x tp started collectives over two axes, another
#     format version) stops
#     `cleave run --save-onnx` with exit 1 and one line naming plan.json and
#     the field, and writes no model;
#   - on tp=2, when only rank 1's blob (weights.tp1.bin) is missing, rank 1
#     says so: its error is not swallowed because rank 0 checks the rest,
#     and the job ends then, not at the collective timeout.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
MODEL = os.path.join(ROOT, "examples", "mlp", "model.onnx")


def run(args):
    return subprocess.run(args, capture_output=True, text=True)


def tampered(work, problems, name, change, field, source="out"):
    out = f"{work}/{name}"
    shutil.copytree(f"{work}/{source}", out)
    plan = json.load(open(f"{out}/plan.json"))
    change(plan)
    json.dump(plan, open(f"{out}/plan.json", "w"))
    onnx_path = f"{work}/{name}.onnx"
    result = run(["cleave", "run", out, "--data", f"x={work}/x.npy,labels={work}/labels.npy",
                  "--steps", "1", "--save-onnx", onnx_path])
    lines = result.stderr.strip().splitlines()
    expected = f"{out}/plan.json: {field}"
    if result.returncode != 1 or len(lines) != 1 or expected not in lines[0]:
        problems.append(f"{name}: exit {result.returncode}, stderr {result.stderr!r}, "
                        f"expected one line with {expected!r}")
    if os.path.exists(onnx_path):
        problems.append(f"{name}: wrote {onnx_path}")


def main():
    work = sys.argv[1]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 32)).astype(np.float32)
    np.save(f"{work}/x.npy", x)
    np.save(f"{work}/labels.npy", np.argmax(x[:, :10], axis=1).astype(np.int64))
    problems = []

    subprocess.run(["cleave", "compile", MODEL, "-o", f"{work}/out", "--train",
                    "--optimizer", "adam", "--batch-size", "8"], check=True)
    first = lambda plan: plan["parameters"][0]  # noqa: E731
    cases = [
        ("string-offset", lambda p: first(p).update(offset="64"), "parameters[0].offset"),
        ("negative-offset", lambda p: first(p).update(offset=-64), "parameters[0].offset"),
        ("offset-past-blob", lambda p: first(p).update(offset=p["weights"]["bytes"]),
         "parameters[0].offset"),
        ("bytes-wrong", lambda p: first(p).update(bytes=first(p)["bytes"] * 2),
         "parameters[0].bytes"),
        ("split-without-mesh",
         lambda p: first(p).update(global_shape=first(p)["shape"],
                                   split={"dim": 0, "blocks": 1, "axis": "tp"}),
         "parameters[0].split.axis"),
        ("shape-not-a-list", lambda p: first(p).update(shape=7), "parameters[0].shape"),
        ("old-format", lambda p: p.update(format_version=1), "not a format_version 3 plan"),
        ("index-range-reversed", lambda p: p["inputs"][1]["index_range"].update(low=20),
         "inputs[1].index_range.high: is below low"),
        ("buckets-without-mesh",
         lambda p: p["training"].update(gradient_buckets={"axis": "dp", "bytes": [64]}),
         "training.gradient_buckets.axis: 'dp' is not an axis of the plan's mesh"),
        ("buckets-not-an-object", lambda p: p["training"].update(gradient_buckets=[64]),
         "training.gradient_buckets: is not an object"),
        ("gathers-without-mesh",
         lambda p: p["training"].update(prefetched_gathers={"axis": "dp", "bytes": [64]}),
         "training.prefetched_gathers.axis: 'dp' is not an axis of the plan's mesh"),
        ("gathers-not-an-object", lambda p: p["training"].update(prefetched_gathers=[64]),
         "training.prefetched_gathers: is not an object"),
        ("scatters-without-mesh",
         lambda p: p["training"].update(overlapped_reduce_scatters={"axis": "dp", "bytes": [64]}),
         "training.overlapped_reduce_scatters.axis: 'dp' is not an axis of the plan's mesh"),
    ]
    for name, change, field in cases:
        tampered(work, problems, name, change, field)

    # The background thread runs each started collective over an axis of
    # the mesh.
    subprocess.run(["cleave", "compile", MODEL, "-o", f"{work}/dptp", "--train", "--mesh",
                    "dp=2,tp=2", "--plan", os.path.join(ROOT, "plans", "megatron-mlp.json"),
                    "--batch-size", "16"], check=True)
    tampered(work, problems, "tp-sums-off-the-mesh",
             lambda p: p["training"].update(overlapped_tp_sums={"axis": "pp", "bytes": [64]}),
             "training.overlapped_tp_sums.axis: 'pp' is not an axis of the plan's mesh",
             source="dptp")

    subprocess.run(["cleave", "compile", MODEL, "-o", f"{work}/tp", "--train", "--mesh", "tp=2",
                    "--plan", os.path.join(ROOT, "plans", "megatron-mlp.json"),
                    "--batch-size", "8"], check=True)
    os.remove(f"{work}/tp/weights.tp1.bin")
    start = time.monotonic()
    result = run(["cleave", "run", "-n", "2", f"{work}/tp", "--data",
                  f"x={work}/x.npy,labels={work}/labels.npy", "--steps", "1"])
    took = time.monotonic() - start
    # Rank 0 learns of rank 1's fault when every rank has loaded, not from
    # the first collective's timeout (300 s).
    if took > 100 or "timed out" in result.stderr:
        problems.append(f"tp=2 without weights.tp1.bin took {took:.0f} s: {result.stderr!r}")
    if result.returncode == 0 or "weights.tp1.bin: missing or not" not in result.stderr:
        problems.append(f"tp=2 without weights.tp1.bin: exit {result.returncode}, "
                        f"stderr {result.stderr!r}")
    if result.stderr.count("weights.tp1.bin: missing") != 1:
        problems.append(f"rank 1's error is not printed once: {result.stderr!r}")

    for problem in problems:
        print("FAIL:", problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
