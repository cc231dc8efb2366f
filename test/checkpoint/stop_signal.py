# With --checkpoint-dir, SIGTERM to `cleave run` (one rank, and -n 2 with
# dp=2) stops the run after its step: every rank writes the checkpoint of
# that step, rank 0 says how to resume, the exit status is 0 and --log-json
# holds the steps that ran. Resumed for 3 more steps, the run equals an
# uninterrupted one of as many steps, bit for bit. (Without --checkpoint-dir
# a stop signal still ends the run at once: test/robustness/stop_signals.py.)
# The dp=2 stop also holds when writing the checkpoint takes seconds (every
# fsync made 2 s slower by an LD_PRELOAD shim): the ranks get the signal from
# cleave run itself, and mpirun, which would kill every rank a second after
# passing a signal on, never sees one.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import signal
import subprocess
import sys
import time

import mlp_data

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "..", "examples", "mlp", "model.onnx")
# name, ranks, mesh flags, whether fsync is slow.
LAYOUTS = [("single", 1, [], False), ("dp2", 2, ["--mesh", "dp=2"], False),
           ("dp2-slow-write", 2, ["--mesh", "dp=2"], True)]
MORE = 3

# Every fsync sleeps $CLEAVE_SLOW_FSYNC seconds first.
SLOW_FSYNC = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>
int fsync(int fd) {
  static int (*real)(int);
  if (!real) real = dlsym(RTLD_NEXT, "fsync");
  const char *seconds = getenv("CLEAVE_SLOW_FSYNC");
  if (seconds) sleep((unsigned)atoi(seconds));
  return real(fd);
}
"""


def slow_fsync_env(work):
    with open(f"{work}/slow_fsync.c", "w") as f:
        f.write(SLOW_FSYNC)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", f"{work}/slow_fsync.so",
                    f"{work}/slow_fsync.c", "-ldl"], check=True)
    return dict(os.environ, LD_PRELOAD=f"{work}/slow_fsync.so", CLEAVE_SLOW_FSYNC="2")


def main():
    work = sys.argv[1]
    mlp_data.save(work, 4)
    problems = []
    slow = slow_fsync_env(work)
    for name, ranks, mesh, slow_write in LAYOUTS:
        out, ckpt = f"{work}/{name}", f"{work}/{name}-ckpt"
        subprocess.run(["cleave", "compile", MODEL, "-o", out, "--train", "--optimizer", "adam",
                        "--lr", "0.001"] + mesh, check=True, stderr=subprocess.DEVNULL)
        run = ["cleave", "run", "-n", str(ranks), out, "--data",
               f"x={work}/x.npy,labels={work}/labels.npy"]
        job = subprocess.Popen(run + ["--steps", "100000000", "--checkpoint-dir", ckpt,
                                      "--checkpoint-every", "500", "--log-json",
                                      f"{out}-stopped.json"],
                               stderr=subprocess.PIPE, text=True,
                               env=slow if slow_write else None)
        while not os.path.exists(f"{ckpt}/latest") and job.poll() is None:
            time.sleep(0.01)
        job.send_signal(signal.SIGTERM)
        _, stderr = job.communicate(timeout=120)
        at = int(open(f"{ckpt}/latest").read().strip().split("-")[1])
        said = [line for line in stderr.splitlines() if line.startswith("stopped by SIGTERM")]
        if job.returncode != 0:
            problems.append(f"{name}: exit {job.returncode}, not 0: {stderr[-300:]!r}")
        if said != [f"stopped by SIGTERM after step {at} of 100000000: continue with --resume "
                    f"{ckpt}"]:
            problems.append(f"{name}: the stop said {said}, latest is step-{at}")
        logged = json.load(open(f"{out}-stopped.json"))["steps"]
        if len(logged) != at:
            problems.append(f"{name}: --log-json holds {len(logged)} steps, not {at}")

        steps = ["--steps", str(at + MORE)]
        subprocess.run(run + steps + ["--resume", ckpt, "--output-dir", f"{out}-resumed",
                                      "--log-json", f"{out}-resumed.json"],
                       check=True, stderr=subprocess.DEVNULL)
        subprocess.run(run + steps + ["--output-dir", f"{out}-full", "--log-json",
                                      f"{out}-full.json"], check=True, stderr=subprocess.DEVNULL)
        full = json.load(open(f"{out}-full.json"))["steps"]
        if json.load(open(f"{out}-resumed.json"))["steps"] != full[at:]:
            problems.append(f"{name}: the resumed steps differ from the uninterrupted run's")
        if full[:at] != logged:
            problems.append(f"{name}: the stopped run's steps differ from the uninterrupted run's")
        for blob in os.listdir(f"{out}-full"):
            if blob.endswith(".bin") and open(f"{out}-full/{blob}", "rb").read() != \
                    open(f"{out}-resumed/{blob}", "rb").read():
                problems.append(f"{name}: {blob} differs from the uninterrupted run's")
        print(f"{name}: stopped after step {at}, resumed to step {at + MORE}")
    for p in problems:
        print("FAIL:", p)
    failed = len({p.split(":")[0] for p in problems})
    print(f"{len(LAYOUTS) - failed} passed, {failed} failed")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
