# Checkpoints written behind training (--checkpoint-async): each rank's file
# is written on the thread "cleave-ckpt" while the next steps run, and the
# checkpoint is published (the index, the rename, `latest`) after the first
# step at whose end every rank's file is in; the run's last checkpoint is
# written at once. On one device, on dp=2 with ZeRO 1 (rank 1 holds a
# slice of the optimizer state) and on pp=2 (each rank its stage's), a run of STEPS steps checkpointing every 2
# writes the same checkpoints as the run that writes them at once, byte for
# byte (every file of step-2, step-4 and step-6), with the same losses; its
# --log-json says after which step each was published (after its own step
# and no later than the next checkpoint's) and how long rank 0's file took;
# its trace shows each file's write on the track "checkpoint (background)"
# and its publishing on "checkpoint" (the trace checked by
# test/lib/chrome_trace.py); and --resume from its
# step-4 ends with the uninterrupted run's losses and trained blob, bit for
# bit. A write that fails behind training: test/checkpoint/write_fails.py.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import subprocess
import sys

import chrome_trace
import mlp_data

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "..", "examples", "mlp", "model.onnx")
STEPS, EVERY = 6, 2
LAYOUTS = [("single", 1, []), ("dp2-zero1", 2, ["--mesh", "dp=2", "--zero", "1"]),
           ("pp2", 2, ["--mesh", "pp=2", "--batch-size", "32", "--grad-accum", "4"])]


def files(directory):
    """Every file under `directory`, by its path inside it, with its bytes."""
    found = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            found[os.path.relpath(path, directory)] = open(path, "rb").read()
    return found


def main():
    work = sys.argv[1]
    mlp_data.save(work, 3, rows=64)
    problems = []
    for name, ranks, mesh in LAYOUTS:
        out = f"{work}/{name}"
        subprocess.run(["cleave", "compile", MODEL, "-o", out, "--train", "--optimizer", "adam",
                        "--lr", "0.01"] + mesh, check=True, stderr=subprocess.DEVNULL)
        run = ["cleave", "run", "-n", str(ranks), out, "--data",
               f"x={work}/x.npy,labels={work}/labels.npy", "--steps", str(STEPS)]
        logs = {}
        for mode, flags in (("at-once", []), ("async", ["--checkpoint-async"])):
            subprocess.run(run + flags + [
                "--checkpoint-dir", f"{out}-{mode}", "--checkpoint-every", str(EVERY),
                "--log-json", f"{out}-{mode}.json", "--trace", f"{out}-{mode}-trace.json",
                "--output-dir", f"{out}-{mode}-out"], check=True, stderr=subprocess.DEVNULL)
            logs[mode] = json.load(open(f"{out}-{mode}.json"))
        written = {mode: files(f"{out}-{mode}") for mode in logs}
        want = {f"step-{s}" for s in range(EVERY, STEPS + 1, EVERY)}
        got = {path.split("/")[0] for path in written["async"] if "/" in path}
        if got != want:
            problems.append(f"{name}: the async run's checkpoints are {sorted(got)}")
        if written["async"] != written["at-once"]:
            differ = sorted(p for p in set(written["async"]) | set(written["at-once"])
                            if written["async"].get(p) != written["at-once"].get(p))
            problems.append(f"{name}: files differ from those written at once: {differ}")
        if logs["async"]["steps"] != logs["at-once"]["steps"]:
            problems.append(f"{name}: the async run's steps differ")
        checkpoints = logs["async"]["checkpoints"]
        for entry in checkpoints:
            last = entry["step"] == STEPS
            after = entry.get("published_after_step")
            if last != (after is None) or (not last and not (
                    entry["step"] < after <= entry["step"] + EVERY and entry["write_seconds"] > 0)):
                problems.append(f"{name}: checkpoint entry {entry}")
        if [c["step"] for c in checkpoints] != sorted(int(s[5:]) for s in want):
            problems.append(f"{name}: checkpoints logged {checkpoints}")
        trace = chrome_trace.load(f"{out}-async-trace.json")
        writes = sorted(s.name for s in trace.track(0, "checkpoint (background)"))
        if writes != [f"write checkpoint step {s}" for s in range(EVERY, STEPS, EVERY)]:
            problems.append(f"{name}: background writes in the trace: {writes}")
        published = sorted(s.name for s in trace.track(0, "checkpoint")
                           if s.name.startswith("publish "))
        if published != [f"publish checkpoint step {s}" for s in range(EVERY, STEPS, EVERY)]:
            problems.append(f"{name}: publishing in the trace: {published}")
        # Resumed from the async run's step-4: the uninterrupted run's last
        # steps and trained blob.
        resumed = f"{out}-resumed"
        subprocess.run(["cp", "-r", f"{out}-async", f"{resumed}-ckpt"], check=True)
        subprocess.run(["rm", "-rf", f"{resumed}-ckpt/step-6"], check=True)
        open(f"{resumed}-ckpt/latest", "w").write("step-4\n")
        subprocess.run(run + ["--resume", f"{resumed}-ckpt", "--log-json", f"{resumed}.json",
                              "--output-dir", resumed], check=True, stderr=subprocess.DEVNULL)
        if json.load(open(f"{resumed}.json"))["steps"] != logs["async"]["steps"][4:]:
            problems.append(f"{name}: the steps resumed from step-4 differ")
        blobs = {path: data for path, data in files(f"{out}-async-out").items()
                 if path.endswith(".bin")}
        if not blobs or any(files(resumed).get(path) != data for path, data in blobs.items()):
            problems.append(f"{name}: the blobs resumed differ from the uninterrupted run's")
        print(f"{name}: published after steps "
              f"{[c.get('published_after_step') for c in checkpoints]}")
    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
