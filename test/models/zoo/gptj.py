"""transformers' GPTJForCausalLM at a small size: vocabulary 64, 16
positions, width 32, 4 heads, 2 blocks (attention and MLP in parallel),
rotary positions on 4 dims of each head, untied head, no dropout. Its
rotary tables are cut by a Split of a constant shape, which cleave folds
at import. The loss is the model's own shifted language-modelling
cross-entropy.

Inputs: idx, targets (4x16 int64). Usage: gptj.py OUT.onnx"""
import sys

from transformers import GPTJConfig, GPTJForCausalLM

import common

NAMES = ["idx", "targets"]
VOCAB, SEQ, BATCH = 64, 16, 4


def make_model():
    config = GPTJConfig(vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=4,
                        rotary_dim=4, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        use_cache=False)
    return common.LanguageModelLoss(GPTJForCausalLM(config))


build, export = common.entry_points(make_model, common.token_inputs(VOCAB, BATCH, SEQ), NAMES)


if __name__ == "__main__":
    export(sys.argv[1])
