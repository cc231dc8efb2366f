"""transformers' GPTNeoXForCausalLM at a small size: vocabulary 64, 16
positions, width 32, 4 heads, 2 layers (attention and MLP in parallel),
rotary positions on a quarter of each head, untied head, no dropout. Its
fused q, k, v projection holds each head's q, k and v together, and its
scores are torch's baddbmm over [batch * heads] (merged dims, which
cleave-unmerge-batch-dims undoes, scaled and added to zeros). The loss is
the model's own shifted language-modelling cross-entropy.

Inputs: idx, targets (4x16 int64). Usage: gpt_neox.py OUT.onnx"""
import sys

from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

import common

NAMES = ["idx", "targets"]
VOCAB, SEQ, BATCH = 64, 16, 4


def make_model():
    config = GPTNeoXConfig(vocab_size=VOCAB, max_position_embeddings=SEQ, hidden_size=32,
                           num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                           attention_dropout=0.0, hidden_dropout=0.0, use_cache=False)
    return common.LanguageModelLoss(GPTNeoXForCausalLM(config))


build, export = common.entry_points(make_model, common.token_inputs(VOCAB, BATCH, SEQ), NAMES)


if __name__ == "__main__":
    export(sys.argv[1])
