"""Export a small CNN without BatchNorm, for training against PyTorch.

Usage: export_cnn_train.py OUT.onnx

Conv2d(3 -> 8, 3x3, pad 1) -> ReLU -> MaxPool2d(3, stride 2, pad 1)
(overlapping windows) -> Conv2d(8 -> 16, 3x3, stride 2, pad 1, groups 2) ->
ReLU -> AvgPool2d(3, stride 2, pad 1, ceil_mode, count_include_pad=False) ->
AdaptiveAvgPool2d(1) -> Flatten -> Linear -> F.cross_entropy. Every layer
trains the same in eval and train mode, so PyTorch's steps are cleave's.

Graph inputs: x (4x3x15x15 f32), labels (4 int64). Output: loss (scalar f32).
Exported with torch.onnx.export at opset 17, static shapes, no constant folding.
Prints nothing.
"""
import sys
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch_export import export_with_loss

BATCH, CHANNELS, SIZE, CLASSES = 4, 3, 15, 10


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(CHANNELS, 8, kernel_size=3, padding=1)
        self.pool1 = nn.MaxPool2d(3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(8, 16, kernel_size=3, stride=2, padding=1, groups=2)
        self.pool2 = nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True,
                                  count_include_pad=False)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(16, CLASSES)

    def forward(self, x, labels):
        h = self.pool1(F.relu(self.conv1(x)))
        h = self.pool2(F.relu(self.conv2(h)))
        logits = self.fc(self.flatten(self.gap(h)))
        return F.cross_entropy(logits, labels)


def build():
    torch.manual_seed(0)
    model = CNN()
    model.eval()
    x = torch.randn(BATCH, CHANNELS, SIZE, SIZE)
    labels = torch.randint(0, CLASSES, (BATCH,), dtype=torch.int64)
    return model, (x, labels)


def export(path):
    model, args = build()
    return export_with_loss(model, args, path, ["x", "labels"])


if __name__ == "__main__":
    export(sys.argv[1])
