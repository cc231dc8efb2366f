"""torchvision's mobilenet_v3_small at width multiplier 0.25 (10 classes; no
dropout: the classifier's Dropout(p=0) replaced by the identity) on 32x32
images: squeeze-and-excitation blocks, Hardswish and Hardsigmoid, depthwise
convolutions, BatchNorm in training mode, and a classifier of two Linears
(net.classifier.0 and net.classifier.3) around a Hardswish. The loss is the
cross-entropy of the logits.

Inputs: x (4x3x32x32 f32), labels (4 int64). Usage: mobilenet_v3_small.py OUT.onnx"""
import sys

import torchvision

import common

NAMES = ["x", "labels"]
CLASSES, BATCH = 10, 4


def make_model():
    net = torchvision.models.mobilenet_v3_small(num_classes=CLASSES, width_mult=0.25, dropout=0.0)
    return common.classifier_loss_without_dropout(net)


build, export = common.entry_points(make_model, common.image_inputs(CLASSES, BATCH), NAMES,
                                    training_mode=True)


if __name__ == "__main__":
    export(sys.argv[1])
