# The interleaved schedule (Megatron's interleaved 1F1B) equals one device.
# With --virtual-stages V the layers are cut into pp x V stages, stage s on
# pp rank s mod pp, and each rank's one executable runs the programs of its
# V stages. Each layout is trained STEPS steps in file order from the same
# initial weights on the same data as one device accumulating the same M
# microbatches (--grad-accum M):
#   - the GPT-style model on pp=2, V=2, M in {2, 4} (the MLP with M = 4, and
#     in the long suite, CLEAVE_LONG=1, M = 2 too), and the GPT on pp=4, V=2
#     (8 stages), M=4: every loss and final parameter bit for bit (each
#     stage adds its microbatches' gradients in one device's order);
#   - the GPT on dp x pp = 2 x 2 and tp x pp = 2 x 2
#     (plans/megatron-gpt.json), V=2: within 1e-5 of one device
#     (test/distributed/dp_vs_single.py's check); in the long suite also
#     pp=4 with M = 8 (bit for bit), dp x pp = 2 x 2 with ZeRO 1 and
#     dp x tp x pp = 2 x 2 x 2 (8 ranks, within 1e-5);
#   - dp x pp = 2 x 2 with --deterministic: bit for bit the dp=2 run with
#     the same two microbatches a rank and --deterministic (the dp sum in
#     rank order; both within 1e-5 of one device above and in
#     test/distributed/dp_vs_single.py);
#   - a rank's executable links its stages' programs: stage<r>/ holds the
#     program and programs.cpp, the table of stages r, r + pp, ...; the other
#     stages' directories hold their plan.json, weights and source only;
#   - each stage's plan.json names its rank's actions with their stages
#     ("F0@2"), and the stages together train every parameter once;
#   - global-norm clipping (each rank adds its stages' squares, then the
#     ranks' totals add up over pp) on pp=2 and dp x pp = 2 x 2, within 1e-5
#     of one device; fp16 from a loss scale that overflows (every stage
#     skips the steps one device skips) on pp=2, bit for bit;
#   - what the flags get wrong is refused in one line before anything is
#     built (interleaved without --virtual-stages, --virtual-stages without
#     interleaved or without pp, microbatches not a multiple of pp, a stages
#     file of pp stages, not pp x V); test/pipeline/pp_checkpoint.py checks
#     their checkpoints;
#   - a weight tied between two stages of one rank (the tied LM's embedding
#     and head, cut into stages 0 and 2, both on rank 0; the driver adds
#     the two stages' gradients): pp=2 and dp x pp = 2 x 2, within 1e-5 of
#     one device;
#   - a weight tied both within a rank and between ranks (read in stages 0
#     and 2 of rank 0 and 3 of rank 1): pp=2, dp x pp = 2 x 2 and pp=2 with
#     clipping within 1e-5 of one device, its three copies equal bit for
#     bit;
#   - both with --deterministic (the weight stage 0's alone, sent to the
#     other stages each microbatch, to stage 2 on its own rank too): pp=2,
#     every loss and parameter bit for bit against one device with
#     --deterministic;
#   - an activation and a tied weight that a middle stage reads twice and
#     later stages read again (passed on from reader to reader, their
#     gradients coming back the same way): pp=2 with --deterministic, bit
#     for bit against one device.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(HERE, "..", "models"))
sys.path.insert(0, os.path.join(HERE, "..", "distributed"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))

import export_gpt  # noqa: E402
import export_mlp  # noqa: E402
import torch  # noqa: E402
from dp_vs_single import FP16, LONG, MOMENTUM, Model, close, identical, parameters  # noqa: E402
from pp_vs_single import TiedLM, refused, stages_hold_their_parameters  # noqa: E402

INTERLEAVED = ["--schedule", "interleaved", "--virtual-stages", "2"]


class ThriceTied(torch.nn.Module):
    """A weight that three layers read: the first, the third and the last,
    which the stages file below puts in stages 0, 2 and 3 of pp=2 with
    V = 2, two on rank 0 and one on rank 1."""

    def __init__(self):
        super().__init__()
        for name in ("emb", "w1", "w2", "w3"):
            setattr(self, name, torch.nn.Parameter(0.5 * torch.randn(8, 8)))

    def forward(self, x, labels):
        h = torch.tanh(torch.tanh(x @ self.emb) @ self.w1)
        h = torch.tanh(torch.tanh(h @ self.w2) @ self.emb)
        return torch.nn.functional.cross_entropy(torch.tanh(h @ self.w3) @ self.emb, labels)

    @staticmethod
    def build():
        torch.manual_seed(0)
        return ThriceTied(), (torch.randn(4, 8), torch.randint(0, 8, (4,)))


class ManyReaders(torch.nn.Module):
    """h0 (stage 0) read twice in stage 1 and once in stages 2 and 3; w0
    read in stage 0, twice in stage 1 and again by the head in stage 3."""

    def __init__(self):
        super().__init__()
        for name in ("w0", "w1", "w2", "w3"):
            setattr(self, name, torch.nn.Parameter(0.5 * torch.randn(8, 8)))

    def forward(self, x, labels):
        h0 = torch.tanh(x @ self.w0)
        a = torch.tanh(h0 @ self.w1)
        b = a * h0
        h1 = torch.tanh(b + a @ self.w0 + b @ self.w0)
        h2 = torch.tanh(h1 @ self.w2) + h0
        h3 = torch.tanh(h2 @ self.w3) + h0
        return torch.nn.functional.cross_entropy(h3 @ self.w0, labels)

    @staticmethod
    def build():
        torch.manual_seed(0)
        return ManyReaders(), (torch.randn(4, 8), torch.randint(0, 8, (4,)))


def read_again_later(workdir, problems):
    """With --deterministic, every loss and parameter of ManyReaders on
    pp=2 with V = 2 (stage s holding w<s>) bit for bit against one
    device."""
    m = Model("many", ManyReaders, ["x", "labels"], 8, workdir)
    stages = os.path.join(workdir, "many-stages.json")
    json.dump({"stages": [["w0"], ["w1"], ["w2"], ["w3"]]}, open(stages, "w"))
    deterministic = ["--deterministic"]
    run = m.train("pp2-v2-det", 1, 4, MOMENTUM, INTERLEAVED + ["--stages", stages, *deterministic],
                  pp=2)
    identical("many readers pp2-v2 --deterministic", run,
              m.train("one-k4-det", 1, 4, MOMENTUM, deterministic), problems)


def tied_within_and_between_ranks(workdir, problems):
    """The driver adds the copies of a rank's stages, then each rank's first
    stage sends the rank's sum to the other rank's stages: within 1e-5 of
    one device, with clipping too, and the three copies equal bit for bit."""
    m = Model("thrice", ThriceTied, ["x", "labels"], 8, workdir)
    stages = os.path.join(workdir, "thrice-stages.json")
    json.dump({"stages": [["emb"], ["w1"], ["w2"], ["w3"]]}, open(stages, "w"))
    clipped = MOMENTUM + ["--clip-grad-norm", "0.5"]
    for label, dp, optimizer in (("pp2-v2", 1, MOMENTUM), ("dp2-pp2-v2", 2, MOMENTUM),
                                 ("pp2-v2-clip", 1, clipped)):
        one = m.train(f"one-k4{'-clip' if optimizer is clipped else ''}", 1, 4, optimizer)
        run = m.train(label, dp, 4 // dp, optimizer, INTERLEAVED + ["--stages", stages], pp=2)
        close(f"thrice-tied {label}", run, one, problems)
        out = os.path.join(workdir, f"thrice-{label}")
        copies = [parameters(json.load(open(os.path.join(out, f"stage{s}", "plan.json"))),
                             os.path.join(out + ".results", f"stage{s}"), 1).get("emb")
                  for s in (0, 2, 3)]
        if any(c is None for c in copies) or len({c.tobytes() for c in copies}) != 1:
            problems.append(f"thrice-tied {label}: the copies of stages 0, 2 and 3 differ")
    deterministic = ["--deterministic"]
    run = m.train("pp2-v2-det", 1, 4, MOMENTUM,
                  INTERLEAVED + ["--stages", stages, *deterministic], pp=2)
    identical("thrice-tied pp2-v2 --deterministic", run,
              m.train("one-k4-det", 1, 4, MOMENTUM, deterministic), problems)
    print(f"thrice-tied: checked against {one[0][0]:.6f} -> {one[0][-1]:.6f}")


def executables(label, out, pp, problems):
    """Rank r's executable in stage<r>/ with the table of its stages; the
    other stages' directories hold no program."""
    for s in range(2 * pp):
        has_program = os.path.exists(os.path.join(out, f"stage{s}", "program"))
        if has_program != (s < pp):
            problems.append(f"{label}: stage{s}/program {'exists' if has_program else 'missing'}")
    for r in range(pp):
        table = open(os.path.join(out, f"stage{r}", "programs.cpp")).read()
        for s in (r, r + pp):
            if f"cleave_stage{s}_forward" not in table:
                problems.append(f"{label}: stage{r}/programs.cpp does not run stage {s}")
    actions = json.load(open(os.path.join(out, "stage0", "plan.json")))
    actions = actions["training"]["pipeline"]["actions"]
    if "F0@0" not in actions or f"F0@{pp}" not in actions:
        problems.append(f"{label}: stage 0's actions {actions} do not name stages 0 and {pp}")


def main():
    workdir = sys.argv[1]
    problems = []
    for name, module, names, batch in (("mlp", export_mlp, ["x", "labels"], 16),
                                       ("gpt", export_gpt, ["idx", "targets"], 8)):
        m = Model(name, module, names, batch, workdir)
        for accum in ((2, 4) if name == "gpt" or LONG else (4,)):
            reference = m.train(f"one-k{accum}", 1, accum, MOMENTUM)
            label = f"pp2-v2-k{accum}"
            run = m.train(label, 1, accum, MOMENTUM, INTERLEAVED, pp=2)
            identical(f"{name} {label} bitwise", run, reference, problems)
            out = os.path.join(workdir, f"{name}-{label}")
            stages_hold_their_parameters(f"{name} {label}", out, 4, reference[1], problems)
            executables(f"{name} {label}", out, 2, problems)
        if name == "gpt":
            identical("gpt pp4-v2-k4 bitwise",
                      m.train("pp4-v2-k4", 1, 4, MOMENTUM, INTERLEAVED, pp=4), reference, problems)
            if LONG:  # M = 2P on pp=4 (8 stages)
                identical("gpt pp4-v2-k8 bitwise",
                          m.train("pp4-v2-k8", 1, 8, MOMENTUM, INTERLEAVED, pp=4),
                          m.train("one-k8", 1, 8, MOMENTUM), problems)
            megatron = ["--plan", os.path.join(ROOT, "plans", "megatron-gpt.json")]
            layouts = [("dp2-pp2-v2", 2, 1, []), ("tp2-pp2-v2", 1, 2, megatron)]
            if LONG:  # ZeRO 1, and 8 ranks
                layouts += [("dp2-pp2-v2-z1", 2, 1, ["--zero", "1"]),
                            ("dp2-tp2-pp2-v2", 2, 2, megatron)]
            for label, dp, tp, extra in layouts:
                run = m.train(label, dp, 4 // dp, MOMENTUM, INTERLEAVED + extra, tp=tp, pp=2)
                close(f"gpt {label}", run, reference, problems)
            # --deterministic sums the dp ranks' gradients in rank order, as
            # dp alone does with the same two microbatches a rank.
            deterministic = ["--deterministic"]
            identical("gpt dp2-pp2-v2 --deterministic against dp=2",
                      m.train("dp2-pp2-v2-det", 2, 2, MOMENTUM, INTERLEAVED + deterministic, pp=2),
                      m.train("dp2-det", 2, 2, MOMENTUM, deterministic), problems)
            # Clipping counts every stage's squares once: the rank's stages add
            # theirs, then the ranks' totals add up over pp.
            clipped = MOMENTUM + ["--clip-grad-norm", "0.5"]
            one = m.train("one-k4-clip", 1, 4, clipped)
            for label, dp in (("pp2-v2-clip", 1), ("dp2-pp2-v2-clip", 2)):
                close(f"gpt {label}", m.train(label, dp, 4 // dp, clipped, INTERLEAVED, pp=2), one,
                      problems)
            # fp16 from a loss scale that overflows: every stage skips the
            # steps one device skips.
            identical("gpt pp2-v2 fp16 bitwise",
                      m.train("pp2-v2-fp16", 1, 4, MOMENTUM, INTERLEAVED + FP16, pp=2),
                      m.train("one-k4-fp16", 1, 4, MOMENTUM, FP16), problems)
        print(f"{name}: checked against {reference[0][0]:.6f} -> {reference[0][-1]:.6f}")

    model = m.export(2)
    compile_pp = ["cleave", "compile", model, "-o", os.path.join(workdir, "refused"), "--train",
                  "--mesh", "pp=2"]
    four = ["--grad-accum", "4"]
    for label, flags, expected in (
            ("interleaved without V", four + ["--schedule", "interleaved"],
             "--schedule interleaved: runs two or more stages on each pp rank"),
            ("V without interleaved", four + ["--virtual-stages", "2"],
             "--virtual-stages 2: the 1f1b schedule runs one stage on each pp rank"),
            ("M not a multiple of pp", INTERLEAVED + ["--grad-accum", "3"],
             "--grad-accum 3: the interleaved schedule runs a multiple of pp's ranks (2)")):
        refused(label, compile_pp + flags, expected, problems)
    refused("V without pp", compile_pp[:-2] + ["--virtual-stages", "2"],
            "--virtual-stages 2: is the stages each rank of a pipeline runs", problems)
    two = os.path.join(ROOT, "plans", "stages-gpt-pp2.json")
    refused("a stages file of pp stages", compile_pp + four + INTERLEAVED + ["--stages", two],
            f"{two}: has 2 stages, but --mesh has pp=2 with 2 virtual stages each (4)", problems)
    # The auto cut puts the tied LM's embedding in stages 0 and 2, both on
    # rank 0: the driver adds the two stages' gradients before the update.
    tied = Model("tied", TiedLM, ["idx", "targets"], 8, workdir)
    one = tied.train("one-k4", 1, 4, MOMENTUM)
    for label, dp in (("pp2-v2", 1), ("dp2-pp2-v2", 2)):
        close(f"tied {label}", tied.train(label, dp, 4 // dp, MOMENTUM, INTERLEAVED, pp=2), one,
              problems)
    deterministic = ["--deterministic"]
    identical("tied pp2-v2 --deterministic",
              tied.train("pp2-v2-det", 1, 4, MOMENTUM, INTERLEAVED + deterministic, pp=2),
              tied.train("one-k4-det", 1, 4, MOMENTUM, deterministic), problems)
    tied_within_and_between_ranks(workdir, problems)
    read_again_later(workdir, problems)
    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
