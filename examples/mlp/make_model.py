"""Write examples/mlp/model.onnx: a small MLP whose graph ends in its loss.

    python examples/mlp/make_model.py [OUT.onnx]

32 features -> Linear(16) -> ReLU -> Linear(16) -> GELU -> Linear(10 classes),
then cross-entropy against int64 labels, so the graph's single output is the
scalar loss. Inputs: x (8x32 f32) and labels (8 int64). Exported by torch's
TorchScript exporter at opset 17 with static shapes and no constant folding,
from a fixed seed. About 970 parameters (~4 KB file).
"""
import os
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, FEATURES, HIDDEN, CLASSES = 8, 32, 16, 10


class MLP(nn.Module):
    """Linear, ReLU, Linear, `activation`, Linear, then cross-entropy: the
    loss is the model's output. (test/models/export_mlp.py builds a wider one
    with tanh.)"""

    def __init__(self, hidden=HIDDEN, activation=F.gelu):
        super().__init__()
        self.fc1 = nn.Linear(FEATURES, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, CLASSES)
        self.activation = activation

    def forward(self, x, labels):
        h = F.relu(self.fc1(x))
        h = self.activation(self.fc2(h))
        return F.cross_entropy(self.fc3(h), labels)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "model.onnx")
    torch.manual_seed(0)
    model = MLP().eval()
    x = torch.randn(BATCH, FEATURES)
    labels = torch.randint(0, CLASSES, (BATCH,), dtype=torch.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x, labels), out, opset_version=17,
                          do_constant_folding=False,
                          input_names=["x", "labels"], output_names=["loss"])


if __name__ == "__main__":
    main()
