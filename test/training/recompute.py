# Activation recomputation (--recompute selective | full) changes memory, not
# results. For the tiny GPT (test/models/export_gpt.py) and a two-block MLP
# with unseeded dropouts (each block Linear -> ReLU -> Dropout(0.3): its
# copies in the backward must draw the same masks), one device and dp=2 with
# --grad-accum 2, each mode trains the same steps on the same data:
#   - every step's loss and every final parameter equal the run without
#     recomputation bit for bit;
#   - plan.json's predicted arena (activation_bytes) falls: selective below
#     none on both models (the GPT: softmax, dropout-free attention scores'
#     elementwise chains and GELU; the MLP: each dropout), full below none;
#   - the program's measured peak equals plan.json's predicted peak byte for
#     byte in every run.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import subprocess
import sys

import numpy as np
import torch
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))

import export_gpt  # noqa: E402
from onnx_models import constant_node, model, save  # noqa: E402
from torch_export import export_with_loss  # noqa: E402

STEPS = 4
MODES = ("none", "selective", "full")
problems = []


def expect(condition, message):
    if not condition:
        problems.append(message)


def dropout_mlp(path, batch):
    """x (batch x 16) -> [/block0: MatMul, Relu, Dropout] -> [/block1: the
    same] -> /head: MatMul -> mean of squares; the dropouts have no seed."""
    rng = np.random.default_rng(0)
    nodes = [constant_node("ratio", np.array(0.3, np.float32)),
             constant_node("training", np.array(True))]
    inits = {}
    x = "x"
    for b in range(2):
        inits[f"w{b}"] = (rng.standard_normal((16, 16)) / 4).astype(np.float32)
        nodes += [helper.make_node("MatMul", [x, f"w{b}"], [f"h{b}"], name=f"/block{b}/MatMul"),
                  helper.make_node("Relu", [f"h{b}"], [f"r{b}"], name=f"/block{b}/Relu"),
                  helper.make_node("Dropout", [f"r{b}", "ratio", "training"], [f"d{b}"],
                                   name=f"/block{b}/Dropout")]
        x = f"d{b}"
    inits["head"] = (rng.standard_normal((16, 4)) / 4).astype(np.float32)
    nodes += [helper.make_node("MatMul", [x, "head"], ["y"], name="/head/MatMul"),
              helper.make_node("Mul", ["y", "y"], ["sq"], name="/Mul"),
              helper.make_node("ReduceMean", ["sq"], ["loss"], keepdims=0, name="/ReduceMean")]
    save(model(nodes, [("x", TensorProto.FLOAT, [batch, 16])], ["loss"], initializers=inits),
         path)


def gpt(path, batch):
    m, args = export_gpt.build()
    export_with_loss(m, tuple(torch.cat([a] * batch)[:batch] for a in args), path,
                     ["idx", "targets"])


def train(workdir, label, onnx_path, flags, data, ranks):
    out = os.path.join(workdir, label)
    subprocess.run(["cleave", "compile", onnx_path, "-o", out, "--train", "--optimizer", "adamw",
                    "--lr", "0.01", *flags], check=True)
    log = out + ".json"
    launch = ["-n", str(ranks)] if ranks > 1 else []
    subprocess.run(["cleave", "run", *launch, out, *data, "--steps", str(STEPS), "--no-shuffle",
                    "--log-json", log, "--output-dir", out + ".results"], check=True,
                   stderr=subprocess.DEVNULL)
    metrics = json.load(open(log))
    plan = json.load(open(os.path.join(out, "plan.json")))
    expect(metrics["peak_bytes_allocated"] == plan["memory"]["predicted_peak_bytes"],
           f"{label}: measured peak {metrics['peak_bytes_allocated']}, predicted "
           f"{plan['memory']['predicted_peak_bytes']}")
    weights = os.path.join(out + ".results", plan["weights"]["file"].replace("{dp}", "0"))
    blob = np.fromfile(weights, dtype=np.uint8)
    params = {p["name"]: blob[p["offset"]:p["offset"] + p["bytes"]].tobytes()
              for p in plan["parameters"]}
    return [s["loss"] for s in metrics["steps"]], params, plan["memory"]["activation_bytes"]


def main():
    workdir = sys.argv[1]
    rng = np.random.default_rng(1)
    cases = []
    for name, build, batch, arrays in (
            ("mlp", dropout_mlp, 8, {"x": rng.standard_normal((16, 16)).astype(np.float32)}),
            ("gpt", gpt, 4, {"idx": rng.integers(0, 64, (8, 16)).astype(np.int64),
                             "targets": rng.integers(0, 64, (8, 16)).astype(np.int64)})):
        data = []
        for key, array in arrays.items():
            np.save(os.path.join(workdir, f"{name}.{key}.npy"), array)
            data += ["--data", f"{key}={workdir}/{name}.{key}.npy"]
        for ranks, accum in ((1, 1), (2, 2)):
            micro = batch // (ranks * accum)
            path = os.path.join(workdir, f"{name}-b{micro}.onnx")
            build(path, micro)
            mesh = ["--mesh", f"dp={ranks}"] if ranks > 1 else []
            runs = {mode: train(workdir, f"{name}-dp{ranks}-{mode}", path,
                                ["--batch-size", str(batch), "--grad-accum", str(accum),
                                 "--recompute", mode, *mesh], data, ranks)
                    for mode in MODES}
            where = f"{name} dp={ranks} grad-accum {accum}"
            losses, params, arena = runs["none"]
            for mode in MODES[1:]:
                expect(runs[mode][0] == losses,
                       f"{where} --recompute {mode}: losses {runs[mode][0]}, without {losses}")
                expect(runs[mode][1] == params,
                       f"{where} --recompute {mode}: final parameters differ from without")
                expect(runs[mode][2] < arena,
                       f"{where} --recompute {mode}: arena {runs[mode][2]} bytes, without "
                       f"{arena}")
            print(f"{where}: arena none/selective/full "
                  f"{[runs[m][2] for m in MODES]} bytes; losses {losses[0]:.6f} -> "
                  f"{losses[-1]:.6f}")
    if problems:
        sys.exit("\n".join(problems))


if __name__ == "__main__":
    main()
