"""torchvision's Swin Transformer at a small size: 32x32 RGB images in 4x4
patches (an 8x8 grid), width 32, two stages of 2 blocks (2 and 4 heads)
with a patch merging between, windows of 3x3, so that each block pads its
grid to whole windows (torch's F.pad, whose pads reach the ONNX graph
reversed through a transpose of a constant) and every second one shifts
them (a roll); no stochastic depth, 10 classes.

Inputs: x (4x3x32x32 f32), labels (4 int64). Usage: swin.py OUT.onnx"""
import sys

from torchvision.models.swin_transformer import _swin_transformer

import common

NAMES = ["x", "labels"]
CLASSES, BATCH = 10, 4


def make_model():
    return common.ClassifierLoss(_swin_transformer(
        patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=[3, 3],
        stochastic_depth_prob=0.0, weights=None, progress=False, num_classes=CLASSES))


build, export = common.entry_points(make_model, common.image_inputs(CLASSES, BATCH), NAMES)


if __name__ == "__main__":
    export(sys.argv[1])
