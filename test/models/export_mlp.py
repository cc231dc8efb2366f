"""Export a small 3-layer MLP (the example's, 64 wide, with tanh) with its
cross-entropy loss to ONNX.

Usage: export_mlp.py OUT.onnx

Graph inputs: x (8x32 f32), labels (8 int64). Output: loss (scalar f32).
Exported with torch.onnx.export at opset 17, static shapes, no constant folding.
Prints nothing.
"""
import os
import sys

import torch
from torch_export import export_with_loss

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples", "mlp"))
from make_model import BATCH, CLASSES, FEATURES, MLP  # noqa: E402

HIDDEN = 64


def build():
    torch.manual_seed(0)
    model = MLP(hidden=HIDDEN, activation=torch.tanh)
    model.eval()
    x = torch.randn(BATCH, FEATURES)
    labels = torch.randint(0, CLASSES, (BATCH,), dtype=torch.int64)
    return model, (x, labels)


def export(path):
    model, args = build()
    return export_with_loss(model, args, path, ["x", "labels"])


if __name__ == "__main__":
    export(sys.argv[1])
