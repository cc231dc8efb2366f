# Mixed precision (--precision bf16) against PyTorch. The torch-exported MLP,
# GPT-style transformer and CNN are trained STEPS steps with momentum SGD (whose
# updates are linear in the gradients, so differences are not magnified) on a fixed
# dataset in file order, from the same initial weights, three ways:
#   1. cleave --precision bf16 against PyTorch computing the same recipe:
#      every matrix product (nn.Linear, @) and 2-d convolution rounds its
#      two factors to bf16 (round to nearest even) and sums their exact
#      products in f32, in the forward and in both backward products (the
#      incoming gradient rounded too); everything else in f32. cleave differentiates the loss's sum and
#      divides the gradients by the count of counted targets after
#      (docs/training.md); rounding to bf16 commutes with that division only
#      when the count is a power of two, so the recipe differentiates the sum
#      too (the mean times the count). Both sides then multiply the same bf16
#      numbers and differ only in f32 summation order. The MLP agrees to
#      1e-7 at every step (1e-5 required: the fp32 run is 1e-4 away). The
#      GPT agrees to 1e-7 over its first 2 steps (1e-6 required;
#      the fp32 run is 2e-5 away at the first), then drifts: an f32 value
#      a few ulps from its other side can round to the neighbouring bf16
#      number (2^-8 apart) where the attention's backward cancels, and the
#      updates carry that on (block 1's first gradients agree to 1e-6,
#      block 0's, behind it, to 1e-3). So the GPT's later steps are held to
#      EMULATED relative, and both models' final parameters to their loss
#      tolerance of their largest element. The CNN agrees to 1e-7 at every
#      step (CNN = 1e-5 required), its final parameters likewise.
#   2. cleave --precision bf16 against fp32 (PyTorch's, which cleave's fp32
#      equals within 1e-4: train_vs_pytorch.py): the loss curve within
#      CURVE relative at every step. bf16 keeps 8 significant bits (a
#      relative rounding of at most 2^-9 = 0.2% per factor); summed over K
#      terms of random sign the errors cancel to well under that, and the
#      loss is an average over the batch: 1% leaves a margin of ten over
#      the largest difference measured here (9e-4, against autocast), and is
#      far below what training moves the loss (by half over these steps).
#   3. cleave --precision bf16 against torch.autocast("cpu", bfloat16): the
#      same CURVE. Autocast also rounds the products' results to bf16 (and
#      runs the ops after them on those), so it is a neighbour of the recipe,
#      not the recipe.
#   4. cleave --precision fp16 with dynamic loss scaling from 2^20 (past
#      what these models' scaled gradients fit in fp16: the first steps back
#      it off) and a growth interval of 3 (it grows and overflows again),
#      against the recipe in fp16 (fp16's rounding overflows to inf, as
#      cleave's does) with GradScaler's documented rule applied to the loss's
#      sum (this torch, 1.13, has GradScaler for CUDA only): a step with an
#      inf or NaN gradient is skipped and multiplies the scale by the backoff
#      factor, 3 steps without multiply it by the growth factor where that
#      stays finite, the scale an f32 as GradScaler keeps it
#      (--loss-scale-growth, --loss-scale-backoff; the defaults, GradScaler's
#      2 and 0.5, are the layout tests'): the MLP with 4 and 0.125, the GPT
#      with 3 and 0.25, whose scales are not powers of two (where scaling and
#      unscaling round, so that cleave's gradients, scaled after the loss's
#      sum, and PyTorch's, scaled before the mean's backward, can differ by
#      a rounding: the GPT's tolerance is the emulation's, 2e-3; the MLP's
#      1e-5 fails with these factors, 1.7e-5). Every step's scale and skip equal
#      the recipe's, the losses are within the bf16 comparison's tolerance,
#      the log's skipped_steps counts them, and the run resumed from a
#      checkpoint written half way logs the same steps as the whole run
#      (the MLP's; the GPT's too with CLEAVE_LONG=1), the checkpoint without
#      the weights' fp16 copies (plan.json's weight_copy state, which a
#      run's first step makes from the parameters and each update keeps).
#   5. the MLP with --grad-accum-dtype bf16 (gradient accumulators kept in
#      bf16) against the recipe with each step's gradient of the loss's sum
#      rounded to bf16 before the division by the count, as cleave's
#      accumulator holds it: the same 1e-5, and not the f32 accumulators'
#      losses.
# Also: every product's factors are bf16 in forward.mlir.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F
from safetensors import safe_open

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))

import export_cnn_train  # noqa: E402
import export_gpt  # noqa: E402
import export_mlp  # noqa: E402
from train_vs_pytorch import (OPTIMIZERS, compare, dataset, pytorch_steps,  # noqa: E402
                              run_steps)

STEPS = 20
EXACT = 1e-6
EMULATED = 2e-3
CNN = 1e-5
CURVE = 0.01
# fp16's first loss scale (2^20, past what these models' scaled gradients
# fit in fp16's range: the first steps back it off) and growth interval
# (short, so that it grows and overflows again within the run).
SCALE_EXPONENT = 20
SCALE_WINDOW = 3


def rounded(t, dtype):
    """t rounded to `dtype` (to nearest even; fp16 overflows to inf), back
    in f32."""
    return t.to(dtype).to(torch.float32)


def reduce_to(grad, shape):
    """grad summed over the leading dims a product broadcast."""
    while grad.dim() > len(shape):
        grad = grad.sum(0)
    for d, n in enumerate(shape):
        if n == 1 and grad.shape[d] != 1:
            grad = grad.sum(d, keepdim=True)
    return grad


class LowPrecisionProduct(torch.autograd.Function):
    """a @ b on factors rounded to `dtype`, summed in f32; its backward
    multiplies the rounded incoming gradient by the rounded factors."""

    @staticmethod
    def forward(ctx, a, b, dtype):
        ra, rb = rounded(a, dtype), rounded(b, dtype)
        ctx.save_for_backward(ra, rb)
        ctx.shapes, ctx.dtype = (a.shape, b.shape), dtype
        return torch.matmul(ra, rb)

    @staticmethod
    def backward(ctx, grad):
        ra, rb = ctx.saved_tensors
        rg = rounded(grad, ctx.dtype)
        a_shape, b_shape = ctx.shapes
        return (reduce_to(rg @ rb.transpose(-1, -2), a_shape),
                reduce_to(ra.transpose(-1, -2) @ rg, b_shape), None)


class LowPrecisionConv(torch.autograd.Function):
    """conv2d on x and w rounded to `dtype`, summed in f32, the bias added in
    f32; its backward convolves the rounded incoming gradient with the
    rounded w (x's gradient) and correlates it with the rounded x (w's)."""

    @staticmethod
    def forward(ctx, x, w, bias, stride, padding, dilation, groups, dtype):
        rx, rw = rounded(x, dtype), rounded(w, dtype)
        ctx.save_for_backward(rx, rw)
        ctx.geometry, ctx.dtype = (stride, padding, dilation, groups), dtype
        return torch.conv2d(rx, rw, bias, stride, padding, dilation, groups)

    @staticmethod
    def backward(ctx, grad):
        rx, rw = ctx.saved_tensors
        rg = rounded(grad, ctx.dtype)
        geometry = ctx.geometry
        return (torch.nn.grad.conv2d_input(rx.shape, rw, rg, *geometry),
                torch.nn.grad.conv2d_weight(rx, rw.shape, rg, *geometry),
                grad.sum((0, 2, 3)), None, None, None, None, None)


class LowPrecisionProducts(torch.overrides.TorchFunctionMode):
    """Every nn.Linear, matrix product and 2-d convolution in the recipe
    above."""

    def __init__(self, dtype):
        super().__init__()
        self.dtype = dtype

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear:
            x, weight = args[0], args[1]
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            y = LowPrecisionProduct.apply(x, weight.t(), self.dtype)
            return y if bias is None else y + bias
        if func in (torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__):
            return LowPrecisionProduct.apply(args[0], args[1], self.dtype)
        if func in (F.conv2d, torch.conv2d):
            x, w, bias, stride, padding, dilation, groups = args
            return LowPrecisionConv.apply(x, w, bias, stride, padding, dilation, groups,
                                          self.dtype)
        return func(*args, **kwargs)


def under(model, context):
    """model with its forward run inside `context()`."""
    forward = model.forward

    def wrapped(*args):
        with context():
            return forward(*args)

    model.forward = wrapped
    return model


def recipe_steps(model, make_optimizer, data, names, batch, counted, dtype=torch.bfloat16,
                 scaling=None, steps=STEPS, grad_dtype=None):
    """PyTorch's losses for `steps` steps of the recipe, as pytorch_steps runs
    them but with the gradients of the loss's sum divided by the count
    (`counted(*inputs)`, the targets the mean divides by) before the
    optimizer step; and the largest gradient each parameter element saw.
    With `scaling` = (initial scale, growth interval, growth factor, backoff
    factor), dynamic loss scaling as GradScaler documents it, on the loss's
    sum: the backward of the sum times the scale, the gradients divided by
    it; a step with an inf or NaN gradient is skipped (no optimizer step)
    and multiplies the scale by the backoff factor, and `interval` steps
    without multiply it by the growth factor if the product is finite (in
    f32, as GradScaler's scale tensor); then the losses are (loss, scale
    used, skipped) triples. With `grad_dtype`, each gradient of the loss's
    sum is rounded to that type (nearest even) before the division."""
    under(model, lambda: LowPrecisionProducts(dtype))
    opt = make_optimizer(model.parameters())
    samples = len(data[names[0]])
    losses = []
    largest_grad = {name: torch.zeros_like(p) for name, p in model.named_parameters()}
    scale, interval, growth, backoff = scaling or (1.0, None, None, None)
    scale = np.float32(scale)
    good = 0
    for step in range(steps):
        start = (step * batch) % samples
        inputs = [torch.from_numpy(data[name][start:start + batch]) for name in names]
        count = float(counted(*inputs))
        opt.zero_grad()
        loss = model(*inputs)
        (loss * count * float(scale)).backward()
        finite = all(bool(torch.isfinite(p.grad).all()) for p in model.parameters())
        if scaling:
            losses.append((float(loss), float(scale), not finite))
        else:
            losses.append(float(loss))
        if not finite:
            scale, good = scale * np.float32(backoff), 0
            continue
        for name, p in model.named_parameters():
            if grad_dtype is not None:
                p.grad = rounded(p.grad, grad_dtype)
            p.grad /= count * float(scale)
            largest_grad[name] = torch.maximum(largest_grad[name], p.grad.abs())
        opt.step()
        good += 1
        if interval and good == interval:
            grown = scale * np.float32(growth)
            scale, good = (grown if np.isfinite(grown) else scale), 0
    return losses, largest_grad


def cleave_steps(path, data, workdir, label, flags):
    """cleave's log of STEPS steps (loss, and with fp16 loss_scale and
    skipped) trained with momentum and `flags`, and its program and results
    directories."""
    out = os.path.join(workdir, label)
    optimizer, _ = OPTIMIZERS["momentum"]
    subprocess.run(["cleave", "compile", path, "-o", out, "--train", *optimizer, *flags],
                   check=True)
    log, results = run_steps(out, data, workdir, label, STEPS)
    return log, out, results


def cleave_losses(path, data, workdir, label, precision):
    log, out, results = cleave_steps(path, data, workdir, label, ["--precision", precision])
    return [s["loss"] for s in log["steps"]], out, results


def curve_problems(label, ours, theirs):
    worst = max(abs(a - b) / abs(b) for a, b in zip(ours, theirs))
    print(f"{label}: largest relative loss difference {worst:.2e}")
    return [f"{label}: loss differs by {worst:.2e} relative (> {CURVE})"] if worst > CURVE else []


def products_in_bf16(out):
    """Problems unless every matmul and gemm of forward.mlir multiplies bf16."""
    text = open(os.path.join(out, "forward.mlir")).read()
    factors = re.findall(r"cleave\.(?:matmul|gemm) .*: \(tensor<[^>]*x(\w+)>, tensor<[^>]*x(\w+)>",
                         text)
    if not factors:
        return ["no products in forward.mlir"]
    wrong = [f for f in factors if f != ("bf16", "bf16")]
    return [f"{len(wrong)} of {len(factors)} products on {wrong[0]} factors"] if wrong else []


def check(name, module, names, counted, tolerance, exact_steps, workdir):
    path = os.path.join(workdir, f"{name}.onnx")
    module.export(path)
    model, args = module.build()
    data = dataset(args, names, np.random.default_rng(0))
    batch = args[0].shape[0]
    _, make_optimizer = OPTIMIZERS["momentum"]
    ours, out, results = cleave_losses(path, data, workdir, f"{name}-bf16", "bf16")
    problems = products_in_bf16(out)
    # fp32: PyTorch's (cleave's equals it within 1e-4: train_vs_pytorch.py).
    model, _ = module.build()
    fp32, _ = pytorch_steps(model, make_optimizer, data, names, batch, STEPS)

    model, _ = module.build()
    emulated, largest_grad = recipe_steps(model, make_optimizer, data, names, batch, counted)
    found = compare(ours, emulated, os.path.join(out, "plan.json"),
                    os.path.join(results, "weights.bin"), model, largest_grad, tolerance)
    differences = [abs(a - b) / abs(b) for a, b in zip(ours, emulated)]
    print(f"{name} bf16 vs pytorch's recipe: relative loss differences "
          + " ".join(f"{d:.0e}" for d in differences))
    first = max(differences[:exact_steps])
    if first > EXACT:
        found.append(f"the first {exact_steps} steps' losses differ by {first:.2e} relative")
    problems += [f"against pytorch's recipe: {p}" for p in found]

    problems += curve_problems(f"{name} bf16 vs fp32", ours, fp32)
    model, _ = module.build()
    autocast = lambda: torch.autocast("cpu", dtype=torch.bfloat16)  # noqa: E731
    theirs, _ = pytorch_steps(under(model, autocast), make_optimizer, data, names, batch, STEPS)
    problems += curve_problems(f"{name} bf16 vs torch.autocast", ours, theirs)
    print(f"{name}: bf16 {ours[0]:.6f} -> {ours[-1]:.6f}, fp32 {fp32[0]:.6f} -> {fp32[-1]:.6f}")
    return [f"{name}: {p}" for p in problems]


def loss_scaling(name, module, names, counted, tolerance, workdir, factors):
    """fp16 with dynamic loss scaling from a scale that overflows, growing
    and backing off by `factors` (None: the defaults, GradScaler's 2 and
    0.5): every step's scale and whether it was skipped as the recipe with
    GradScaler's rule has them, the losses within `tolerance`, both kinds of
    step seen, and a run resumed from a checkpoint half way equal to the
    whole run."""
    path = os.path.join(workdir, f"{name}.onnx")
    model, args = module.build()
    data = dataset(args, names, np.random.default_rng(0))
    flags = ["--precision", "fp16", "--loss-scale", str(2.0 ** SCALE_EXPONENT),
             "--loss-scale-window", str(SCALE_WINDOW)]
    if factors:
        flags += ["--loss-scale-growth", str(factors[0]), "--loss-scale-backoff", str(factors[1])]
    log, out, _ = cleave_steps(path, data, workdir, f"{name}-fp16", flags)
    ours = [(s["loss"], s["loss_scale"], s["skipped"]) for s in log["steps"]]
    # The scale and its counters are state a checkpoint keeps: half the
    # steps, then the rest resumed, log what the whole run did (the MLP;
    # the GPT too in the long suite).
    resumed = None
    if name == "mlp" or os.environ.get("CLEAVE_LONG") == "1":
        checkpoints = os.path.join(workdir, f"{name}-fp16-checkpoints")
        run_steps(out, data, workdir, f"{name}-fp16-half", STEPS // 2,
                  ["--checkpoint-dir", checkpoints])
        resumed, _ = run_steps(out, data, workdir, f"{name}-fp16-resumed", STEPS,
                               ["--resume", checkpoints])
    _, make_optimizer = OPTIMIZERS["momentum"]
    model, _ = module.build()
    growth, backoff = factors or (2.0, 0.5)
    theirs, _ = recipe_steps(model, make_optimizer, data, names, args[0].shape[0], counted,
                             torch.float16, (2.0 ** SCALE_EXPONENT, SCALE_WINDOW, growth, backoff))
    pattern = " ".join(f"{math.log2(scale):.3g}{'s' if skipped else ''}"
                       for _, scale, skipped in ours)
    worst = max(abs(o[0] - t[0]) / abs(t[0]) for o, t in zip(ours, theirs))
    print(f"{name} fp16: log2 of each step's scale (s: skipped) {pattern}; "
          f"{log['skipped_steps']} skipped; losses within {worst:.0e} of the recipe's")
    problems = []
    if [o[1:] for o in ours] != [t[1:] for t in theirs]:
        problems.append(f"scales and skips {[o[1:] for o in ours]}, "
                        f"the recipe's {[t[1:] for t in theirs]}")
    if worst > tolerance:
        problems.append(f"fp16 loss differs from the recipe's by {worst:.2e} relative")
    if resumed and resumed["steps"] != log["steps"][STEPS // 2:]:
        problems.append("resumed from a checkpoint at half the steps, the rest differs")
    if resumed:
        # The weights' fp16 copies are plan.json's weight_copy state, which
        # a run's first step makes from the parameters: the checkpoint
        # leaves them out.
        plan = json.load(open(os.path.join(out, "plan.json")))
        copies = {s["name"] for s in plan["state"] if s["role"] == "weight_copy"}
        with safe_open(os.path.join(checkpoints, f"step-{STEPS // 2}", "rank-0.safetensors"),
                       "np") as saved:
            kept = copies & set(saved.keys())
        if not copies or kept:
            problems.append(f"weight copies {sorted(copies)}, in the checkpoint {sorted(kept)}")
    skips = [o[2] for o in ours]
    if log["skipped_steps"] != sum(skips) or all(skips) or not any(skips):
        problems.append(f"skipped_steps {log['skipped_steps']}, steps skipped {skips}")
    return [f"{name} fp16: {p}" for p in problems]


def bf16_gradients(name, module, names, counted, tolerance, workdir):
    """--grad-accum-dtype bf16 against the recipe with each step's gradient
    of the loss's sum rounded to bf16 before the division by the count (one
    microbatch a step: the accumulator holds that gradient, rounded once);
    the accumulators are bf16 in plan.json and the losses are not the f32
    accumulators' (the flag acts). `check` exported the model."""
    path = os.path.join(workdir, f"{name}.onnx")
    model, args = module.build()
    data = dataset(args, names, np.random.default_rng(0))
    _, make_optimizer = OPTIMIZERS["momentum"]
    log, out, results = cleave_steps(path, data, workdir, f"{name}-bf16-grads",
                                     ["--precision", "bf16", "--grad-accum-dtype", "bf16"])
    ours = [s["loss"] for s in log["steps"]]
    emulated, largest_grad = recipe_steps(model, make_optimizer, data, names, args[0].shape[0],
                                          counted, grad_dtype=torch.bfloat16)
    problems = compare(ours, emulated, os.path.join(out, "plan.json"),
                       os.path.join(results, "weights.bin"), model, largest_grad, tolerance)
    worst = max(abs(a - b) / abs(b) for a, b in zip(ours, emulated))
    print(f"{name} bf16 gradients vs pytorch's recipe: largest relative loss difference "
          f"{worst:.1e}")
    plan = json.load(open(os.path.join(out, "plan.json")))
    grads = [s for s in plan["state"] if s["name"].startswith("grad:")]
    if not grads or any(s["dtype"] != "bf16" for s in grads):
        problems.append(f"gradient accumulators {[(s['name'], s['dtype']) for s in grads]}")
    f32_grads = [s["loss"] for s in json.load(open(os.path.join(workdir, f"{name}-bf16.json")))
                 ["steps"]]
    if ours == f32_grads:
        problems.append("the same losses as with f32 gradient accumulators")
    return [f"{name} bf16 gradients: {p}" for p in problems]


def main():
    workdir = sys.argv[1]
    problems = []
    # The targets each model's mean loss divides by: the GPT predicts every
    # position's next token.
    models = (("mlp", export_mlp, ["x", "labels"], lambda x, labels: (labels != -100).sum(),
               1e-5, STEPS, (4.0, 0.125)),
              ("gpt", export_gpt, ["idx", "targets"],
               lambda idx, targets: (targets[:, 1:] != -100).sum(), EMULATED, 2, (3.0, 0.25)))
    for name, module, names, counted, tolerance, exact_steps, factors in models:
        problems += check(name, module, names, counted, tolerance, exact_steps, workdir)
        if name == "mlp":
            problems += bf16_gradients(name, module, names, counted, tolerance, workdir)
        problems += loss_scaling(name, module, names, counted, tolerance, workdir, factors)
    problems += check("cnn", export_cnn_train, ["x", "labels"], lambda x, labels: len(labels),
                      CNN, STEPS, workdir)
    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
