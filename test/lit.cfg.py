# lit configuration for Cleave's tests.
import os
import subprocess

import lit.formats

config.name = "Cleave"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".py", ".test"]
config.excludes = ["lib", "Inputs", "lit.cfg.py", "lit.site.cfg.py", "CMakeLists.txt"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.cleave_obj_root, "test")

path = os.pathsep.join([config.cleave_tools_dir, config.llvm_tools_dir,
                        config.environment.get("PATH", os.environ["PATH"])])
config.environment["PATH"] = path
config.environment["PYTHONPATH"] = os.path.join(config.test_source_root, "lib")
config.substitutions.append(("%python", config.python_executable))
# `%refuses N cmd...`: cmd exits N with one error line (test/lib/one_error.py),
# which it prints for FileCheck.
config.substitutions.append(
    ("%refuses", config.python_executable + " " +
     os.path.join(config.test_source_root, "lib", "one_error.py")))
# GoogleTest death tests re-execute their binary through argv[0]: give a path.
config.substitutions.append(("%bindir", config.cleave_tools_dir))
# The checkout's root, for its scripts.
config.substitutions.append(("%root", os.path.dirname(config.test_source_root)))

# A -DCLEAVE_FUZZ=ON build: everything, and every program it compiles, runs
# under AddressSanitizer and UBSan (scripts/test.sh --long). Tests that limit
# address space (which ASan's shadow memory cannot live in) say
# UNSUPPORTED: sanitized.
if config.cleave_sanitized:
    config.available_features.add("sanitized")
    config.environment["ASAN_OPTIONS"] = "detect_leaks=0"

# The long suite (scripts/test.sh --long): more trials of the fault tests,
# and the tests that say REQUIRES: long.
if os.environ.get("CLEAVE_LONG") == "1":
    config.environment["CLEAVE_LONG"] = "1"
    config.available_features.add("long")

# The headers programs include first are precompiled where the host compiler
# is GCC (runtime/cpu/CMakeLists.txt); %cxx is that compiler.
if config.cleave_program_headers:
    config.available_features.add("program-headers")
config.substitutions.append(("%cxx", config.cleave_cxx))

# The CUDA target is built whenever nvcc is found; running it needs a GPU.
if config.cleave_have_cuda:
    config.available_features.add("cuda")


def gpu_count():
    """The GPUs `nvidia-smi -L` lists (0 without the tool, a driver or a GPU)."""
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True,
                                 timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    if listing.returncode != 0:
        return 0
    return sum(1 for line in listing.stdout.splitlines() if line.startswith("GPU "))


# Tests that run kernels or NCCL on a device say REQUIRES: gpu (one GPU) or
# multi-gpu (two), so without them lit reports UNSUPPORTED rather than a pass
# whose every test skipped itself.
gpus = gpu_count() if config.cleave_have_cuda else 0
if gpus >= 1:
    config.available_features.add("gpu")
if gpus >= 2:
    config.available_features.add("multi-gpu")
