# Data that ops index with is checked before the first step: a token id past
# an embedding table, or a class target past the logits, in a sample the run
# reads stops it with exit 1 and one line naming the data input, its file,
# the sample, the step that reads it (in file order, --no-shuffle), the
# value, the kind of op and what it takes (a kernel's error, mid-step, could
# name none of them):
#   - ids into a table of 10 rows take [-10, 10) (ONNX Gather's negative
#     indices count from the end): 10 in sample 5 of batches of 4 is read at
#     step 2, so --steps 2 refuses it and --steps 1 trains;
#   - -10 trains, -11 is refused;
#   - the appended cross-entropy's targets take [0, 3) or its ignore_index
#     -100 (PyTorch's default): -100 trains, 3 is refused;
#   - ids that pass an Add before the lookup are not checked before the
#     first step: the kernel's error names the step that met the bad id.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROWS, WIDTH, CLASSES, BATCH, SAMPLES = 10, 5, 3, 4, 12


def model(path, offset=False):
    """The lookup of idx (idx + 1 with `offset`, which the check before the
    first step does not follow), flattened, a linear classifier."""
    rng = np.random.default_rng(0)
    table = rng.standard_normal((ROWS, WIDTH)).astype(np.float32)
    weight = rng.standard_normal((3 * WIDTH, CLASSES)).astype(np.float32)
    shift = [helper.make_node("Add", ["idx_in", "one"], ["idx"], name="shift")] if offset else []
    graph = helper.make_graph(
        shift + [helper.make_node("Gather", ["table", "idx"], ["rows"], name="lookup"),
         helper.make_node("Reshape", ["rows", "shape"], ["flat"], name="flatten"),
         helper.make_node("MatMul", ["flat", "weight"], ["logits"], name="head")],
        "index_ranges",
        [helper.make_tensor_value_info("idx_in" if offset else "idx", TensorProto.INT64,
                                       [BATCH, 3])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [BATCH, CLASSES])],
        [numpy_helper.from_array(table, "table"), numpy_helper.from_array(weight, "weight"),
         numpy_helper.from_array(np.array([BATCH, 3 * WIDTH], np.int64), "shape"),
         numpy_helper.from_array(np.array(1, np.int64), "one")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def main():
    work = sys.argv[1]
    model(f"{work}/model.onnx")
    model(f"{work}/offset.onnx", offset=True)
    for name, out in (("model", "out"), ("offset", "offset")):
        subprocess.run(["cleave", "compile", f"{work}/{name}.onnx", "-o", f"{work}/{out}",
                        "--train", "--loss", "cross_entropy:logits,labels"], check=True)
    rng = np.random.default_rng(1)
    good_idx = rng.integers(0, ROWS, (SAMPLES, 3))
    good_labels = rng.integers(0, CLASSES, SAMPLES)
    problems = []

    def run(name, idx, labels, steps, wanted, program="out", ids="idx"):
        np.save(f"{work}/{name}.idx.npy", idx)
        np.save(f"{work}/{name}.labels.npy", labels)
        result = subprocess.run(
            ["cleave", "run", f"{work}/{program}", "--data",
             f"{ids}={work}/{name}.idx.npy,labels={work}/{name}.labels.npy", "--steps", str(steps),
             "--no-shuffle", "--quiet"], capture_output=True, text=True)
        lines = result.stderr.strip().splitlines()
        if wanted is None:
            if result.returncode != 0:
                problems.append(f"{name}: exit {result.returncode}: {result.stderr!r}")
            return
        if result.returncode != 1 or len(lines) != 1 or wanted not in lines[0]:
            problems.append(f"{name}: exit {result.returncode}, stderr {result.stderr!r}, "
                            f"expected one line with {wanted!r}")

    def with_value(array, sample, column, value):
        array = array.copy()
        if array.ndim == 1:
            array[sample] = value
        else:
            array[sample, column] = value
        return array

    table = f"the indices of gather (a table of {ROWS} rows) take [-{ROWS}, {ROWS})"
    past = with_value(good_idx, 5, 1, ROWS)
    run("past-table", past, good_labels, 2,
        f"data 'idx' ({work}/past-table.idx.npy): sample 5, read at step {5 // BATCH + 1}, "
        f"holds {ROWS}: {table}")
    run("past-table-unread", past, good_labels, 1, None)
    run("from-end", with_value(good_idx, 2, 0, -ROWS), good_labels, 3, None)
    run("before-table", with_value(good_idx, 9, 2, -ROWS - 1), good_labels, 3,
        f"sample 9, read at step {9 // BATCH + 1}, holds {-ROWS - 1}: {table}")
    run("ignored-target", good_idx, with_value(good_labels, 2, 0, -100), 3, None)
    run("past-classes", good_idx, with_value(good_labels, 6, 0, CLASSES), 3,
        f"data 'labels' ({work}/past-classes.labels.npy): sample 6, read at step "
        f"{6 // BATCH + 1}, holds {CLASSES}: the targets of softmax_cross_entropy_loss "
        f"({CLASSES} classes) take [0, {CLASSES}) or -100")

    # Past the table only after the model's own Add: the kernel's error,
    # naming the step.
    run("offset", with_value(good_idx % (ROWS - 1), 5, 1, ROWS - 1), good_labels, 2,
        f"cleave: error: step {5 // BATCH + 1}: kernel gather: index {ROWS} out of range "
        f"[-{ROWS}, {ROWS})", program="offset", ids="idx_in")

    for problem in problems:
        print("FAIL:", problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
