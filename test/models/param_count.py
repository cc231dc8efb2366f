# `cleave import --summary` reports as parameters exactly the tensors torch
# holds for each model: the parameters plus the float buffers. The importer
# turns every float initializer into a parameter, and torch exports float
# buffers as initializers too (the GPT's causal mask, BatchNorm's running
# mean and variance), so they count; BatchNorm's integer num_batches_tracked
# is not used in eval mode and is not exported. The reference numbers come
# from torch, never from the ONNX file or cleave.
#
# RUN: %python %s %t
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import export_cnn  # noqa: E402
import export_gpt  # noqa: E402
import export_mlp  # noqa: E402

SUMMARY = re.compile(
    r"^\s*parameters:\s*(\d+) tensors?, (\d+) elements?, (\d+) bytes?\s*$",
    re.MULTILINE)


def check(name, module, outdir):
    path = os.path.join(outdir, name + ".onnx")
    model = module.export(path)
    tensors = list(model.parameters())
    tensors += [b for b in model.buffers() if b.is_floating_point()]
    want_tensors = len(tensors)
    want_elements = sum(t.numel() for t in tensors)
    want_bytes = sum(t.numel() * t.element_size() for t in tensors)

    proc = subprocess.run(["cleave", "import", path, "--summary"],
                          capture_output=True, text=True)
    if proc.returncode != 0 or proc.stderr:
        sys.exit(f"{name}: cleave import --summary failed "
                 f"(exit {proc.returncode}):\n{proc.stderr}")
    found = SUMMARY.findall(proc.stdout)
    if len(found) != 1:
        sys.exit(f"{name}: expected one 'parameters:' line, got:\n"
                 f"{proc.stdout}")
    got = tuple(int(v) for v in found[0])
    want = (want_tensors, want_elements, want_bytes)
    if got != want:
        sys.exit(f"{name}: summary says {got[0]} tensors, {got[1]} elements, "
                 f"{got[2]} bytes; torch has {want[0]}, {want[1]}, {want[2]}")


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    check("mlp", export_mlp, outdir)
    check("gpt", export_gpt, outdir)
    check("cnn", export_cnn, outdir)


if __name__ == "__main__":
    main()
