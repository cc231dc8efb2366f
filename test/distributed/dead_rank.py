# A rank that dies or hangs never hangs the job. A data-parallel MLP trains
# on 2 ranks with a 3 s collective timeout for many steps; then
#   - one rank is killed (SIGKILL): the job must end within a few seconds
#     with mpirun's status 137, and say so in one cleave line naming the
#     rank and the signal, without mpirun's banner;
#   - one rank is stopped (SIGSTOP): the other waits in the step's
#     all-reduce, times out after 3 s, prints one line naming the rank, the
#     collective, the axis and the step, and the job ends non-zero;
#   - the program started on 1 or 4 ranks instead of its mesh's 2: exit 2
#     with a line naming the -n to use.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import os
import re
import signal
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "..", "examples", "mlp", "model.onnx")
TIMEOUT = 3


def ranks_of(program):
    """The pids of the processes running `program`."""
    found = subprocess.run(["pgrep", "-f", "^" + re.escape(program)], capture_output=True,
                           text=True).stdout.split()
    return [int(pid) for pid in found]


def trial(workdir, out, sig):
    program = os.path.join(out, "program")
    job = subprocess.Popen(
        ["cleave", "run", "-n", "2", out, "--data",
         f"x={workdir}/x.npy,labels={workdir}/y.npy", "--steps", "100000000",
         "--collective-timeout", str(TIMEOUT)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while len(ranks_of(program)) < 2 and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)  # both ranks are inside their training loops
    victims = ranks_of(program)
    if len(victims) < 2:
        job.kill()
        return f"{sig.name}: found {len(victims)} ranks running"
    start = time.time()
    os.kill(max(victims), sig)
    try:
        _, err = job.communicate(timeout=TIMEOUT + 20)
    except subprocess.TimeoutExpired:
        job.kill()
        for pid in ranks_of(program):
            os.kill(pid, signal.SIGKILL)
        return f"{sig.name}: the job still runs {TIMEOUT + 20} s later"
    took = time.time() - start
    print(f"{sig.name}: exit {job.returncode} after {took:.1f} s")
    if job.returncode == 0:
        return f"{sig.name}: the job ended with status 0"
    if sig == signal.SIGKILL:
        lines = [l for l in err.splitlines() if l.strip()]
        if job.returncode != 137 or len(lines) != 1 or not re.fullmatch(
                r"cleave: error: rank [01]: killed by SIGKILL( after step \d+)?; the job exits "
                r"with 137", lines[0]):
            return f"{sig.name}: exit {job.returncode}, expected 137 and one line, got:\n{err}"
    if sig == signal.SIGSTOP:
        line = re.search(r"cleave: error: rank 0: collective all_reduce of '[^']*' on axis 'dp' "
                         r"at step \d+ timed out after 3 s", err)
        if not line:
            return f"{sig.name}: no timeout line naming rank, collective, axis and step in:\n{err}"
        if took < TIMEOUT - 0.5:
            return f"{sig.name}: ended after {took:.1f} s, before the timeout"
    return None


def main():
    workdir = sys.argv[1]
    rng = np.random.default_rng(0)
    np.save(os.path.join(workdir, "x.npy"), rng.standard_normal((64, 32)).astype(np.float32))
    np.save(os.path.join(workdir, "y.npy"), rng.integers(0, 10, 64).astype(np.int64))
    out = os.path.join(workdir, "dp2")
    subprocess.run(["cleave", "compile", MODEL, "-o", out, "--train", "--mesh", "dp=2",
                    "--batch-size", "16"], check=True)
    problems = [p for p in (trial(workdir, out, signal.SIGKILL),
                            trial(workdir, out, signal.SIGSTOP)) if p]
    # Started on another number of ranks than its mesh: one line, exit 2.
    for launch in ([], ["-n", "4"]):
        run = subprocess.run(["cleave", "run", *launch, out, "--data",
                              f"x={workdir}/x.npy,labels={workdir}/y.npy", "--steps", "1"],
                             capture_output=True, text=True)
        wanted = "the program is compiled for 2 ranks (mesh dp=2) but was started on"
        if run.returncode != 2 or wanted not in run.stderr or "cleave run -n 2" not in run.stderr:
            problems.append(f"-n {launch[1] if launch else 1}: exit {run.returncode}, "
                            f"stderr {run.stderr!r}")
    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
