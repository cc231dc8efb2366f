"""transformers' T5ForConditionalGeneration in its v1.1 form at a small
size: t5.py's sizes, with a gated-GELU feed-forward (wi_0 and wi_1) and an
output head of its own (lm_head, not tied to the shared embedding), no
dropout. The encoder reads idx; the decoder reads targets shifted right, and
the loss is the model's own cross-entropy against targets.

Inputs: idx, targets (4x8 int64). Usage: t5_v1_1.py OUT.onnx"""
import sys

from transformers import T5Config, T5ForConditionalGeneration

import common
import t5

NAMES = t5.NAMES


def make_model():
    config = T5Config(vocab_size=t5.VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                      num_heads=4, dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0,
                      feed_forward_proj="gated-gelu", tie_word_embeddings=False,
                      use_cache=False)
    return common.LanguageModelLoss(T5ForConditionalGeneration(config))


build, export = common.entry_points(make_model,
                                    common.token_inputs(t5.VOCAB, t5.BATCH, t5.SEQ), NAMES)


if __name__ == "__main__":
    export(sys.argv[1])
