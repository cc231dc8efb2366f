"""Checks a pack of scripts/gpu-check.sh (docs/gpu-check.md):

    gpu_pack_contents.py PACK.tar.gz ROOT

Whatever the GPU half needs is there; each test model is compiled for CUDA (its
bf16 and fp16 variants with their products, its pipeline one program a stage, which sends
and receives, its layouts on two ranks with the background collectives they
start); each model's reference losses are finite, one per step, and the
first is the model's loss on the first rows of its data as onnxruntime computes
it from the exported ONNX model (where a step takes several microbatches, the
mean of their losses); the timing models'
gzipped blobs are as long as their plans say; the pack is under 64 MiB.
"""
import gzip
import json
import math
import os
import re
import subprocess
import sys
import tarfile
import tempfile

import numpy as np
import onnxruntime as ort

# The first loss against onnxruntime's fp32 one: the CPU's fp32 products sum in
# another order (a few ulps); bf16 products round every factor to 8 bits of
# mantissa, which moves the tiny GPT's first loss by about 1e-3 relative.
FIRST_LOSS = {"fp32": 1e-5, "bf16": 1e-2, "fp16": 2e-3}
# The element type of a precision's products in its programs.
PRODUCTS = {"fp32": None, "bf16": "DType::BF16", "fp16": "DType::F16"}
# The layouts on two ranks and the collectives they start on the background
# thread.
STARTED = {"mlp-dp2": ["all_reduce_start", "all_reduce_wait"],
           "mlp-dp2-bf16-sums": ["all_reduce_start", "all_reduce_wait"],
           "mlp-dp2-bf16-grads": [],
           "mlp-zero1": ["reduce_scatter_owned_start", "reduce_scatter_wait"],
           "mlp-zero2": ["reduce_scatter_owned_start", "reduce_scatter_wait"],
           "mlp-zero3": ["all_gather_start", "all_gather_wait", "reduce_scatter_start",
                         "reduce_scatter_wait"],
           "gpt-tp2": ["all_reduce_start", "all_reduce_wait"],
           "gpt-bf16-zero2": []}
# The layouts whose @apply sums and updates a large parameter in chunks.
CHUNKED = {"mlp-dp2-bf16-grads"}


def reads_chunks(source):
    """Whether a kernel of the program reads a `cleave.elements` view (a
    chunk); ZeRO 1's zeroing of members of its flat gradients makes such
    views too, but fills the members in place, reading none."""
    for function in source.split("\nvoid cleave_")[1:]:
        chunks = re.findall(r"Tensor (v\d+) = cleave::rt::elements\(", function)
        if any(re.search(rf"\b{chunk}\b", line) for chunk in chunks
               for line in function.splitlines() if "= cleave::rt::elements(" not in line):
            return True
    return False
NEEDED = ["CMakeLists.txt", "check.py", "torch_gpt2.py", "manifest.json",
          "runtime/CMakeLists.txt", "runtime/cuda/Linalg.cu", "runtime/driver/CudaMain.cu",
          "runtime/comm/Nccl.cpp", "third_party/include/nlohmann/json.hpp",
          "third_party/include/CLI/CLI.hpp", "third_party/googletest/googletest/CMakeLists.txt",
          "third_party/openmpi/include/mpi.h", "third_party/openmpi/lib/libmpi.so.40",
          "third_party/openmpi/bin/mpirun", "runtime/comm/HostStaged.cpp"]


def check(condition, message):
    if not condition:
        sys.exit("gpu pack: " + message)


def first_loss(root, model, directory, work, microbatches):
    exported = os.path.join(work, model["exporter"] + ".onnx")
    if not os.path.exists(exported):
        subprocess.run([sys.executable, os.path.join(root, "test", "models", model["exporter"]),
                        exported], check=True)
    session = ort.InferenceSession(exported, providers=["CPUExecutionProvider"])
    losses = []
    for k in range(microbatches):
        feeds = {}
        for graph_input in session.get_inputs():
            rows = graph_input.shape[0]
            feeds[graph_input.name] = np.load(
                os.path.join(directory, f"data.{graph_input.name}.npy"))[k * rows:(k + 1) * rows]
        losses.append(float(session.run(None, feeds)[0]))
    return sum(losses) / microbatches


def main():
    pack, root = sys.argv[1], sys.argv[2]
    size = os.path.getsize(pack)
    check(size < 64 << 20, f"{size} bytes, over 64 MiB")
    with tempfile.TemporaryDirectory() as work:
        with tarfile.open(pack) as tar:
            tar.extractall(work)
        base = os.path.join(work, "gpu-check")
        for path in NEEDED:
            check(os.path.exists(os.path.join(base, path)), f"{path} is missing")
        with open(os.path.join(base, "manifest.json")) as f:
            manifest = json.load(f)
        names = [model["name"] for model in manifest["models"]]
        check(names == ["mlp", "cnn", "gpt", "gpt-bf16", "cnn-bf16", "gpt-fp16", "mlp-pp2"] +
              list(STARTED),
              f"models {names}")
        for model in manifest["models"]:
            directory = os.path.join(base, "models", model["name"])
            stages = model["stages"]
            program_dirs = [os.path.join(directory, f"stage{s}") for s in range(stages)] if (
                stages > 1) else [directory]
            for program_dir in program_dirs:
                with open(os.path.join(program_dir, "plan.json")) as f:
                    plan = json.load(f)
                with open(os.path.join(program_dir, "program.cu")) as f:
                    source = f.read()
                check(plan["target"] == "cuda", f"{model['name']}: target {plan['target']}")
                check('#include "runtime/cuda/Program.h"' in source,
                      f"{model['name']}: program.cu")
                # The products' operand types (a sum's wire type aside).
                products = "\n".join(line for line in source.splitlines()
                                      if "all_reduce" not in line)
                for precision, dtype in PRODUCTS.items():
                    check(not dtype or (dtype in products) == (model["precision"] == precision),
                          f"{model['name']}: {precision} products in a {model['precision']} "
                          f"program, or none in a {precision} one")
                check(("pipeline_send" in source) == (stages > 1),
                      f"{model['name']}: pipeline messages in a program of {stages} stages")
                check(reads_chunks(source) == (model["name"] in CHUNKED),
                      f"{model['name']}: chunked sums where none are planned, or none")
                started = STARTED.get(model["name"], [])
                check(all(f"cuda::{kernel}(" in source for kernel in started) and (
                      started or "_start(" not in source),
                      f"{model['name']}: the background collectives {started} and no others")
            steps = int(model["run_flags"][model["run_flags"].index("--steps") + 1])
            losses = model["cpu_losses"]
            check(len(losses) == steps and all(math.isfinite(x) for x in losses),
                  f"{model['name']}: losses {losses}")
            reference = first_loss(root, model, directory, work, model["microbatches"])
            difference = abs(losses[0] - reference) / abs(reference)
            check(difference <= FIRST_LOSS[model["precision"]],
                  f"{model['name']}: first loss {losses[0]} against onnxruntime's {reference}")
            print(f"{model['name']}: {steps} losses, the first {difference:.1e} from onnxruntime's")
        for entry in manifest["timing"]["models"]:
            directory = os.path.join(base, "models", entry["name"])
            with open(os.path.join(directory, "plan.json")) as f:
                plan = json.load(f)
            with gzip.open(os.path.join(directory, "weights.bin.gz")) as f:
                length = len(f.read())
            check(plan["target"] == "cuda" and length == plan["weights"]["bytes"],
                  f"{entry['name']}: {length} bytes of weights, the plan says "
                  f"{plan['weights']['bytes']}")
    print(f"pack: {size / 2**20:.1f} MiB, complete")


if __name__ == "__main__":
    main()
