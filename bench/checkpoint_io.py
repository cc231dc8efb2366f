"""Checkpoint write and load time and throughput per layout, and the cost of a restart.

    .venv/bin/python bench/checkpoint_io.py [--steps N] [--repeat R] [--cleave PATH]
        [--writes-only]

For an MLP and a GPT-style decoder (bench/forward_vs_onnxruntime.py's), with
the same global batch and AdamW, compiles one rank (2 BLAS threads) and, on 2
ranks of 1 thread, dp=2, ZeRO 1 and ZeRO 3 on dp=2, and tp=2 with a Megatron
plan (bench/layouts_vs_one_rank.py's), and for each:

- write: trains N steps with `--checkpoint-every 1 --keep 2` and reads the
  driver's own figures from `--log-json`'s `checkpoints` (each checkpoint's
  bytes, all ranks' files and the index, and the seconds training stood
  still for it on rank 0: copy to the host, writes, fsyncs, barriers,
  renames, pruning). "write s" is the median over the N checkpoints, MB/s
  the bytes over it (MB = 10^6 bytes).
- raw: the same number of bytes written by Python to one file in the same
  directory (4 MiB writes of random bytes, then fsync and close; median of
  3), the machine's sequential write+fsync rate: "of raw" is cleave's MB/s
  over it.
- stall: the same N steps without checkpoints in the same session ("step
  ms", the driver's loop seconds over N) against the run with a checkpoint
  after every step ("ckpt ms", the same figure): their ratio is how much a
  checkpoint after every step slows training.
- async: 3N steps with a checkpoint every N (3 of them, the last written
  at once), written at once and with `--checkpoint-async` (each rank's
  file written on the thread "cleave-ckpt" while the next steps run, the
  checkpoint published after the first step at whose end every rank's file
  is in, at the latest before the next one begins), in turn, R times each:
  "still s" and "async" are the medians of the seconds training stood
  still for the first two checkpoints (at once: everything; async: the
  copy to the host, and later the publishing), "3N steps s" and "async"
  the medians of the loop's seconds, "ratio" async over at once. With
  `--writes-only` the bench stops here (no loads, no kills).
- load: the driver reports no load time. "load s" is the span of a
  resumed run's reading of the checkpoint as the kernel reports it: from
  the first to the last inotify event (an open or a read) on the checkpoint
  directory and its step-N directories, as this script reads them (the
  index, every rank's safetensors headers, every file's CRC-32, the preads
  of each rank's ranges; both ranks' reads overlap in it; the files stay
  open until the run ends, so their closes are not counted); median of R
  resumed runs of 2 steps from the write run's last checkpoint. The files
  were just written, so they are read from the page cache, not the disk.
  MB/s is the checkpoint's bytes over it (the CRC pass and the preads read
  each byte about twice). "wall diff s" is the other estimate: from
  launching `cleave run` to the progress line of its first step, the
  fastest of the R resumed runs minus the fastest of R fresh runs of 2
  steps, alternated (both runs load the compiled weights.bin alike, so the
  difference is the checkpoint's reading plus noise: launching mpirun
  varies by tens of ms under load).
- recovery: one run of N steps with `--checkpoint-every 1 --keep 2
  --max-restarts 1`, whose rank 1 (the only rank on one rank) is killed with
  SIGKILL as soon as the checkpoint of step 3 is reported. "to warning" is
  the time from the kill to cleave run's restart warning (the job's end
  detected and torn down); "to step" the time from the kill to the progress
  line of the first step the restarted job trains (teardown, relaunch,
  checkpoint load and that one step), each as this script reads the lines
  from the pipe. (The detail lines on stderr say how many steps reported
  before the kill the restarted job trained again: at most 1 with a
  checkpoint after every step.)
  On 2 ranks about 2 s of it is OpenMPI's: after a rank dies, mpirun sends
  the others SIGCONT, waits odls_base_sigkill_timeout (1 s by default),
  sends SIGTERM (which a run with --checkpoint-dir takes as a stop request,
  and cannot act on while it waits in a collective for the dead rank), waits
  1 s more and sends SIGKILL. "to step s, mca 0" is the same run again with
  OMPI_MCA_odls_base_sigkill_timeout=0 in the environment: what a restart
  costs without that wait. It is not a setting to use: with it, mpirun also
  kills the ranks at once when cleave run is sent SIGTERM, so a stop no
  longer writes its checkpoint (the job exits 143, nothing written).

The first lines give the load average and zlib.crc32's rate on 16 MB, a
peer for the CRC-32 that cleave computes over every file it writes and
verifies over every file it loads.

Every run of 2 ranks gives each 1 thread; the one-rank run 2: the same 2
cores in every row. Checkpoints go to a temporary directory (tempfile's,
under $TMPDIR) and are removed at the end.
"""
import argparse
import ctypes
import json
import os
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from forward_vs_onnxruntime import CLEAVE  # noqa: E402
from layouts_vs_one_rank import bench_cases, compiled_layouts  # noqa: E402

LAYOUTS = (("one rank, 2 threads", 1, []),
           ("dp=2", 2, ["--mesh", "dp=2"]),
           ("dp=2 zero=1", 2, ["--mesh", "dp=2", "--zero", "1"]),
           ("dp=2 zero=3", 2, ["--mesh", "dp=2", "--zero", "3"]),
           ("tp=2", 2, ["--mesh", "tp=2", "--plan", "{plan}"]))
KILL_AFTER = 3  # the checkpoint whose line sets off the kill
STEP_LINE = re.compile(r"^step (\d+)/\d+ ")
MB = 1e6
LIBC = ctypes.CDLL(None, use_errno=True)


class Job:
    """A `cleave run` whose stderr lines are read as they come, each with the
    time.monotonic() it was read at."""

    def __init__(self, command, environment=None):
        self.start = time.monotonic()
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, env=environment,
                                        stderr=subprocess.PIPE, text=True, bufsize=1)
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.process.stderr:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def wait(self, what):
        code = self.process.wait(timeout=600)
        self.end = time.monotonic()
        self.reader.join(timeout=10)
        if code != 0:
            tail = "\n".join(line for _, line in self.lines[-6:])
            raise SystemExit(f"{what}: exit {code}\n{tail}")
        return self

    def first(self, pattern, after=0.0):
        for at, line in self.lines:
            if at >= after and re.search(pattern, line):
                return at, line
        return None


class Watch:
    """The inotify events (open, read) on the files of some directories,
    each batch with the time.monotonic() this script read it at. (Not the
    closes: a resumed run keeps the checkpoint's files open until it ends.)"""

    MASK = 0x1 | 0x20  # IN_ACCESS, IN_OPEN

    def __init__(self, directories):
        self.fd = LIBC.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        for directory in directories:
            if LIBC.inotify_add_watch(self.fd, directory.encode(), self.MASK) < 0:
                raise OSError(ctypes.get_errno(), f"inotify_add_watch {directory}")
        self.times = []
        self.stopped = False
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        while not self.stopped:
            if select.select([self.fd], [], [], 0.05)[0]:
                os.read(self.fd, 1 << 16)
                self.times.append(time.monotonic())

    def span(self):
        """Seconds from the first event to the last."""
        self.stopped = True
        self.reader.join()
        os.close(self.fd)
        return self.times[-1] - self.times[0] if self.times else float("nan")


def rank_pids(program_dir):
    """{rank: pid} of the processes running DIR/program (the rank from
    OpenMPI's environment; 0 for a program run without mpirun)."""
    pids = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            args = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
            environ = open(f"/proc/{entry}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if args and args[0].decode(errors="replace") == f"{program_dir}/program":
            rank = 0
            for variable in environ:
                if variable.startswith(b"OMPI_COMM_WORLD_RANK="):
                    rank = int(variable.split(b"=")[1])
            pids[rank] = int(entry)
    return pids


def raw_write_seconds(directory, size, repeat=3):
    """Median seconds to write `size` bytes to a new file in `directory`,
    fsync and close it."""
    block = np.random.default_rng(0).integers(0, 256, 4 << 20, dtype=np.uint8).tobytes()
    times = []
    for i in range(repeat):
        path = os.path.join(directory, f"raw-{i}.bin")
        start = time.monotonic()
        with open(path, "wb", buffering=0) as file:
            left = size
            while left > 0:
                left -= file.write(block[:min(left, len(block))])
            os.fsync(file.fileno())
        times.append(time.monotonic() - start)
        os.unlink(path)
    return statistics.median(times)


def measure(cleave, label, ranks, out, flags, steps, repeat, work, writes_only):
    launch = [cleave, "run", *(["-n", str(ranks)] if ranks > 1 else []), out, *flags,
              "--no-shuffle", "--threads", str(2 // ranks)]
    metrics = os.path.join(work, "metrics.json")

    # The step time without checkpoints, then with one after every step.
    Job(launch + ["--steps", str(steps), "--log-json", metrics]).wait(f"{label}: plain run")
    plain = json.load(open(metrics))["seconds"] / steps
    ckpt = os.path.join(work, "ckpt")
    Job(launch + ["--steps", str(steps), "--log-json", metrics, "--checkpoint-dir", ckpt,
                  "--checkpoint-every", "1", "--keep", "2"]).wait(f"{label}: checkpoint run")
    log = json.load(open(metrics))
    with_ckpt = log["seconds"] / steps
    records = log["checkpoints"]
    size = statistics.median(r["bytes"] for r in records)
    write = statistics.median(r["seconds"] for r in records)
    raw = raw_write_seconds(work, int(size))
    # Checkpoints every N steps over 3 N steps, written at once and behind
    # training (--checkpoint-async; the last one at once in both), in turn,
    # `repeat` times each: the loop's seconds, and how long training stood
    # still for each of the first two.
    spaced = {"at once": [], "async": []}
    for _ in range(repeat):
        for mode, extra in (("at once", []), ("async", ["--checkpoint-async"])):
            ckpt_dir = os.path.join(work, "ckpt-" + mode.replace(" ", "-"))
            shutil.rmtree(ckpt_dir, ignore_errors=True)
            Job(launch + ["--steps", str(3 * steps), "--log-json", metrics, "--checkpoint-dir",
                          ckpt_dir, "--checkpoint-every", str(steps), *extra]
                ).wait(f"{label}: checkpoints every {steps} steps, {mode}")
            log = json.load(open(metrics))
            spaced[mode].append((log["seconds"], [c["seconds"] for c in log["checkpoints"][:2]]))
    loop = {mode: statistics.median(r[0] for r in runs) for mode, runs in spaced.items()}
    still = {mode: statistics.median(t for r in runs for t in r[1]) for mode, runs in spaced.items()}
    measured = dict(label=label, bytes=size, write=write, writes=[r["seconds"] for r in records],
                    raw=raw, plain=plain, with_ckpt=with_ckpt, loop=loop, still=still)
    if writes_only:
        return measured

    # Load: the checkpoint's files as inotify sees them read, and launch to
    # the first step's line, resumed against fresh.
    loads, resumed, fresh = [], [], []
    steps_dirs = [os.path.join(ckpt, d) for d in os.listdir(ckpt) if d.startswith("step-")]
    for _ in range(repeat):
        watch = Watch([ckpt, *steps_dirs])
        job = Job(launch + ["--steps", str(steps + 2), "--resume", ckpt]).wait(f"{label}: resume")
        loads.append(watch.span())
        resumed.append(job.first(STEP_LINE.pattern)[0] - job.start)
        job = Job(launch + ["--steps", "2"]).wait(f"{label}: fresh run")
        fresh.append(job.first(STEP_LINE.pattern)[0] - job.start)
    load = statistics.median(loads)
    difference = min(resumed) - min(fresh)

    to_warning, to_step, redo = recovery(launch, label, ranks, out, steps, work, "ckpt-restart")
    # The same with OpenMPI's kill escalation shortened (see the docstring).
    fast = (recovery(launch, label, ranks, out, steps, work, "ckpt-fast",
                     {"OMPI_MCA_odls_base_sigkill_timeout": "0"}) if ranks > 1 else None)
    return dict(measured, load=load, loads=loads, difference=difference, resumed=resumed,
                fresh=fresh, to_warning=to_warning, to_step=to_step, redo=redo, fast=fast)


def recovery(launch, label, ranks, out, steps, work, name, environment=None):
    """Kills one rank once the checkpoint of step KILL_AFTER is reported;
    returns the seconds from the kill to the restart warning and to the
    first step trained after it, and the steps trained again."""
    ckpt = os.path.join(work, name)
    job = Job(launch + ["--steps", str(steps), "--checkpoint-dir", ckpt, "--checkpoint-every",
                        "1", "--keep", "2", "--max-restarts", "1"],
              dict(os.environ, **(environment or {})))
    victim = 1 if ranks > 1 else 0
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and job.process.poll() is None and time.monotonic() < deadline:
        if job.first(rf"^checkpoint .*/step-{KILL_AFTER}: "):
            pid = rank_pids(out).get(victim)
            if pid:
                os.kill(pid, signal.SIGKILL)
                killed = time.monotonic()
                continue
        time.sleep(0.001)
    job.wait(f"{label}: restarted run")
    if killed is None:
        raise SystemExit(f"{label}: the run ended before rank {victim} could be killed")
    before = [int(STEP_LINE.match(line).group(1)) for at, line in job.lines
              if at < killed and STEP_LINE.match(line)]
    warned = job.first(r"restarting from the latest checkpoint", after=killed)
    again = warned and job.first(STEP_LINE.pattern, after=warned[0])
    if not again:
        raise SystemExit(f"{label}: no restart, or no step after it:\n" +
                         "\n".join(line for _, line in job.lines))
    redo = max(before) - int(STEP_LINE.match(again[1]).group(1)) + 1
    return warned[0] - killed, again[0] - killed, redo


def bench(cleave, model, args, plan, steps, repeat, work, writes_only):
    rows = []
    # (the compile warnings about the eval-mode export's merged initializers
    # are layouts_vs_one_rank.py's too: they change no checkpoint's size)
    for label, ranks, out, flags in compiled_layouts(cleave, model, args, plan, work, LAYOUTS):
        with tempfile.TemporaryDirectory(dir=work) as scratch:
            rows.append(measure(cleave, label, ranks, out, flags, steps, repeat, scratch,
                                writes_only))
        r = rows[-1]
        if writes_only:
            continue
        times = lambda values: " ".join(f"{t:.3f}" for t in values)  # noqa: E731
        print(f"  {label}: write s {min(r['writes']):.3f}-{max(r['writes']):.3f}; load s "
              f"{times(r['loads'])}; to the first step: resumed {times(r['resumed'])}, fresh "
              f"{times(r['fresh'])}; kill to warning {r['to_warning']:.3f}, steps reported before "
              f"the kill and trained again {r['redo']}"
              + (f", with sigkill_timeout 0 {r['fast'][0]:.3f}" if r["fast"] else ""),
              file=sys.stderr, flush=True)
    return rows


COLUMNS = (("ckpt MB", 8), ("write s", 8), ("MB/s", 6), ("raw MB/s", 8), ("of raw", 6),
           ("step ms", 8), ("ckpt ms", 8), ("stall", 6), ("still s", 7), ("async", 6),
           ("3N steps s", 10), ("async", 6), ("ratio", 5), ("load s", 7), ("MB/s", 6),
           ("wall diff s", 11), ("to warning s", 12), ("to step s", 9),
           ("to step s, mca 0", 16))


def cells(r):
    """The table's figures for one layout's measurements."""
    return (f"{r['bytes'] / MB:.2f}", f"{r['write']:.3f}", f"{r['bytes'] / r['write'] / MB:.0f}",
            f"{r['bytes'] / r['raw'] / MB:.0f}", f"{r['raw'] / r['write']:.2f}",
            f"{r['plain'] * 1e3:.2f}", f"{r['with_ckpt'] * 1e3:.2f}",
            f"{r['with_ckpt'] / r['plain']:.2f}", f"{r['still']['at once']:.3f}",
            f"{r['still']['async']:.3f}", f"{r['loop']['at once']:.3f}",
            f"{r['loop']['async']:.3f}", f"{r['loop']['async'] / r['loop']['at once']:.2f}",
            *((f"{r['load']:.3f}", f"{r['bytes'] / r['load'] / MB:.0f}",
               f"{r['difference']:.3f}", f"{r['to_warning']:.3f}", f"{r['to_step']:.3f}",
               f"{r['fast'][1]:.3f}" if r["fast"] else "-") if "load" in r else ("-",) * 6))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cleave", default=CLEAVE, help="the cleave binary (default: %(default)s)")
    parser.add_argument("--writes-only", action="store_true",
                        help="measure the writes alone (no loads, no kills)")
    options = parser.parse_args()
    if options.steps < KILL_AFTER + 2 or options.steps > 17:
        parser.error("--steps: 5 to 17 (every step's progress line is printed up to 19 steps)")
    start = time.monotonic()
    print(f"{os.cpu_count()} cpus; load average {os.getloadavg()[0]:.2f}; {options.steps} steps; "
          "MB = 10^6 bytes; write: median of the driver's --log-json checkpoint seconds; load: "
          f"median of {options.repeat} resumed launches, first to last inotify event on the "
          f"checkpoint; wall diff: fastest of {options.repeat} resumed launches minus fastest of "
          f"{options.repeat} fresh ones, to the first step's line")
    block = np.random.default_rng(0).integers(0, 256, 16 * 10**6, dtype=np.uint8).tobytes()
    crc = []
    for _ in range(3):
        begin = time.perf_counter()
        zlib.crc32(block)
        crc.append(time.perf_counter() - begin)
    print(f"zlib.crc32 (Python's zlib) of 16 MB: {16 / min(crc):.0f} MB/s, a peer for the "
          "CRC-32 each checkpoint computes when written and verifies when loaded")
    print(f"{'model':40} {'layout':20} " + " ".join(f"{title:>{width}}" for title, width in COLUMNS))
    for name, model, args, plan in bench_cases():
        with tempfile.TemporaryDirectory() as work:
            rows = bench(options.cleave, model, args, plan, options.steps, options.repeat, work,
                         options.writes_only)
        for r in rows:
            print(f"{name:40} {r['label']:20} " +
                  " ".join(f"{cell:>{width}}" for cell, (_, width) in zip(cells(r), COLUMNS)),
                  flush=True)
    print(f"{time.monotonic() - start:.0f} s in all; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
