"""llama.py's LlamaForCausalLM with multi-query attention: its 4 query heads
share one key/value head, fewer than the ranks of tp=2, so
plans/zoo-llama_mqa.json splits the query heads and keeps the key and value
projections whole (each rank slices the heads its queries read).

Inputs: idx, targets (4x16 int64). Usage: llama_mqa.py OUT.onnx"""
import sys

import common
import llama

NAMES = llama.NAMES

build, export = common.entry_points(lambda: llama.make_model(kv_heads=1),
                                    common.token_inputs(llama.VOCAB, llama.BATCH, llama.SEQ),
                                    NAMES)


if __name__ == "__main__":
    export(sys.argv[1])
