"""The data set the checkpoint tests train examples/mlp/model.onnx on: `rows`
samples of 32 normal features drawn from `seed`, each labelled by the
largest of its first 10 (a task the MLP learns), saved as WORK/x.npy and
WORK/labels.npy.

    mlp_data.save(work, seed)     # then --data x=WORK/x.npy,labels=WORK/labels.npy
"""
import numpy as np


def save(work, seed, rows=40):
    x = np.random.default_rng(seed).standard_normal((rows, 32)).astype(np.float32)
    np.save(f"{work}/x.npy", x)
    np.save(f"{work}/labels.npy", np.argmax(x[:, :10], axis=1).astype(np.int64))
