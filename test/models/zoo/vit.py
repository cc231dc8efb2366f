"""transformers' ViTForImageClassification at a small size: 32x32 RGB
images in 8x8 patches (16 patches and the class token), width 32, 2 heads,
2 layers, intermediate 64, no dropout, 10 classes. The loss is the model's
cross-entropy of the class token's logits.

Inputs: x (4x3x32x32 f32), labels (4 int64). Usage: vit.py OUT.onnx"""
import sys

import torch
from transformers import ViTConfig, ViTForImageClassification

import common

NAMES = ["x", "labels"]
CLASSES, BATCH = 10, 4


class WithLoss(torch.nn.Module):
    def __init__(self):
        super().__init__()
        config = ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=32,
                           num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                           hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                           num_labels=CLASSES, problem_type="single_label_classification",
                           attn_implementation="eager")
        self.net = ViTForImageClassification(config)

    def forward(self, x, labels):
        return self.net(pixel_values=x, labels=labels).loss


build, export = common.entry_points(WithLoss, common.image_inputs(CLASSES, BATCH), NAMES)


if __name__ == "__main__":
    export(sys.argv[1])
