"""transformers' T5ForConditionalGeneration at a small size: vocabulary 64,
width 32, 4 heads of 8, feed-forward 64, 2 encoder and 2 decoder blocks,
no dropout, the output head tied to the shared embedding (scaled by
width^-0.5, as T5 does). The encoder reads idx; the decoder reads targets
shifted right (a ScatterND of int64), and the loss is the model's own
cross-entropy against targets (-100 ignored).

Inputs: idx, targets (4x8 int64). Usage: t5.py OUT.onnx"""
import sys

from transformers import T5Config, T5ForConditionalGeneration

import common

NAMES = ["idx", "targets"]
VOCAB, SEQ, BATCH = 64, 8, 4


def make_model():
    config = T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                      dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0,
                      use_cache=False)
    return common.LanguageModelLoss(T5ForConditionalGeneration(config))


build, export = common.entry_points(make_model, common.token_inputs(VOCAB, BATCH, SEQ), NAMES)


if __name__ == "__main__":
    export(sys.argv[1])
