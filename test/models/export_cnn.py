"""Export a small CNN with its cross-entropy loss to ONNX.

Usage: export_cnn.py OUT.onnx

Conv2d -> BatchNorm2d -> ReLU -> MaxPool2d -> Conv2d -> BatchNorm2d -> ReLU ->
AdaptiveAvgPool2d(1) (GlobalAveragePool) -> Flatten -> Linear -> F.cross_entropy.
BatchNorm runs in eval mode (running statistics are float initializers). The
export uses TrainingMode.PRESERVE: with the default (EVAL) torch 1.13 folds
each BatchNorm into the preceding Conv even without constant folding, and the
folded weights lose their torch names.

Graph inputs: x (4x3x16x16 f32), labels (4 int64). Output: loss (scalar f32).
Exported with torch.onnx.export at opset 17, static shapes, no constant folding.
Prints nothing.
"""
import sys
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch_export import export_with_loss

BATCH, CHANNELS, SIZE, CLASSES = 4, 3, 16, 10


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(CHANNELS, 8, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, kernel_size=3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(16, CLASSES)

    def forward(self, x, labels):
        h = self.pool1(F.relu(self.bn1(self.conv1(x))))
        h = F.relu(self.bn2(self.conv2(h)))
        logits = self.fc(self.flatten(self.gap(h)))
        return F.cross_entropy(logits, labels)


def build():
    torch.manual_seed(0)
    model = CNN()
    # BatchNorm starts at weight 1, bias 0, mean 0, var 1; the exporter merges
    # initializers with equal contents and drops their names, so give every
    # one its own values: random affine parameters, and running statistics
    # from a few training-mode batches.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
        model.train()
        for _ in range(3):
            model(torch.randn(BATCH, CHANNELS, SIZE, SIZE),
                  torch.zeros(BATCH, dtype=torch.int64))
    model.eval()
    x = torch.randn(BATCH, CHANNELS, SIZE, SIZE)
    labels = torch.randint(0, CLASSES, (BATCH,), dtype=torch.int64)
    return model, (x, labels)


def export(path):
    model, args = build()
    return export_with_loss(model, args, path, ["x", "labels"],
                            training=torch.onnx.TrainingMode.PRESERVE)


if __name__ == "__main__":
    export(sys.argv[1])
