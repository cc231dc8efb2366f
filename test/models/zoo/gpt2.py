"""transformers' GPT2LMHeadModel at a small size: vocabulary 64, 16
positions, width 32, 2 heads, 2 blocks, no dropout, the output head tied to
the token embedding. The loss is the model's own shifted language-modelling
cross-entropy (targets of -100 are ignored).

Inputs: idx, targets (4x16 int64). Usage: gpt2.py OUT.onnx"""
import sys

from transformers import GPT2Config, GPT2LMHeadModel

import common

NAMES = ["idx", "targets"]
VOCAB, SEQ, BATCH = 64, 16, 4


def make_model():
    config = GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=2,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
    return common.LanguageModelLoss(GPT2LMHeadModel(config))


build, export = common.entry_points(make_model, common.token_inputs(VOCAB, BATCH, SEQ), NAMES)


if __name__ == "__main__":
    export(sys.argv[1])
