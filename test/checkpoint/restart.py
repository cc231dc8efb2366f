# --max-restarts: a data-parallel run whose ranks are killed (kill -9) at
# random moments, seeded, finishes with parameters and a last loss
# bit-identical to an uninterrupted run's: each time, the job ends on every
# rank, cleave run says in one warning line which rank died of which signal
# after which step and that it restarts from the latest checkpoint, and the
# job continues from there. Three trials on 2 ranks here; 20 on 4 ranks with
# CLEAVE_LONG=1 (scripts/test.sh --long). Also: a run killed more often than
# it may restart ends with the job's status, and --max-restarts without
# --checkpoint-dir is refused.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import glob
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "..", "examples", "mlp", "model.onnx")
STEPS, EVERY = 20000, 1000
LONG = os.environ.get("CLEAVE_LONG") == "1"
TRIALS, RANKS = (20, 4) if LONG else (3, 2)


def rank_pids(program_dir):
    """The pids of the ranks running DIR/program."""
    pids = []
    for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            args = open(cmdline, "rb").read().split(b"\0")
        except OSError:
            continue
        if args and args[0].decode(errors="replace") == f"{program_dir}/program":
            pids.append(int(cmdline.split("/")[2]))
    return sorted(pids)


def run_with_kills(run, out, ckpt, kills, rng, problems, name):
    """Runs `run`, killing a random rank `kills` times, each once a new
    checkpoint exists and a random moment later. Returns (exit code, stderr)."""
    job = subprocess.Popen(run, stderr=subprocess.PIPE, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(job.stderr), daemon=True)
    reader.start()
    killed = 0
    seen = None
    deadline = time.time() + 300 * RANKS // 2  # 4 ranks on 2 cores take longer
    while job.poll() is None and time.time() < deadline:
        latest = open(f"{ckpt}/latest").read() if os.path.exists(f"{ckpt}/latest") else None
        pids = rank_pids(out)
        # A kill after the last step's checkpoint is not restarted (nothing
        # is left to train; docs/training.md): kill before it.
        final = latest and int(latest.strip().split("-")[1]) >= STEPS
        if killed < kills and latest and latest != seen and not final and len(pids) == RANKS:
            time.sleep(rng.uniform(0, 0.05))
            now = open(f"{ckpt}/latest").read()
            victim = rng.choice(rank_pids(out) or [None])
            if victim and int(now.strip().split("-")[1]) < STEPS:
                os.kill(victim, signal.SIGKILL)
                killed += 1
                seen = latest
                # Wait for the next job to start training.
                while job.poll() is None and set(rank_pids(out)) & {victim}:
                    time.sleep(0.01)
        time.sleep(0.01)
    if job.poll() is None:
        job.kill()
        problems.append(f"{name}: still running after {300 * RANKS // 2} s")
    job.wait()
    reader.join(timeout=10)
    if killed != kills:
        problems.append(f"{name}: killed {killed} times, meant {kills} (the run ended first)")
    return job.returncode, "".join(lines)


def main():
    work = sys.argv[1]
    rng = random.Random(20261201)
    data = np.random.default_rng(7)
    x = data.standard_normal((64, 32)).astype(np.float32)
    np.save(f"{work}/x.npy", x)
    np.save(f"{work}/labels.npy", np.argmax(x[:, :10], axis=1).astype(np.int64))
    out = f"{work}/dp{RANKS}"
    subprocess.run(["cleave", "compile", MODEL, "-o", out, "--train", "--optimizer", "adam",
                    "--lr", "0.001", "--mesh", f"dp={RANKS}", "--batch-size", str(8 * RANKS)],
                   check=True,
                   stderr=subprocess.DEVNULL)
    base = ["cleave", "run", "-n", str(RANKS), out, "--data",
            f"x={work}/x.npy,labels={work}/labels.npy",
            "--steps", str(STEPS), "--shuffle", "--seed", "5"]
    subprocess.run(base + ["--output-dir", f"{work}/reference", "--log-json",
                           f"{work}/reference.json"], check=True, stderr=subprocess.DEVNULL)
    reference = {os.path.basename(p): open(p, "rb").read()
                 for p in glob.glob(f"{work}/reference/weights*.bin")}
    last_loss = json.load(open(f"{work}/reference.json"))["steps"][-1]
    problems = []
    warning = re.compile(
        r"^cleave: warning: cleave run: rank [0-9] was killed by SIGKILL(?: after step \d+)?: "
        r"restarting from the (?:latest checkpoint in \S+|start \(no checkpoint yet\)) "
        r"\(restart \d of 3\)$")
    for trial in range(TRIALS):
        name = f"trial {trial}"
        ckpt, result = f"{work}/ckpt-{trial}", f"{work}/out-{trial}"
        kills = rng.randint(1, 3)
        code, stderr = run_with_kills(
            base + ["--checkpoint-dir", ckpt, "--checkpoint-every", str(EVERY), "--keep", "2",
                    "--max-restarts", "3", "--output-dir", result, "--log-json",
                    f"{result}.json"], out, ckpt, kills, rng, problems, name)
        if code != 0:
            problems.append(f"{name}: exit {code}: {stderr[-400:]!r}")
            continue
        said = [line for line in stderr.splitlines() if "restarting" in line]
        if len(said) != kills or not all(warning.match(line) for line in said):
            problems.append(f"{name}: {kills} kills, the restart lines: {said}")
        got = {os.path.basename(p): open(p, "rb").read()
               for p in glob.glob(f"{result}/weights*.bin")}
        if got != reference:
            problems.append(f"{name}: the final weights differ from the uninterrupted run's")
        if json.load(open(f"{result}.json"))["steps"][-1] != last_loss:
            problems.append(f"{name}: the last step's log differs from the uninterrupted run's")

    # More kills than restarts: the job's own status, after the restart lines.
    ckpt = f"{work}/ckpt-exhausted"
    code, stderr = run_with_kills(base + ["--checkpoint-dir", ckpt, "--checkpoint-every",
                                          str(EVERY), "--max-restarts", "1"],
                                  out, ckpt, 2, rng, problems, "exhausted")
    said = [line for line in stderr.splitlines() if "restarting" in line]
    if code != 137 or len(said) != 1 or "killed by SIGKILL" not in stderr.splitlines()[-1]:
        problems.append(f"exhausted: exit {code}, restart lines {said}, "
                        f"last line {stderr.splitlines()[-1:]}")

    refused = subprocess.run(base + ["--max-restarts", "2"], capture_output=True, text=True)
    if refused.returncode != 2 or refused.stderr.strip() != (
            "cleave: error: --max-restarts 2: needs --checkpoint-dir: a restart continues from "
            "the run's latest checkpoint\nnote: e.g. --checkpoint-dir ckpt/ --checkpoint-every "
            "100"):
        problems.append(f"no --checkpoint-dir: exit {refused.returncode}, {refused.stderr!r}")

    if problems:
        print("\n".join(problems))
        sys.exit(1)
    print(f"{TRIALS} trials of random kills on {RANKS} ranks ended bit-identical to the "
          "uninterrupted run")


main()
