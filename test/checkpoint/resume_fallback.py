# --resume D with a damaged latest checkpoint falls back to the newest
# earlier complete one, with one warning line naming the damaged file, the
# fault and the checkpoint skipped, and then continues from it exactly: the
# resumed run's losses and trained parameters equal an uninterrupted run's,
# bit for bit. Cases: a flipped bit in one device's shard, a truncated shard
# of rank 1 of dp=2 with ZeRO 1 (whose file rank 1 verifies), and an
# index.json that is not JSON. When every checkpoint is damaged the run
# stops with exit 1: a warning for the latest and an error naming the last
# one's fault, and nothing written.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "..", "examples", "mlp", "model.onnx")
STEPS = 6


def flip(path):
    data = bytearray(open(path, "rb").read())
    data[-7] ^= 0x40
    open(path, "wb").write(bytes(data))


def truncate(path):
    data = open(path, "rb").read()
    open(path, "wb").write(data[:-12])


def not_json(path):
    open(path, "w").write("{\"format_version\": ")


# (name, layout, ranks, damage of step-4, the file it damages, what the warning says)
CASES = [
    ("flip", "single", 1, flip, "rank-0.safetensors", "(the file is damaged)"),
    ("truncated rank 1", "dp2-zero1", 2, truncate, "rank-1.safetensors", "(truncated or replaced)"),
    ("index", "single", 1, not_json, "index.json", "is not a JSON object"),
]


def main():
    work = sys.argv[1]
    rng = np.random.default_rng(2)
    x = rng.standard_normal((32, 32)).astype(np.float32)
    np.save(f"{work}/x.npy", x)
    np.save(f"{work}/labels.npy", np.argmax(x[:, :10], axis=1).astype(np.int64))
    data = ["--data", f"x={work}/x.npy,labels={work}/labels.npy", "--total-steps", str(STEPS)]
    layouts = {"single": [], "dp2-zero1": ["--mesh", "dp=2", "--zero", "1"]}
    for name, flags in layouts.items():
        subprocess.run(["cleave", "compile", MODEL, "-o", f"{work}/{name}", "--train",
                        "--optimizer", "adam", "--lr-schedule", "linear", *flags], check=True,
                       stderr=subprocess.DEVNULL)
    problems = []
    for name, layout, ranks, damage, damaged, fault in CASES:
        case = f"{work}/{name.replace(' ', '-')}"
        run = ["cleave", "run", "-n", str(ranks), f"{work}/{layout}", *data]
        subprocess.run(run + ["--steps", str(STEPS), "--log-json", f"{case}-full.json",
                              "--output-dir", f"{case}-full"], check=True,
                       stderr=subprocess.DEVNULL)
        subprocess.run(run + ["--steps", "4", "--checkpoint-dir", f"{case}-ckpt",
                              "--checkpoint-every", "2"], check=True, stderr=subprocess.DEVNULL)
        damage(f"{case}-ckpt/step-4/{damaged}")
        if name == "flip":  # for the case where no checkpoint loads
            shutil.copytree(f"{case}-ckpt", f"{work}/all-damaged", symlinks=True)
        resumed = subprocess.run(run + ["--steps", str(STEPS), "--resume", f"{case}-ckpt",
                                        "--log-json", f"{case}-resumed.json", "--output-dir",
                                        f"{case}-resumed"], capture_output=True, text=True)
        warnings = [line for line in resumed.stderr.splitlines()
                    if line.startswith("cleave: warning: ")]
        if resumed.returncode != 0:
            problems.append(f"{name}: exit {resumed.returncode}: {resumed.stderr}")
            continue
        if len(warnings) != 1 or not all(
                text in warnings[0] for text in
                [f"{case}-ckpt/step-4/{damaged}", fault, "skipped step-4, trying step-2"]):
            problems.append(f"{name}: warnings {warnings}")
        if f"resuming from {case}-ckpt/step-2 at step 3" not in resumed.stderr:
            problems.append(f"{name}: did not resume from step-2: {resumed.stderr}")
        full = json.load(open(f"{case}-full.json"))["steps"]
        steps = json.load(open(f"{case}-resumed.json"))["steps"]
        if steps != full[2:]:
            problems.append(f"{name}: resumed steps {steps} are not {full[2:]}")
        for blob in os.listdir(f"{case}-full"):
            if blob.endswith(".bin") and open(f"{case}-full/{blob}", "rb").read() != open(
                    f"{case}-resumed/{blob}", "rb").read():
                problems.append(f"{name}: {blob} differs from the uninterrupted run's")
        print(f"{name}: {warnings[0] if warnings else ''}")

    truncate(f"{work}/all-damaged/step-2/rank-0.safetensors")
    os.makedirs(f"{work}/none")
    stopped = subprocess.run(["cleave", "run", f"{work}/single", *data, "--steps", str(STEPS),
                              "--resume", f"{work}/all-damaged", "--output-dir", f"{work}/none"],
                             capture_output=True, text=True)
    lines = [line for line in stopped.stderr.splitlines() if not line.startswith("note: ")]
    if stopped.returncode != 1 or len(lines) != 2 or not lines[0].startswith(
            "cleave: warning: ") or not (lines[1].startswith("cleave: error: ") and
                                         "step-2/rank-0.safetensors" in lines[1] and
                                         "truncated" in lines[1]):
        problems.append(f"all damaged: exit {stopped.returncode}: {stopped.stderr!r}")
    if os.listdir(f"{work}/none"):
        problems.append(f"all damaged: wrote {os.listdir(f'{work}/none')}")
    print(f"all damaged: {lines}")
    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
