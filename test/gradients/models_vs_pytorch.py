# Whole-model gradients: the torch-exported MLP, GPT-style transformer and CNN
# are compiled with --gradients and run on the export's inputs; every
# parameter's gradient must equal PyTorch's autograd (loss.backward() on the
# original module) within 1e-4 relative to the gradient's largest element, and
# the loss must equal PyTorch's within 1e-5. Buffers (the causal mask) get no
# gradient; the CNN's BatchNorm running statistics, which ONNX makes float
# initializers, are buffers in PyTorch and frozen here (--freeze).
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import os
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))

import export_cnn  # noqa: E402
import export_gpt  # noqa: E402
import export_mlp  # noqa: E402

MODELS = (("mlp", export_mlp, ["x", "labels"], []),
          ("gpt", export_gpt, ["idx", "targets"], []),
          ("cnn", export_cnn, ["x", "labels"], ["--freeze", "*.running_*"]))


def check(name, module, input_names, flags, workdir):
    path = os.path.join(workdir, f"{name}.onnx")
    module.export(path)
    model, args = module.build()
    out = os.path.join(workdir, name)
    subprocess.run(["cleave", "compile", path, "-o", out, "--gradients", *flags], check=True)
    flags = []
    for input_name, value in zip(input_names, args):
        file = os.path.join(workdir, f"{name}.{input_name}.npy")
        np.save(file, value.numpy())
        flags += ["--input", f"{input_name}={file}"]
    results = os.path.join(workdir, f"{name}.results")
    subprocess.run(["cleave", "run", out, *flags, "--output-dir", results], check=True)

    model.zero_grad()
    loss = model(*args)
    loss.backward()
    problems = []
    ours_loss = float(np.load(os.path.join(results, "loss.npy")))
    if abs(ours_loss - float(loss)) > 1e-5 * abs(float(loss)):
        problems.append(f"{name}: loss {ours_loss} differs from pytorch's {float(loss)}")
    checked = 0
    for param_name, param in model.named_parameters():
        file = os.path.join(results, f"grad_{param_name}.npy")
        if not os.path.exists(file):
            problems.append(f"{name}: no gradient for {param_name}")
            continue
        ours, theirs = np.load(file), param.grad.numpy()
        scale = max(float(np.abs(theirs).max()), 1e-12)
        error = float(np.abs(ours - theirs).max()) / scale
        if error > 1e-4:
            problems.append(f"{name}: gradient of {param_name} differs by {error:.2e} "
                            f"(relative to its largest element)")
        checked += 1
    for buffer_name, _ in model.named_buffers():
        if os.path.exists(os.path.join(results, f"grad_{buffer_name}.npy")):
            problems.append(f"{name}: buffer {buffer_name} got a gradient")
    print(f"{name}: loss {ours_loss:.8f} (pytorch {float(loss):.8f}); {checked} gradients compared")
    return problems


def main():
    workdir = sys.argv[1]
    problems = []
    for name, module, input_names, flags in MODELS:
        problems += check(name, module, input_names, flags, workdir)
    for p in problems:
        print("FAIL:", p)
    print(f"{len(MODELS) - len({p.split(':')[0] for p in problems})} passed, "
          f"{len({p.split(':')[0] for p in problems})} failed")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
