# Training equals PyTorch step for step: the torch-exported MLP and GPT-style
# transformer (every optimizer) and two CNNs (convolutions, max and average
# pooling and their gradients; momentum and adam, and sgd for the second) are
# compiled with --train, trained for STEPS steps on a fixed dataset in file
# order (--no-shuffle), and every step's loss must equal PyTorch's (same
# initial weights, same batches, torch.optim with the same hyperparameters)
# within 1e-4 relative, and the final parameters within 1e-4 of their largest
# element. With --clip-grad-norm each step's logged grad_norm must equal the
# total norm torch.nn.utils.clip_grad_norm_ returns within 1e-4 relative. Elements whose gradient is zero in exact arithmetic are left out of
# the parameter comparison: the attention key bias (softmax ignores a shift
# common to all keys) gets gradients of pure rounding noise, which Adam scales
# up to lr-sized steps, in PyTorch as in cleave.
# The first CNN's BatchNorm runs in eval mode in the export and in PyTorch
# (running statistics fixed, affine parameters trained); ONNX makes the
# running statistics float initializers, so they are frozen here (--freeze).
# The second CNN (export_cnn_train.py) has no BatchNorm.
#
# Optional arguments after the work directory pick models by name.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))

import export_cnn  # noqa: E402
import export_cnn_train  # noqa: E402
import export_gpt  # noqa: E402
import export_mlp  # noqa: E402

STEPS = 20
BATCHES = 3  # the dataset holds 3 batches, so the file order wraps around

OPTIMIZERS = {
    "sgd": (["--optimizer", "sgd", "--lr", "0.1", "--weight-decay", "0.01"],
            lambda p: torch.optim.SGD(p, lr=0.1, weight_decay=0.01)),
    "momentum": (["--optimizer", "momentum", "--lr", "0.05", "--momentum", "0.9"],
                 lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)),
    "nesterov": (["--optimizer", "momentum", "--lr", "0.05", "--momentum", "0.8",
                  "--nesterov"],
                 lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True)),
    "adam": (["--optimizer", "adam", "--lr", "0.01"],
             lambda p: torch.optim.Adam(p, lr=0.01)),
    "adamw": (["--optimizer", "adamw", "--lr", "0.01", "--weight-decay", "0.1",
               "--beta2", "0.99", "--eps", "1e-6"],
              lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1, betas=(0.9, 0.99),
                                          eps=1e-6)),
    "adagrad": (["--optimizer", "adagrad", "--lr", "0.05", "--eps", "1e-10"],
                lambda p: torch.optim.Adagrad(p, lr=0.05, eps=1e-10)),
    "momentum_clipped": (["--optimizer", "momentum", "--lr", "0.05", "--clip-grad-norm", "0.5"],
                         lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)),
}
# AdamW at lr 1e-3, for the comparisons where lr 1e-2 puts their 1e-4 at
# float32's own distance from float64: AdamW's first update lr g / (|g| +
# eps) turns gradient rounding near g = 0 into parameter differences of that
# size (docs/training.md's Mistral analysis; docs/performance.md's GPT-2).
ADAMW_LR_1E3 = (["--optimizer", "adamw", "--lr", "0.001", "--weight-decay", "0.1",
                 "--beta2", "0.99", "--eps", "1e-6"],
                lambda p: torch.optim.AdamW(p, lr=0.001, weight_decay=0.1, betas=(0.9, 0.99),
                                            eps=1e-6))
# Global gradient-norm clipping (torch.nn.utils.clip_grad_norm_) per optimizer.
CLIP_GRAD_NORM = {"momentum_clipped": 0.5}


def dataset(args, names, generator):
    """BATCHES batches shaped like the export's inputs. Integer inputs are
    classes below the largest the export used; the GPT's targets also get
    ignored positions (-100), spread unevenly over the batches."""
    data = {}
    for name, value in zip(names, args):
        shape = (value.shape[0] * BATCHES,) + tuple(value.shape[1:])
        if value.dtype == torch.int64:
            array = generator.integers(0, int(value.max()) + 1, shape).astype(np.int64)
            if name == "targets":
                array.reshape(-1)[::7] = -100
            data[name] = array
        else:
            data[name] = generator.standard_normal(shape).astype(np.float32)
    return data


# name, export module, data inputs, extra compile flags, optimizers.
MODELS = (("mlp", export_mlp, ["x", "labels"], [], list(OPTIMIZERS)),
          ("gpt", export_gpt, ["idx", "targets"], [], list(OPTIMIZERS)),
          ("cnn", export_cnn, ["x", "labels"], ["--freeze", "*.running_*"],
           ["momentum", "adam"]),
          ("cnn_train", export_cnn_train, ["x", "labels"], [], ["sgd", "momentum", "adam"]))


def run_steps(out, data, workdir, label, steps, run_flags=()):
    """The --log-json log of `steps` steps in file order of the program in
    `out` on `data` (saved as LABEL.NAME.npy), and its results directory
    (LABEL.results)."""
    data_flags = []
    for name, array in data.items():
        file = os.path.join(workdir, f"{label}.{name}.npy")
        np.save(file, array)
        data_flags += ["--data", f"{name}={file}"]
    metrics = os.path.join(workdir, f"{label}.json")
    results = os.path.join(workdir, f"{label}.results")
    subprocess.run(["cleave", "run", out, *data_flags, "--steps", str(steps), "--no-shuffle",
                    "--log-json", metrics, "--output-dir", results, *run_flags], check=True,
                   stderr=subprocess.DEVNULL)
    return json.load(open(metrics)), results


def check(model_name, module, names, extra_flags, optimizer, workdir):
    flags, make_optimizer = OPTIMIZERS[optimizer]
    path = os.path.join(workdir, f"{model_name}.onnx")
    if not os.path.exists(path):
        module.export(path)
    model, args = module.build()
    batch = args[0].shape[0]
    data = dataset(args, names, np.random.default_rng(0))
    out = os.path.join(workdir, f"{model_name}-{optimizer}")
    subprocess.run(["cleave", "compile", path, "-o", out, "--train", *flags, *extra_flags],
                   check=True)
    log, results = run_steps(out, data, workdir, f"{model_name}-{optimizer}", STEPS)
    ours = [s["loss"] for s in log["steps"]]

    norms = []
    theirs, largest_grad = pytorch_steps(model, make_optimizer, data, names, batch, STEPS,
                                         CLIP_GRAD_NORM.get(optimizer), norms)
    problems = compare(ours, theirs, os.path.join(out, "plan.json"),
                       os.path.join(results, "weights.bin"), model, largest_grad)
    logged = [s.get("grad_norm") for s in log["steps"]]
    if norms and not (None not in logged and np.allclose(logged, norms, rtol=1e-4, atol=0)):
        problems.append(f"gradient norms {logged}, pytorch {norms}")
    if len(ours) != STEPS:
        problems.append(f"{len(ours)} steps logged, expected {STEPS}")
    print(f"{model_name} {optimizer}: losses {ours[0]:.6f} -> {ours[-1]:.6f} "
          f"(pytorch {theirs[0]:.6f} -> {theirs[-1]:.6f})")
    return [f"{model_name} {optimizer}: {p}" for p in problems]


def pytorch_steps(model, make_optimizer, data, names, batch, steps, clip=None, norms=None):
    """PyTorch's losses for `steps` steps of `batch` samples of `data` in
    file order (wrapping around), the largest gradient each parameter
    element saw; with `clip`, each step's total norm before clipping is
    appended to `norms`."""
    opt = make_optimizer(model.parameters())
    samples = len(data[names[0]])
    theirs = []
    largest_grad = {name: torch.zeros_like(p) for name, p in model.named_parameters()}
    for step in range(steps):
        start = (step * batch) % samples
        inputs = [torch.from_numpy(data[name][start:start + batch]) for name in names]
        opt.zero_grad()
        loss = model(*inputs)
        loss.backward()
        if clip:
            norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), clip))
            if norms is not None:
                norms.append(norm)
        for name, p in model.named_parameters():
            largest_grad[name] = torch.maximum(largest_grad[name], p.grad.abs())
        opt.step()
        theirs.append(float(loss))
    return theirs, largest_grad


def compare(ours, theirs, plan_path, weights_path, model, largest_grad, tolerance=1e-4):
    """Problems: the first step whose loss differs from PyTorch's by more than
    `tolerance` relative, and the first parameter (left in weights_path, laid
    out as plan.json says) that differs by more than `tolerance` of its
    largest element, counting only elements whose gradient is not zero in
    exact arithmetic (those are rounding noise in both)."""
    problems = []
    for step, (a, b) in enumerate(zip(ours, theirs), start=1):
        if abs(a - b) > tolerance * abs(b):
            problems.append(f"step {step}: loss {a:.7f}, pytorch {b:.7f}")
            break
    plan = json.load(open(plan_path))
    weights = np.fromfile(weights_path, dtype=np.uint8)
    params = dict(model.named_parameters())
    for entry in plan["parameters"]:
        if entry["name"] not in params:
            continue
        trained = weights[entry["offset"]:entry["offset"] + entry["bytes"]].view(np.float32)
        expected = params[entry["name"]].detach().numpy()
        grads = largest_grad[entry["name"]].numpy()
        meaningful = grads > 1e-6 * max(grads.max(), 1e-30)
        difference = np.abs(trained.reshape(expected.shape) - expected)
        error = difference[meaningful].max() if meaningful.any() else 0.0
        if error > tolerance * max(np.abs(expected).max(), 1e-6):
            problems.append(f"final {entry['name']} differs by {error:.2e}")
            break
    return problems


def main():
    workdir = sys.argv[1]
    selected = sys.argv[2:]  # model names to run (all by default)
    problems, cases = [], 0
    for model_name, module, names, extra_flags, optimizers in MODELS:
        if selected and model_name not in selected:
            continue
        for optimizer in optimizers:
            problems += check(model_name, module, names, extra_flags, optimizer, workdir)
            cases += 1
    for p in problems:
        print("FAIL:", p)
    failed = len({p.split(":")[0] for p in problems})
    print(f"{cases - failed} passed, {failed} failed")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
