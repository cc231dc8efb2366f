"""transformers' LlamaForCausalLM at a small size with grouped-query
attention: vocabulary 64, 16 positions, width 32, 4 query heads sharing 2
key/value heads, 2 layers, SwiGLU MLP of 64, RMSNorm, rotary positions, eager
attention, no dropout, untied output head. The loss is the model's shifted
language-modelling cross-entropy.

Inputs: idx, targets (4x16 int64). Usage: llama.py OUT.onnx"""
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM

import common

NAMES = ["idx", "targets"]
VOCAB, SEQ, BATCH = 64, 16, 4


class WithLoss(torch.nn.Module):
    def __init__(self):
        super().__init__()
        config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                             max_position_embeddings=SEQ, attention_dropout=0.0,
                             use_cache=False, attn_implementation="eager")
        self.net = LlamaForCausalLM(config)

    def forward(self, idx, targets):
        return self.net(input_ids=idx, labels=targets).loss


def build():
    torch.manual_seed(0)
    model = common.distinct(WithLoss())
    g = torch.Generator().manual_seed(1)
    idx = common.labels(VOCAB, (BATCH, SEQ), g)
    targets = common.labels(VOCAB, (BATCH, SEQ), g)
    return model.train(), (idx, targets)


def export(path, batch=None):
    return common.export(sys.modules[__name__], path, batch)


if __name__ == "__main__":
    export(sys.argv[1])
