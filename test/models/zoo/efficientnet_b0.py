"""torchvision's efficientnet_b0 made small with the library's own scaling
knobs: width multiplier 0.25 and depth multiplier 0.25
(torchvision.models.efficientnet._efficientnet_conf("efficientnet_b0", ...),
which efficientnet_b1..b7 scale with too), so each of b0's 7 stages keeps its
expansion, kernel (3 or 5) and stride but has one MBConv block (16 blocks in
b0); 10 classes; no stochastic depth (stochastic_depth_prob=0: torch 1.13
cannot export its Bernoulli); no dropout (the classifier's Dropout(p=0)
replaced by the identity). On 32x32 images: depthwise (grouped) convolutions,
squeeze-and-excitation (a global average pool, two 1x1 convolutions, SiLU
and a sigmoid gate), SiLU (exported as x * sigmoid(x)), BatchNorm in training
mode (exported with torch.onnx.TrainingMode.TRAINING and compared with
model.train()). The loss is the cross-entropy of the logits.

Why this size: in PyTorch alone the full-size b0's float32 and float64
losses part by more than 1e-1 relative within 10 steps even at SGD lr 1e-7
(BatchNorm over 4 values per channel on 1x1 maps), so no float32 run of it
could be compared with PyTorch at 1e-4; its training program is also 12,300
generated lines (not compiled here; mobilenet_v2's 9,700 take g++ -O2 about
13 CPU minutes). At width 0.25 and depth 0.25 float32 and float64 stay
within 7.1e-6 (losses) and 3.3e-7 (parameters) over 10 steps of SGD at lr
1e-6, the zoo's setting for it, and its 5,600 lines compile in about 40 s.

Inputs: x (4x3x32x32 f32), labels (4 int64). Usage: efficientnet_b0.py OUT.onnx"""
import sys

from torchvision.models import efficientnet

import common

NAMES = ["x", "labels"]
CLASSES, BATCH = 10, 4
WIDTH, DEPTH = 0.25, 0.25


def make_model():
    setting, last_channel = efficientnet._efficientnet_conf("efficientnet_b0", width_mult=WIDTH,
                                                            depth_mult=DEPTH)
    net = efficientnet.EfficientNet(setting, dropout=0.0, stochastic_depth_prob=0.0,
                                    num_classes=CLASSES, last_channel=last_channel)
    return common.classifier_loss_without_dropout(net)


build, export = common.entry_points(make_model, common.image_inputs(CLASSES, BATCH), NAMES,
                                    training_mode=True)


if __name__ == "__main__":
    export(sys.argv[1])
