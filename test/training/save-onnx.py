# cleave run --save-onnx writes the input model with its trained parameters:
# onnxruntime loads it, every parameter equals the trained weights blob, the
# nodes and non-parameter initializers are unchanged, and its loss on a batch
# is below the untrained model's (computed by onnxruntime on both files).
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "..", "examples", "mlp", "model.onnx")


def main():
    work = sys.argv[1]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 32)).astype(np.float32)
    labels = np.argmax(x[:, :10], axis=1).astype(np.int64)
    np.save(f"{work}/x.npy", x)
    np.save(f"{work}/labels.npy", labels)
    subprocess.run(["cleave", "compile", MODEL, "-o", f"{work}/out", "--train", "--optimizer",
                    "adam", "--lr", "0.01"], check=True)
    subprocess.run(["cleave", "run", f"{work}/out", "--data", f"x={work}/x.npy",
                    "--data", f"labels={work}/labels.npy", "--steps", "40", "--output-dir",
                    f"{work}/res", "--save-onnx", f"{work}/trained.onnx"], check=True,
                   stderr=subprocess.DEVNULL)

    original, trained = onnx.load(MODEL), onnx.load(f"{work}/trained.onnx")
    onnx.checker.check_model(trained)
    problems = []
    if [n.SerializeToString() for n in original.graph.node] != \
            [n.SerializeToString() for n in trained.graph.node]:
        problems.append("the nodes changed")
    plan = json.load(open(f"{work}/out/plan.json"))
    blob = np.fromfile(f"{work}/res/weights.bin", dtype=np.uint8)
    params = {p["name"]: p for p in plan["parameters"]}
    for tensor in trained.graph.initializer:
        value = numpy_helper.to_array(tensor)
        if tensor.name in params:
            p = params[tensor.name]
            expected = blob[p["offset"]:p["offset"] + p["bytes"]].view(np.float32)
            if not np.array_equal(value.reshape(-1), expected):
                problems.append(f"{tensor.name} is not the trained value")
        else:
            before = next(t for t in original.graph.initializer if t.name == tensor.name)
            if not np.array_equal(value, numpy_helper.to_array(before)):
                problems.append(f"non-parameter {tensor.name} changed")

    def loss(path):
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        return float(session.run(None, {"x": x[:8], "labels": labels[:8]})[0])

    before, after = loss(MODEL), loss(f"{work}/trained.onnx")
    print(f"onnxruntime loss on batch 0: untrained {before:.5f}, trained {after:.5f}")
    if not after < before:
        problems.append("the trained model's loss did not fall")
    for p in problems:
        print("FAIL:", p)
    print(f"{0 if problems else 1} passed, {1 if problems else 0} failed")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
