# Bad input never crashes the importer: a valid model is mutated at random
# (bytes flipped, cut short, spliced) with a fixed seed, and every import must
# either succeed or fail with exit 1 and exactly one `cleave: error:` line
# (plus at most one `note:` line) - never a signal, an LLVM fatal error or a
# stack dump.
#
# RUN: %python %s %t

import os
import random
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MUTATIONS = 300


def model_bytes():
    f32 = TensorProto.FLOAT
    nodes = [
        helper.make_node("Gather", ["emb", "idx"], ["e"], name="embed", axis=0),
        helper.make_node("Shape", ["e"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "zero"], ["b"], name="batch", axis=0),
        helper.make_node("Unsqueeze", ["b", "zero1"], ["b1"], name="unsq"),
        helper.make_node("Concat", ["b1", "minus1"], ["newshape"], name="cat", axis=0),
        helper.make_node("Reshape", ["e", "newshape"], ["flat"], name="reshape"),
        helper.make_node("MatMul", ["flat", "w"], ["h"], name="mm"),
        helper.make_node("Add", ["h", "bias"], ["hb"], name="add"),
        helper.make_node("LayerNormalization", ["hb", "g", "bias"], ["n"], name="ln", axis=-1),
        helper.make_node("Slice", ["n", "starts", "ends", "axes"], ["sl"], name="slice"),
        helper.make_node("Softmax", ["sl"], ["p"], name="softmax", axis=-1),
        helper.make_node("ReduceMean", ["p"], ["m"], name="mean", axes=[1], keepdims=0),
        helper.make_node("Transpose", ["n"], ["t"], name="transpose", perm=[1, 0]),
        helper.make_node("Split", ["t", "sizes"], ["t0", "t1"], name="split", axis=0),
    ]
    inits = [
        numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4), "emb"),
        numpy_helper.from_array(np.ones((8, 6), np.float32), "w"),
        numpy_helper.from_array(np.zeros(6, np.float32), "bias"),
        numpy_helper.from_array(np.ones(6, np.float32), "g"),
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        numpy_helper.from_array(np.array([0], np.int64), "zero1"),
        numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
        numpy_helper.from_array(np.array([1], np.int64), "starts"),
        numpy_helper.from_array(np.array([5], np.int64), "ends"),
        numpy_helper.from_array(np.array([1], np.int64), "axes"),
        numpy_helper.from_array(np.array([2, 4], np.int64), "sizes"),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("idx", TensorProto.INT64, [3, 2])],
        [helper.make_tensor_value_info("m", f32, [3]),
         helper.make_tensor_value_info("t1", f32, [4, 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()


def mutate(data, rng):
    data = bytearray(data)
    kind = rng.randrange(4)
    if kind == 0:  # flip a few bytes
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif kind == 1:  # cut short
        del data[rng.randrange(1, len(data)):]
    elif kind == 2:  # splice a chunk elsewhere
        start = rng.randrange(len(data))
        chunk = data[start:start + rng.randint(1, 16)]
        at = rng.randrange(len(data))
        data[at:at] = chunk
    else:  # zero a run of bytes
        start = rng.randrange(len(data))
        data[start:start + rng.randint(1, 8)] = bytes(min(8, len(data) - start))
    return bytes(data)


def main():
    workdir = sys.argv[1]
    os.makedirs(workdir, exist_ok=True)
    original = model_bytes()
    path = os.path.join(workdir, "model.onnx")
    with open(path, "wb") as f:
        f.write(original)
    ok = subprocess.run(["cleave", "import", path], capture_output=True, text=True, errors="replace")
    assert ok.returncode == 0, ok.stderr

    rng = random.Random(1234)
    problems, outcomes = [], {0: 0, 1: 0}
    for i in range(MUTATIONS):
        with open(path, "wb") as f:
            f.write(mutate(original, rng))
        run = subprocess.run(["cleave", "import", path], capture_output=True, text=True, errors="replace")
        lines = run.stderr.splitlines()
        well_formed = (
            (run.returncode == 0 and not lines)
            or (run.returncode == 1 and 1 <= len(lines) <= 2
                and lines[0].startswith("cleave: error: ")
                and (len(lines) == 1 or lines[1].startswith("note: "))))
        if not well_formed:
            kept = os.path.join(workdir, f"crash-{i}.onnx")
            os.replace(path, kept)
            problems.append(f"mutation {i}: exit {run.returncode}: {run.stderr[:300]!r} ({kept})")
            continue
        outcomes[run.returncode] += 1
    print(f"{outcomes[0]} imported, {outcomes[1]} refused with one error line")
    for p in problems:
        print(p)
    print(f"{MUTATIONS - len(problems)} passed, {len(problems)} failed")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
