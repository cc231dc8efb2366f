"""torchvision's DenseNet at a small size (growth rate 8, two dense blocks
of 2 layers, 16 initial features, 10 classes) on 32x32 images: every layer
reads the concatenation of all the block's earlier feature maps, BatchNorm
in training mode before each convolution, a transition's average pooling.
The loss is the cross-entropy of the logits.

Inputs: x (4x3x32x32 f32), labels (4 int64). Usage: densenet.py OUT.onnx"""
import sys

from torchvision.models.densenet import DenseNet

import common

NAMES = ["x", "labels"]
CLASSES, BATCH = 10, 4


def make_model():
    return common.ClassifierLoss(DenseNet(growth_rate=8, block_config=(2, 2),
                                          num_init_features=16, num_classes=CLASSES))


build, export = common.entry_points(make_model, common.image_inputs(CLASSES, BATCH), NAMES,
                                    training_mode=True)


if __name__ == "__main__":
    export(sys.argv[1])
