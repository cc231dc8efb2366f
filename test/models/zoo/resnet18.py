"""torchvision's resnet18 (full width, 10 classes) on 32x32 images, trained
with BatchNorm in training mode: exported with
torch.onnx.TrainingMode.TRAINING and compared with model.train(). The loss is
the cross-entropy of the logits.

Inputs: x (4x3x32x32 f32), labels (4 int64). Usage: resnet18.py OUT.onnx"""
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
        self.net = torchvision.models.resnet18(num_classes=CLASSES)

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
