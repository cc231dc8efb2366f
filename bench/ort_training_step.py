"""onnxruntime-training's side of bench/train_step_vs_ort_training.py, run in
the venv that has onnxruntime-training (it conflicts with onnxruntime).

    python ort_training_step.py MODEL.onnx PARAMS.txt WORKDIR THREADS STEPS INPUT.npy...

Builds the training artifacts of MODEL (its only output is the loss; the
parameters named in PARAMS.txt train) with AdamW, then times STEPS steps
(forward and backward, the optimizer's step, the gradients' reset) on the
inputs, and prints {"median_ms": ..., "loss": ...} as JSON."""
import json
import os
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.training import artifacts
from onnxruntime.training.api import CheckpointState, Module, Optimizer


def with_saved_statistics(model):
    """The gradient builders read LayerNormalization's mean and inverse
    standard deviation and SoftmaxCrossEntropyLoss's log-probabilities, which
    torch's export leaves out: each gets its outputs."""
    for i, node in enumerate(model.graph.node):
        wanted = {"LayerNormalization": 3, "SoftmaxCrossEntropyLoss": 2}.get(node.op_type, 0)
        while len(node.output) < wanted:
            node.output.append(f"bench_saved_{i}_{len(node.output)}")
    return model


def main():
    path, params_file, workdir, threads, steps = sys.argv[1:6]
    inputs = [np.load(p) for p in sys.argv[6:]]
    model = with_saved_statistics(onnx.load(path))
    initializers = {t.name for t in model.graph.initializer}
    params = [n for n in open(params_file).read().split() if n in initializers]
    os.makedirs(workdir, exist_ok=True)
    artifacts.generate_artifacts(model, requires_grad=params, frozen_params=[], loss=None,
                                 optimizer=artifacts.OptimType.AdamW, artifact_directory=workdir)
    options = ort.SessionOptions()
    options.intra_op_num_threads = int(threads)
    options.inter_op_num_threads = 1
    state = CheckpointState.load_checkpoint(os.path.join(workdir, "checkpoint"))
    module = Module(os.path.join(workdir, "training_model.onnx"), state,
                    os.path.join(workdir, "eval_model.onnx"), session_options=options)
    optimizer = Optimizer(os.path.join(workdir, "optimizer_model.onnx"), module)
    optimizer.set_learning_rate(1e-3)
    module.train()
    times = []
    for _ in range(int(steps)):
        start = time.perf_counter()
        loss = module(*inputs)
        optimizer.step()
        module.lazy_reset_grad()
        times.append(time.perf_counter() - start)
    print(json.dumps({"median_ms": float(np.median(times)) * 1e3, "loss": float(loss)}))


if __name__ == "__main__":
    main()
