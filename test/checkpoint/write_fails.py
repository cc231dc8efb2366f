# A checkpoint that cannot be written (ENOSPC, injected by test/lib's
# full_disk shim) ends the run with one line naming the file and exit 1,
# and leaves the previous checkpoint whole: after a run checkpointing every
# 2 steps fails at step 4 (on a rank's safetensors file or on index.json; on
# one device and on rank 1 of dp=2 with ZeRO 1, which holds a slice of the
# optimizer state), `latest` still names step-2, and --resume from it ends
# bit-identical to an uninterrupted run. The same when the file is written
# behind training (--checkpoint-async): the write fails on the thread
# "cleave-ckpt" and the run ends with the same line when the checkpoint
# would have been published.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import subprocess
import sys

import full_disk
import mlp_data

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "..", "examples", "mlp", "model.onnx")
STEPS = 6
# (case, ranks, mesh, the file that cannot be written, run flags)
CASES = [
    ("shard", 1, [], "step-4.tmp/rank-0.safetensors", []),
    ("index", 1, [], "step-4.tmp/index.json", []),
    ("rank 1", 2, ["--mesh", "dp=2", "--zero", "1"], "step-4.tmp/rank-1.safetensors", []),
    ("shard async", 1, [], "step-4.tmp/rank-0.safetensors", ["--checkpoint-async"]),
    ("rank 1 async", 2, ["--mesh", "dp=2", "--zero", "1"], "step-4.tmp/rank-1.safetensors",
     ["--checkpoint-async"]),
]


def main():
    work = sys.argv[1]
    shim = full_disk.build(work)
    mlp_data.save(work, 5)
    problems = []
    for case, ranks, mesh, victim, flags in CASES:
        name = case.replace(" ", "-")
        out, ckpt = f"{work}/{name}", f"{work}/{name}-ckpt"
        subprocess.run(["cleave", "compile", MODEL, "-o", out, "--train", "--optimizer", "adam",
                        "--lr", "0.01"] + mesh, check=True, stderr=subprocess.DEVNULL)
        run = ["cleave", "run", "-n", str(ranks), out, "--data",
               f"x={work}/x.npy,labels={work}/labels.npy", "--steps", str(STEPS)]
        env = dict(os.environ, LD_PRELOAD=shim, CLEAVE_FULL_DISK=f"{name}-ckpt/{victim}")
        failed = subprocess.run(run + flags + ["--checkpoint-dir", ckpt, "--checkpoint-every",
                                               "2"], capture_output=True, text=True, env=env)
        errors = [line for line in failed.stderr.splitlines()
                  if line.startswith("cleave: error: ")]
        if failed.returncode != 1:
            problems.append(f"{case}: exit {failed.returncode}, not 1: {failed.stderr[-300:]!r}")
        elif len(errors) != 1 or victim.split("/")[-1] not in errors[0] or \
                "No space left on device" not in errors[0]:
            problems.append(f"{case}: the errors {errors} do not name {victim} and why")
        latest = open(f"{ckpt}/latest").read().strip()
        if latest != "step-2":
            problems.append(f"{case}: latest is {latest}, not step-2")
        subprocess.run(run + ["--resume", ckpt, "--checkpoint-dir", ckpt, "--output-dir",
                              f"{out}-resumed", "--log-json", f"{out}-resumed.json"],
                       check=True, stderr=subprocess.DEVNULL)
        subprocess.run(run + ["--output-dir", f"{out}-full", "--log-json", f"{out}-full.json"],
                       check=True, stderr=subprocess.DEVNULL)
        full = json.load(open(f"{out}-full.json"))["steps"]
        if json.load(open(f"{out}-resumed.json"))["steps"] != full[2:]:
            problems.append(f"{case}: the steps resumed from step-2 differ")
        for blob in os.listdir(f"{out}-full"):
            if blob.endswith(".bin") and open(f"{out}-full/{blob}", "rb").read() != \
                    open(f"{out}-resumed/{blob}", "rb").read():
                problems.append(f"{case}: {blob} differs from the uninterrupted run's")
        print(f"{case}: {errors[0] if errors else failed.stderr[-200:]}")
    for p in problems:
        print("FAIL:", p)
    failed = len({p.split(":")[0] for p in problems})
    print(f"{len(CASES) - failed} passed, {failed} failed")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
