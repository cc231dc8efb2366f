# Cast between f32 and IEEE binary16 against numpy's conversions (round to
# nearest even, overflow to infinity, subnormal halves, signed zeros), on
# two threads (the cast splits its loop among them): 2^20 random float32
# bit patterns and every float32 within 4 units of each half's value and of
# each rounding midpoint, to f16, and every one of the 65536 halves to f32,
# bit for bit (NaN: a NaN, whose payload numpy keeps and cleave makes the
# quiet 0x7e00).
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper


def cast_model(n_float, n_half):
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16, name="to_half"),
         helper.make_node("Cast", ["g"], ["f"], to=TensorProto.FLOAT, name="to_float")],
        "casts",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n_float]),
         helper.make_tensor_value_info("g", TensorProto.FLOAT16, [n_half])],
        [helper.make_tensor_value_info("h", TensorProto.FLOAT16, [n_float]),
         helper.make_tensor_value_info("f", TensorProto.FLOAT, [n_half])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def main():
    work = sys.argv[1]
    rng = np.random.default_rng(11)
    halves = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    # Each half's value as a float, and the midpoints between neighbours.
    values = halves.view(np.float16).astype(np.float32)
    finite = values[np.isfinite(values)]
    ordered = np.unique(finite)
    mids = ((ordered[:-1].astype(np.float64) + ordered[1:]) / 2).astype(np.float32)
    near = np.concatenate([finite, mids]).view(np.uint32).astype(np.int64)
    near = np.concatenate([near + d for d in range(-4, 5)])
    near = near[(near >= 0) & (near < 1 << 32)].astype(np.uint32)
    bits = np.concatenate([rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32),
                           near])
    x = bits.view(np.float32)
    np.save(f"{work}/x.npy", x)
    np.save(f"{work}/g.npy", halves.view(np.float16))
    onnx.save(cast_model(x.size, halves.size), f"{work}/casts.onnx")
    subprocess.run(["cleave", "compile", f"{work}/casts.onnx", "-o", f"{work}/casts"], check=True)
    subprocess.run(["cleave", "run", f"{work}/casts", "--input", f"x={work}/x.npy", "--input",
                    f"g={work}/g.npy", "--threads", "2", "--output-dir", f"{work}/out"],
                   check=True, stdout=subprocess.DEVNULL)
    problems = []

    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(np.float16)
    got = np.load(f"{work}/out/h.npy")
    nan = np.isnan(x)
    wrong = np.flatnonzero((got.view(np.uint16) != want.view(np.uint16)) & ~nan)
    if wrong.size:
        i = wrong[0]
        problems.append(f"f32 -> f16: {wrong.size} of {x.size} differ from numpy, the first "
                        f"{bits[i]:#010x} -> {got.view(np.uint16)[i]:#06x}, numpy "
                        f"{want.view(np.uint16)[i]:#06x}")
    if not np.isnan(got[nan]).all():
        problems.append("f32 -> f16: a NaN did not stay NaN")

    want = halves.view(np.float16).astype(np.float32)
    got = np.load(f"{work}/out/f.npy")
    wrong = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    if wrong.size:
        i = wrong[0]
        problems.append(f"f16 -> f32: {wrong.size} of 65536 differ from numpy, the first "
                        f"{halves[i]:#06x} -> {got.view(np.uint32)[i]:#010x}, numpy "
                        f"{want.view(np.uint32)[i]:#010x}")

    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
