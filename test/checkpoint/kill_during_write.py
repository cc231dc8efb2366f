# A crash at any moment leaves the previous checkpoint whole. The program
# writes a checkpoint after every step (most of its time goes to writing
# them; every other trial writes each behind the next step, on the thread
# "cleave-ckpt", with --checkpoint-async) and is killed with SIGKILL at a
# seeded random moment, TRIALS times;
# each time --resume continues from `latest` and ends with the losses and
# the trained blob of an uninterrupted run, bit for bit. A staging directory
# a crash left half written (step-N.tmp) is never loaded and is removed by
# the next checkpoint. A crash between the rename of step-N.tmp and the
# replacing of `latest` leaves `latest` naming the checkpoint before: the
# run resumes from it and writes step-N again.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import random
import signal
import subprocess
import sys
import time

import mlp_data

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "..", "examples", "mlp", "model.onnx")
STEPS, TRIALS = 4000, 4


def main():
    work = sys.argv[1]
    mlp_data.save(work, 2)
    out = f"{work}/out"
    subprocess.run(["cleave", "compile", MODEL, "-o", out, "--train", "--optimizer", "adam",
                    "--lr", "0.001"], check=True, stderr=subprocess.DEVNULL)
    data = ["--data", f"x={work}/x.npy,labels={work}/labels.npy", "--steps", str(STEPS)]
    subprocess.run(["cleave", "run", out, *data, "--output-dir", f"{work}/full", "--log-json",
                    f"{work}/full.json"], check=True, stderr=subprocess.DEVNULL)
    full = json.load(open(f"{work}/full.json"))["steps"]
    blob = open(f"{work}/full/weights.bin", "rb").read()

    problems = []
    chooser = random.Random(13)
    for trial in range(TRIALS):
        ckpt = f"{work}/ckpt{trial}"
        behind = ["--checkpoint-async"] if trial % 2 else []
        job = subprocess.Popen([f"{out}/program", "--dir", out, *data, "--checkpoint-dir", ckpt,
                                "--checkpoint-every", "1", "--keep", "2", *behind],
                               stderr=subprocess.DEVNULL)
        while not os.path.exists(f"{ckpt}/latest") and job.poll() is None:
            time.sleep(0.01)
        time.sleep(chooser.uniform(0.05, 0.5))
        job.send_signal(signal.SIGKILL)
        job.wait()
        if job.returncode != -signal.SIGKILL:
            problems.append(f"trial {trial}: the run ended ({job.returncode}) before the kill")
            continue
        left = sorted(os.listdir(ckpt))
        at = int(open(f"{ckpt}/latest").read().strip().split("-")[1])
        # What a crash in the middle of a write leaves: a half-written file.
        os.makedirs(f"{ckpt}/step-{at + 1}.tmp", exist_ok=True)
        open(f"{ckpt}/step-{at + 1}.tmp/rank-0.safetensors", "wb").write(b"\x10\0\0\0")
        results = f"{work}/resumed{trial}"
        os.makedirs(results)
        subprocess.run(["cleave", "run", out, *data, "--resume", ckpt, "--checkpoint-dir", ckpt,
                        "--output-dir", results, "--log-json", f"{results}/log.json"],
                       check=True, stderr=subprocess.DEVNULL)
        resumed = json.load(open(f"{results}/log.json"))["steps"]
        if resumed != full[at:]:
            problems.append(f"trial {trial}: the losses after step {at} differ")
        if open(f"{results}/weights.bin", "rb").read() != blob:
            problems.append(f"trial {trial}: the trained blob differs")
        stale = [name for name in os.listdir(ckpt) if name.endswith(".tmp")]
        if stale:
            problems.append(f"trial {trial}: {stale} left after the next checkpoint")
        print(f"trial {trial}{' (async)' if behind else ''}: killed with {left} in the "
              f"directory, resumed after step {at}")
    # What a crash after the rename and before `latest` leaves.
    ckpt = f"{work}/renamed"
    short = ["--steps", "6"]
    subprocess.run(["cleave", "run", out, *data[:2], *short, "--checkpoint-dir", ckpt,
                    "--checkpoint-every", "2", "--keep", "2"], check=True,
                   stderr=subprocess.DEVNULL)
    open(f"{ckpt}/latest", "w").write("step-4\n")
    subprocess.run(["cleave", "run", out, *data[:2], "--steps", "8", "--checkpoint-dir", ckpt,
                    "--checkpoint-every", "2", "--keep", "2", "--resume", ckpt, "--log-json",
                    f"{work}/renamed.json"], check=True, stderr=subprocess.DEVNULL)
    if json.load(open(f"{work}/renamed.json"))["steps"] != full[4:8]:
        problems.append("renamed: the steps resumed from step-4 differ")
    if sorted(os.listdir(ckpt)) != ["latest", "step-6", "step-8"]:
        problems.append(f"renamed: {sorted(os.listdir(ckpt))} left, not step-6 and step-8")
    for p in problems:
        print("FAIL:", p)
    failed = len({p.split(":")[0] for p in problems})
    print(f"{TRIALS + 1 - failed} passed, {failed} failed")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
