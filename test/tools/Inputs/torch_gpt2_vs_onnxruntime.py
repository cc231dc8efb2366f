"""The GPU check times examples/gpt2's decoder against scripts/gpu-check/
torch_gpt2.py: they must be the same model. From one set of check.py's random
parameters, onnxruntime running make_model.py's graph and the PyTorch module
give the same loss on the same batch (1e-5 relative: fp32 in both).

    torch_gpt2_vs_onnxruntime.py ROOT
"""
import importlib.util
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import numpy_helper

ROOT = sys.argv[1]
sys.path.insert(0, os.path.join(ROOT, "scripts", "gpu-check"))
from check import random_parameters  # noqa: E402
from torch_gpt2 import Gpt2  # noqa: E402

LAYERS, WIDTH, HEADS, VOCAB, SEQ, BATCH = 2, 64, 4, 512, 32, 2

spec = importlib.util.spec_from_file_location(
    "make_model", os.path.join(ROOT, "examples", "gpt2", "make_model.py"))
make_model = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_model)
model, _ = make_model.build(LAYERS, WIDTH, HEADS, VOCAB, SEQ, "unused.bin")
rng = np.random.default_rng(0)
values = random_parameters(
    {"parameters": [{"name": t.name, "shape": list(t.dims)} for t in model.graph.initializer]},
    rng)
initializers = [numpy_helper.from_array(values[t.name], t.name) for t in model.graph.initializer]
del model.graph.initializer[:]
model.graph.initializer.extend(initializers)

idx = rng.integers(0, VOCAB, (BATCH, SEQ)).astype(np.int64)
targets = rng.integers(0, VOCAB, (BATCH, SEQ)).astype(np.int64)
session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
reference = float(session.run(None, {"idx": idx, "targets": targets})[0])

peer = Gpt2(LAYERS, WIDTH, HEADS, VOCAB, SEQ)
peer.load_state_dict({name: torch.from_numpy(value) for name, value in values.items()})
with torch.no_grad():
    loss = float(peer(torch.from_numpy(idx), torch.from_numpy(targets)))
difference = abs(loss - reference) / abs(reference)
print(f"onnxruntime {reference:.7f}, torch_gpt2 {loss:.7f}: {difference:.1e}")
assert difference <= 1e-5, "torch_gpt2.py is not examples/gpt2's model"
