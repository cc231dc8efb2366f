# Exact resume on the same layout: for one device, dp=2, dp=2 with ZeRO 1,
# 2 and 3, tp=2 (plans/megatron-mlp.json) and dp=2 x tp=2 with ZeRO 1 and 3
# on the example MLP, a model with dropout and --grad-accum 2 (its masks
# follow the step), and a model whose training_info is the step (its Adam
# moments and int64 counter are state), a run of STEPS steps is compared with one stopped after HALF steps
# (checkpoints every 2, --keep 1) and resumed with --resume: the resumed
# run's logged steps are HALF+1 .. STEPS with the uninterrupted run's losses
# and learning rates (a cosine schedule, shuffled epochs), and its trained
# blobs and --save-onnx model equal the uninterrupted run's, bit for bit.
# The final checkpoint's safetensors files, read by the `safetensors`
# package and put together by index.json's shards, equal the parameters of
# the saved model, and the run's --log-json counts the bytes of its files.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file

import mlp_data
import training_info_models
from onnx_models import constant_node, model, save

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "..", "examples", "mlp", "model.onnx")
PLAN = os.path.join(HERE, "..", "..", "plans", "megatron-mlp.json")
STEPS, HALF = 7, 4

ADAM = ["--optimizer", "adam", "--lr", "0.01", "--lr-schedule", "cosine"]
MLP_DATA = ["x", "labels"]
# (name, ranks, model, compile flags, data inputs)
LAYOUTS = [
    ("single", 1, MODEL, ADAM, MLP_DATA),
    ("dp2", 2, MODEL, ADAM + ["--mesh", "dp=2"], MLP_DATA),
    ("dp2-zero1", 2, MODEL, ADAM + ["--mesh", "dp=2", "--zero", "1"], MLP_DATA),
    ("dp2-zero2", 2, MODEL, ADAM + ["--mesh", "dp=2", "--zero", "2"], MLP_DATA),
    ("dp2-zero3", 2, MODEL, ADAM + ["--mesh", "dp=2", "--zero", "3"], MLP_DATA),
    ("tp2", 2, MODEL, ADAM + ["--mesh", "tp=2", "--plan", PLAN], MLP_DATA),
    ("dp2tp2-zero1", 4, MODEL, ADAM + ["--mesh", "dp=2,tp=2", "--plan", PLAN, "--zero", "1"],
     MLP_DATA),
    ("dp2tp2-zero3", 4, MODEL, ADAM + ["--mesh", "dp=2,tp=2", "--plan", PLAN, "--zero", "3"],
     MLP_DATA),
    ("dropout", 1, "dropout.onnx", ["--optimizer", "momentum", "--lr", "0.05", "--grad-accum",
                                    "2"], ["x"]),
    ("training-info", 1, "training_info.onnx", [], ["x", "labels"]),
]


def write_models(work):
    """The dropout model, y = Dropout(x @ w) with loss mean(y * y), and a
    training_info MLP, with their data sets."""
    w = np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32)
    nodes = [constant_node("ratio", np.array(0.5, np.float32)),
             constant_node("training", np.array(True)),
             helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Dropout", ["h", "ratio", "training"], ["y"], seed=7),
             helper.make_node("Mul", ["y", "y"], ["sq"]),
             helper.make_node("ReduceMean", ["sq"], ["loss"], keepdims=0)]
    save(model(nodes, [("x", TensorProto.FLOAT, [4, 6])], ["loss"], initializers={"w": w}),
         f"{work}/dropout.onnx")
    os.makedirs(f"{work}/dropout-data")
    np.save(f"{work}/dropout-data/x.npy",
            np.random.default_rng(1).standard_normal((20, 6)).astype(np.float32))
    onnx.save(training_info_models.mlp("adam")[0], f"{work}/training_info.onnx")
    os.makedirs(f"{work}/training-info-data")
    x, labels = training_info_models.dataset(20)
    np.save(f"{work}/training-info-data/x.npy", x)
    np.save(f"{work}/training-info-data/labels.npy", labels)


def run(out, ranks, data, *flags):
    command = ["cleave", "run", "-n", str(ranks), out, "--data", data]
    subprocess.run(command + list(flags), check=True, stderr=subprocess.DEVNULL)


def initializers(path):
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


def assembled(checkpoint, names):
    """The checkpoint's tensors named `names`, whole, from their shards."""
    index = json.load(open(f"{checkpoint}/index.json"))
    files = {f["name"]: load_file(f"{checkpoint}/{f['name']}") for f in index["files"]}
    tensors = {}
    for tensor in index["tensors"]:
        layout = tensor["layout"]
        if tensor["name"] not in names:
            continue
        shape = layout.get("global_shape", layout["shape"])
        whole = None
        # Shards with the same boxes are one part (its ZeRO slices, if any).
        parts = {}
        for shard in tensor["shards"]:
            boxes = shard.get("boxes", [{"offset": [0] * len(shape), "shape": shape}])
            assert len(boxes) == 1, "one box per shard in these layouts"
            parts.setdefault(json.dumps(boxes[0]), []).append(shard)
        for box, shards in parts.items():
            box = json.loads(box)
            arrays = [files[s["file"]][s["key"]] for s in
                      sorted(shards, key=lambda s: s.get("elements", [0])[0])]
            if whole is None:
                whole = np.zeros(shape, dtype=arrays[0].dtype)
            part = np.concatenate([a.reshape(-1) for a in arrays])
            if "zero3" in layout:  # slices of the flattened part, padded
                part = part[:layout["zero3"]["elements"]]
            where = tuple(slice(o, o + n) for o, n in zip(box["offset"], box["shape"]))
            whole[where] = part.reshape(box["shape"])
        tensors[tensor["name"]] = whole
    return tensors


def main():
    work = sys.argv[1]
    mlp_data.save(work, 3)
    write_models(work)
    problems = []
    for name, ranks, path, flags, inputs in LAYOUTS:
        out = f"{work}/{name}"
        folder = work if path == MODEL else f"{work}/{name}-data"
        data = ",".join(f"{i}={folder}/{i}.npy" for i in inputs)
        subprocess.run(["cleave", "compile", os.path.join(work, path), "-o", out, "--train"]
                       + flags, check=True, stderr=subprocess.DEVNULL)
        # A schedule's length is the whole run's, for the stopped run too.
        total = [] if name == "training-info" else ["--total-steps", str(STEPS)]
        run(out, ranks, data, "--steps", str(STEPS), "--output-dir", f"{out}-full",
            "--log-json", f"{out}-full.json", "--save-onnx", f"{out}-full.onnx", *total)
        ckpt = f"{out}-ckpt"
        run(out, ranks, data, "--steps", str(HALF), "--checkpoint-dir", ckpt,
            "--checkpoint-every", "2", "--keep", "1", *total)
        kept = sorted(os.listdir(ckpt))
        if kept != ["latest", f"step-{HALF}"]:
            problems.append(f"{name}: --keep 1 left {kept}")
        run(out, ranks, data, "--steps", str(STEPS), "--resume", ckpt, "--checkpoint-dir", ckpt,
            "--output-dir", f"{out}-resumed", "--log-json", f"{out}-resumed.json",
            "--save-onnx", f"{out}-resumed.onnx", *total)

        full = json.load(open(f"{out}-full.json"))["steps"]
        resumed = json.load(open(f"{out}-resumed.json"))["steps"]
        if resumed != full[HALF:]:
            problems.append(f"{name}: resumed steps {resumed} are not {full[HALF:]}")
        blobs = sorted(f for f in os.listdir(f"{out}-full") if f.endswith(".bin"))
        for blob in blobs:
            a = open(f"{out}-full/{blob}", "rb").read()
            b = open(f"{out}-resumed/{blob}", "rb").read()
            if a != b:
                problems.append(f"{name}: {blob} differs from the uninterrupted run's")
        trained = initializers(f"{out}-full.onnx")
        resumedModel = initializers(f"{out}-resumed.onnx")
        for key, value in trained.items():
            if not np.array_equal(value, resumedModel[key]):
                problems.append(f"{name}: --save-onnx {key} differs")
        final = f"{ckpt}/step-{STEPS}"
        # The parameters, and the state a training_info step keeps in
        # initializers: what --save-onnx wrote into the model.
        saved = assembled(final, trained)
        for key, value in saved.items():
            if not np.array_equal(value, trained[key]):
                problems.append(f"{name}: safetensors {key} is not the trained value")
        parameters = {p["name"] for p in json.load(open(f"{out}/plan.json"))["parameters"]}
        if not parameters <= set(saved):
            problems.append(f"{name}: the checkpoint lacks {parameters - set(saved)}")
        written = json.load(open(f"{out}-resumed.json"))["checkpoints"]
        size = sum(os.path.getsize(f"{final}/{f}") for f in os.listdir(final))
        if [(c["step"], c["bytes"]) for c in written] != [(STEPS, size)]:
            problems.append(f"{name}: --log-json's checkpoints {written}, not step {STEPS} of "
                            f"{size} bytes")
        print(f"{name}: {len(resumed)} resumed steps, {len(blobs)} blobs, {len(saved)} "
              "tensors of the checkpoint compared")
    for p in problems:
        print("FAIL:", p)
    print(f"{len(LAYOUTS) - len({p.split(':')[0] for p in problems})} passed, "
          f"{len({p.split(':')[0] for p in problems})} failed")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
