# Pipeline parallel equals one device. The torch-exported MLP and GPT-style
# models are cut into pipeline stages (the balanced cut of
# cleave-pipeline-split) and trained STEPS steps in file order, each layout
# from the same initial weights on the same data, against one device
# accumulating the same M microbatches (--grad-accum M):
#   - pp=2 with gpipe, 1f1b and zb-h1 (M = 4), pp=4 with 1f1b and zb-h1 for the MLP
#     (its last stage the loss alone, with no parameter; also dp x pp = 2 x 4
#     with ZeRO 1 and 2, gpipe, where that stage has no flat buffer), dp x pp = 2 x 2
#     with 1f1b (M = 2 a rank), for the GPT also with ZeRO 1, 2 and 3, and
#     tp x pp = 2 x 2 and dp x tp x pp = 2 x 2 x 2 (8 ranks, 11 s here) with
#     plans/megatron-gpt.json: every step's loss within 1e-5 relative
#     of one device and the final parameters, gathered from the stages'
#     blobs, within 1e-5 of their largest element; tp x pp = 2 x 2 with
#     --overlap-tp-sums on bit for bit as without
#     (test/distributed/dp_vs_single.py's check); without dp, every loss and
#     parameter bit for bit (each microbatch's gradients are added in the
#     same order as on one device); dp x pp = 2 x 2 with --deterministic (one
#     microbatch a dp rank, gpipe) bit for bit against one device
#     accumulating the same two microbatches, and so are tp x pp = 2 x 2
#     (1f1b, and interleaved over four stages) and dp x tp x pp = 2 x 2 x 2
#     with the Megatron plan (tp's partial products gathered whole; one
#     device resumed from the 3-D mesh's step-3 checkpoint bit for bit); dp x pp = 2 x 2 with 1f1b and
#     zb-h1 and 1 KiB gradient buckets, started by each stage's backward
#     (zb-h1: its weights' backward), with the interleaved schedule (two
#     stages a rank), and with zb-h1 under ZeRO 2 (each microbatch's packed
#     gradients reduce-scattered in buckets), with --deterministic bit for
#     bit as without buckets;
#   - an MLP with two training-mode Dropouts, one in each stage, draws one
#     device's masks (bit for bit), and with global-norm clipping (the
#     stages' sums of squares all-reduced over pp) on pp=2 and 2 x 2 equals
#     one device within 1e-5;
#   - a language model whose head reads its token embedding again (tied
#     weights; the cut leaves the embedding in stage 0, the head in stage 1):
#     both stages hold it and sum its gradients, on pp=2, dp x pp = 2 x 2 and
#     2 x 2 with ZeRO 1 and 2 (the tied weight whole beside the flat buffer)
#     and 3 (each dp rank's slice of the gradient summed), with
#     and without clipping, equal to one device within 1e-5, the two
#     stages' copies equal bit for bit, and --save-onnx's model holds the
#     trained parameters (gathered from both stages); with ZeRO 1 and 2,
#     resumed from a step-3 checkpoint, bit for bit as uninterrupted; with
#     --deterministic (the weight sent from the first stage each microbatch,
#     its gradient back) bit for bit against one device on pp=2 with gpipe,
#     1f1b, zb-h1 and interleaved and on dp x pp = 2 x 2 plain and with ZeRO
#     1 and 3, the later stage not holding the weight, one device resumed
#     from its checkpoint bit for bit;
#   - the GPT on pp=2 with --recompute selective and full (1f1b; full with
#     zb-h1 too): bit for bit against one device, and stage 0's stash
#     (plan.json's memory.stash_bytes) smaller than without;
#   - the GPT on pp=2 with --precision bf16, and in the long suite
#     (CLEAVE_LONG=1) with fp16 from a loss scale that overflows: bit for bit
#     against one device in the same precision;
#   - the same with the stages files of plans/ (stages-mlp-pp2.json,
#     stages-gpt-pp2.json) instead of the balanced cut;
#   - each stage's plan.json holds the parameters its stage reads, and each
#     trained parameter is trained in exactly one stage;
#   - clipping on the MLP on pp=4, whose second stage trains no parameter:
#     within 1e-5 of one device, and the global norm each step logs
#     (--log-json's grad_norm) within 1e-5 of one device's;
#   - a stages file of another number of stages and --stages without a pp
#     axis are refused in one line (test/pipeline/interleaved_vs_single.py
#     checks the interleaved schedule, test/pipeline/pp_checkpoint.py the
#     pipelines' checkpoints).
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(HERE, "..", "models"))
sys.path.insert(0, os.path.join(HERE, "..", "distributed"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))

import export_gpt  # noqa: E402
import export_mlp  # noqa: E402
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnx.numpy_helper  # noqa: E402
import torch  # noqa: E402
from dp_vs_single import FP16, LONG, MOMENTUM, Model, close, identical, parameters  # noqa: E402
from tp_vs_single import TrainingModeModel  # noqa: E402


def stages_hold_their_parameters(label, out, pp, reference_params, problems):
    """Every parameter is in some stage, and each trained one (with a
    gradient accumulator) in exactly one; an untrained one, such as the GPT's
    causal mask, is read where it is needed."""
    held, trained = set(), {}
    for s in range(pp):
        plan = json.load(open(os.path.join(out, f"stage{s}", "plan.json")))
        held |= {p["name"] for p in plan["parameters"]}
        for state in plan["state"]:
            name = state["name"]
            if name.startswith("grad:"):
                if name[5:] in trained:
                    problems.append(f"{label}: {name[5:]} trained in stages {trained[name[5:]]} "
                                    f"and {s}")
                trained[name[5:]] = s
    if held != set(reference_params) or not set(trained) <= held:
        problems.append(f"{label}: the stages hold {sorted(held)}, train {sorted(trained)}; the "
                        f"model has {sorted(reference_params)}")


class TwoDropoutMLP(torch.nn.Module):
    """fc1 -> ReLU -> Dropout -> fc2 -> ReLU -> Dropout -> fc3 -> cross-entropy:
    with fc1 in the first stage and the rest in the second, the second
    stage's dropout is the model's second."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(12, 32), torch.nn.Linear(32, 32)
        self.fc3 = torch.nn.Linear(32, 6)
        self.drop1, self.drop2 = torch.nn.Dropout(0.3), torch.nn.Dropout(0.2)

    def forward(self, x, labels):
        h = self.drop1(torch.relu(self.fc1(x)))
        h = self.drop2(torch.relu(self.fc2(h)))
        return torch.nn.functional.cross_entropy(self.fc3(h), labels)

    @staticmethod
    def build():
        torch.manual_seed(0)
        return TwoDropoutMLP(), (torch.randn(4, 12), torch.randint(0, 6, (4,)))


def dropout_and_clipping(workdir, problems):
    """Each stage draws one device's dropout masks, and global-norm clipping
    counts every stage's gradients once (so its sums add up in another
    order: within 1e-5, not bit for bit)."""
    m = TrainingModeModel("drop2", TwoDropoutMLP, ["x", "labels"], 16, workdir)
    stages = os.path.join(workdir, "drop2-stages.json")
    json.dump({"stages": [["fc1.*"], ["fc2.*", "fc3.*"]]}, open(stages, "w"))
    one = m.train("one-k4", 1, 4, MOMENTUM)
    run = m.train("pp2", 1, 4, MOMENTUM, ["--stages", stages], pp=2)
    identical("dropout mlp pp2", run, one, problems)
    clipped = MOMENTUM + ["--clip-grad-norm", "0.05"]
    one = m.train("one-k4-clip", 1, 4, clipped)
    close("dropout mlp pp2 clipped", m.train("pp2-clip", 1, 4, clipped, ["--stages", stages], pp=2),
          one, problems)
    close("dropout mlp dp2 pp2 clipped",
          m.train("dp2-pp2-clip", 2, 2, clipped, ["--stages", stages], pp=2), one, problems)
    print(f"dropout mlp: checked against {one[0][0]:.6f} -> {one[0][-1]:.6f}")


def clipping_with_a_stage_that_trains_nothing(workdir, problems):
    """The MLP on pp=4: a stage holds only a ReLU. Its @apply adds 0 to
    the clip's sum over pp, and every stage logs the same global norm as
    one device."""
    m = Model("mlp", export_mlp, ["x", "labels"], 16, workdir)
    clipped = MOMENTUM + ["--clip-grad-norm", "0.5"]
    one = m.train("one-k4-clip", 1, 4, clipped)
    run = m.train("pp4-clip", 1, 4, clipped, pp=4)
    out = os.path.join(workdir, "mlp-pp4-clip")
    idle = [s for s in range(4)
            if not json.load(open(os.path.join(out, f"stage{s}", "plan.json")))["parameters"]]
    if not idle:
        problems.append("mlp pp4: every stage trains a parameter; the case is not tested")
    close("mlp pp4 clipped", run, one, problems)
    norms = [[s["grad_norm"] for s in r[2]["steps"]] for r in (run, one)]
    if not np.allclose(*norms, rtol=1e-5, atol=0):
        problems.append(f"mlp pp4 clipped: gradient norms {norms[0]}, one device {norms[1]}")
    print(f"mlp pp4 clipped (stage {idle} trains nothing): norms {norms[0][0]:.6f} ...")


class TiedLM(torch.nn.Module):
    """A token embedding that the output head reads again (tied weights),
    with a layer between: cut after the embedding, both stages hold it."""

    def __init__(self):
        super().__init__()
        self.tok_emb = torch.nn.Embedding(16, 8)
        self.fc = torch.nn.Linear(8, 8)
        self.head_bias = torch.nn.Parameter(torch.zeros(16))

    def forward(self, idx, targets):
        h = torch.tanh(self.fc(self.tok_emb(idx))).reshape(-1, 8)
        # A Gemm that reads the embedding itself (transB), not a transposed copy.
        logits = torch.nn.functional.linear(h, self.tok_emb.weight, self.head_bias)
        return torch.nn.functional.cross_entropy(logits, targets.reshape(-1))

    @staticmethod
    def build():
        torch.manual_seed(0)
        return TiedLM(), (torch.randint(0, 16, (4, 6)), torch.randint(0, 16, (4, 6)))


def buckets_in_stages(m, name, optimizer, reference, problems):
    """dp x pp = 2 x 2 with 1 KiB gradient buckets, whose sums the last
    microbatch's backward starts in each stage's program (@backward; with
    zb-h1 @backward_weight, where the weights' gradients are made; with the
    interleaved schedule in each of a rank's two stages; under ZeRO 2, with
    zb-h1, every microbatch's reduce-scatters of its packed gradients):
    with --deterministic the same losses and parameters bit for bit as the
    same layout summing every gradient after the backward (--bucket-mb 0),
    several buckets in each stage's plan.json (over the four stages,
    interleaved), and within 1e-5 of one device."""
    for schedule, flags, stages in (("1f1b", [], 2), ("zb-h1", [], 2),
                                    ("interleaved", ["--virtual-stages", "2"], 4),
                                    ("zb-h1", ["--zero", "2"], 2)):
        zero2 = "--zero" in flags
        layout = f"dp2-pp2-{schedule}{'-z2' if zero2 else ''}-det-buckets"
        runs = {mb: m.train(layout + mb, 2, 2, optimizer,
                            ["--schedule", schedule, *flags, "--deterministic", "--bucket-mb", mb],
                            pp=2)
                for mb in ("0", "0.001")}
        label = f"{name} {layout.replace('-det-buckets', '')} --deterministic 1 KiB buckets"
        identical(label, runs["0.001"], runs["0"], problems)
        close(label, runs["0.001"], reference, problems)
        if stages == 4:
            count = sum(len(json.load(open(os.path.join(
                m.workdir, f"{name}-{layout}0.001", f"stage{s}",
                "plan.json")))["training"].get("gradient_buckets", {}).get("bytes", []))
                for s in range(stages))
            if count < 2:
                problems.append(f"{label}: {count} buckets over the {stages} stages")
            continue
        start = "reduce_scatter_owned_start" if zero2 else "all_reduce_start"
        for stage in range(stages):
            out = os.path.join(m.workdir, f"{name}-{layout}0.001", f"stage{stage}")
            training = json.load(open(os.path.join(out, "plan.json")))["training"]
            buckets = training.get("gradient_buckets", {}).get("bytes", [])
            program = open(os.path.join(out, "program.cpp")).read()
            made_in = "cleave_backward_weight" if schedule == "zb-h1" else "cleave_backward"
            started_there = program.split(f"void {made_in}(")[1].split("\n}\n")[0]
            if len(buckets) < 2 or start not in started_there:
                problems.append(f"{label}: stage {stage} has buckets {buckets}, "
                                f"{start} in {made_in}: {start in started_there}")


def tied_weights(workdir, problems):
    """The stages holding a tied weight sum its gradients (Megatron's
    embedding all-reduce): pp=2, dp x pp = 2 x 2, and dp x pp = 2 x 2 with
    ZeRO 1 and 2 (the tied weight whole beside the flat buffer) and 3 (each
    stage sums its dp slice of the gradient), each with and without
    clipping, equal one device within 1e-5 (the sum's order differs), and
    both stages end with the same copy, bit for bit; dp x pp = 2 x 2 with
    ZeRO 1 and 2 in bf16 equal one device in bf16 within 1e-5."""
    m = Model("tied", TiedLM, ["idx", "targets"], 8, workdir)
    stages = os.path.join(workdir, "tied-stages.json")
    json.dump({"stages": [["tok_emb.*"], ["fc.*", "head_bias"]]}, open(stages, "w"))
    # With fc in stage 0 too, ZeRO 1's first stage holds a flat buffer
    # beside the tied weight, whose squares it counts for the clip.
    beside = os.path.join(workdir, "tied-stages-beside.json")
    json.dump({"stages": [["tok_emb.*", "fc.*"], ["head_bias"]]}, open(beside, "w"))
    for label, optimizer in (("", MOMENTUM), ("-clip", MOMENTUM + ["--clip-grad-norm", "0.5"])):
        one = m.train("one-k4" + label, 1, 4, optimizer)
        for dp, zero, cut in ((1, [], stages), (2, [], stages),
                              *((2, ["--zero", z], stages) for z in ("1", "2", "3")),
                              (2, ["--zero", "1"], beside)):
            layout = (f"dp{dp}-pp2{'-z' + zero[1] if zero else ''}"
                      f"{'-beside' if cut == beside else ''}{label}")
            saved = os.path.join(workdir, f"tied-{layout}.onnx")
            run = m.train(layout, dp, 4 // dp, optimizer, ["--stages", cut, *zero],
                          pp=2, save_onnx=saved)
            close(f"tied {layout}", run, one, problems)
            exported = {t.name: onnx.numpy_helper.to_array(t)
                        for t in onnx.load(saved).graph.initializer}
            for name, value in run[1].items():
                if not np.array_equal(exported[name], value):
                    problems.append(f"tied {layout}: --save-onnx's {name} is not the trained one")
            copies = [parameters(json.load(open(os.path.join(workdir, f"tied-{layout}",
                                                            f"stage{s}", "plan.json"))),
                                 os.path.join(workdir, f"tied-{layout}.results", f"stage{s}"), 1)
                      .get("tok_emb.weight") for s in (0, 1)]
            if any(c is None for c in copies) or copies[0].tobytes() != copies[1].tobytes():
                problems.append(f"tied {layout}: the stages' embeddings differ")
    # Mixed precision: ZeRO 1 and 2 keep every f32 parameter as dp slices
    # (master weights), the tied one on both stages as ZeRO 3 does, and
    # gather their copies once a step.
    bf16 = ["--precision", "bf16"]
    one_bf16 = m.train("one-k4-bf16", 1, 4, MOMENTUM, bf16)
    for zero in ("1", "2"):
        layout = f"dp2-pp2-z{zero}-bf16"
        close(f"tied {layout}", m.train(layout, 2, 2, MOMENTUM, ["--stages", stages, "--zero", zero,
                                                                *bf16], pp=2),
              one_bf16, problems)
    print(f"tied lm: checked against {one[0][0]:.6f} -> {one[0][-1]:.6f}")
    tied_zero_resumes(workdir, m, problems)
    tied_deterministic(workdir, m, stages, problems)


def tied_deterministic(workdir, m, stages, problems):
    """With --deterministic the first stage holding a tied weight sends it
    to the other each microbatch and takes its gradient back, adding the two
    contributions where one device does: pp=2 with gpipe, 1f1b and zb-h1
    (four microbatches a step), the interleaved schedule (four stages, the
    weight in the first and the last), dp x pp = 2 x 2 (one microbatch a dp
    rank) plain and with ZeRO 1 and 3, every loss and parameter bit for bit
    against one device; the later stage's plan.json does not hold the
    weight; one device resumed from pp=2's checkpoint ends bit for bit as
    one device; and no compile warns."""
    four = os.path.join(workdir, "tied-stages-four.json")
    json.dump({"stages": [["tok_emb.*"], ["fc.weight"], ["fc.bias"], ["head_bias"]]},
              open(four, "w"))
    one = {accum: m.train(f"one-k{accum}-det", 1, accum, MOMENTUM, ["--deterministic"])
           for accum in (2, 4)}
    # (layout, dp ranks, microbatches a dp rank, flags); with dp, one
    # microbatch a rank, as dp's --deterministic is bit for bit with one
    # device accumulating the ranks' microbatches.
    cases = [(f"pp2-{schedule}", 1, 4, ["--schedule", schedule, "--stages", stages])
             for schedule in ("gpipe", "1f1b", "zb-h1")]
    cases.append(("pp2-interleaved", 1, 4, ["--schedule", "interleaved", "--virtual-stages", "2",
                                            "--stages", four]))
    cases += [(f"dp2-pp2{'-z' + z if z else ''}", 2, 1,
               ["--schedule", "gpipe", "--stages", stages, *(["--zero", z] if z else [])])
              for z in ("", "1", "3")]
    for layout, dp, accum, flags in cases:
        label = f"tied {layout} --deterministic"
        out = os.path.join(workdir, f"tied-{layout}-det")
        run = m.train(f"{layout}-det", dp, accum, MOMENTUM, [*flags, "--deterministic"], pp=2)
        identical(label, run, one[dp * accum], problems)
        last = sorted(d for d in os.listdir(out) if d.startswith("stage"))[-1]
        held = {p["name"] for p in json.load(open(os.path.join(out, last, "plan.json")))
                ["parameters"]}
        if "tok_emb.weight" in held:
            problems.append(f"{label}: {last} holds tok_emb.weight, which stage 0 sends")
    # Its checkpoint holds the weight once, as any layout's does: one device
    # resumed from pp=2's step-5 checkpoint ends as one device does.
    one_device_resumes(m, "tied pp=2 --deterministic", os.path.join(workdir, "tied-pp2-1f1b-det"),
                       2, os.path.join(workdir, "tied-one-k4-det"), one[4], 5, problems)
    compiled = subprocess.run(["cleave", "compile", m.export(m.batch // 2), "-o",
                               os.path.join(workdir, "tied-det-plan"), "--train", *MOMENTUM,
                               "--batch-size", str(m.batch), "--grad-accum", "2", "--mesh", "pp=2",
                               "--stages", stages, "--emit", "plan", "--deterministic"],
                              capture_output=True, text=True)
    if compiled.returncode != 0 or "warning" in compiled.stderr:
        problems.append(f"tied --deterministic compile: exit {compiled.returncode}: "
                        f"{compiled.stderr.strip()[:300]}")


def run_again(m, out, label, ranks, extra, tp=1):
    """Runs the program compiled into `out` again on `ranks` ranks (`tp` of
    them a tp group) with `extra` flags (steps, checkpoints): its losses and
    each stage's parameters (one entry without stages)."""
    results, log = f"{out}-{label}.results", f"{out}-{label}.json"
    os.makedirs(results, exist_ok=True)
    launch = ["-n", str(ranks)] if ranks > 1 else []
    subprocess.run(["cleave", "run", *launch, out, *m.flags, "--no-shuffle", "--log-json", log,
                    "--output-dir", results, *extra], check=True, stderr=subprocess.DEVNULL)
    stages = sorted((d for d in os.listdir(out) if d.startswith("stage")),
                    key=lambda d: int(d[5:])) or [""]
    params = [parameters(json.load(open(os.path.join(out, s, "plan.json"))),
                         os.path.join(results, s), tp) for s in stages]
    return [s["loss"] for s in json.load(open(log))["steps"]], params


def one_device_resumes(m, label, out, ranks, one_out, one, step, problems, tp=1):
    """The program compiled into `out`, run on `ranks` ranks (`tp` of them a
    tp group), checkpoints at `step`; one device (compiled into `one_out`)
    resumed from it ends as its own uninterrupted run `one` does: the losses
    after `step` and every parameter bit for bit."""
    checkpoint = f"{out}-ck"
    run_again(m, out, "first", ranks, ["--steps", str(step), "--checkpoint-dir", checkpoint], tp)
    losses, [resumed] = run_again(m, one_out, "resumed", 1,
                                  ["--steps", str(len(one[0])), "--resume", checkpoint])
    if losses != one[0][step:] or any(resumed[name].tobytes() != value.tobytes()
                                      for name, value in one[1].items()):
        problems.append(f"{label}: one device resumed at step {step}: losses {losses} or "
                        f"parameters are not one device's {one[0][step:]}")


def tied_zero_resumes(workdir, m, problems):
    """dp x pp = 2 x 2 with ZeRO 1 and 2 and a tied weight (whole beside
    each stage's flat buffer), checkpointed at step 3 and resumed, ends with
    the uninterrupted run's losses and every stage's parameters bit for
    bit."""
    for zero in ("1", "2"):
        out = os.path.join(workdir, f"tied-dp2-pp2-z{zero}-clip")
        whole = run_again(m, out, "whole", 4, ["--steps", "6"])
        run_again(m, out, "first", 4, ["--steps", "3", "--checkpoint-dir", f"{out}-ck"])
        losses, params = run_again(m, out, "resumed", 4,
                                   ["--steps", "6", "--resume", f"{out}-ck"])
        if losses != whole[0][3:] or any(
                params[s][name].tobytes() != value.tobytes()
                for s in (0, 1) for name, value in whole[1][s].items()):
            problems.append(f"tied dp2 pp2 ZeRO {zero}: resumed at step 3, losses {losses} and "
                            f"parameters are not the uninterrupted run's {whole[0][3:]}")


RECOMPUTE = ("selective", "full")


def stashes_shrink(workdir, problems):
    """Recomputation keeps less from each stage's forward to its backward:
    plan.json's stash (the microbatches in flight times what one keeps) is
    smaller with each mode than without, on the first stage."""
    def stash(label):
        plan = json.load(open(os.path.join(workdir, f"gpt-{label}", "stage0", "plan.json")))
        return plan["memory"]["stash_bytes"]
    kept = stash("pp2-1f1b")
    for mode in RECOMPUTE:
        if not stash(f"pp2-{mode}") < kept:
            problems.append(f"gpt pp2 --recompute {mode}: stash {stash(f'pp2-{mode}')} bytes, "
                            f"not below {kept} without recomputation")


def refused(label, command, expected, problems):
    run = subprocess.run(command, capture_output=True, text=True)
    lines = run.stderr.strip().splitlines()
    if run.returncode == 0 or not lines or expected not in lines[0]:
        problems.append(f"{label}: exit {run.returncode}, {run.stderr.strip()!r}")


def main():
    workdir = sys.argv[1]
    problems = []
    for name, module, names, batch, optimizer in (
            ("mlp", export_mlp, ["x", "labels"], 16, MOMENTUM),
            ("gpt", export_gpt, ["idx", "targets"], 8, MOMENTUM)):
        m = Model(name, module, names, batch, workdir)
        reference = m.train("one-k4", 1, 4, optimizer)
        stages = ["--stages", os.path.join(ROOT, "plans", f"stages-{name}-pp2.json")]
        layouts = [("pp2-gpipe", 1, 2, ["--schedule", "gpipe"]), ("pp2-1f1b", 1, 2, []),
                   ("pp2-zb", 1, 2, ["--schedule", "zb-h1"]), ("pp2-file", 1, 2, stages),
                   ("dp2-pp2-1f1b", 2, 2, [])]
        if name == "mlp":
            layouts += [("pp4-1f1b", 1, 4, []), ("pp4-zb", 1, 4, ["--schedule", "zb-h1"])]
            # 8 ranks: the last stage trains no parameter, so it has no flat buffer.
            layouts += [(f"dp2-pp4-z{zero}", 2, 4, ["--zero", str(zero), "--schedule", "gpipe"])
                        for zero in (1, 2)]
        else:
            layouts += [(f"dp2-pp2-z{zero}", 2, 2, ["--zero", str(zero)]) for zero in (1, 2, 3)]
            megatron = ["--plan", os.path.join(ROOT, "plans", "megatron-gpt.json")]
            layouts += [("tp2-pp2", 1, 2, megatron), ("tp2-dp2-pp2", 2, 2, megatron)]
            # The input gradients' tp sums on the background thread.
            layouts += [("tp2-pp2-tpsums", 1, 2, megatron + ["--overlap-tp-sums", "on"])]
            layouts += [(f"pp2-{mode}", 1, 2, ["--recompute", mode]) for mode in RECOMPUTE]
            layouts += [("pp2-zb-full", 1, 2, ["--schedule", "zb-h1", "--recompute", "full"])]
        runs = {}
        for label, dp, pp, flags in layouts:
            accum = 4 // dp
            tp = 2 if label.startswith("tp2") else 1
            run = runs[label] = m.train(label, dp, accum, optimizer, flags, tp=tp, pp=pp)
            close(f"{name} {label}", run, reference, problems)
            if dp == 1 and tp == 1:  # the same sums in the same order as one device
                identical(f"{name} {label} bitwise", run, reference, problems)
            stages_hold_their_parameters(f"{name} {label}", os.path.join(workdir, f"{name}-{label}"),
                                         pp, reference[1], problems)
        if name == "gpt":
            stashes_shrink(workdir, problems)
            identical("gpt tp2-pp2 --overlap-tp-sums on bitwise", runs["tp2-pp2-tpsums"],
                      runs["tp2-pp2"], problems)
            # bf16 products: each microbatch's on the stage that holds it.
            bf16 = ["--precision", "bf16"]
            identical("gpt pp2 1f1b bf16 bitwise", m.train("pp2-bf16", 1, 4, optimizer, bf16, pp=2),
                      m.train("one-k4-bf16", 1, 4, optimizer, bf16), problems)
            # fp16 from a loss scale that overflows: both stages skip the
            # steps one device skips (an all-reduce over pp); long suite.
            if LONG:
                identical("gpt pp2 1f1b fp16 bitwise",
                          m.train("pp2-fp16", 1, 4, optimizer, FP16, pp=2),
                          m.train("one-k4-fp16", 1, 4, optimizer, FP16), problems)
        # --deterministic sums the dp ranks' gradients in rank order: with one
        # microbatch each, the order one device adds them in.
        one_k2 = m.train("one-k2", 1, 2, optimizer)
        identical(f"{name} dp2-pp2 gpipe --deterministic",
                  m.train("dp2-pp2-det", 2, 1, optimizer, ["--schedule", "gpipe",
                                                             "--deterministic"], pp=2),
                  one_k2, problems)
        if name == "gpt":
            # tp's partial products and its cross-entropy over split classes
            # made whole (cleave-gather-split-products): the 3-D mesh too.
            whole = megatron + ["--deterministic"]
            identical("gpt tp2-pp2 --deterministic",
                      m.train("tp2-pp2-det", 1, 4, optimizer, whole, tp=2, pp=2), reference,
                      problems)
            identical("gpt tp2-pp2 interleaved --deterministic",
                      m.train("tp2-pp2-interleaved-det", 1, 4, optimizer,
                              whole + ["--schedule", "interleaved", "--virtual-stages", "2"],
                              tp=2, pp=2), reference, problems)
            identical("gpt dp2-tp2-pp2 gpipe --deterministic",
                      m.train("dp2-tp2-pp2-det", 2, 1, optimizer, whole + ["--schedule", "gpipe"],
                              tp=2, pp=2), one_k2, problems)
            # Its step-3 checkpoint, resumed on one device.
            one_device_resumes(m, "gpt dp2-tp2-pp2 gpipe --deterministic",
                               os.path.join(workdir, "gpt-dp2-tp2-pp2-det"), 8,
                               os.path.join(workdir, "gpt-one-k2"), one_k2, 3, problems, tp=2)
        buckets_in_stages(m, name, optimizer, reference, problems)
        print(f"{name}: checked against {reference[0][0]:.6f} -> {reference[0][-1]:.6f}")

    dropout_and_clipping(workdir, problems)
    tied_weights(workdir, problems)

    model = m.export(2)
    compile_pp = ["cleave", "compile", model, "-o", os.path.join(workdir, "refused"), "--train",
                  "--grad-accum", "4", "--mesh", "pp=2"]
    # A pipeline's stages are training programs, which time no lone forward.
    refused("--repeat on a pipeline", ["cleave", "run", os.path.join(workdir, "mlp-pp2-1f1b"),
                                       "-n", "2", "--repeat", "2"],
            "--repeat: a training program does not take it: a pipeline's stages train", problems)
    three = os.path.join(workdir, "three-stages.json")
    json.dump({"stages": [["tok_emb.*"], ["blocks.*"], ["ln_f.*", "head.*"]]}, open(three, "w"))
    refused("a stages file for another pp", compile_pp + ["--stages", three],
            f"{three}: has 3 stages, but --mesh has pp=2", problems)
    refused("--stages without pp", compile_pp[:-2] + ["--stages", three],
            f"--stages {three}: cuts a pipeline into stages", problems)
    clipping_with_a_stage_that_trains_nothing(workdir, problems)
    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
