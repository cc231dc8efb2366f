# Cast between f32 and IEEE binary16 against numpy's conversions (round to
# nearest even, overflow to infinity, subnormal halves, signed zeros), on
# two threads (the cast splits its loop among them): 2^20 random float32
# bit patterns and every float32 within 4 units of each half's value and of
# each rounding midpoint, to f16, and every one of the 65536 halves to f32,
# bit for bit (NaN: a NaN, whose payload numpy keeps and cleave makes the
# quiet 0x7e00).
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import sys

import numpy as np
import onnx
from onnx import helper

from expectations import expect, finish, run
from onnx_models import F16, F32, model


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
    casts = model([helper.make_node("Cast", ["x"], ["h"], to=F16, name="to_half"),
                   helper.make_node("Cast", ["g"], ["f"], to=F32, name="to_float")],
                  [("x", F32, [x.size]), ("g", F16, [halves.size])], ["h", "f"])
    onnx.save(casts, f"{work}/casts.onnx")
    run(["cleave", "compile", f"{work}/casts.onnx", "-o", f"{work}/casts"])
    run(["cleave", "run", f"{work}/casts", "--input", f"x={work}/x.npy", "--input",
         f"g={work}/g.npy", "--threads", "2", "--output-dir", f"{work}/out"])

    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(np.float16)
    got = np.load(f"{work}/out/h.npy")
    nan = np.isnan(x)
    wrong = np.flatnonzero((got.view(np.uint16) != want.view(np.uint16)) & ~nan)
    i = wrong[0] if wrong.size else 0
    expect(not wrong.size, f"f32 -> f16: {wrong.size} of {x.size} differ from numpy, the first "
                           f"{bits[i]:#010x} -> {got.view(np.uint16)[i]:#06x}, numpy "
                           f"{want.view(np.uint16)[i]:#06x}")
    expect(np.isnan(got[nan]).all(), "f32 -> f16: a NaN did not stay NaN")

    want = halves.view(np.float16).astype(np.float32)
    got = np.load(f"{work}/out/f.npy")
    wrong = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    i = wrong[0] if wrong.size else 0
    expect(not wrong.size, f"f16 -> f32: {wrong.size} of 65536 differ from numpy, the first "
                           f"{halves[i]:#06x} -> {got.view(np.uint32)[i]:#010x}, numpy "
                           f"{want.view(np.uint32)[i]:#010x}")
    finish()


if __name__ == "__main__":
    main()
