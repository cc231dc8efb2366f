"""torchvision's resnet18 (full width, 10 classes) on 32x32 images, trained
with BatchNorm in training mode: exported with
torch.onnx.TrainingMode.TRAINING and compared with model.train(). The loss is
the cross-entropy of the logits.

Inputs: x (4x3x32x32 f32), labels (4 int64). Usage: resnet18.py OUT.onnx"""
import sys

import torchvision

import common

NAMES = ["x", "labels"]
CLASSES, BATCH = 10, 4


def make_model():
    net = torchvision.models.resnet18(num_classes=CLASSES)
    return common.ClassifierLoss(net)


build, export = common.entry_points(make_model, common.image_inputs(CLASSES, BATCH), NAMES,
                                    training_mode=True)


if __name__ == "__main__":
    export(sys.argv[1])
