"""Export a small 3-layer MLP with its cross-entropy loss to ONNX.

Usage: export_mlp.py OUT.onnx

Graph inputs: x (8x32 f32), labels (8 int64). Output: loss (scalar f32).
Exported with torch.onnx.export at opset 17, static shapes, no constant folding.
Prints nothing.
"""
import sys
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch_export import export_with_loss

BATCH, FEATURES, HIDDEN, CLASSES = 8, 32, 64, 10


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(FEATURES, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, HIDDEN)
        self.fc3 = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x, labels):
        h = F.relu(self.fc1(x))
        h = torch.tanh(self.fc2(h))
        logits = self.fc3(h)
        return F.cross_entropy(logits, labels)


def build():
    torch.manual_seed(0)
    model = MLP()
    model.eval()
    x = torch.randn(BATCH, FEATURES)
    labels = torch.randint(0, CLASSES, (BATCH,), dtype=torch.int64)
    return model, (x, labels)


def export(path):
    model, args = build()
    return export_with_loss(model, args, path, ["x", "labels"])


if __name__ == "__main__":
    export(sys.argv[1])
