# Damaged and mismatched checkpoints are refused before anything is loaded:
# for each fault, --resume exits 1 (2 for flags that do not fit the
# checkpoint's run) with one error line naming the file (or field, or flag)
# and the fault, at most one note, and writes nothing (no --output-dir blob,
# no --log-json). The index's CRC-32s are zlib's, checked here first.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import shutil
import struct
import subprocess
import sys
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "..", "examples", "mlp", "model.onnx")
SHARD = "rank-0.safetensors"


def edit_index(checkpoint, change):
    path = f"{checkpoint}/index.json"
    index = json.load(open(path))
    change(index)
    json.dump(index, open(path, "w"))


def refresh_file(checkpoint, name):
    """Makes the index's size and checksum of `name` agree with the file."""
    data = open(f"{checkpoint}/{name}", "rb").read()

    def change(index):
        entry = next(f for f in index["files"] if f["name"] == name)
        entry["bytes"], entry["crc32"] = len(data), f"{zlib.crc32(data):08x}"
    edit_index(checkpoint, change)


def rewrite_header(checkpoint, change):
    """Edits the shard's safetensors header (keeping its checksum valid)."""
    path = f"{checkpoint}/{SHARD}"
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    change(header)
    text = json.dumps(header).encode()
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + data[8 + n:])
    refresh_file(checkpoint, SHARD)


def truncate(c):
    data = open(f"{c}/{SHARD}", "rb").read()
    open(f"{c}/{SHARD}", "wb").write(data[:-10])


def flip(c):
    data = bytearray(open(f"{c}/{SHARD}", "rb").read())
    data[-100] ^= 0x10
    open(f"{c}/{SHARD}", "wb").write(bytes(data))


def symlink_out(c):
    outside = os.path.join(os.path.dirname(os.path.dirname(c)), "outside.safetensors")
    shutil.copy(f"{c}/{SHARD}", outside)
    os.remove(f"{c}/{SHARD}")
    os.symlink(outside, f"{c}/{SHARD}")


def rename_file(name):
    def change(index):
        index["files"][0]["name"] = name
        for tensor in index["tensors"]:
            for shard in tensor["shards"]:
                shard["file"] = name
    return lambda c: edit_index(c, change)


def set_layout_shape(index):
    index["tensors"][0]["layout"]["shape"] = [16, 33]


def set_mesh(index):
    """A mesh without the tp axis a tensor's layout splits over."""
    index["mesh"] = {"text": "dp=2", "axes": [{"name": "dp", "size": 2}]}
    layout = index["tensors"][0]["layout"]
    layout.update(global_shape=[32, 32], split={"dim": 0, "blocks": 1, "axis": "tp"})


def set_optimizer(index):
    index["optimizer"]["name"] = "sgd"


def drop_tensor(index):
    index["tensors"] = [t for t in index["tensors"] if t["name"] != "adam.v:fc3.bias"]


def add_tensor(index):
    tensor = json.loads(json.dumps(next(t for t in index["tensors"]
                                        if t["name"] == "adam.v:fc3.bias")))
    tensor["name"] = tensor["layout"]["name"] = "adam.v:head.bias"
    index["tensors"].append(tensor)


def twice(index):
    """fc1.bias held by two shards: each element twice."""
    tensor = next(t for t in index["tensors"] if t["name"] == "fc1.bias")
    tensor["shards"].append(tensor["shards"][0])


def bias_shape(shape):
    return lambda c: rewrite_header(c, lambda h: h["fc1.bias"].update(shape=shape))


# (name, damage, exit code, extra flags, fragments the error line holds)
FAULTS = [
    ("truncated", truncate, 1, [], [SHARD, "truncated"]),
    ("bit flip", flip, 1, [], [SHARD, "CRC-32", "damaged"]),
    ("missing file", lambda c: os.remove(f"{c}/{SHARD}"), 1, [], [SHARD, "is missing"]),
    ("missing index", lambda c: os.remove(f"{c}/index.json"), 1, [], ["index.json"]),
    ("index not json", lambda c: open(f"{c}/index.json", "w").write("{"), 1, [],
     ["index.json", "not a JSON object"]),
    ("index field", lambda c: edit_index(c, lambda i: i["files"][0].update(crc32="xyz")), 1,
     [], ["index.json: files[0].crc32", "not 8 hex digits"]),
    ("model mismatch", lambda c: edit_index(c, set_layout_shape), 1, [],
     ["index.json: tensor 'fc1.weight'", "is f32 16x33", "the program's is f32 16x32"]),
    ("other optimizer", lambda c: edit_index(c, set_optimizer), 1, [],
     ["index.json: optimizer", "is sgd", "the program's is adam"]),
    ("tensor missing", lambda c: edit_index(c, drop_tensor), 1, [],
     ["index.json: tensor 'adam.v:fc3.bias'", "is missing", "f32 10"]),
    ("other tensor", lambda c: edit_index(c, add_tensor), 1, [],
     ["index.json: tensor 'adam.v:head.bias'", "is not a tensor of the program"]),
    ("mesh without the axis", lambda c: edit_index(c, set_mesh), 1, [],
     ["index.json: tensors[0].layout.split.axis", "'tp' is not an axis"]),
    ("held twice", lambda c: edit_index(c, twice), 1, [],
     ["index.json: tensor 'fc1.bias'", "do not hold each of its 16 elements exactly once"]),
    ("dot dot", rename_file("../rank-0.safetensors"), 1, [], ["index.json", "not a file name"]),
    ("absolute", rename_file("/etc/passwd"), 1, [], ["index.json", "not a file name"]),
    ("symlink out", symlink_out, 1, [], [SHARD, "symlink out"]),
    ("latest out", lambda c: open(f"{os.path.dirname(c)}/latest", "w").write("../step-2\n"), 1,
     [], ["latest", "does not name a checkpoint"]),
    ("header not json", lambda c: rewrite_header(c, lambda h: h.update(x=float("nan"))), 1, [],
     [SHARD, "header is not a JSON object"]),
    ("header size", bias_shape([17]), 1, [], [SHARD, "fc1.bias", "f32 17 takes 68"]),
    ("stored shape", bias_shape([4, 4]), 1, [], [SHARD, "fc1.bias", "is f32 4x4",
                                                 "stores f32 16"]),
    ("other seed", None, 2, ["--seed", "5"], ["--seed 5", "checkpoint's seed 0"]),
    ("nothing left", None, 2, ["--steps", "2"], ["--steps 2", "leaves nothing to run"]),
]


def main():
    work = sys.argv[1]
    rng = np.random.default_rng(1)
    x = rng.standard_normal((24, 32)).astype(np.float32)
    np.save(f"{work}/x.npy", x)
    np.save(f"{work}/labels.npy", np.argmax(x[:, :10], axis=1).astype(np.int64))
    out = f"{work}/out"
    subprocess.run(["cleave", "compile", MODEL, "-o", out, "--train", "--optimizer", "adam",
                    "--lr", "0.01"], check=True, stderr=subprocess.DEVNULL)
    data = ["--data", f"x={work}/x.npy,labels={work}/labels.npy"]
    good = f"{work}/good"
    subprocess.run(["cleave", "run", out, *data, "--steps", "2", "--checkpoint-dir", good],
                   check=True, stderr=subprocess.DEVNULL)
    problems = []
    index = json.load(open(f"{good}/step-2/index.json"))
    for entry in index["files"]:
        crc = zlib.crc32(open(f"{good}/step-2/{entry['name']}", "rb").read())
        if entry["crc32"] != f"{crc:08x}":
            problems.append(f"{entry['name']}: crc32 {entry['crc32']} is not zlib's {crc:08x}")

    for name, damage, code, flags, fragments in FAULTS:
        case = f"{work}/{name.replace(' ', '-')}"
        shutil.copytree(good, case, symlinks=True)
        if damage:
            damage(f"{case}/step-2")
        results = f"{case}-results"
        os.makedirs(results)
        steps = [] if "--steps" in flags else ["--steps", "4"]
        run = subprocess.run(["cleave", "run", out, *data, *steps, "--resume", case,
                              "--output-dir", results, "--log-json", f"{results}/log.json"]
                             + flags, capture_output=True, text=True)
        lines = run.stderr.splitlines()
        errors = [line for line in lines if not line.startswith("note: ")]
        line = errors[0] if errors else ""
        if run.returncode != code:
            problems.append(f"{name}: exit {run.returncode}, not {code}: {run.stderr!r}")
        elif len(errors) != 1 or len(lines) - len(errors) > 1:
            problems.append(f"{name}: not one error line: {run.stderr!r}")
        elif not line.startswith("cleave: error: ") or not all(f in line for f in fragments):
            problems.append(f"{name}: '{line}' does not say {fragments}")
        if os.listdir(results):
            problems.append(f"{name}: wrote {os.listdir(results)}")
        print(f"{name}: {line}")
    for p in problems:
        print("FAIL:", p)
    failed = len({p.split(":")[0] for p in problems})
    print(f"{len(FAULTS) - failed} passed, {failed} failed")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
