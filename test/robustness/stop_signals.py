# A stop signal ends the whole job and keeps the earlier results: after a
# first run has written its results,
#   - SIGTERM, SIGINT or SIGHUP to `cleave run` (one rank, and SIGTERM with
#     -n 2) stops the program (mpirun and every rank), within seconds, and
#     `cleave run` exits with 128 + the signal; no program process is left
#     to write results later, and the earlier results are unchanged;
#   - SIGTERM to the program itself is a clean stop, not a crash: one error
#     line saying so, exit 143, earlier results unchanged.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import hashlib
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "..", "examples", "mlp", "model.onnx")


def processes_of(program):
    found = subprocess.run(["pgrep", "-f", "^" + re.escape(program)], capture_output=True,
                           text=True).stdout.split()
    return [int(pid) for pid in found]


def digests(paths):
    return {p: hashlib.sha256(open(p, "rb").read()).hexdigest() for p in paths}


def main():
    work = sys.argv[1]
    rng = np.random.default_rng(0)
    np.save(f"{work}/x.npy", rng.standard_normal((64, 32)).astype(np.float32))
    np.save(f"{work}/labels.npy", rng.integers(0, 10, 64).astype(np.int64))
    data = ["--data", f"x={work}/x.npy,labels={work}/labels.npy"]
    problems = []
    for out, layout in ((f"{work}/one", ["--batch-size", "8"]),
                        (f"{work}/dp2", ["--batch-size", "16", "--mesh", "dp=2"])):
        subprocess.run(["cleave", "compile", MODEL, "-o", out, "--train", *layout], check=True)
    results, metrics = f"{work}/results", f"{work}/metrics.json"
    subprocess.run(["cleave", "run", f"{work}/one", *data, "--steps", "1", "--output-dir",
                    results, "--log-json", metrics], check=True, capture_output=True)
    kept = [metrics] + [os.path.join(results, n) for n in os.listdir(results)]
    earlier = digests(kept)

    def trial(name, out, launch, sig, target, code, wanted):
        program = os.path.join(out, "program")
        job = subprocess.Popen(["cleave", "run", *launch, out, *data, "--steps", "100000000",
                                "--output-dir", results, "--log-json", metrics],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        ranks = 2 if launch else 1
        deadline = time.time() + 30
        while len(processes_of(program)) < ranks and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # training
        pids = processes_of(program)
        os.kill(job.pid if target == "cleave" else pids[0], sig)
        try:
            _, err = job.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            job.kill()
            problems.append(f"{name}: cleave run still runs 20 s later")
            err = ""
        time.sleep(1.0)
        left = processes_of(program)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        if left:
            problems.append(f"{name}: {len(left)} program processes still run after cleave run")
        lines = [l for l in err.splitlines() if l.startswith("cleave: ")]
        if job.returncode != code or len(lines) != 1 or wanted not in lines[0]:
            problems.append(f"{name}: exit {job.returncode}, stderr {err!r}, expected exit "
                            f"{code} and one line with {wanted!r}")
        if digests(kept) != earlier:
            problems.append(f"{name}: the earlier results changed")

    one = f"{work}/one"
    trial("SIGTERM to cleave run", one, [], signal.SIGTERM, "cleave", 143, "stopped by SIGTERM")
    trial("SIGINT to cleave run", one, [], signal.SIGINT, "cleave", 130, "stopped by SIGINT")
    trial("SIGHUP to cleave run", one, [], signal.SIGHUP, "cleave", 129, "stopped by SIGHUP")
    trial("SIGTERM to the program", one, [], signal.SIGTERM, "program", 143,
          "program: stopped by SIGTERM")
    trial("SIGTERM to cleave run -n 2", f"{work}/dp2", ["-n", "2"], signal.SIGTERM, "cleave",
          143, "stopped by SIGTERM")
    for problem in problems:
        print("FAIL:", problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
