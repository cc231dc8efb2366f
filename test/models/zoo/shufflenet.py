"""torchvision's ShuffleNetV2 at a small size (stages of 1 block, widths 8,
16, 32, 64 and 128, 10 classes) on 32x32 images: each block's channels
split in two (chunk) or sent down two branches, concatenated and shuffled
(a reshape, a transpose and a reshape), depthwise 3x3 convolutions,
BatchNorm in training mode. The loss is the cross-entropy of the logits.

Inputs: x (4x3x32x32 f32), labels (4 int64). Usage: shufflenet.py OUT.onnx"""
import sys

from torchvision.models.shufflenetv2 import ShuffleNetV2

import common

NAMES = ["x", "labels"]
CLASSES, BATCH = 10, 4


def make_model():
    return common.ClassifierLoss(ShuffleNetV2([1, 1, 1], [8, 16, 32, 64, 128],
                                              num_classes=CLASSES))


build, export = common.entry_points(make_model, common.image_inputs(CLASSES, BATCH), NAMES,
                                    training_mode=True)


if __name__ == "__main__":
    export(sys.argv[1])
