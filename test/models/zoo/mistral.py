"""transformers' MistralForCausalLM at a small size: LLaMA's blocks (grouped-
query attention, 4 query heads sharing 2 key/value heads, SwiGLU MLP of 64,
RMSNorm, rotary positions) with a sliding attention window of 8 positions
over a sequence of 16, so the window's mask matters; vocabulary 64, width
32, 2 layers, eager attention, no dropout. Its module names are LLaMA's, so
plans/zoo-llama.json splits it. The loss is the model's shifted
language-modelling cross-entropy.

Inputs: idx, targets (4x16 int64). Usage: mistral.py OUT.onnx"""
import sys

from transformers import MistralConfig, MistralForCausalLM

import common

NAMES = ["idx", "targets"]
VOCAB, SEQ, BATCH = 64, 16, 4


def make_model():
    config = MistralConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                           max_position_embeddings=SEQ, sliding_window=8, attention_dropout=0.0,
                           use_cache=False, attn_implementation="eager")
    return common.LanguageModelLoss(MistralForCausalLM(config))


build, export = common.entry_points(make_model, common.token_inputs(VOCAB, BATCH, SEQ), NAMES)


if __name__ == "__main__":
    export(sys.argv[1])
