# --loss cross_entropy:LOGITS,LABELS and mse:OUTPUT,TARGET append a loss to a
# model exported without one: the loss and every parameter gradient must equal
# PyTorch's F.cross_entropy (classes last, ignore_index -100) and F.mse_loss on
# the same module and data, within 1e-5 (loss) and 1e-4 (gradients).
# A malformed --loss is a usage error.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t
# RUN: not cleave compile %t/tagger.onnx -o %t/bad --gradients --loss cross_entropy:logits 2>&1 | FileCheck %s
# CHECK: cleave: error: --loss 'cross_entropy:logits': expected NAME, cross_entropy:LOGITS,LABELS or mse:OUTPUT,TARGET

import os
import subprocess
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Tagger(nn.Module):
    """Token classifier: logits N x T x C, classes last."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 16)
        self.out = nn.Linear(16, 7)

    def forward(self, tokens):
        return self.out(torch.tanh(self.embed(tokens)))


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(5, 8), nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def check(name, model, inputs, loss_flag, target, loss_fn, work):
    path = os.path.join(work, f"{name}.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, inputs, path, opset_version=17, do_constant_folding=False,
                          input_names=["in"], output_names=["pred"])
    out = os.path.join(work, name)
    subprocess.run(["cleave", "compile", path, "-o", out, "--gradients", "--loss", loss_flag],
                   check=True)
    np.save(os.path.join(work, f"{name}.in.npy"), inputs[0].numpy())
    np.save(os.path.join(work, f"{name}.t.npy"), target.numpy())
    results = os.path.join(work, f"{name}.results")
    subprocess.run(["cleave", "run", out, "--input", f"in={work}/{name}.in.npy",
                    "--input", f"{loss_flag.split(',')[1]}={work}/{name}.t.npy",
                    "--output-dir", results], check=True)
    model.zero_grad()
    loss = loss_fn(model(*inputs), target)
    loss.backward()
    problems = []
    ours = float(np.load(os.path.join(results, "loss.npy")))
    if abs(ours - float(loss)) > 1e-5 * abs(float(loss)):
        problems.append(f"{name}: loss {ours} differs from pytorch's {float(loss)}")
    for pname, p in model.named_parameters():
        grad = np.load(os.path.join(results, f"grad_{pname}.npy"))
        error = np.abs(grad - p.grad.numpy()).max() / max(np.abs(p.grad.numpy()).max(), 1e-12)
        if error > 1e-4:
            problems.append(f"{name}: gradient of {pname} differs by {error:.2e}")
    return problems


def main():
    work = sys.argv[1]
    torch.manual_seed(0)
    tokens = torch.randint(0, 20, (3, 5))
    labels = torch.randint(0, 7, (3, 5))
    labels[0, 1] = labels[2, 4] = -100
    problems = check("tagger", Tagger(), (tokens,), "cross_entropy:pred,labels", labels,
                     lambda logits, t: F.cross_entropy(logits.reshape(-1, 7), t.reshape(-1)),
                     work)
    x, y = torch.randn(4, 5), torch.randn(4, 3)
    problems += check("regressor", Regressor(), (x,), "mse:pred,target", y, F.mse_loss, work)
    for p in problems:
        print("FAIL:", p)
    failed = len({p.split(":")[0] for p in problems})
    print(f"{2 - failed} passed, {failed} failed")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
