"""torchvision's mobilenet_v2 at width multiplier 0.25 (10 classes; no
dropout: the classifier's Dropout(p=0) replaced by the identity) on 32x32
images: depthwise (grouped) convolutions, ReLU6, BatchNorm in training mode
(exported with torch.onnx.TrainingMode.TRAINING and compared with
model.train()). The loss is the cross-entropy of the logits.

Inputs: x (4x3x32x32 f32), labels (4 int64). Usage: mobilenet_v2.py OUT.onnx"""
import sys

import torch
import torch.nn.functional as F
import torchvision

import common

NAMES = ["x", "labels"]
CLASSES, BATCH = 10, 4
TRAINING_MODE = True  # BatchNorm


class WithLoss(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torchvision.models.mobilenet_v2(num_classes=CLASSES, width_mult=0.25,
                                                   dropout=0.0)
        # The classifier's Dropout(p=0) is the identity; without it the graph
        # has no training-mode Dropout op (whose masks are cleave's own).
        self.net.classifier[0] = torch.nn.Identity()

    def forward(self, x, labels):
        return F.cross_entropy(self.net(x), labels)


def build():
    torch.manual_seed(0)
    model = common.distinct(WithLoss())
    g = torch.Generator().manual_seed(1)
    x = torch.randn((BATCH, 3, 32, 32), generator=g)
    return model.train(), (x, common.labels(CLASSES, (BATCH,), g))


def export(path, batch=None):
    return common.export(sys.modules[__name__], path, batch, training_mode=True)


if __name__ == "__main__":
    export(sys.argv[1])
