# The progress line. On a terminal (stderr a pseudo-terminal here) it is
# redrawn in place after every step ("\r", the line, "erase to the end of the
# line") and ended with one newline after the last step, or before another
# line (a checkpoint's) is printed; piped, it is one plain line after every
# max(1, N/10) steps and after the last. On several ranks it shows the
# communication share, which is rank 0's exposed communication seconds of the
# --log-json metrics over the run's seconds (within 2 points: the line is
# drawn a moment before the run's time is taken). --quiet prints none.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import pty
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "..", "examples", "mlp", "model.onnx")
LINE = (r"step (\d+)/(\d+)  loss \d+\.\d{6}  lr 0\.01  \d+ samples/s(?:  comm (\d+)%)?"
        r"  ETA (?:\d+s|\d+m\d\ds|\d+h\d\dm)")

problems = []


def expect(condition, message):
    if not condition:
        problems.append(message)


def on_terminal(args):
    """`args`' stderr, written to a pseudo-terminal."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: every writer has closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    if process.wait(timeout=600) != 0:
        sys.exit(f"{args} exited {process.returncode}")
    # The terminal turns "\n" into "\r\n".
    return b"".join(chunks).decode().replace("\r\n", "\n")


def main():
    workdir = sys.argv[1]
    rng = np.random.default_rng(0)
    np.save(f"{workdir}/x.npy", rng.standard_normal((64, 32)).astype(np.float32))
    np.save(f"{workdir}/labels.npy", rng.integers(0, 10, 64))
    data = ["--data", f"x={workdir}/x.npy,labels={workdir}/labels.npy"]
    for name, mesh in (("one", []), ("dp2", ["--mesh", "dp=2"])):
        subprocess.run(["cleave", "compile", MODEL, "-o", f"{workdir}/{name}", "--train"] + mesh,
                       check=True)
    program = [f"{workdir}/one/program", "--dir", f"{workdir}/one"] + data

    # In place on a terminal, and ended before the checkpoint's line.
    text = on_terminal(program + ["--steps", "5", "--checkpoint-dir", f"{workdir}/ckpt",
                                  "--checkpoint-every", "3"])
    redraws = re.findall("\r(" + LINE + ")\x1b\\[K", text)
    expect([int(r[1]) for r in redraws] == [1, 2, 3, 4, 5], f"terminal: redraws {redraws!r}")
    lines = text.split("\n")
    shape = [re.sub(r"\rstep (\d)/5 [^\r]*\x1b\[K", r"<\1>", line) for line in lines]
    shape = ["checkpoint" if line.startswith("checkpoint ") else line for line in shape]
    expect(shape == ["<1><2><3>", "checkpoint", "<4><5>", "checkpoint", ""],
           f"terminal: lines {lines!r}, want steps 1-3 redrawn on one line, a checkpoint, "
           "steps 4-5, a checkpoint")
    expect("comm" not in text, "terminal: a communication share on one rank")
    expect("ETA 0s\x1b[K\n" in text, f"terminal: the last redraw {text[-160:]!r}")

    # Plain lines when piped: steps 2, 4, ..., 20 of 20.
    run = subprocess.run(program + ["--steps", "20"], capture_output=True, text=True, check=True)
    steps = [int(m.group(1)) for m in re.finditer("^" + LINE + "$", run.stderr, re.M)]
    expect(steps == list(range(2, 21, 2)) and run.stderr.count("\n") == 10
           and "\r" not in run.stderr, f"piped: {run.stderr!r}")

    # The communication share of two ranks, and --quiet. Enough steps that
    # the moment between the last line and the run's end is a small part of
    # the run (piped, still one line every 100 steps: ten lines); with 200
    # steps (a third of a second) it came to 2.1 points once under load.
    run = subprocess.run(["cleave", "run", "-n", "2", f"{workdir}/dp2"] + data +
                         ["--steps", "1000", "--log-json", f"{workdir}/dp2.json"],
                         capture_output=True, text=True, check=True)
    shares = [m.group(3) for m in re.finditer("^" + LINE + "$", run.stderr, re.M)]
    metrics = json.load(open(f"{workdir}/dp2.json"))
    spent = sum(s["ranks"][0]["exposed_communication_seconds"] for s in metrics["step_times"])
    want = 100 * spent / metrics["seconds"]
    expect(len(shares) == 10 and all(s is not None for s in shares)
           and abs(int(shares[-1]) - want) <= 2,
           f"dp2: shares {shares}, want {want:.1f} at the last step:\n{run.stderr}")
    run = subprocess.run(["cleave", "run", "-n", "2", f"{workdir}/dp2"] + data +
                         ["--steps", "10", "--quiet"], capture_output=True, text=True, check=True)
    expect(run.stderr == "", f"--quiet printed {run.stderr!r}")
    if problems:
        sys.exit("\n".join(problems))


if __name__ == "__main__":
    main()
