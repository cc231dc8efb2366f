# Data parallel equals one device. The torch-exported MLP and GPT-style
# models are compiled for a global batch B and trained STEPS steps in file
# order, each layout from the same initial weights on the same data:
#   - one device, the whole batch in one microbatch: the reference;
#   - --mesh dp=N (N = 2, 4), each rank B/N samples: every step's loss within
#     1e-5 relative of the reference and the final parameters within 1e-5 of
#     their largest element; and dp=2 with --grad-accum 2;
#   - ZeRO stages 1, 2 and 3 on dp=2 and dp=4 (and stage 2 with global-norm
#     clipping, which must count every parameter element once): the same
#     tolerances (stage 3's parameters put back together from the dp ranks'
#     slices); stage 3 on dp=2 with its gathers prefetched and its
#     reduce-scatters overlapped (--prefetch-gathers on
#     --overlap-reduce-scatters on, the background thread) too;
#   - --mesh dp=N --deterministic against one device accumulating the same N
#     microbatches (--grad-accum N): every loss and every parameter bit for
#     bit, with adamw;
#   - gradients summed in buckets during the last microbatch's backward
#     (--bucket-mb, the background all-reduce, and ZeRO 1's reduce-scatters
#     of spans of its flat buffer; under ZeRO 2 every microbatch's, of spans
#     of its packed gradients; the default "auto" is what every run above
#     uses, which leaves ZeRO 1 and 2 unbucketed): small buckets (several
#     per step, checked in plan.json) on dp=2 with --grad-accum 2 (ZeRO 1
#     and 2 too) and on dp=4, and none at all (--bucket-mb 0), within the
#     same tolerances; with --deterministic, bit for bit (ZeRO 1 and 2 too,
#     dp=2 and dp=4);
#   - the bytes each rank sent (the run's log) equal plan.json's prediction;
#   - with --precision bf16 (products on bf16 factors, gradients in f32),
#     for the GPT (the MLP too in the long suite, CLEAVE_LONG=1):
#     dp=2 with ZeRO 1, 2 and 3 within 1e-5 of one device in bf16
#     (measured: 1e-7; --deterministic below covers plain dp), each
#     gathering fewer bytes than in f32 (the products' weights as bf16
#     slices), ZeRO 1 and 2 each parameter once a step (their f32 masters
#     are slices, their whole copies made once a step), the bytes sent as
#     planned, and
#     --deterministic bit for bit; with --grad-accum-dtype bf16 (gradient
#     accumulators in bf16) dp=2 with ZeRO 0-3 track one device in bf16 as
#     the bf16 sums below do, keeping half the gradient bytes under ZeRO;
#     with --precision fp16 from a
#     loss scale that overflows, dp=2 with ZeRO 1, 2 and 3 within 1e-5 of
#     one device in fp16, skipping the same steps;
#   - gradients summed in bf16 (--grad-reduce-dtype bf16), for the MLP (the
#     GPT too in the long suite): dp=2 with buckets, with --deterministic,
#     with ZeRO 1, 2 and 3 and dp=4 track one device in f32: every loss
#     within 1e-3, and each parameter's distance from the f32 one within 1%
#     of how far the f32 run moved it (each gradient element is rounded
#     twice, a relative 2^-9 each, so a step moves a parameter within about
#     2^-8 = 0.4% of its f32 move; measured: 3e-5 of the loss, 0.24% of the
#     move); they differ
#     from dp=2 summing in f32 (the flag acts); dp=2 in its four layouts
#     gives the same losses and parameters bit for bit (each rank's part of
#     every sum is rounded, the parts are added in f32 in rank order and the
#     sum rounded once, whichever collective carries it); the bytes sent are
#     as planned, and the all-reduce's under half of summing in f32 (the
#     loss's count and sum stay f32); with --precision bf16 and the
#     accumulators in bf16 too (--grad-accum-dtype bf16), dp=2 with buckets,
#     ZeRO 1 and ZeRO 2 give the f32 accumulators' losses and parameters bit
#     for bit at a lower peak, the buckets started during the backward; and
#     summed in f32 with --deterministic, ZeRO 1 (reduce-scatters widening
#     the bf16 accumulators' parts) gives plain dp's losses and parameters
#     bit for bit, at a lower peak than with f32 accumulators.
# The GPT's targets have ignore_index positions spread unevenly over the
# ranks' slices. Models are exported at each micro-batch they run at (their
# exports have static shapes).
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))

import export_gpt  # noqa: E402
import export_mlp  # noqa: E402
from torch_export import export_with_loss  # noqa: E402

STEPS = 10
BATCHES = 2  # global batches in the data set
MOMENTUM = ["--optimizer", "momentum", "--lr", "0.05"]
ADAMW = ["--optimizer", "adamw", "--lr", "0.01", "--weight-decay", "0.1"]
# fp16 with a first loss scale these models' gradients overflow, so that
# steps are skipped and the scale moves (test/training/precision_vs_pytorch.py).
FP16 = ["--precision", "fp16", "--loss-scale", str(2.0 ** 20), "--loss-scale-window", "3"]
# scripts/test.sh --long runs more cases.
LONG = os.environ.get("CLEAVE_LONG") == "1"


class Model:
    def __init__(self, name, module, names, batch, workdir):
        self.name, self.module, self.names, self.batch = name, module, names, batch
        self.workdir = workdir
        model, args = module.build()
        self.example = args
        rng = np.random.default_rng(3)
        self.data = {}
        for name, value in zip(names, args):
            shape = (batch * BATCHES,) + tuple(value.shape[1:])
            if value.dtype == torch.int64:
                array = rng.integers(0, int(value.max()) + 1, shape).astype(np.int64)
                if name == "targets":
                    array[::3, 4:] = -100
                self.data[name] = array
            else:
                self.data[name] = rng.standard_normal(shape).astype(np.float32)
        self.flags = []
        for name, array in self.data.items():
            path = os.path.join(workdir, f"{self.name}.{name}.npy")
            np.save(path, array)
            self.flags += ["--data", f"{name}={path}"]

    def export(self, micro):
        path = os.path.join(self.workdir, f"{self.name}-b{micro}.onnx")
        if not os.path.exists(path):
            model, _ = self.module.build()
            args = tuple(torch.cat([a] * micro)[:micro] for a in self.example)
            export_with_loss(model, args, path, self.names)
        return path

    def train(self, label, ranks, accum, optimizer, extra=(), tp=1, save_onnx=None, pp=1):
        """Compiles and trains one layout on `ranks` dp x `tp` tp x `pp` pp
        ranks; returns (losses, parameters, log, plan), the parameters whole
        (reassembled from the tp ranks' blobs, gathered from the pipeline
        stages' directories) and the plan of the first stage."""
        micro = self.batch // (ranks * accum)
        out = os.path.join(self.workdir, f"{self.name}-{label}")
        mesh = []
        if ranks * tp * pp > 1:
            mesh = ["--mesh", f"dp={ranks}" + (f",tp={tp}" if tp > 1 else "") +
                    (f",pp={pp}" if pp > 1 else "")]
        subprocess.run(["cleave", "compile", self.export(micro), "-o", out, "--train",
                        *optimizer, "--batch-size", str(self.batch), "--grad-accum", str(accum),
                        *mesh, *extra], check=True)
        log, results = out + ".json", out + ".results"
        os.makedirs(results, exist_ok=True)
        launch = ["-n", str(ranks * tp * pp)] if ranks * tp * pp > 1 else []
        save = ["--save-onnx", save_onnx] if save_onnx else []
        subprocess.run(["cleave", "run", *launch, out, *self.flags, "--steps", str(STEPS),
                        "--no-shuffle", "--log-json", log, "--output-dir", results, *save],
                       check=True, stderr=subprocess.DEVNULL)
        metrics = json.load(open(log))
        # pp ranks, or with the interleaved schedule pp x V stages.
        stages = [""] if pp == 1 else sorted((d for d in os.listdir(out) if d.startswith("stage")),
                                             key=lambda d: int(d[5:]))
        params = {}
        for stage in stages:
            plan = json.load(open(os.path.join(out, stage, "plan.json")))
            params.update(parameters(plan, os.path.join(results, stage), tp))
        plan = json.load(open(os.path.join(out, stages[0], "plan.json")))
        return [s["loss"] for s in metrics["steps"]], params, metrics, plan


def parameters(plan, results, tp):
    """Every parameter whole: a parameter split over tp is its blocks' parts,
    one from each tp rank's blob in rank order; with ZeRO 3 each part is the
    dp ranks' slices of it flattened, one after another (docs/formats.md)."""
    dp = next((a["size"] for a in plan.get("mesh", {}).get("axes", []) if a["name"] == "dp"), 1)
    template = plan["weights"]["file"]
    dp = dp if "{dp}" in template else 1

    def blob(d, r):
        name = template.replace("{dp}", str(d)).replace("{tp}", str(r))
        return np.fromfile(os.path.join(results, name), dtype=np.uint8)

    blobs = [[blob(d, r) for r in range(tp)] for d in range(dp)]
    params = {}
    for p in plan["parameters"]:
        global_shape = p.get("global_shape", p["shape"])
        local_shape = list(global_shape)
        if "split" in p:
            local_shape[p["split"]["dim"]] //= tp
        parts = []
        for r in range(tp):
            raw = [blobs[d][r][p["offset"]:p["offset"] + p["bytes"]].view(np.float32)
                   for d in range(dp if "zero3" in p else 1)]
            flat = np.concatenate(raw)[:int(np.prod(local_shape))]
            parts.append(flat.reshape(local_shape))
        if "split" in p:
            dim, blocks = p["split"]["dim"], p["split"]["blocks"]
            pieces = [np.split(part, blocks, axis=dim) for part in parts]
            whole = np.concatenate([pieces[r][k] for k in range(blocks) for r in range(tp)],
                                   axis=dim)
        else:
            whole = parts[0]
        assert list(whole.shape) == list(global_shape)
        params[p["name"]] = whole
    return params


def close(label, ours, reference, problems, tolerance=1e-5):
    losses, params, _, _ = ours
    ref_losses, ref_params, _, _ = reference
    for step, (a, b) in enumerate(zip(losses, ref_losses), start=1):
        if abs(a - b) > tolerance * abs(b):
            problems.append(f"{label}: step {step}: loss {a!r}, one device {b!r}")
            return
    for name, expected in ref_params.items():
        error = np.abs(params[name] - expected).max()
        if error > tolerance * max(np.abs(expected).max(), 1e-6):
            problems.append(f"{label}: final {name} differs by {error:.2e}")
            return


def identical(label, ours, reference, problems):
    losses, params, _, _ = ours
    ref_losses, ref_params, _, _ = reference
    if losses != ref_losses:
        problems.append(f"{label}: losses {losses} differ from one device's {ref_losses}")
        return
    for name, expected in ref_params.items():
        if params[name].tobytes() != expected.tobytes():
            problems.append(f"{label}: final {name} is not bit-identical")
            return


def gathered_bytes(run):
    """Bytes a rank sends in all-gathers a step, as plan.json predicts them."""
    return sum(c["bytes_sent_per_rank"] for c in run[3]["collectives"]
               if c["kind"] == "all_gather")


def bytes_as_planned(label, run, problems):
    _, _, metrics, plan = run
    planned = {(c["kind"], c["axis"]): c["bytes_sent_per_rank"] * STEPS
               for c in plan["collectives"]}
    sent = {(b["kind"], b["axis"]): b["bytes"] for b in metrics["bytes_sent"]}
    if sent != planned:
        problems.append(f"{label}: sent {sent}, plan.json predicts {planned}")


def mixed_precision(m, name, reference, zero_runs, problems):
    """bf16 and fp16 layouts against one device in the same precision;
    `reference` is the f32 one-device run, `zero_runs` the f32 dp=2 ZeRO
    runs by stage."""
    # Mixed precision: products on bf16 factors, gradients still f32, so
    # the ranks sum what one device sums.
    bf16 = ["--precision", "bf16"]
    one_bf16 = m.train("one-bf16", 1, 1, MOMENTUM, bf16)
    if one_bf16[0] == reference[0]:
        problems.append(f"{name} bf16: the same losses as f32")
    bf16_runs = {}
    for zero in (1, 2, 3):
        label = f"{name} dp=2 zero={zero} bf16"
        run = bf16_runs[zero] = m.train(f"dp2-z{zero}-bf16", 2, 1, MOMENTUM,
                                        ["--zero", str(zero), *bf16])
        close(label, run, one_bf16, problems)
        bytes_as_planned(label, run, problems)
        # The products' weights are gathered as bf16 slices (the biases and
        # normalizations' parameters stay f32): fewer bytes than in f32, each
        # as plan.json predicts (bytes_as_planned).
        gathered = [gathered_bytes(r) for r in (run, zero_runs[zero, 2])]
        print(f"{label}: all-gathers send {gathered[0]} bytes a step, {gathered[1]} in f32")
        if not gathered[0] < gathered[1]:
            problems.append(f"{label}: gathers {gathered[0]} bytes a step, f32 {gathered[1]}")
        # ZeRO 1 and 2 gather each parameter once a step (ZeRO 3: before
        # the forward's and the backward's readers).
        gathers = sum(c["calls_per_step"] for c in run[3]["collectives"]
                      if c["kind"] == "all_gather")
        sliced = sum("zero3" in p for p in run[3]["parameters"])
        if zero < 3 and gathers != sliced:
            problems.append(f"{label}: {gathers} all-gathers a step, {sliced} sliced parameters")
    # Gradient accumulators in bf16: each rank's gradient is rounded once
    # (2^-9 relative) where one device keeps f32, so the layouts track one
    # device in bf16 as the bf16 sums do, with half the gradient bytes.
    initial = {t.name: numpy_helper.to_array(t)
               for t in onnx.load(m.export(m.batch)).graph.initializer}
    for zero in (0, 1, 2, 3):
        label = f"{name} dp=2 zero={zero} bf16 gradients"
        run = m.train(f"dp2-z{zero}-bf16-grads", 2, 1, MOMENTUM,
                      ["--zero", str(zero), *bf16, "--grad-accum-dtype", "bf16"])
        moved_close(label, run, one_bf16, initial, problems)
        bytes_as_planned(label, run, problems)
        if zero > 0:
            kept = [r[3]["memory"]["gradient_bytes"] for r in (run, bf16_runs[zero])]
            if not kept[0] < 0.55 * kept[1]:
                problems.append(f"{label}: gradients take {kept[0]} bytes, f32 {kept[1]}")
    identical(f"{name} dp=2 --deterministic bf16",
              m.train("dp2-det-bf16", 2, 1, ADAMW, ["--deterministic", *bf16]),
              m.train("one-k2-bf16", 1, 2, ADAMW, bf16), problems)
    # fp16 from a loss scale that overflows: the ranks skip the steps
    # one device skips (the ZeRO stages' slices agree on it through an
    # all-reduce).
    one_fp16 = m.train("one-fp16", 1, 1, MOMENTUM, FP16)
    for zero in (1, 2, 3):
        label = f"{name} dp=2 zero={zero} fp16"
        run = m.train(f"dp2-z{zero}-fp16", 2, 1, MOMENTUM, ["--zero", str(zero), *FP16])
        close(label, run, one_fp16, problems)
        skipped = [[s["skipped"] for s in r[2]["steps"]] for r in (run, one_fp16)]
        if skipped[0] != skipped[1] or not any(skipped[1]):
            problems.append(f"{label}: skipped {skipped[0]}, one device {skipped[1]}")


def moved_close(label, ours, reference, initial, problems):
    """Every loss within 1e-3 relative of `reference`'s, and every parameter
    within 1% of how far `reference` moved it from `initial`."""
    for step, (a, b) in enumerate(zip(ours[0], reference[0]), start=1):
        if abs(a - b) > 1e-3 * abs(b):
            problems.append(f"{label}: step {step}: loss {a!r}, one device {b!r}")
            return
    for name, expected in reference[1].items():
        error = np.abs(ours[1][name] - expected).max()
        moved = np.abs(expected - initial[name]).max()
        if error > 1e-2 * moved:
            problems.append(f"{label}: final {name} differs by {error:.2e}, "
                            f"{error / moved:.2%} of the f32 run's move")
            return


def bf16_accumulators_hold(label, ours, reference, f32_accumulators, problems):
    """`ours` (gradient accumulators in bf16) gives `reference`'s losses and
    parameters bit for bit, sends the bytes planned, and peaks below
    `f32_accumulators` (the same layout with f32 accumulators)."""
    identical(label, ours, reference, problems)
    bytes_as_planned(label, ours, problems)
    peaks = [r[2]["peak_bytes_allocated"] for r in (ours, f32_accumulators)]
    if not peaks[0] < peaks[1]:
        problems.append(f"{label}: peak {peaks[0]} bytes, f32 accumulators' {peaks[1]}")


def bf16_gradient_sums(m, name, reference, dp2, problems):
    """--grad-reduce-dtype bf16 against one device in f32 (`reference`) and
    dp=2 summing in f32 (`dp2`)."""
    bf16 = ["--grad-reduce-dtype", "bf16"]
    initial = {t.name: numpy_helper.to_array(t)
               for t in onnx.load(m.export(m.batch)).graph.initializer}
    runs = {label: m.train(f"{label.replace(' ', '').replace('=', '').replace('--', '-')}"
                           "-bf16-sums", ranks, 1, MOMENTUM, [*flags, *bf16])
            for label, ranks, flags in (("dp=2", 2, []), ("dp=2 --deterministic", 2,
                                                          ["--deterministic"]),
                                        ("dp=2 zero=1", 2, ["--zero", "1"]),
                                        ("dp=2 zero=2", 2, ["--zero", "2"]),
                                        ("dp=2 zero=3", 2, ["--zero", "3"]),
                                        ("dp=4", 4, []))}
    for label, run in runs.items():
        label = f"{name} {label} bf16 gradient sums"
        moved_close(label, run, reference, initial, problems)
        bytes_as_planned(label, run, problems)
    first = runs["dp=2"]
    if first[0] == dp2[0]:
        problems.append(f"{name} dp=2 bf16 gradient sums: the same losses as summing in f32")
    for label in ("dp=2 --deterministic", "dp=2 zero=1", "dp=2 zero=2", "dp=2 zero=3"):
        identical(f"{name} {label} bf16 gradient sums", runs[label], first, problems)
    # bf16 products with accumulators in bf16 summed in bf16: the sums read
    # the bf16 accumulators themselves (no f32 copy first, so the buckets
    # start during the backward as f32 accumulators' do) and give what the
    # f32 accumulators' sums give bit for bit (one microbatch: each holds
    # its gradient rounded to bf16, what the f32 one is rounded to on the
    # wire), at a lower peak.
    mixed = ["--precision", "bf16", *bf16]
    for label, flags in (("dp=2 1 KiB buckets", ["--bucket-mb", "0.001"]),
                         ("dp=2 zero=1", ["--zero", "1"]), ("dp=2 zero=2", ["--zero", "2"])):
        tag = label.replace(" ", "-").replace("=", "")
        f32_slots, bf16_slots = (m.train(f"{tag}-bf16-sums-{kind}-slots", 2, 1, MOMENTUM,
                                         [*mixed, *flags, "--grad-accum-dtype", kind])
                                 for kind in ("fp32", "bf16"))
        label = f"{name} {label} bf16 sums of bf16 accumulators"
        bf16_accumulators_hold(label, bf16_slots, f32_slots, f32_slots, problems)
        buckets = bf16_slots[3]["training"].get("gradient_buckets", {}).get("bytes", [])
        if "buckets" in label and len(buckets) < 2:
            problems.append(f"{label}: plan.json has buckets {buckets}, not several")
    # Summed in f32 (the default), ZeRO 1's reduce-scatters read the bf16
    # accumulators too, widening the parts they sum in rank order: plain
    # dp's all-reduce of the accumulators' f32 copies in rank order
    # (--deterministic) bit for bit, from half the bytes, at a lower peak
    # than f32 accumulators' ZeRO 1.
    deterministic = ["--precision", "bf16", "--deterministic"]
    plain, sliced, f32_sliced = (
        m.train(f"dp2-{tag}-det-f32-sums-{kind}-slots", 2, 1, MOMENTUM,
                [*deterministic, *flags, "--grad-accum-dtype", kind])
        for tag, flags, kind in (("z0", [], "bf16"), ("z1", ["--zero", "1"], "bf16"),
                                 ("z1", ["--zero", "1"], "fp32")))
    label = f"{name} dp=2 zero=1 --deterministic f32 sums of bf16 accumulators"
    bf16_accumulators_hold(label, sliced, plain, f32_sliced, problems)
    scattered = [sum(c["bytes_sent_per_rank"] for c in r[3]["collectives"]
                     if c["kind"] == "reduce_scatter") for r in (sliced, f32_sliced)]
    if not 0 < scattered[0] < 0.55 * scattered[1]:
        problems.append(f"{label}: reduce-scatters send {scattered[0]} bytes a step, "
                        f"{scattered[1]} from f32 accumulators")
    reduced = [sum(c["bytes_sent_per_rank"] for c in r[3]["collectives"]
                   if c["kind"] == "all_reduce") for r in (first, dp2)]
    print(f"{name} dp=2: the all-reduce sends {reduced[0]} bytes a step summing in bf16, "
          f"{reduced[1]} in f32")
    if not reduced[0] < 0.55 * reduced[1]:
        problems.append(f"{name} dp=2 bf16 gradient sums: all-reduce sends {reduced[0]} bytes "
                        f"a step, f32 {reduced[1]}")


def main():
    workdir = sys.argv[1]
    problems = []
    for name, module, names, batch in (("mlp", export_mlp, ["x", "labels"], 8),
                                       ("gpt", export_gpt, ["idx", "targets"], 4)):
        m = Model(name, module, names, batch, workdir)
        reference = m.train("one", 1, 1, MOMENTUM)
        dp_runs = {}
        for ranks in (2, 4):
            run = m.train(f"dp{ranks}", ranks, 1, MOMENTUM)
            close(f"{name} dp={ranks}", run, reference, problems)
            bytes_as_planned(f"{name} dp={ranks}", run, problems)
            dp_runs[ranks] = run
        if name == "mlp" or LONG:
            bf16_gradient_sums(m, name, reference, dp_runs[2], problems)
        close(f"{name} dp=2 grad-accum 2", m.train("dp2-k2", 2, 2, MOMENTUM), reference,
              problems)
        small = ["--bucket-mb", "0.001"]
        for ranks, accum in ((2, 2), (4, 1)):
            label = f"{name} dp={ranks} grad-accum {accum} 1 KiB buckets"
            run = m.train(f"dp{ranks}-k{accum}-buckets", ranks, accum, MOMENTUM, small)
            close(label, run, reference, problems)
            bytes_as_planned(label, run, problems)
            buckets = run[3]["training"].get("gradient_buckets", {}).get("bytes", [])
            if len(buckets) < 2:
                problems.append(f"{label}: plan.json has buckets {buckets}, not several")
        run = m.train("dp2-no-buckets", 2, 1, MOMENTUM, ["--bucket-mb", "0"])
        close(f"{name} dp=2 --bucket-mb 0", run, reference, problems)
        if "gradient_buckets" in run[3]["training"]:
            problems.append(f"{name} dp=2 --bucket-mb 0: plan.json has gradient_buckets")
        zero_runs = {}
        for zero in (1, 2, 3):
            for ranks in (2, 4):
                label = f"{name} dp={ranks} zero={zero}"
                run = m.train(f"dp{ranks}-z{zero}", ranks, 1, MOMENTUM, ["--zero", str(zero)])
                close(label, run, reference, problems)
                bytes_as_planned(label, run, problems)
                zero_runs[zero, ranks] = run
        for zero in (1, 2):
            label = f"{name} dp=2 zero={zero} grad-accum 2 1 KiB buckets"
            run = m.train(f"dp2-k2-z{zero}-buckets", 2, 2, MOMENTUM, ["--zero", str(zero), *small])
            close(label, run, reference, problems)
            bytes_as_planned(label, run, problems)
            buckets = run[3]["training"].get("gradient_buckets", {}).get("bytes", [])
            if len(buckets) < 2:
                problems.append(f"{label}: plan.json has buckets {buckets}, not several")
        label = f"{name} dp=2 zero=3 gathers and reduce-scatters overlapped"
        run = m.train("dp2-z3-overlapped", 2, 1, MOMENTUM,
                      ["--zero", "3", "--prefetch-gathers", "on", "--overlap-reduce-scatters", "on"])
        close(label, run, reference, problems)
        bytes_as_planned(label, run, problems)
        for key in ("prefetched_gathers", "overlapped_reduce_scatters"):
            if not run[3]["training"].get(key, {}).get("bytes"):
                problems.append(f"{label}: plan.json has no {key}")
        # The MLP's mixed-precision layouts in the long suite only: the GPT's
        # cover the same passes and kernels.
        if name == "gpt" or LONG:
            mixed_precision(m, name, reference, zero_runs, problems)
        clipped = MOMENTUM + ["--clip-grad-norm", "0.5"]
        close(f"{name} dp=2 zero=2 clipped", m.train("dp2-z2-clip", 2, 1, clipped, ["--zero", "2"]),
              m.train("one-clip", 1, 1, clipped), problems)
        for ranks in (2, 4):
            one = m.train(f"one-k{ranks}", 1, ranks, ADAMW)
            run = m.train(f"dp{ranks}-det", ranks, 1, ADAMW, ["--deterministic"])
            identical(f"{name} dp={ranks} --deterministic", run, one, problems)
            run = m.train(f"dp{ranks}-det-buckets", ranks, 1, ADAMW, ["--deterministic", *small])
            identical(f"{name} dp={ranks} --deterministic 1 KiB buckets", run, one, problems)
            for zero in (1, 2):
                run = m.train(f"dp{ranks}-z{zero}-det-buckets", ranks, 1, ADAMW,
                              ["--zero", str(zero), "--deterministic", *small])
                identical(f"{name} dp={ranks} zero={zero} --deterministic 1 KiB buckets", run, one,
                          problems)
        print(f"{name}: checked against {reference[0][0]:.6f} -> {reference[0][-1]:.6f}")
    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
