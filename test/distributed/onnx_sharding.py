# The ONNX 1.18 sharding specs a model carries serve as its tensor-parallel
# plan when no --plan is given. An MLP (MatMul, Add, Relu, MatMul,
# SoftmaxCrossEntropyLoss) annotates W1 split along axis 1 and b1 along axis
# 0 (column parallel) and W2 along axis 0 (row parallel), each into 2 shards.
# Compiled with --mesh tp=2 and no plan, it must split exactly those
# parameters (plan.json), make one all-reduce forward, and train 10 steps
# with every loss within 1e-5 of the same model on one device. A spec with 4
# shards on a 2-rank tp axis, or splitting two dims, is an error naming the
# tensor.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def annotate(node, tensor, splits):
    """A sharding spec of `tensor` on `node`: `splits` maps axis -> shards."""
    config = node.device_configurations.add()
    config.configuration_id = "tp"
    spec = config.sharding_spec.add()
    spec.tensor_name = tensor
    spec.device.extend([0, 1])
    for axis, shards in splits.items():
        dim = spec.sharded_dim.add()
        dim.axis = axis
        dim.simple_sharding.add().num_shards = shards


def build(path, w1_splits={1: 2}):
    rng = np.random.default_rng(0)
    mm1 = helper.make_node("MatMul", ["x", "W1"], ["h"], name="mm1")
    annotate(mm1, "W1", w1_splits)
    add = helper.make_node("Add", ["h", "b1"], ["hb"], name="add1")
    annotate(add, "b1", {0: 2})
    relu = helper.make_node("Relu", ["hb"], ["a"], name="relu")
    mm2 = helper.make_node("MatMul", ["a", "W2"], ["logits"], name="mm2")
    annotate(mm2, "W2", {0: 2})
    loss = helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["loss"],
                            name="loss", reduction="mean")
    graph = helper.make_graph(
        [mm1, add, relu, mm2, loss], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16]),
         helper.make_tensor_value_info("labels", TensorProto.INT64, [8])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        [numpy_helper.from_array((rng.standard_normal((16, 32)) * 0.3).astype(np.float32), "W1"),
         numpy_helper.from_array((rng.standard_normal(32) * 0.1).astype(np.float32), "b1"),
         numpy_helper.from_array((rng.standard_normal((32, 10)) * 0.3).astype(np.float32), "W2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=11)
    config = model.configuration.add()
    config.name = "tp"
    config.num_devices = 2
    onnx.checker.check_model(model)
    onnx.save(model, path)


def train(workdir, name, mesh, data):
    out = os.path.join(workdir, name)
    subprocess.run(["cleave", "compile", os.path.join(workdir, "mlp.onnx"), "-o", out, "--train",
                    "--optimizer", "momentum", "--lr", "0.1", *mesh], check=True)
    log = out + ".json"
    launch = ["-n", "2"] if mesh else []
    subprocess.run(["cleave", "run", *launch, out, *data, "--steps", "10", "--no-shuffle",
                    "--log-json", log], check=True, stderr=subprocess.DEVNULL)
    return [s["loss"] for s in json.load(open(log))["steps"]], json.load(
        open(os.path.join(out, "plan.json")))


def main():
    workdir = sys.argv[1]
    problems = []
    build(os.path.join(workdir, "mlp.onnx"))
    rng = np.random.default_rng(1)
    np.save(os.path.join(workdir, "x.npy"), rng.standard_normal((32, 16)).astype(np.float32))
    np.save(os.path.join(workdir, "y.npy"), rng.integers(0, 10, 32).astype(np.int64))
    data = ["--data", f"x={workdir}/x.npy,labels={workdir}/y.npy"]
    reference, _ = train(workdir, "one", [], data)
    losses, plan = train(workdir, "tp2", ["--mesh", "tp=2"], data)
    splits = {p["name"]: p["split"]["dim"] for p in plan["parameters"] if "split" in p}
    if splits != {"W1": 1, "b1": 0, "W2": 0}:
        problems.append(f"split parameters {splits}, annotated W1:1, b1:0, W2:0")
    calls = {c["kind"]: c["calls_per_step"] for c in plan["collectives"]}
    if calls != {"all_reduce": 1}:
        problems.append(f"collectives per step {calls}, expected one all-reduce")
    for step, (a, b) in enumerate(zip(losses, reference), start=1):
        if abs(a - b) > 1e-5 * abs(b):
            problems.append(f"step {step}: loss {a}, one device {b}")
            break

    for label, splits, message in (
            ("four", {1: 4}, "the sharding spec of 'W1' does not split it into the mesh's 2 tp ranks"),
            ("two dims", {0: 2, 1: 2}, "the sharding spec of 'W1' splits more than one dim")):
        path = os.path.join(workdir, "mlp.onnx")
        build(path, splits)
        run = subprocess.run(["cleave", "compile", path, "-o", os.path.join(workdir, "bad"),
                              "--train", "--mesh", "tp=2"], capture_output=True, text=True)
        if run.returncode == 0 or message not in run.stderr or run.stderr.count("error") != 1:
            problems.append(f"{label}: exit {run.returncode}, stderr {run.stderr!r}")
    for p in problems:
        print("FAIL:", p)
    print(f"losses {losses[0]:.6f} -> {losses[-1]:.6f}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
