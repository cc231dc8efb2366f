# A run that cannot write its results fails in one line and keeps the
# earlier ones: after a first run has written --output-dir, --log-json and
# --save-onnx,
#   - a --save-onnx path that is a directory, has no parent directory, or
#     lies where nothing can be created is refused (exit 2, one line naming
#     --save-onnx) before training, and every earlier result is unchanged;
#   - a full disk (ENOSPC, injected by an LD_PRELOAD shim compiled here) on
#     writing loss.npy, metrics.json or the --save-onnx model is an error
#     (exit 1, one line naming the file, no "LLVM ERROR") that leaves every
#     earlier file as it was (the results are one set: none of them
#     changes) and no temporary file behind.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import hashlib
import os
import shutil
import subprocess
import sys

import numpy as np

import full_disk

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "..", "examples", "mlp", "model.onnx")

def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def snapshot(paths):
    """Every file under `paths` with its contents' digest."""
    files = {}
    for path in paths:
        if os.path.isdir(path):
            for name in sorted(os.listdir(path)):
                files[os.path.join(path, name)] = digest(os.path.join(path, name))
        elif os.path.exists(path):
            files[path] = digest(path)
    return files


def main():
    work = sys.argv[1]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 32)).astype(np.float32)
    np.save(f"{work}/x.npy", x)
    np.save(f"{work}/labels.npy", np.argmax(x[:, :10], axis=1).astype(np.int64))
    shim = full_disk.build(work)
    out = f"{work}/out"
    subprocess.run(["cleave", "compile", MODEL, "-o", out, "--train", "--batch-size", "8"],
                   check=True)
    results, metrics, model = f"{work}/results", f"{work}/metrics.json", f"{work}/trained.onnx"
    data = ["--data", f"x={work}/x.npy,labels={work}/labels.npy"]

    def cleave_run(seed, save_onnx=model, env=None):
        return subprocess.run(["cleave", "run", out, *data, "--steps", "2", "--seed", str(seed),
                               "--output-dir", results, "--log-json", metrics,
                               "--save-onnx", save_onnx],
                              capture_output=True, text=True, env=env)

    first = cleave_run(1)
    if first.returncode != 0:
        sys.exit(f"the first run failed: {first.stderr}")
    earlier = snapshot([results, metrics, model])
    if len(earlier) < 4:
        sys.exit(f"the first run wrote too little: {earlier}")
    problems = []

    def check(name, result, code, wanted):
        lines = [l for l in result.stderr.splitlines() if not l.startswith(("note: ", "step "))]
        if result.returncode != code or len(lines) != 1 or wanted not in lines[0] \
                or "LLVM ERROR" in result.stderr:
            problems.append(f"{name}: exit {result.returncode}, stderr {result.stderr!r}, "
                            f"expected exit {code} and one line with {wanted!r}")
        now = snapshot([results, metrics, model])
        if now != earlier:
            changed = sorted(set(now.items()) ^ set(earlier.items()))
            problems.append(f"{name}: the earlier results changed: {changed}")

    # Bad --save-onnx paths, refused before training (a seed that would
    # change every result).
    os.makedirs(f"{work}/a-directory.onnx")
    for name, path in [("a directory", f"{work}/a-directory.onnx"),
                       ("no parent", f"{work}/missing/trained.onnx"),
                       ("nowhere to create", "/proc/trained.onnx")]:
        result = cleave_run(2, save_onnx=path)
        check(f"--save-onnx {name}", result, 2, f"--save-onnx {path}")
        if "step " in result.stderr:
            problems.append(f"--save-onnx {name}: trained before refusing")

    # A full disk on each file of the set.
    for victim, wanted in [("loss.npy", f"{results}/loss.npy"), ("metrics.json", metrics),
                           ("trained.onnx", model)]:
        env = dict(os.environ, LD_PRELOAD=shim, CLEAVE_FULL_DISK=victim)
        result = cleave_run(3, env=env)
        check(f"ENOSPC on {victim}", result, 1, wanted)
        if "No space left on device" not in result.stderr:
            problems.append(f"ENOSPC on {victim}: the error does not say why: {result.stderr!r}")
        # The program alone, without cleave run.
        result = subprocess.run([f"{out}/program", "--dir", out, *data, "--steps", "2",
                                 "--seed", "3", "--output-dir", results, "--log-json", metrics],
                                capture_output=True, text=True, env=env)
        if victim != "trained.onnx":
            check(f"ENOSPC on {victim} (the program)", result, 1, wanted)
    leftovers = [p for p in os.listdir(work) + os.listdir(results) if p.endswith(".partial")]
    if leftovers:
        problems.append(f"temporary files left: {leftovers}")

    for problem in problems:
        print("FAIL:", problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
