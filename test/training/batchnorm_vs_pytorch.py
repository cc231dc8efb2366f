# BatchNorm in training mode trains as PyTorch's model.train(): the CNN of
# export_cnn.py (two BatchNorm2d), exported in training mode, is trained for
# STEPS steps with momentum, and every step's loss, the final parameters and
# the final running statistics (read back from --save-onnx's model) must equal
# PyTorch's within 1e-4:
# - one device, the whole batch a microbatch;
# - --grad-accum 2: each microbatch normalizes with its own statistics and
#   updates the running ones, as two PyTorch forwards of half a batch do;
# - dp=2: each rank normalizes its half, so the losses equal the one-device
#   --grad-accum 2 run within 1e-5; the running statistics are rank 0's,
#   updated from its halves only, as DDP keeps them (broadcast from rank 0);
# - dp=2 with --sync-batchnorm: the statistics of both halves together, so
#   PyTorch's step on the whole batch;
# - dp=2 resumed from a checkpoint: bit-identical to the uninterrupted run.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import copy
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))

import export_cnn  # noqa: E402
from torch_export import export_with_loss  # noqa: E402

STEPS = 8
BATCHES = 3
LR, MOMENTUM = 0.05, 0.9


def export(path):
    """The CNN in training mode, with the state the file holds (the export
    runs a training-mode forward, which moves the running statistics)."""
    model, args = export_cnn.build()
    model.train()
    export_with_loss(model, args, path, ["x", "labels"],
                     training=torch.onnx.TrainingMode.TRAINING,
                     dynamic_axes={"x": {0: "batch"}, "labels": {0: "batch"}})
    exported = {t.name: torch.from_numpy(onnx.numpy_helper.to_array(t).copy())
                for t in onnx.load(path).graph.initializer}
    state = model.state_dict()
    missing = [name for name in state if name not in exported and "num_batches" not in name]
    if missing:
        sys.exit(f"FAIL: the export has no initializer {missing[0]}")
    model.load_state_dict({**state, **{k: v for k, v in exported.items() if k in state}})
    return model, args


def pytorch_run(model, data, batch, parts, ranks=1):
    """Losses of STEPS steps of `batch` samples (file order), each step's
    batch cut into `parts` microbatches whose gradients are averaged by their
    counts; with `ranks`, the running statistics kept are those rank 0's
    microbatches alone give (DDP's), the losses those of every microbatch."""
    model = copy.deepcopy(model)
    rank0 = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    samples = len(data["x"])
    micro = batch // parts
    losses = []
    for step in range(STEPS):
        start = (step * batch) % samples
        opt.zero_grad()
        total = 0.0
        for part in range(parts):
            lo = start + part * micro
            x = torch.from_numpy(data["x"][lo:lo + micro])
            labels = torch.from_numpy(data["labels"][lo:lo + micro])
            loss = model(x, labels) / parts
            loss.backward()
            total += float(loss)
            if ranks > 1 and part % ranks == 0:
                # Rank 0's copy: the same weights, its own running statistics.
                weights = {k: v for k, v in model.state_dict().items() if "running" not in k}
                rank0.load_state_dict(weights, strict=False)
                with torch.no_grad():
                    rank0(x, labels)
        opt.step()
        losses.append(total)
    stats = rank0 if ranks > 1 else model
    return losses, model, {k: v.numpy() for k, v in stats.state_dict().items() if "running" in k}


def cleave_run(path, data_flags, workdir, name, compile_flags, ranks=1):
    out = os.path.join(workdir, name)
    subprocess.run(["cleave", "compile", path, "-o", out, "--train", "--optimizer", "momentum",
                    "--lr", str(LR), "--momentum", str(MOMENTUM), *compile_flags], check=True)
    metrics = os.path.join(workdir, name + ".json")
    trained = os.path.join(workdir, name + ".trained.onnx")
    run = ["cleave", "run", out, *data_flags, "--steps", str(STEPS), "--no-shuffle",
           "--log-json", metrics, "--save-onnx", trained, "--quiet"]
    if ranks > 1:
        run[2:2] = ["-n", str(ranks)]
    subprocess.run(run, check=True)
    losses = [s["loss"] for s in json.load(open(metrics))["steps"]]
    tensors = {t.name: onnx.numpy_helper.to_array(t)
               for t in onnx.load(trained).graph.initializer}
    return losses, tensors


def compare(label, ours, theirs, tensors, model, stats, tolerance=1e-4):
    problems = []
    if len(ours) != STEPS:
        problems.append(f"{len(ours)} steps logged, expected {STEPS}")
    for step, (a, b) in enumerate(zip(ours, theirs), start=1):
        if abs(a - b) > tolerance * abs(b):
            problems.append(f"step {step}: loss {a:.7f}, pytorch {b:.7f}")
            break
    expected = {name: p.detach().numpy() for name, p in model.named_parameters()}
    expected.update(stats)
    for name, value in expected.items():
        if name not in tensors:
            problems.append(f"{name} is not in the trained model")
            continue
        error = np.abs(tensors[name] - value).max()
        if error > tolerance * max(np.abs(value).max(), 1e-6):
            problems.append(f"final {name} differs by {error:.2e}")
    print(f"{label}: losses {ours[0]:.6f} -> {ours[-1]:.6f} "
          f"(pytorch {theirs[0]:.6f} -> {theirs[-1]:.6f}); running_var of bn1 "
          f"{tensors['bn1.running_var'][:2]} (pytorch {stats['bn1.running_var'][:2]})")
    return [f"{label}: {p}" for p in problems]


def main():
    workdir = sys.argv[1]
    path = os.path.join(workdir, "cnn_bn.onnx")
    model, args = export(path)
    batch = args[0].shape[0]
    rng = np.random.default_rng(0)
    data = {"x": rng.standard_normal((batch * BATCHES,) + tuple(args[0].shape[1:]))
            .astype(np.float32),
            "labels": rng.integers(0, export_cnn.CLASSES, batch * BATCHES).astype(np.int64)}
    data_flags = []
    for name, array in data.items():
        file = os.path.join(workdir, name + ".npy")
        np.save(file, array)
        data_flags += ["--data", f"{name}={file}"]

    problems = []
    ours, tensors = cleave_run(path, data_flags, workdir, "one", ["--batch-size", str(batch)])
    theirs, trained, stats = pytorch_run(model, data, batch, 1)
    problems += compare("one device", ours, theirs, tensors, trained, stats)

    accum, tensors = cleave_run(path, data_flags, workdir, "accum",
                                ["--grad-accum", "2", "--batch-size", str(batch)])
    theirs, trained, stats = pytorch_run(model, data, batch, 2)
    problems += compare("--grad-accum 2", accum, theirs, tensors, trained, stats)

    dp, tensors = cleave_run(path, data_flags, workdir, "dp",
                             ["--mesh", "dp=2", "--batch-size", str(batch)], ranks=2)
    theirs, trained, stats = pytorch_run(model, data, batch, 2, ranks=2)
    problems += compare("dp=2", dp, theirs, tensors, trained, stats)
    for step, (a, b) in enumerate(zip(dp, accum), start=1):
        if abs(a - b) > 1e-5 * abs(b):
            problems.append(f"dp=2: step {step}: loss {a:.8f}, one device with --grad-accum 2 "
                            f"{b:.8f}")
            break

    # The running statistics are checkpointed: dp=2 resumed from step 4 ends
    # bit-identical to the uninterrupted run.
    out, checkpoints = os.path.join(workdir, "dp"), os.path.join(workdir, "ckpt")
    run = ["cleave", "run", "-n", "2", out, *data_flags, "--no-shuffle", "--quiet",
           "--checkpoint-dir", checkpoints]
    subprocess.run(run + ["--steps", str(STEPS // 2)], check=True)
    resumed_model = os.path.join(workdir, "resumed.onnx")
    subprocess.run(run + ["--steps", str(STEPS), "--resume", checkpoints,
                          "--save-onnx", resumed_model], check=True)
    for t in onnx.load(resumed_model).graph.initializer:
        if not np.array_equal(onnx.numpy_helper.to_array(t), tensors[t.name]):
            problems.append(f"dp=2 resumed: {t.name} differs from the uninterrupted run")
            break

    synced, tensors = cleave_run(path, data_flags, workdir, "sync",
                                 ["--mesh", "dp=2", "--batch-size", str(batch),
                                  "--sync-batchnorm"], ranks=2)
    theirs, trained, stats = pytorch_run(model, data, batch, 1)
    problems += compare("dp=2 --sync-batchnorm", synced, theirs, tensors, trained, stats)

    for p in problems:
        print("FAIL:", p)
    print(f"{5 - len({p.split(':')[0] for p in problems})} passed, "
          f"{len({p.split(':')[0] for p in problems})} failed")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
