"""transformers' LlamaForCausalLM at a small size with grouped-query
attention: vocabulary 64, 16 positions, width 32, 4 query heads sharing 2
key/value heads, 2 layers, SwiGLU MLP of 64, RMSNorm, rotary positions, eager
attention, no dropout, untied output head. The loss is the model's shifted
language-modelling cross-entropy.

Inputs: idx, targets (4x16 int64). Usage: llama.py OUT.onnx"""
import sys

from transformers import LlamaConfig, LlamaForCausalLM

import common

NAMES = ["idx", "targets"]
VOCAB, SEQ, BATCH = 64, 16, 4


def make_model(kv_heads=2):
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=kv_heads,
                         max_position_embeddings=SEQ, attention_dropout=0.0,
                         use_cache=False, attn_implementation="eager")
    return common.LanguageModelLoss(LlamaForCausalLM(config))


build, export = common.entry_points(make_model, common.token_inputs(VOCAB, BATCH, SEQ), NAMES)


if __name__ == "__main__":
    export(sys.argv[1])
