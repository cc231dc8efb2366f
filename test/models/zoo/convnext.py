"""torchvision's ConvNeXt at a small size: 32x32 RGB images, a 4x4 patch
stem, two stages (width 16 and 32, one block each) with a downsampling
between: 7x7 depthwise convolutions, LayerNorm over channels (the block's
permutes to channels-last and back; LayerNorm2d around the downsampling),
GELU, and a per-channel layer scale (0.5 here: torchvision's 1e-6 would
leave the blocks' gradients near zero); no stochastic depth, 10 classes.

Inputs: x (4x3x32x32 f32), labels (4 int64). Usage: convnext.py OUT.onnx"""
import sys

from torchvision.models.convnext import CNBlockConfig, ConvNeXt

import common

NAMES = ["x", "labels"]
CLASSES, BATCH = 10, 4


def make_model():
    stages = [CNBlockConfig(16, 32, 1), CNBlockConfig(32, None, 1)]
    return common.ClassifierLoss(ConvNeXt(stages, stochastic_depth_prob=0.0, layer_scale=0.5,
                                          num_classes=CLASSES))


build, export = common.entry_points(make_model, common.image_inputs(CLASSES, BATCH), NAMES)


if __name__ == "__main__":
    export(sys.argv[1])
