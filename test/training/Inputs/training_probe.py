"""Probe models and checks for the driver's training loop (test/training/).

The driver's contract with a training program is plan.json's "training"
object and the program's inputs (data, cleave.lr, cleave.step) and loss
(docs/training.md). These probes are ordinary forward programs whose loss
shows what the driver fed them; the tests add the "training" object to their
plan.json by hand, so the driver's batching, shuffling and learning-rate
schedule are checked exactly, independently of any optimizer.

    training_probe.py model batches|schedule OUT.onnx
    training_probe.py train-plan PLAN.json '{"lr": 0.1, ...}'
    training_probe.py data DIR
    training_probe.py check-batches LOG.json --batch B [--seed S | --no-shuffle] [--steps N]
    training_probe.py check-schedule LOG.json --lr LR --schedule S --warmup W --total T --steps N
    training_probe.py same-steps A.json B.json   (exit 1 unless equal)
    training_probe.py expect CODE -- COMMAND...
        runs COMMAND, prints its stderr on stdout, and fails unless it exits
        with CODE and, when CODE is not 0, its stderr is one error line and at
        most one note line (after any progress lines)
"""

import argparse
import json
import math
import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from onnx_models import F32, I64, constant_node, model, save

SAMPLES = 16
LABEL_SCALE = 131072.0  # 2^17: above every sum of x over a batch of 3


def probe_model(kind):
    """batches: x [3, 2] f32 and labels [3] i64; loss = sum(x) + 2^17 sum(labels)
    and echo = x. Sample i holds x = [2^i, 2^i], label i, so every loss is
    exact in f32 and names the samples of its batch.
    schedule: x [2, 1]; loss = cleave.step + cleave.lr."""
    zero = constant_node("zero", np.array(0.0, np.float32))
    w = {"w": np.array([0.5], np.float32)}
    # 0 * (lr + step + sum(w)): every input and the parameter are read.
    unused = [helper.make_node("Add", ["cleave.lr", "cleave.step"], ["ls"]),
              helper.make_node("ReduceSum", ["w"], ["wsum"], keepdims=0),
              helper.make_node("Add", ["ls", "wsum"], ["lsw"]),
              helper.make_node("Mul", ["lsw", "zero"], ["nothing"])]
    scalars = [("cleave.lr", F32, []), ("cleave.step", F32, [])]
    if kind == "batches":
        scale = constant_node("scale", np.array(LABEL_SCALE, np.float32))
        nodes = [zero, scale] + unused + [
            helper.make_node("ReduceSum", ["x"], ["xsum"], keepdims=0),
            helper.make_node("Cast", ["labels"], ["labelsf"], to=TensorProto.FLOAT),
            helper.make_node("ReduceSum", ["labelsf"], ["lsum"], keepdims=0),
            helper.make_node("Mul", ["lsum", "scale"], ["lterm"]),
            helper.make_node("Add", ["xsum", "lterm"], ["sum"]),
            helper.make_node("Add", ["sum", "nothing"], ["loss"]),
            helper.make_node("Identity", ["x"], ["echo"]),
        ]
        return model(nodes, [("x", F32, [3, 2]), ("labels", I64, [3])] + scalars,
                     ["loss", "echo"], initializers=w)
    if kind == "schedule":
        nodes = [zero] + unused + [
            helper.make_node("ReduceSum", ["x"], ["xsum"], keepdims=0),
            helper.make_node("Mul", ["xsum", "zero"], ["xzero"]),
            helper.make_node("Add", ["cleave.step", "cleave.lr"], ["sl"]),
            helper.make_node("Add", ["sl", "xzero"], ["slx"]),
            helper.make_node("Add", ["slx", "nothing"], ["loss"]),
        ]
        return model(nodes, [("x", F32, [2, 1])] + scalars, ["loss"], initializers=w)
    raise SystemExit(f"unknown probe {kind!r}")


def write_data(out):
    os.makedirs(out, exist_ok=True)
    powers = np.array([2.0 ** i for i in range(SAMPLES)], np.float32)
    x = np.stack([powers, powers], axis=1)
    labels = np.arange(SAMPLES, dtype=np.int64)
    np.save(f"{out}/x.npy", x)
    np.save(f"{out}/labels.npy", labels)
    with open(f"{out}/labels.pb", "wb") as f:
        f.write(numpy_helper.from_array(labels, "labels").SerializeToString())
    np.save(f"{out}/x64.npy", x.astype(np.float64))
    np.save(f"{out}/x3.npy", np.zeros((SAMPLES, 3), np.float32))
    np.save(f"{out}/xflat.npy", powers)
    np.save(f"{out}/labels15.npy", labels[:15])
    np.save(f"{out}/x2.npy", x[:2])
    np.save(f"{out}/labels2.npy", labels[:2])
    nan = x.copy()
    nan[5, 1] = np.nan
    np.save(f"{out}/xnan.npy", nan)
    inf = x.copy()
    inf[7, 0] = np.inf
    np.save(f"{out}/xinf.npy", inf)
    np.save(f"{out}/s.npy", np.zeros((SAMPLES, 1), np.float32))


# std::mt19937_64, as the C++ standard defines it.
MASK = (1 << 64) - 1


class MT19937_64:
    def __init__(self, seed):
        self.state = [seed & MASK]
        for i in range(1, 312):
            prev = self.state[-1]
            self.state.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & MASK)
        self.index = 312

    def _twist(self):
        s = self.state
        for i in range(312):
            x = (s[i] & ~((1 << 31) - 1) & MASK) | (s[(i + 1) % 312] & ((1 << 31) - 1))
            xa = x >> 1
            if x & 1:
                xa ^= 0xB5026F5AA96619E9
            s[i] = s[(i + 156) % 312] ^ xa
        self.index = 0

    def __call__(self):
        if self.index >= 312:
            self._twist()
        y = self.state[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & MASK


def _check_generator():
    # The standard's check: the 10000th number of a default-constructed engine.
    rng = MT19937_64(5489)
    for _ in range(9999):
        rng()
    assert rng() == 9981545732273789042


def uniform_below(rng, bound):
    threshold = ((1 << 64) - bound) % bound
    while True:
        r = rng()
        if r >= threshold:
            return r % bound


def epoch_order(count, seed, epoch):
    order = list(range(count))
    rng = MT19937_64((seed * 1000003 + epoch) & MASK)
    for i in range(count - 1, 0, -1):
        j = uniform_below(rng, i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def expected_batches(count, batch, steps, seed):
    """Batch t: positions [(t-1)B, tB) of the epochs one after another."""
    orders = {}
    for t in range(1, steps + 1):
        rows = []
        for p in range((t - 1) * batch, t * batch):
            epoch, index = divmod(p, count)
            if seed is None:
                rows.append(index)
            else:
                if epoch not in orders:
                    orders[epoch] = epoch_order(count, seed, epoch)
                rows.append(orders[epoch][index])
        yield rows


def read_log(path):
    with open(path) as f:
        log = json.load(f)
    assert log["format_version"] == 1, log
    assert log["seconds"] > 0 and log["samples_per_second"] > 0, log
    assert [s["step"] for s in log["steps"]] == list(range(1, len(log["steps"]) + 1)), log
    for s in log["steps"]:
        assert list(s) == ["step", "loss", "lr"], s
    return log


def check_batches(args):
    _check_generator()
    log = read_log(args.log)
    steps = log["steps"]
    if args.steps is not None:
        assert len(steps) == args.steps, (len(steps), args.steps)
    seed = None if args.no_shuffle else args.seed
    for record, rows in zip(steps, expected_batches(SAMPLES, args.batch, len(steps), seed)):
        want = sum(2 * 2.0 ** r for r in rows) + LABEL_SCALE * sum(rows)
        if record["loss"] != want:
            sys.exit(f"step {record['step']}: loss {record['loss']}, want {want} "
                     f"(samples {rows})")
    print(f"{len(steps)} batches as expected")


def schedule_lr(lr, schedule, warmup, total, t):
    if warmup > 0 and t <= warmup:
        return lr * t / warmup
    progress = (t - warmup) / (total - warmup)
    if schedule == "constant":
        return lr
    if schedule == "linear":
        return lr * (1 - progress)
    return lr * 0.5 * (1 + math.cos(math.pi * progress))


def check_schedule(args):
    log = read_log(args.log)
    steps = log["steps"]
    assert len(steps) == args.steps, (len(steps), args.steps)
    for record in steps:
        t = record["step"]
        want = schedule_lr(args.lr, args.schedule, args.warmup, args.total, t)
        if abs(record["lr"] - want) > 1e-12 * max(1.0, abs(want)):
            sys.exit(f"step {t}: lr {record['lr']}, want {want}")
        # The program saw cleave.step = t and cleave.lr = lr, both as f32.
        seen = float(np.float32(t) + np.float32(want))
        if abs(record["loss"] - seen) > 1e-6 * seen:
            sys.exit(f"step {t}: loss {record['loss']}, want step + lr = {seen}")
    print(f"{len(steps)} learning rates as expected")


def expect(code, command):
    result = subprocess.run(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    sys.stdout.write(result.stderr)
    if result.returncode != code:
        sys.exit(f"exit code {result.returncode}, expected {code}")
    if code != 0:
        # Progress lines of the steps before a failure come first.
        lines = [line for line in result.stderr.splitlines() if not line.startswith("step ")]
        if not (1 <= len(lines) <= 2 and lines[0].startswith("cleave: error: ")
                and all(line.startswith("note: ") for line in lines[1:])):
            sys.exit("expected one error line and at most one note")


def main():
    if len(sys.argv) > 3 and sys.argv[1] == "expect" and sys.argv[3] == "--":
        expect(int(sys.argv[2]), sys.argv[4:])
        return
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("model")
    p.add_argument("kind")
    p.add_argument("out")
    p = sub.add_parser("train-plan")
    p.add_argument("plan")
    p.add_argument("training")
    p = sub.add_parser("data")
    p.add_argument("out")
    p = sub.add_parser("check-batches")
    p.add_argument("log")
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-shuffle", action="store_true")
    p.add_argument("--steps", type=int)
    p = sub.add_parser("check-schedule")
    p.add_argument("log")
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--schedule", required=True)
    p.add_argument("--warmup", type=int, default=0)
    p.add_argument("--total", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p = sub.add_parser("same-steps")
    p.add_argument("a")
    p.add_argument("b")
    args = parser.parse_args()

    if args.command == "model":
        save(probe_model(args.kind), args.out)
    elif args.command == "train-plan":
        with open(args.plan) as f:
            plan = json.load(f)
        plan["training"] = json.loads(args.training)
        with open(args.plan, "w") as f:
            json.dump(plan, f, indent=2)
    elif args.command == "data":
        write_data(args.out)
    elif args.command == "check-batches":
        check_batches(args)
    elif args.command == "check-schedule":
        check_schedule(args)
    elif args.command == "same-steps":
        a, b = read_log(args.a)["steps"], read_log(args.b)["steps"]
        sys.exit(0 if a == b else 1)


if __name__ == "__main__":
    main()
