# --init-from a PyTorch state_dict of a BatchNorm model: the file holds the
# parameters, the running statistics and BatchNorm's num_batches_tracked
# counter (which ONNX has no counterpart of: it is passed over). A small
# conv-BatchNorm-linear model, exported in training mode, trains one SGD step
# from new values of all of them; its loss must equal PyTorch's step from the
# module holding those values (1e-5 relative), and the running statistics
# and parameters after it, read back from --save-onnx, PyTorch's (1e-5 of
# their largest element). A tensor of another name is still refused.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))

from torch_export import export_with_loss  # noqa: E402

LR = 0.1


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4 * 4 * 4, 5)

    def forward(self, x, labels):
        y = torch.relu(self.bn(self.conv(x)))
        return torch.nn.functional.cross_entropy(self.fc(y.flatten(1)), labels)


def main():
    work = sys.argv[1]
    torch.manual_seed(0)
    net = Net().train()
    x = torch.randn(4, 3, 6, 6)
    labels = torch.tensor([0, 4, 2, 1])
    export_with_loss(net, (x, labels), f"{work}/model.onnx", ["x", "labels"],
                     training=torch.onnx.TrainingMode.TRAINING)
    subprocess.run(["cleave", "compile", f"{work}/model.onnx", "-o", f"{work}/out", "--train",
                    "--optimizer", "sgd", "--lr", str(LR)], check=True)
    np.save(f"{work}/x.npy", x.numpy())
    np.save(f"{work}/labels.npy", labels.numpy())

    # New values of everything the state_dict holds, the counter included.
    with torch.no_grad():
        for name, tensor in net.state_dict().items():
            if "num_batches_tracked" in name:
                tensor.fill_(7)
            elif "running_var" in name:
                tensor.uniform_(0.5, 1.5)
            else:
                tensor.add_(0.1 * torch.randn_like(tensor))
    state = {n: t.clone().contiguous() for n, t in net.state_dict().items()}
    save_file(state, f"{work}/state.safetensors")

    optimizer = torch.optim.SGD(net.parameters(), lr=LR)
    optimizer.zero_grad()
    loss = net(x, labels)
    loss.backward()
    optimizer.step()
    theirs = {n: t.detach().numpy() for n, t in net.state_dict().items()
              if "num_batches_tracked" not in n}

    problems = []
    run = subprocess.run(
        ["cleave", "run", f"{work}/out", "--data", f"x={work}/x.npy,labels={work}/labels.npy",
         "--steps", "1", "--quiet", "--init-from", f"{work}/state.safetensors",
         "--log-json", f"{work}/log.json", "--save-onnx", f"{work}/trained.onnx"],
        capture_output=True, text=True)
    if run.returncode != 0:
        print("FAIL: --init-from the state_dict:", run.stderr)
        sys.exit(1)
    ours_loss = json.load(open(f"{work}/log.json"))["steps"][0]["loss"]
    if abs(ours_loss - float(loss)) > 1e-5 * abs(float(loss)):
        problems.append(f"loss {ours_loss}, PyTorch's {float(loss)}")
    trained = {t.name: numpy_helper.to_array(t)
               for t in onnx.load(f"{work}/trained.onnx").graph.initializer}
    for name, value in theirs.items():
        if name not in trained:
            problems.append(f"{name}: not in the trained model")
            continue
        error = np.abs(trained[name] - value).max() / max(np.abs(value).max(), 1e-6)
        if error > 1e-5:
            problems.append(f"{name}: differs from PyTorch's by {error:.1e} of its largest")
    print(f"loss {ours_loss:.7f} (PyTorch {float(loss):.7f}); {len(theirs)} tensors compared")

    state["bn.unknown"] = torch.zeros(4)
    save_file(state, f"{work}/extra.safetensors")
    refused = subprocess.run(
        ["cleave", "run", f"{work}/out", "--data", f"x={work}/x.npy,labels={work}/labels.npy",
         "--steps", "1", "--init-from", f"{work}/extra.safetensors"],
        capture_output=True, text=True)
    if refused.returncode != 1 or "tensor 'bn.unknown': is not a tensor of the program" \
            not in refused.stderr:
        problems.append(f"an unknown tensor: exit {refused.returncode}, {refused.stderr!r}")

    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
