# cleave ckpt on a checkpoint written by dp=2 x tp=2 with ZeRO 3, and
# --init-from:
#   - inspect prints the step, the mesh, every global tensor at the ONNX
#     model's shapes (parameters and both Adam moments of each) and every
#     file with its size and zlib's CRC-32 of it;
#   - consolidate writes one safetensors file that the safetensors package
#     reads as the model's initializers, equal to the run's --save-onnx;
#   - export writes the model with those values, which onnxruntime runs:
#     its loss equals the cleave-compiled forward of the same file's;
#   - a torch-exported MLP trained by cleave: consolidate's file goes back
#     into the PyTorch module with safetensors.torch.load_file and
#     load_state_dict (strict), and the module's loss equals onnxruntime's
#     on the exported model;
#   - --init-from a safetensors file of new values (written by the package)
#     trains as the model whose initializers onnx replaced by them: bit for
#     bit on one device, within 1e-5 on dp=2 x tp=2 with ZeRO 3.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import subprocess
import sys
import zlib

import numpy as np
import onnx
import onnxruntime
import torch
from onnx import numpy_helper
from safetensors.numpy import load_file, save_file
from safetensors.torch import load_file as load_torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import export_mlp  # noqa: E402

MODEL = os.path.join(HERE, "..", "..", "examples", "mlp", "model.onnx")
PLAN = os.path.join(HERE, "..", "..", "plans", "megatron-mlp.json")
ADAM = ["--train", "--optimizer", "adam", "--lr", "0.01"]
LAYOUT = ["--mesh", "dp=2,tp=2", "--plan", PLAN, "--zero", "3"]
STEPS = 4
problems = []


def check(condition, what):
    if not condition:
        problems.append(what)


def cleave(*args, **options):
    return subprocess.run(["cleave", *args], check=True, capture_output=True, text=True,
                          **options)


def initializers(path):
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


def onnxruntime_loss(path, x, labels):
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    return float(session.run(None, {"x": x, "labels": labels})[0])


def main():
    work = sys.argv[1]
    rng = np.random.default_rng(5)
    x = rng.standard_normal((32, 32)).astype(np.float32)
    labels = np.argmax(x[:, :10], axis=1).astype(np.int64)
    np.save(f"{work}/x.npy", x)
    np.save(f"{work}/labels.npy", labels)
    np.save(f"{work}/x8.npy", x[:8])
    np.save(f"{work}/labels8.npy", labels[:8])
    data = ["--data", f"x={work}/x.npy,labels={work}/labels.npy"]
    model = initializers(MODEL)

    cleave("compile", MODEL, "-o", f"{work}/grid", *ADAM, *LAYOUT)
    ckpt = f"{work}/ckpt"
    cleave("run", "-n", "4", f"{work}/grid", *data, "--steps", str(STEPS), "--checkpoint-dir",
           ckpt, "--save-onnx", f"{work}/trained.onnx")
    trained = initializers(f"{work}/trained.onnx")

    # inspect
    lines = cleave("ckpt", "inspect", ckpt).stdout.splitlines()
    check(lines[0] == f"checkpoint {ckpt}/step-{STEPS}", f"inspect: first line {lines[0]}")
    check(lines[1].startswith(f"step {STEPS}, mesh dp=2,tp=2, optimizer adam"),
          f"inspect: second line {lines[1]}")
    start = lines.index(next(line for line in lines if line.startswith("tensors (")))
    shown = {}
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        name, dtype_shape = line.split(None, 1)
        shown[name] = dtype_shape
    expected = {}
    for name, value in model.items():
        for prefix in ["", "adam.m:", "adam.v:"]:
            expected[prefix + name] = "f32 " + "x".join(str(d) for d in value.shape)
    check(shown == expected, f"inspect: tensors {shown}, not {expected}")
    files = {line.split()[0]: line.split() for line in lines if line.endswith(
        tuple("0123456789abcdef")) and ".safetensors" in line and "bytes" in line}
    on_disk = sorted(f for f in os.listdir(f"{ckpt}/step-{STEPS}") if f.endswith(".safetensors"))
    check(sorted(files) == on_disk, f"inspect: files {sorted(files)}, on disk {on_disk}")
    for name, fields in files.items():
        data_bytes = open(f"{ckpt}/step-{STEPS}/{name}", "rb").read()
        check(fields[1] == str(len(data_bytes)) and fields[-1] == f"{zlib.crc32(data_bytes):08x}",
              f"inspect: {fields} is not {len(data_bytes)} bytes, crc32 "
              f"{zlib.crc32(data_bytes):08x}")

    # consolidate
    cleave("ckpt", "consolidate", ckpt, "-o", f"{work}/model.safetensors")
    whole = load_file(f"{work}/model.safetensors")
    check(set(whole) == set(model), f"consolidate: keys {sorted(whole)}")
    for name, value in trained.items():
        check(name in whole and np.array_equal(whole[name], value),
              f"consolidate: {name} is not the trained value")

    # export, run by onnxruntime and by cleave
    cleave("ckpt", "export", ckpt, "--model", MODEL, "-o", f"{work}/exported.onnx")
    exported = initializers(f"{work}/exported.onnx")
    for name, value in trained.items():
        check(np.array_equal(exported[name], value), f"export: {name} is not the trained value")
    reference = onnxruntime_loss(f"{work}/exported.onnx", x[:8], labels[:8])
    cleave("compile", f"{work}/exported.onnx", "-o", f"{work}/forward")
    cleave("run", f"{work}/forward", "--input", f"x={work}/x8.npy", "--input",
           f"labels={work}/labels8.npy", "--output-dir", f"{work}/forward-out")
    ours = float(np.load(f"{work}/forward-out/loss.npy"))
    check(abs(ours - reference) <= 1e-5 * abs(reference),
          f"export: onnxruntime's loss {reference}, the program's {ours}")
    print(f"exported model: onnxruntime loss {reference:.7f}, cleave {ours:.7f}")

    # a torch export back into its module
    module = export_mlp.export(f"{work}/torch.onnx")
    cleave("compile", f"{work}/torch.onnx", "-o", f"{work}/torch", *ADAM, "--mesh", "tp=2",
           "--plan", PLAN)
    cleave("run", "-n", "2", f"{work}/torch", *data, "--steps", str(STEPS), "--checkpoint-dir",
           f"{work}/torch-ckpt", "--save-onnx", f"{work}/torch-trained.onnx")
    cleave("ckpt", "consolidate", f"{work}/torch-ckpt", "-o", f"{work}/torch.safetensors")
    cleave("ckpt", "export", f"{work}/torch-ckpt", "--model", f"{work}/torch.onnx", "-o",
           f"{work}/torch-exported.onnx")
    module.load_state_dict(load_torch(f"{work}/torch.safetensors"))
    torch_trained = initializers(f"{work}/torch-trained.onnx")
    for name, value in module.state_dict().items():
        check(np.array_equal(value.numpy(), torch_trained[name]),
              f"torch: {name} is not the trained value")
    with torch.no_grad():
        torch_loss = float(module(torch.from_numpy(x[:8]), torch.from_numpy(labels[:8])))
    reference = onnxruntime_loss(f"{work}/torch-exported.onnx", x[:8], labels[:8])
    check(abs(torch_loss - reference) <= 1e-5 * abs(reference),
          f"torch: the module's loss {torch_loss}, onnxruntime's {reference}")
    print(f"torch module: loss {torch_loss:.7f}, onnxruntime {reference:.7f}")

    # --init-from against a model whose initializers are the new values
    fresh = {name: rng.standard_normal(value.shape).astype(np.float32) * 0.1
             for name, value in model.items()}
    save_file(fresh, f"{work}/fresh.safetensors")
    edited = onnx.load(MODEL)
    for tensor in edited.graph.initializer:
        tensor.CopyFrom(numpy_helper.from_array(fresh[tensor.name], tensor.name))
    onnx.save(edited, f"{work}/fresh.onnx")
    # The grid's global batch: two dp ranks of the model's 8 samples.
    cleave("compile", MODEL, "-o", f"{work}/single", *ADAM, "--grad-accum", "2")
    cleave("compile", f"{work}/fresh.onnx", "-o", f"{work}/fresh", *ADAM, "--grad-accum", "2")
    runs = {}
    for name, ranks, out, init in [("replaced", 1, "fresh", []),
                                   ("init-from", 1, "single",
                                    ["--init-from", f"{work}/fresh.safetensors"]),
                                   ("init-from grid", 4, "grid",
                                    ["--init-from", f"{work}/fresh.safetensors"])]:
        cleave("run", "-n", str(ranks), f"{work}/{out}", *data, "--steps", str(STEPS),
               "--log-json", f"{work}/{out}-{ranks}.json", "--save-onnx",
               f"{work}/{out}-{ranks}.onnx", *init)
        runs[name] = ([s["loss"] for s in json.load(open(f"{work}/{out}-{ranks}.json"))["steps"]],
                      initializers(f"{work}/{out}-{ranks}.onnx"))
    losses, params = runs["replaced"]
    check(runs["init-from"][0] == losses, f"--init-from: losses {runs['init-from'][0]}, "
          f"the replaced model's {losses}")
    for name, value in params.items():
        check(np.array_equal(runs["init-from"][1][name], value),
              f"--init-from: trained {name} differs")
        check(np.allclose(runs["init-from grid"][1][name], value, rtol=1e-5, atol=1e-6),
              f"--init-from on the grid: trained {name} differs")
    check(np.allclose(runs["init-from grid"][0], losses, rtol=1e-5, atol=0),
          f"--init-from on the grid: losses {runs['init-from grid'][0]}, not {losses}")

    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
