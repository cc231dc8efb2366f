# Damaged or mismatched compile outputs and .npy inputs are one error line and
# exit 1, never a crash, a huge allocation or results written:
#   - plan.json fields damaged within themselves (a fractional offset, bytes
#     that wrap around 2^64, a string where a number goes) name the field;
#   - plan.json changed where the generated code depends on it (an arena
#     smaller than the program's, inputs reordered, no outputs, a weights
#     blob of 10^12 bytes) names the field and what the program was compiled
#     for, checked before anything is allocated;
#   - another compile's plan.json (of the same model) is refused by its
#     build_id;
#   - a .npy input whose header claims 10^12 elements, a negative or
#     non-numeric dim, or a 27-byte file whose header length says 4 GiB is
#     refused quickly, without taking the memory it claims.
#
# A 2 GiB address-space limit leaves no room for AddressSanitizer's shadow.
# UNSUPPORTED: sanitized
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "..", "examples", "mlp", "model.onnx")
# No case may need more than this much memory (the program itself needs far
# less): a damaged file that makes it allocate what it claims fails here.
MEMORY_LIMIT = 2 << 30


def limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run(args):
    start = time.time()
    result = subprocess.run(args, capture_output=True, text=True, preexec_fn=limit_memory)
    return result, time.time() - start


def expect_refusal(problems, name, args, wanted, outputs):
    result, seconds = run(args)
    lines = [l for l in result.stderr.splitlines() if not l.startswith("note: ")]
    if result.returncode != 1 or len(lines) != 1 or not lines[0].startswith("cleave: error: ") \
            or wanted not in lines[0]:
        problems.append(f"{name}: exit {result.returncode}, stderr {result.stderr!r}, "
                        f"expected one error line with {wanted!r}")
    if seconds > 5:
        problems.append(f"{name}: took {seconds:.1f} s to refuse")
    if os.path.exists(outputs) and os.listdir(outputs):
        problems.append(f"{name}: wrote {os.listdir(outputs)}")


def npy_with_header(path, shape_text, body=b"", version=1, claimed_length=None):
    header = ("{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % shape_text).encode()
    length = len(header) if claimed_length is None else claimed_length
    preamble = b"\x93NUMPY" + bytes([version, 0])
    preamble += struct.pack("<H", length) if version == 1 else struct.pack("<I", length)
    with open(path, "wb") as f:
        f.write(preamble + header + body)


def main():
    work = sys.argv[1]
    rng = np.random.default_rng(0)
    np.save(f"{work}/x.npy", rng.standard_normal((8, 32)).astype(np.float32))
    np.save(f"{work}/labels.npy", rng.integers(0, 10, 8).astype(np.int64))
    for out in ("out", "again"):
        subprocess.run(["cleave", "compile", MODEL, "-o", f"{work}/{out}"], check=True)
    problems = []

    def tampered(name, change, wanted):
        out = f"{work}/{name}"
        shutil.copytree(f"{work}/out", out)
        plan = json.load(open(f"{out}/plan.json"))
        change(plan)
        json.dump(plan, open(f"{out}/plan.json", "w"))
        results = f"{work}/{name}-results"
        expect_refusal(problems, name, [f"{out}/program", "--dir", out,
                                        "--input", f"x={work}/x.npy",
                                        "--input", f"labels={work}/labels.npy",
                                        "--output-dir", results],
                       f"{out}/plan.json: {wanted}", results)

    first = lambda plan: plan["parameters"][0]  # noqa: E731
    tampered("fractional-offset", lambda p: first(p).update(offset=64.5), "parameters[0].offset")
    tampered("string-bytes", lambda p: first(p).update(bytes="4096"), "parameters[0].bytes")
    tampered("wrapping-bytes", lambda p: first(p).update(bytes=2**64 - 64), "parameters[0].bytes")
    tampered("negative-weights", lambda p: p["weights"].update(bytes=-1), "weights.bytes")
    tampered("small-arena", lambda p: p["arena"].update(bytes=64), "arena.bytes: is 64, but")
    tampered("huge-arena", lambda p: p["arena"].update(bytes=10**12), "arena.bytes")
    tampered("huge-weights", lambda p: p["weights"].update(bytes=10**12), "weights.bytes")
    tampered("inputs-reordered", lambda p: p["inputs"].reverse(), "inputs[0]: is 'labels'")
    tampered("no-outputs", lambda p: p.update(outputs=[]), "outputs: is 0")
    tampered("other-build", lambda p: p.update(
        build_id=json.load(open(f"{work}/again/plan.json"))["build_id"]), "build_id")

    # The program of one compile with the plan.json of another.
    mixed = f"{work}/mixed"
    shutil.copytree(f"{work}/out", mixed)
    shutil.copy(f"{work}/again/plan.json", f"{mixed}/plan.json")
    expect_refusal(problems, "plan-of-another-compile",
                   ["cleave", "run", mixed, "--input", f"x={work}/x.npy",
                    "--input", f"labels={work}/labels.npy", "--output-dir", f"{work}/mixed-results"],
                   f"{mixed}/plan.json: build_id", f"{work}/mixed-results")

    def bad_npy(name, write, wanted):
        path = f"{work}/{name}.npy"
        write(path)
        results = f"{work}/{name}-results"
        expect_refusal(problems, name, [f"{work}/out/program", "--dir", f"{work}/out",
                                        "--input", f"x={path}",
                                        "--input", f"labels={work}/labels.npy",
                                        "--output-dir", results],
                       f"input 'x' ({path}): ", results)

    bad_npy("npy-1e12", lambda p: npy_with_header(p, "(1000000, 1000000)", b"\0" * 64), "")
    bad_npy("npy-negative", lambda p: npy_with_header(p, "(-8, 32)", b"\0" * 64), "")
    bad_npy("npy-not-a-dim", lambda p: npy_with_header(p, "(8, x)", b"\0" * 64), "")
    bad_npy("npy-4gib-header", lambda p: open(p, "wb").write(
        b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xFFFFFFFF) + b"\0" * 15), "")
    if os.path.getsize(f"{work}/npy-4gib-header.npy") != 27:
        problems.append("the 4 GiB header case is not 27 bytes")

    for problem in problems:
        print("FAIL:", problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
