"""Forward-pass time of cleave's compiled program against onnxruntime.

    .venv/bin/python bench/forward_vs_onnxruntime.py [--repeat N] [--threads T ...]

For each model (an MLP, a GPT-style decoder and a CNN, larger than the test
models), exports it with torch, compiles it with `cleave compile`, checks that
both runtimes agree on the loss, then times N forwards of each with the same
thread count, in the same run, and prints the ratio cleave / onnxruntime of the
fastest forward (below 1 means cleave is faster), and the fraction of this
machine's measured GEMM peak cleave's forward reaches (bench/gemm_peak.py).
cleave's time is measured by its driver (--stats) around the forward alone;
onnxruntime's around session.run with the inputs already built. Nothing is
written but a temporary directory.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F

from gemm_peak import fraction_of_peak, measured_peaks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLEAVE = os.path.join(ROOT, "build", "bin", "cleave")


class MLP(nn.Module):
    def __init__(self, features=256, hidden=1024, classes=10):
        super().__init__()
        self.fc1 = nn.Linear(features, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, classes)

    def forward(self, x, labels):
        return F.cross_entropy(self.fc3(F.gelu(self.fc2(F.relu(self.fc1(x))))), labels)


class Block(nn.Module):
    def __init__(self, d, heads, seq):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.register_buffer("mask", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        shape = (b, t, self.heads, d // self.heads)
        q, k, v = (z.reshape(shape).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / (d // self.heads) ** 0.5
        att = att.masked_fill(self.mask == 0, float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab=512, d=128, heads=4, seq=64, layers=2):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads, seq) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)
        self.vocab, self.seq = vocab, seq

    def forward(self, idx, targets):
        x = self.tok(idx) + self.pos(torch.arange(self.seq).unsqueeze(0))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.reshape(-1, self.vocab), targets.reshape(-1))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 32, 3, padding=1), nn.Conv2d(32, 64, 3, padding=1)
        self.fc = nn.Linear(64, 10)

    def forward(self, x, labels):
        h = F.max_pool2d(F.relu(self.c1(x)), 2)
        h = F.adaptive_avg_pool2d(F.relu(self.c2(h)), 1).flatten(1)
        return F.cross_entropy(self.fc(h), labels)


def models():
    torch.manual_seed(0)
    yield "mlp (256-1024-1024-10, batch 64)", MLP(), (
        torch.randn(64, 256), torch.randint(0, 10, (64,)))
    yield "gpt (2 layers, d 128, seq 64, batch 8)", GPT(), (
        torch.randint(0, 512, (8, 64)), torch.randint(0, 512, (8, 64)))
    yield "cnn (2 conv, 32x32 images, batch 16)", CNN(), (
        torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,)))


def export(model, args, path, **options):
    """Exports `model` on `args` (inputs "a" and "b", output "loss") the way
    both benches compile it; `options` go to torch.onnx.export."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, path, opset_version=17, do_constant_folding=False,
                          input_names=["a", "b"], output_names=["loss"], **options)


def bench(name, model, args, workdir, repeat, threads, peaks):
    model.eval()
    path = os.path.join(workdir, "model.onnx")
    export(model, args, path)
    out = os.path.join(workdir, "out")
    subprocess.run([CLEAVE, "compile", path, "-o", out], check=True)
    flags = []
    feeds = {}
    for input_name, value in zip(["a", "b"], args):
        file = os.path.join(workdir, input_name + ".npy")
        np.save(file, value.numpy())
        flags += ["--input", f"{input_name}={file}"]
        feeds[input_name] = value.numpy()
    rows = []
    for t in threads:
        run = subprocess.run([CLEAVE, "run", out, *flags, "--threads", str(t), "--repeat",
                              str(repeat), "--stats", "--output-dir", workdir],
                             check=True, capture_output=True, text=True)
        ours = json.loads(run.stdout.strip().splitlines()[-1])["seconds_min"]
        options = ort.SessionOptions()
        options.intra_op_num_threads = t
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        reference = session.run(None, feeds)[0]
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            session.run(None, feeds)
            times.append(time.perf_counter() - start)
        loss = float(np.load(os.path.join(workdir, "loss.npy")))
        if abs(loss - float(reference)) > 1e-4 * abs(float(reference)):
            sys.exit(f"{name}: cleave's loss {loss} differs from onnxruntime's {reference}")
        rows.append((t, ours, min(times), fraction_of_peak(out, ours, peaks[t])))
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    options = parser.parse_args()
    print(f"onnxruntime {ort.__version__}, torch {torch.__version__}, "
          f"{os.cpu_count()} cpus, best of {options.repeat} forwards")
    peaks = measured_peaks(options.threads)
    print(f"{'model':42} {'threads':>7} {'cleave ms':>10} {'ort ms':>9} {'ratio':>6} "
          f"{'of peak':>8}")
    for name, model, args in models():
        with tempfile.TemporaryDirectory() as workdir:
            for t, ours, theirs, fraction in bench(name, model, args, workdir, options.repeat,
                                                   options.threads, peaks):
                print(f"{name:42} {t:>7} {ours * 1e3:>10.3f} {theirs * 1e3:>9.3f} "
                      f"{ours / theirs:>6.2f} {fraction:>8.1%}")


if __name__ == "__main__":
    main()
