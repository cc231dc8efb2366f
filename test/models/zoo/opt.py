"""transformers' OPTForCausalLM at a small size: vocabulary 64, 16
positions, width 32, 4 heads, 2 decoder layers, feed-forward 64, no
dropout, the output head tied to the token embedding. Its attention merges
[batch, heads] into one dim around the scores' products and softmax (the
reshapes cleave-unmerge-batch-dims undoes). The loss is the model's own
shifted language-modelling cross-entropy.

Inputs: idx, targets (4x16 int64). Usage: opt.py OUT.onnx"""
import sys

from transformers import OPTConfig, OPTForCausalLM

import common

NAMES = ["idx", "targets"]
VOCAB, SEQ, BATCH = 64, 16, 4


def make_model():
    config = OPTConfig(vocab_size=VOCAB, max_position_embeddings=SEQ, hidden_size=32,
                       word_embed_proj_dim=32, num_hidden_layers=2, num_attention_heads=4,
                       ffn_dim=64, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                       layerdrop=0.0, use_cache=False, pad_token_id=None)
    return common.LanguageModelLoss(OPTForCausalLM(config))


build, export = common.entry_points(make_model, common.token_inputs(VOCAB, BATCH, SEQ), NAMES)


if __name__ == "__main__":
    export(sys.argv[1])
