# Exact resume on the same layout: for one device, dp=2, dp=2 with ZeRO 1
# and 3, and tp=2 (plans/megatron-mlp.json), a run of STEPS steps is
# compared with one stopped after HALF steps (checkpoints every 2, --keep 1)
# and resumed with --resume: the resumed run's logged steps are HALF+1 ..
# STEPS with the uninterrupted run's losses and learning rates (a cosine
# schedule, shuffled epochs), and its trained blobs and --save-onnx model
# equal the uninterrupted run's, bit for bit. The final checkpoint's
# safetensors files, read by the `safetensors` package and put together by
# index.json's shards, equal the parameters of the saved model.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper
from safetensors.numpy import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "..", "examples", "mlp", "model.onnx")
PLAN = os.path.join(HERE, "..", "..", "plans", "megatron-mlp.json")
STEPS, HALF = 7, 4

LAYOUTS = [
    ("single", 1, []),
    ("dp2", 2, ["--mesh", "dp=2"]),
    ("dp2-zero1", 2, ["--mesh", "dp=2", "--zero", "1"]),
    ("dp2-zero3", 2, ["--mesh", "dp=2", "--zero", "3"]),
    ("tp2", 2, ["--mesh", "tp=2", "--plan", PLAN]),
]


def run(work, out, ranks, *flags):
    command = ["cleave", "run", "-n", str(ranks), out, "--data",
               f"x={work}/x.npy,labels={work}/labels.npy", "--total-steps", str(STEPS)]
    subprocess.run(command + list(flags), check=True, stderr=subprocess.DEVNULL)


def initializers(path):
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


def assembled(checkpoint):
    """Every parameter of the checkpoint, whole, from its shards."""
    index = json.load(open(f"{checkpoint}/index.json"))
    files = {f["name"]: load_file(f"{checkpoint}/{f['name']}") for f in index["files"]}
    tensors = {}
    for tensor in index["tensors"]:
        layout = tensor["layout"]
        if layout["role"] != "parameter":
            continue
        shape = layout.get("global_shape", layout["shape"])
        shards = [(s, files[s["file"]][s["key"]]) for s in tensor["shards"]]
        if "zero3" in layout:  # slices of the flattened tensor, padded
            flat = np.concatenate([a.reshape(-1) for s, a in
                                   sorted(shards, key=lambda p: p[0]["elements"][0])])
            tensors[tensor["name"]] = flat[:layout["zero3"]["elements"]].reshape(shape)
            continue
        whole = np.zeros(shape, dtype=np.float32)
        for shard, array in shards:
            boxes = shard.get("boxes", [{"offset": [0] * len(shape), "shape": shape}])
            assert len(boxes) == 1, "one box per shard in these layouts"
            box = boxes[0]
            where = tuple(slice(o, o + n) for o, n in zip(box["offset"], box["shape"]))
            whole[where] = array.reshape(box["shape"])
        tensors[tensor["name"]] = whole
    return tensors


def main():
    work = sys.argv[1]
    rng = np.random.default_rng(3)
    x = rng.standard_normal((40, 32)).astype(np.float32)
    np.save(f"{work}/x.npy", x)
    np.save(f"{work}/labels.npy", np.argmax(x[:, :10], axis=1).astype(np.int64))
    problems = []
    for name, ranks, mesh in LAYOUTS:
        out = f"{work}/{name}"
        subprocess.run(["cleave", "compile", MODEL, "-o", out, "--train", "--optimizer", "adam",
                        "--lr", "0.01", "--lr-schedule", "cosine"] + mesh,
                       check=True, stderr=subprocess.DEVNULL)
        run(work, out, ranks, "--steps", str(STEPS), "--output-dir", f"{out}-full",
            "--log-json", f"{out}-full.json", "--save-onnx", f"{out}-full.onnx")
        ckpt = f"{out}-ckpt"
        run(work, out, ranks, "--steps", str(HALF), "--checkpoint-dir", ckpt,
            "--checkpoint-every", "2", "--keep", "1")
        kept = sorted(os.listdir(ckpt))
        if kept != ["latest", f"step-{HALF}"]:
            problems.append(f"{name}: --keep 1 left {kept}")
        run(work, out, ranks, "--steps", str(STEPS), "--resume", ckpt, "--checkpoint-dir", ckpt,
            "--output-dir", f"{out}-resumed", "--log-json", f"{out}-resumed.json",
            "--save-onnx", f"{out}-resumed.onnx")

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
        saved = assembled(f"{ckpt}/step-{STEPS}")
        for key, value in saved.items():
            if not np.array_equal(value, trained[key]):
                problems.append(f"{name}: safetensors {key} is not the trained parameter")
        if len(saved) != 6:
            problems.append(f"{name}: {len(saved)} parameters in the checkpoint, not 6")
        print(f"{name}: {len(resumed)} resumed steps, {len(blobs)} blobs, {len(saved)} "
              "parameters compared")
    for p in problems:
        print("FAIL:", p)
    print(f"{len(LAYOUTS) - len({p.split(':')[0] for p in problems})} passed, "
          f"{len({p.split(':')[0] for p in problems})} failed")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
