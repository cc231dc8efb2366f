"""transformers' BertForMaskedLM at a small size: vocabulary 64, 16 positions,
width 32, 2 heads, 2 layers, intermediate 64, no dropout, the decoder tied to
the word embedding, no padding token (pad_token_id 0 would make row 0 of the
word embedding nn.Embedding's padding_idx, whose row PyTorch's lookup passes
no gradient; the exported Gather knows no padding row, so cleave would train
it). The loss is the model's masked-language-modelling
cross-entropy over every position whose label is not -100.

Inputs: idx, targets (4x16 int64). Usage: bert.py OUT.onnx"""
import sys

from transformers import BertConfig, BertForMaskedLM

import common

NAMES = ["idx", "targets"]
VOCAB, SEQ, BATCH = 64, 16, 4


def make_model():
    config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=SEQ, type_vocab_size=1, pad_token_id=None,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                        attn_implementation="eager")
    return common.LanguageModelLoss(BertForMaskedLM(config))


build, export = common.entry_points(make_model, common.token_inputs(VOCAB, BATCH, SEQ), NAMES)


if __name__ == "__main__":
    export(sys.argv[1])
