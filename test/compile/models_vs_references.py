# Forward numerics of compiled torch-exported models: the MLP, the GPT-style
# transformer and the CNN are compiled by cleave, run on the inputs the export
# used, and their loss must equal onnxruntime's on the same ONNX file and
# PyTorch's on the original module, within 1e-5 relative. The run's measured
# arena use must also agree with the memory plan's prediction (to within the
# 64-byte alignment of the last buffer).
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))

import export_cnn  # noqa: E402
import export_gpt  # noqa: E402
import export_mlp  # noqa: E402

TOLERANCE = 1e-5


def check(name, module, workdir):
    onnx_path = os.path.join(workdir, f"{name}.onnx")
    model = module.export(onnx_path)
    _, args = module.build()
    out = os.path.join(workdir, name)
    subprocess.run(["cleave", "compile", onnx_path, "-o", out], check=True)

    session = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    feeds, flags = {}, []
    for spec, value in zip(session.get_inputs(), args):
        array = value.numpy()
        feeds[spec.name] = array
        path = os.path.join(workdir, f"{name}.{spec.name}.npy")
        np.save(path, array)
        flags += ["--input", f"{spec.name}={path}"]
    results = os.path.join(workdir, f"{name}.out")
    run = subprocess.run(["cleave", "run", out, *flags, "--output-dir", results, "--stats"],
                         check=True, capture_output=True, text=True)
    stats = json.loads(run.stdout.strip().splitlines()[-1])

    ours = float(np.load(os.path.join(results, "loss.npy")))
    reference = float(session.run(None, feeds)[0])
    with torch.no_grad():
        torch_loss = float(model(*args))
    problems = []
    for peer, value in (("onnxruntime", reference), ("pytorch", torch_loss)):
        if abs(ours - value) > TOLERANCE * abs(value):
            problems.append(f"{name}: loss {ours!r} differs from {peer}'s {value!r}")
    planned, touched = stats["arena_bytes_planned"], stats["arena_bytes_touched"]
    if not planned - 64 < touched <= planned:
        problems.append(f"{name}: the plan predicts {planned} arena bytes, the run touched {touched}")
    print(f"{name}: cleave {ours:.8f}, onnxruntime {reference:.8f}, pytorch {torch_loss:.8f}; "
          f"arena planned {planned}, touched {touched}")
    return problems


def main():
    workdir = sys.argv[1]
    problems = []
    for name, module in (("mlp", export_mlp), ("gpt", export_gpt), ("cnn", export_cnn)):
        problems += check(name, module, workdir)
    for p in problems:
        print("FAIL:", p)
    failed = len({p.split(":")[0] for p in problems})
    print(f"{3 - failed} passed, {failed} failed")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
