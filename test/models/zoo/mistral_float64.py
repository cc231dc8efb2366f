"""Why cleave's Mistral at AdamW lr 1e-2 ends one token-embedding element
1.3e-4 of the table's largest away from PyTorch's (an analysis, not a test;
docs/training.md, the model zoo, has what it found).

It trains test/models/zoo/mistral.py the way test/models/zoo_vs_pytorch.py
does (the same export, data set and steps, AdamW lr 1e-2, weight decay 0.1,
betas (0.9, 0.99), eps 1e-6) three times: cleave (float32; its weights
blob, with Adam's m and v, read back after each of 1..STEPS steps, each a
run of its own from the compiled initial weights), PyTorch in float32, and
PyTorch in float64 (model.double(), the same initial values and data), the
reference neither float32 run wrote. It prints:
  - for the embedding element where cleave and PyTorch part most, per step:
    the float64 gradient there, the float32 gradient's error (PyTorch's,
    evaluated at the float64 run's parameters, so the rounding of that step
    alone), the sum of the magnitudes of the gradient's terms, one per
    position that looks the token up (what the gradient cancels from), Adam's
    m in each run, sqrt(v) and the update in float64, and each float32 run's
    distance from float64;
  - step 1: both float32 runs' gradient errors, and the parameter element
    that moved furthest from float64 with its gradient and the derivative of
    Adam's first update there (largest where |g| is near eps);
  - for every parameter, each float32 run's final distance from float64
    relative to the parameter's largest element;
  - the spread of that distance over NOISY more PyTorch float32 runs whose
    gradients get Gaussian noise as large as PyTorch's own step-1 rounding
    (its root mean square distance from float64, per parameter; none where a
    gradient is exactly zero): what float32 implementations that round
    differently, by as much, can be expected to reach.

Usage: mistral_float64.py WORKDIR [LR]   (cleave and torch 1.13 on PATH,
test/lib on PYTHONPATH, as for zoo_vs_pytorch.py)"""
import copy
import json
import os
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "training"))

import mistral  # noqa: E402
from train_vs_pytorch import dataset  # noqa: E402

STEPS = 10
NOISY = 20
EMBED = "net.model.embed_tokens.weight"


def optimizer_flags(lr):
    return ["--optimizer", "adamw", "--lr", str(lr), "--weight-decay", "0.1", "--beta2", "0.99",
            "--eps", "1e-6"]


def make_optimizer(params, lr):
    return torch.optim.AdamW(params, lr=lr, weight_decay=0.1, betas=(0.9, 0.99), eps=1e-6)


def batch(data, step, size):
    start = (step * size) % len(data[mistral.NAMES[0]])
    return [torch.from_numpy(data[n][start:start + size]) for n in mistral.NAMES]


def cleave_runs(path, data, workdir, lr):
    """cleave's parameters and Adam slots after each of 1..STEPS steps:
    [{name: array}] (the slots as adam.m:NAME, adam.v:NAME)."""
    out = os.path.join(workdir, "mistral-lr")
    subprocess.run(["cleave", "compile", path, "-o", out, "--train", *optimizer_flags(lr)],
                   check=True)
    flags = []
    for name, array in data.items():
        file = os.path.join(workdir, f"mistral-lr.{name}.npy")
        np.save(file, array)
        flags += ["--data", f"{name}={file}"]
    plan = json.load(open(os.path.join(out, "plan.json")))
    entries = plan["parameters"] + [s for s in plan["state"] if s["name"].startswith("adam.")]
    runs = []
    for steps in range(1, STEPS + 1):
        results = os.path.join(workdir, f"mistral-lr.results{steps}")
        subprocess.run(["cleave", "run", out, *flags, "--steps", str(steps), "--no-shuffle",
                        "--output-dir", results], check=True, stderr=subprocess.DEVNULL)
        blob = np.fromfile(os.path.join(results, "weights.bin"), dtype=np.uint8)
        runs.append({e["name"]: blob[e["offset"]:e["offset"] + e["bytes"]].view(np.float32)
                     .reshape(e["shape"]).astype(np.float64) for e in entries})
    return runs


class DefaultDtype:
    """torch's default dtype set to `dtype` within: transformers builds the
    attention mask from torch.finfo(the activations' dtype).min with
    torch.full's default dtype, which overflows float32 in a float64 run."""

    def __init__(self, dtype):
        self.dtype = dtype

    def __enter__(self):
        self.saved = torch.get_default_dtype()
        torch.set_default_dtype(self.dtype)

    def __exit__(self, *exc):
        torch.set_default_dtype(self.saved)


def pytorch_runs(model, data, dtype, lr, size, noise=None):
    """PyTorch's parameters, gradients and Adam slots after each step, in
    `dtype`: [({name: param}, {name: grad}, {name: (m, v)})]. The model's
    constants (the rotary tables, built in float32) are converted, not
    recomputed: every run trains the same model. With `noise` (a
    torch.Generator and {name: scale}) each gradient element gets N(0, 1) x
    its parameter's scale added: another float32 implementation, whose
    gradients round differently by as much as PyTorch's do."""
    with DefaultDtype(dtype):
        return _pytorch_runs(model, data, dtype, lr, size, noise)


def _pytorch_runs(model, data, dtype, lr, size, noise):
    model = copy.deepcopy(model).to(dtype)
    opt = make_optimizer(model.parameters(), lr)
    runs = []
    for step in range(STEPS):
        opt.zero_grad()
        model(*batch(data, step, size)).backward()
        if noise is not None:
            generator, scales = noise
            for name, p in model.named_parameters():
                # Not where the gradient is exactly zero (an embedding row
                # no token of the batch looks up): every implementation
                # leaves those zero.
                p.grad.add_(scales[name] * (p.grad != 0) * torch.randn(
                    p.grad.shape, generator=generator, dtype=p.grad.dtype))
        grads = {n: p.grad.detach().double().clone() for n, p in model.named_parameters()}
        opt.step()
        params = {n: p.detach().double().clone() for n, p in model.named_parameters()}
        slots = {n: (opt.state[p]["exp_avg"].double().clone(),
                     opt.state[p]["exp_avg_sq"].double().clone())
                 for n, p in model.named_parameters()}
        runs.append((params, grads, slots))
    return runs


def gradient_terms(model, inputs, token, column):
    """The embedding gradient's element (token, column) as the sum of one term
    per position where `token` is looked up, and the sum of those terms'
    magnitudes: the gradient flows into the table only through the lookup."""
    model = copy.deepcopy(model)
    captured = {}
    embed = model.net.model.embed_tokens

    def keep(module, inputs, output):
        output.retain_grad()
        captured["o"] = output

    handle = embed.register_forward_hook(keep)
    model(*inputs).backward()
    handle.remove()
    per_position = captured["o"].grad[..., column][inputs[0] == token]
    return float(per_position.sum()), float(per_position.abs().sum()), int(per_position.numel())


def main():
    workdir = sys.argv[1]
    lr = float(sys.argv[2]) if len(sys.argv) > 2 else 1e-2
    os.makedirs(workdir, exist_ok=True)
    path = os.path.join(workdir, "mistral.onnx")
    model, args = mistral.export(path)
    size = args[0].shape[0]
    data = dataset(args, mistral.NAMES, np.random.default_rng(0))
    ours = cleave_runs(path, data, workdir, lr)
    f32 = pytorch_runs(model, data, torch.float32, lr, size)
    f64 = pytorch_runs(model, data, torch.float64, lr, size)
    initial = {n: p.detach().double() for n, p in model.named_parameters()}

    table = f64[-1][0][EMBED].numpy()
    largest = np.abs(table).max()
    gap = np.abs(ours[-1][EMBED] - f32[-1][0][EMBED].numpy())
    token, column = np.unravel_index(np.argmax(gap), gap.shape)
    print(f"lr {lr}: {EMBED}[{token}, {column}]: cleave and PyTorch float32 part by "
          f"{gap.max() / largest:.2e} of the table's largest element ({largest:.4f}); token "
          f"{token} is looked up at steps "
          f"{[s + 1 for s in range(STEPS) if (batch(data, s, size)[0] == token).any()]}")
    print("step  grad f64     f32 grad err  terms |sum|   m (cleave, f32, f64)              "
          "  sqrt(v) f64  update/lr f64  cleave-f64  pt32-f64  cleave-pt32 (of largest)")
    for step in range(STEPS):
        inputs = batch(data, step, size)
        # The float32 gradient at the float64 run's parameters before this
        # step: the rounding of this step's gradient alone.
        before = f64[step - 1][0] if step else initial
        at64 = copy.deepcopy(model)
        with torch.no_grad():
            for n, p in at64.named_parameters():
                p.copy_(before[n].float())
        at64.zero_grad()
        at64(*inputs).backward()
        g32 = float(dict(at64.named_parameters())[EMBED].grad[token, column])
        g64 = float(f64[step][1][EMBED][token, column])
        ref = copy.deepcopy(model).double()
        with torch.no_grad():
            for n, p in ref.named_parameters():
                p.copy_(before[n])
        with DefaultDtype(torch.float64):
            exact_sum, magnitude, count = gradient_terms(ref, inputs, token, column)
        m64, v64 = (float(t[token, column]) for t in f64[step][2][EMBED])
        m32 = float(f32[step][2][EMBED][0][token, column])
        mc = float(ours[step][f"adam.m:{EMBED}"][token, column])
        # AdamW's step without its decay, in units of lr (bias-corrected).
        k = step + 1
        update = (m64 / (1 - 0.9 ** k)) / (np.sqrt(v64 / (1 - 0.99 ** k)) + 1e-6)
        c = ours[step][EMBED][token, column]
        p32 = float(f32[step][0][EMBED][token, column])
        p64 = float(f64[step][0][EMBED][token, column])
        print(f"{k:4d}  {g64:+.3e}  {abs(g32 - g64):.1e}      {magnitude:.1e} ({count:2d})  "
              f"{mc:+.3e} {m32:+.3e} {m64:+.3e}  {np.sqrt(v64):.3e}    {update:+.4f}       "
              f"{abs(c - p64) / largest:.1e}     {abs(p32 - p64) / largest:.1e}   "
              f"{abs(c - p32) / largest:.1e}")
    # Step 1: AdamW's first update is lr g/(|g| + eps) per element (the decay
    # aside), whose derivative in g, lr eps/(|g| + eps)^2, reaches lr/(4 eps)
    # where |g| = eps: there a gradient's rounding moves the parameter most.
    grad_error = {"cleave": 0.0, "pytorch f32": 0.0}
    rms = {"cleave": [], "pytorch f32": []}
    where = (0.0, None, None)
    for n in initial:
        g64 = f64[0][1][n].numpy()
        scale = np.abs(g64).max()
        # cleave's step-1 gradient is its m / (1 - beta1).
        gradients = (("cleave", ours[0][f"adam.m:{n}"] / 0.1),
                     ("pytorch f32", f32[0][1][n].numpy()))
        for key, g in gradients:
            grad_error[key] = max(grad_error[key], np.abs(g - g64).max() / scale)
            rms[key].append(np.sqrt(np.mean((g - g64) ** 2)) / scale)
        d = np.abs(ours[0][n] - f64[0][0][n].numpy()) / np.abs(f64[0][0][n].numpy()).max()
        if d.max() > where[0]:
            where = (d.max(), n, np.unravel_index(np.argmax(d), d.shape))
    _, n, i = where
    g64 = float(f64[0][1][n][i])
    print(f"step 1: gradients' largest distance from float64, relative to each parameter's "
          f"largest gradient: cleave {grad_error['cleave']:.1e} (root mean square "
          f"{max(rms['cleave']):.1e}), pytorch float32 {grad_error['pytorch f32']:.1e} "
          f"({max(rms['pytorch f32']):.1e}); parameters' largest distance: cleave "
          f"{where[0]:.1e} at {n}{list(map(int, i))}, pytorch float32 "
          f"{max(distance_at(f32[0][0], f64[0][0], m) for m in initial):.1e}; there the float64 "
          f"gradient is {g64:.3e} (cleave's {float(ours[0][f'adam.m:{n}'][i]) / 0.1:.3e}, "
          f"pytorch float32's {float(f32[0][1][n][i]):.3e}) and the update's derivative "
          f"lr eps/(|g| + eps)^2 = {lr * 1e-6 / (abs(g64) + 1e-6) ** 2:.1e}")
    print("final parameters, largest distance from float64 relative to the parameter's "
          "largest element (elements whose gradient is not zero):")
    worst = {"cleave": 0.0, "pytorch f32": 0.0, "cleave-pytorch": 0.0}
    for n, p64 in f64[-1][0].items():
        p64 = p64.numpy()
        seen = max(np.abs(f64[s][1][n].numpy()).max() for s in range(STEPS))
        grads = np.max([np.abs(f64[s][1][n].numpy()) for s in range(STEPS)], axis=0)
        meaningful = grads > 1e-6 * max(seen, 1e-30)
        scale = max(np.abs(p64).max(), 1e-6)
        c = np.abs(ours[-1][n] - p64)[meaningful].max() / scale
        t = np.abs(f32[-1][0][n].numpy() - p64)[meaningful].max() / scale
        ct = np.abs(ours[-1][n] - f32[-1][0][n].numpy())[meaningful].max() / scale
        for key, value in zip(worst, (c, t, ct)):
            worst[key] = max(worst[key], value)
        print(f"  {n}: cleave {c:.1e}, pytorch float32 {t:.1e}, cleave-pytorch {ct:.1e}")
    print("largest over all parameters: " + ", ".join(f"{k} {v:.1e}" for k, v in worst.items()))
    # Other float32 implementations: PyTorch's float32 with noise on every
    # gradient element, as large as its own step-1 gradient's rounding (the
    # root mean square of its distance from float64, per parameter), NOISY
    # seeds.
    scales = {n: float(np.sqrt(np.mean((f32[0][1][n].numpy() - f64[0][1][n].numpy()) ** 2)))
              for n in f64[0][1]}
    spread = []
    for seed in range(NOISY):
        run = pytorch_runs(model, data, torch.float32, lr, size,
                           (torch.Generator().manual_seed(seed), scales))
        spread.append((distance(run[-1][0][EMBED].numpy(), f64, EMBED),
                       max(distance(run[-1][0][n].numpy(), f64, n) for n in f64[-1][0])))
    spread = np.array(spread)
    print(f"PyTorch float32 with noise of its own gradient rounding's size, {NOISY} seeds: "
          f"final distance "
          f"from float64 of {EMBED} {spread[:, 0].min():.1e} .. median "
          f"{np.median(spread[:, 0]):.1e} .. {spread[:, 0].max():.1e}; of all parameters "
          f"{spread[:, 1].min():.1e} .. median {np.median(spread[:, 1]):.1e} .. "
          f"{spread[:, 1].max():.1e} (cleave: {distance(ours[-1][EMBED], f64, EMBED):.1e} and "
          f"{worst['cleave']:.1e})")


def distance_at(run, reference, name):
    """The largest distance of `run`'s parameter `name` from `reference`'s,
    relative to the reference's largest element."""
    expected = reference[name].numpy()
    return np.abs(run[name].numpy() - expected).max() / np.abs(expected).max()


def distance(value, f64, name):
    """The largest distance of a final `value` of parameter `name` from the
    float64 run's, relative to that parameter's largest element, over the
    elements whose float64 gradient was not zero at some step."""
    grads = np.max([np.abs(f64[s][1][name].numpy()) for s in range(STEPS)], axis=0)
    meaningful = grads > 1e-6 * max(grads.max(), 1e-30)
    expected = f64[-1][0][name].numpy()
    return np.abs(value - expected)[meaningful].max() / max(np.abs(expected).max(), 1e-6)


if __name__ == "__main__":
    main()
