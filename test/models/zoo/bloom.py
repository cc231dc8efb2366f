"""transformers' BloomForCausalLM at a small size: vocabulary 64, width 32,
4 heads, 2 layers, ALiBi position biases, the head tied to the token
embedding, no dropout. Its fused q, k, v projection holds each head's q, k
and v together, cut by gathers along their own dim, and its scores are
torch's baddbmm of the ALiBi biases over [batch * heads] (merged dims,
which cleave-unmerge-batch-dims undoes). The loss is the model's own
shifted language-modelling cross-entropy.

Inputs: idx, targets (4x16 int64). Usage: bloom.py OUT.onnx"""
import sys

from transformers import BloomConfig, BloomForCausalLM

import common

NAMES = ["idx", "targets"]
VOCAB, SEQ, BATCH = 64, 16, 4


def make_model():
    config = BloomConfig(vocab_size=VOCAB, hidden_size=32, n_layer=2, n_head=4,
                         hidden_dropout=0.0, attention_dropout=0.0, use_cache=False)
    return common.LanguageModelLoss(BloomForCausalLM(config))


build, export = common.entry_points(make_model, common.token_inputs(VOCAB, BATCH, SEQ), NAMES)


if __name__ == "__main__":
    export(sys.argv[1])
