# Tensor parallel equals one device. The torch-exported MLP and GPT-style
# models train STEPS steps in file order with the Megatron plans of plans/
# (the MLP's fc1 split by output, fc2 by input; the GPT's attention heads and
# MLPs), each layout from the same initial weights on the same data:
#   - tp=2, dp x tp = 2 x 2, tp=2 with ZeRO 1 and 3 on dp=2, and global-norm
#     clipping on tp=2 and on dp x tp = 2 x 2 with ZeRO 2 and 3 (every element
#     counted once whether split over tp, sliced over dp or replicated):
#     every step's loss within 1e-5 relative of one device and
#     the final parameters, reassembled from the tp ranks' blobs, within 1e-5
#     of their largest element;
#   - the bytes each rank sent equal plan.json's prediction;
#   - with --overlap-tp-sums on, tp=2 and dp x tp = 2 x 2 bit for bit as
#     without (overlapped_tp_sums below);
#   - with --deterministic, tp=2 bit for bit against one device, dp x tp =
#     2 x 2 against one device with --grad-accum 2, and for the GPT tp=2 in
#     bf16 against one device in bf16 (whole_sums below); a loss summed over
#     split outputs, which stays a sum of the ranks' parts, warns;
#   - tp=2 with --precision bf16 against one device in bf16, and in the long
#     suite with fp16 from a loss scale that overflows (the same steps
#     skipped): within TP_BF16 (why there), for the GPT (the MLP too in the
#     long suite);
#   - --save-onnx after dp x tp = 2 x 2 with ZeRO 3 writes the parameters the
#     ranks' blobs hold, put back together;
#   - tp=2 without a plan (nothing split) is refused;
#   - the GPT's vocabulary-split embedding takes negative token ids from the
#     end of the table as one device does, and an id past the table stops
#     the run with the out-of-range error;
#   - the CNN with its classifier split by classes (tp=2, 2 x 2) equals one
#     device; a split convolution is an error naming the node;
#   - an MLP with a training-mode Dropout on its column-parallel activation
#     draws the masks of one device: tp=2 equals one device, and dp x tp =
#     2 x 2 one device with --grad-accum 2 (the same microbatches);
#   - a row-parallel linear whose input arrives whole (fc2 split by input
#     alone; fc1 split by input, reading the graph input) slices that input
#     on each rank and gathers its gradient: tp=2 and dp x tp = 2 x 2 equal
#     one device.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "models"))

import export_cnn_train  # noqa: E402
import export_gpt  # noqa: E402
import export_mlp  # noqa: E402
import torch  # noqa: E402
from dp_vs_single import (FP16, LONG, MOMENTUM, Model, bytes_as_planned, close,  # noqa: E402
                          identical)
from torch_export import export_with_loss  # noqa: E402

PLANS = os.path.join(HERE, "..", "..", "plans")
# tp in bf16 against one device in bf16. A row-parallel product adds two
# ranks' partial sums where one device sums all of K at once: the same f32
# numbers in another association. A value a few ulps apart then rounds to
# the neighbouring bf16 number (2^-8 apart) before the next product, and
# training carries it on: the GPT's losses agree to 1e-6 for 9 steps and by
# 2e-5 at the 10th (bf16 against f32 is 3e-5). 1e-4 holds that with a
# margin of five; the MLP agrees exactly. With --deterministic, bit for bit.
TP_BF16 = 1e-4


def token_ids(m, with_plan, workdir, problems):
    """The lookup in the vocabulary-split embedding: negative token ids count
    from the end of the whole table, as on one device; an id past the table
    stops the run with the kernel's out-of-range error."""
    flags = m.flags
    idx = m.data["idx"].copy()
    idx[::2, 0] = -1
    idx[1::4, 3] = -64
    path = os.path.join(workdir, "gpt.idx-negative.npy")
    np.save(path, idx)
    m.flags = ["--data", f"idx={path}"] + flags[2:]
    close("gpt tp2 negative token ids", m.train("tp2-neg", 1, 1, MOMENTUM, with_plan, tp=2),
          m.train("one-neg", 1, 1, MOMENTUM), problems)
    idx[0, 0] = 64
    np.save(path, idx)
    run = subprocess.run(["cleave", "run", "-n", "2", os.path.join(workdir, "gpt-tp2-neg"),
                          *m.flags, "--steps", "1"], capture_output=True, text=True,
                         stdin=subprocess.DEVNULL)
    wanted = ("sample 0, read at step 1, holds 64: the indices of gather (a table of 64 rows) "
              "take [-64, 64)")
    if run.returncode != 1 or wanted not in run.stderr:
        problems.append(f"gpt tp2 token id 64 (vocabulary 64): exit {run.returncode}, "
                        f"stderr {run.stderr[-300:]!r}")
    m.flags = flags


def classifier_head(workdir, problems):
    """The CNN with its classifier split by classes over tp (the convolutions
    replicated): the cross-entropy over split classes equals one device;
    splitting a convolution, which has no tensor-parallel rule, is an error
    naming the node."""
    m = Model("cnn", export_cnn_train, ["x", "labels"], 8, workdir)
    plan = os.path.join(workdir, "cnn-classifier.json")
    with open(plan, "w") as f:
        json.dump({"format_version": 1,
                   "parameters": {"fc.weight": ["tp", "-"], "fc.bias": ["tp"]}}, f)
    reference = m.train("one", 1, 1, MOMENTUM)
    for label, dp in (("tp2", 1), ("dp2tp2", 2)):
        run = m.train(label, dp, 1, MOMENTUM, ["--plan", plan], tp=2)
        close(f"cnn {label} classifier split", run, reference, problems)
    with open(plan, "w") as f:
        json.dump({"format_version": 1, "parameters": {"conv1.weight": ["tp", "-", "-", "-"]}}, f)
    run = subprocess.run(["cleave", "compile", m.export(8), "-o",
                          os.path.join(workdir, "cnn-conv"), "--train", "--batch-size", "8",
                          "--mesh", "tp=2", "--plan", plan], capture_output=True, text=True)
    wanted = ("node '/conv1/Conv': has no tensor-parallel rule that keeps operand #1 split "
              "along dim 0")
    if run.returncode != 1 or wanted not in run.stderr:
        problems.append(f"cnn conv1 split: exit {run.returncode}, stderr {run.stderr!r}")
    print(f"cnn: checked against {reference[0][0]:.6f} -> {reference[0][-1]:.6f}")


class DropoutMLP(torch.nn.Module):
    """fc1 -> ReLU -> Dropout(0.3) -> fc2 -> cross-entropy."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(12, 32), torch.nn.Linear(32, 6)
        self.drop = torch.nn.Dropout(0.3)

    def forward(self, x, labels):
        h = self.drop(torch.relu(self.fc1(x)))
        return torch.nn.functional.cross_entropy(self.fc2(h), labels)

    @staticmethod
    def build():
        torch.manual_seed(0)
        return DropoutMLP(), (torch.randn(4, 12), torch.randint(0, 6, (4,)))


class TrainingModeModel(Model):
    """A Model exported in training mode, so that its Dropout drops."""

    def export(self, micro):
        path = os.path.join(self.workdir, f"{self.name}-b{micro}.onnx")
        if not os.path.exists(path):
            model, _ = self.module.build()
            args = tuple(torch.cat([a] * micro)[:micro] for a in self.example)
            export_with_loss(model, args, path, self.names,
                             training=torch.onnx.TrainingMode.TRAINING)
        return path


def dropout_on_split(workdir, problems):
    """A Dropout of fc1's activation, which the Megatron plan splits over tp:
    each rank's part draws the whole tensor's masks for its elements."""
    m = TrainingModeModel("dropmlp", DropoutMLP, ["x", "labels"], 8, workdir)
    plan = os.path.join(workdir, "dropmlp-plan.json")
    with open(plan, "w") as f:
        json.dump({"format_version": 1, "parameters": {
            "fc1.weight": ["tp", "-"], "fc1.bias": ["tp"], "fc2.weight": ["-", "tp"]}}, f)
    one = m.train("one", 1, 1, MOMENTUM)
    close("dropout mlp tp2", m.train("tp2", 1, 1, MOMENTUM, ["--plan", plan], tp=2), one,
          problems)
    close("dropout mlp dp2tp2", m.train("dp2tp2", 2, 1, MOMENTUM, ["--plan", plan], tp=2),
          m.train("one-k2", 1, 2, MOMENTUM), problems)
    print(f"dropout mlp: checked against {one[0][0]:.6f} -> {one[0][-1]:.6f}")


def whole_input_sliced(workdir, problems):
    """Row-parallel linears whose input arrives whole: each rank slices its
    part of the input (Megatron's row-parallel input), and the input's
    gradient is the ranks' parts gathered."""
    m = Model("mlp", export_mlp, ["x", "labels"], 8, workdir)
    one = m.train("one", 1, 1, MOMENTUM)
    for name, parameters in (("fc2-rows", {"fc2.weight": ["-", "tp"]}),
                             ("fc1-rows", {"fc1.weight": ["-", "tp"]})):
        plan = os.path.join(workdir, f"mlp-{name}.json")
        with open(plan, "w") as f:
            json.dump({"format_version": 1, "parameters": parameters}, f)
        for label, dp in (("tp2", 1), ("dp2tp2", 2)):
            run = m.train(f"{name}-{label}", dp, 1, MOMENTUM, ["--plan", plan], tp=2)
            close(f"mlp {name} {label}", run, one, problems)
            bytes_as_planned(f"mlp {name} {label}", run, problems)
    print(f"mlp with whole inputs sliced: checked against {one[0][0]:.6f} -> {one[0][-1]:.6f}")


def overlapped_tp_sums(m, name, with_plan, runs, problems):
    """--overlap-tp-sums on: the GPT's input gradients' sums over tp (one
    per column-parallel layer: qkv and fc in each of 2 blocks, and the
    vocabulary-split head) start on the background thread, beside dp's gradient
    buckets on dp x tp, and the runs equal those that sum where the partial
    sums are made bit for bit (the same sums of two ranks' values); the
    MLP's only column-parallel layer reads the data, whose gradient nobody
    needs, so it starts none."""
    expected = 5 if name == "gpt" else 0
    for label, dp in (("tp2", 1), ("dp2tp2", 2)):
        run = m.train(f"{label}-overlap", dp, 1, MOMENTUM,
                      with_plan + ["--overlap-tp-sums", "on"], tp=2)
        identical(f"{name} {label} --overlap-tp-sums on", run, runs[label], problems)
        bytes_as_planned(f"{name} {label} --overlap-tp-sums on", run, problems)
        started = run[3]["training"].get("overlapped_tp_sums", {"axis": "tp", "bytes": []})
        if started["axis"] != "tp" or len(started["bytes"]) != expected:
            problems.append(f"{name} {label} --overlap-tp-sums on: plan.json starts {started}, "
                            f"not {expected} sums over tp")


def partial_sum_warns(workdir, problems):
    """A loss summed over a column-parallel product's split outputs is a sum
    over tp of the ranks' parts that no gathered product replaces: the
    compile warns, naming the node, that it is not bit for bit."""
    w = numpy_helper.from_array(np.ones((8, 8), np.float32), "w")
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("MatMul", ["x", "w"], ["y"], name="proj"),
         onnx.helper.make_node("ReduceSum", ["y"], ["loss"], keepdims=0, name="total")], "sum",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 8])],
        [onnx.helper.make_tensor_value_info("loss", onnx.TensorProto.FLOAT, [])], [w])
    model = os.path.join(workdir, "sum-loss.onnx")
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]),
              model)
    plan = os.path.join(workdir, "sum-loss-plan.json")
    json.dump({"format_version": 1, "parameters": {"w": ["-", "tp"]}}, open(plan, "w"))
    compiled = subprocess.run(["cleave", "compile", model, "-o", os.path.join(workdir, "sum-loss"),
                               "--train", "--batch-size", "4", "--mesh", "tp=2", "--plan", plan,
                               "--deterministic", "--emit", "mlir"], capture_output=True, text=True)
    expected = ("node 'total': --deterministic: this sum over tp adds partial results other than "
                "products whose factors can be gathered: not bit for bit with one device")
    if compiled.returncode or expected not in compiled.stderr:
        problems.append(f"a partial loss on tp=2 --deterministic: exit {compiled.returncode}, "
                        f"{compiled.stderr.strip()!r}")


def whole_sums(m, name, with_plan, reference, problems):
    """--deterministic: each product summing over a split dim gathers its
    factors and computes one device's product (cleave-gather-split-products),
    the GPT's cross-entropy over split classes its scores, the fused q, k, v
    projection's blocks put back in one device's order: tp=2 bit for bit
    against one device, and dp x tp = 2 x 2 (one microbatch a dp rank)
    against one device accumulating the same two. The sums are all made
    whole: the compile warns of none."""
    det = with_plan + ["--deterministic"]
    compiled = subprocess.run(["cleave", "compile", m.export(m.batch), "-o",
                               os.path.join(m.workdir, f"{name}-tp2-det-warnings"), "--train",
                               "--batch-size", str(m.batch), "--mesh", "tp=2", *det],
                              capture_output=True, text=True)
    if compiled.returncode or "warning" in compiled.stderr:
        problems.append(f"{name} tp2 --deterministic: exit {compiled.returncode}, "
                        f"{compiled.stderr.strip()!r}")
    identical(f"{name} tp2 --deterministic", m.train("tp2-det", 1, 1, MOMENTUM, det, tp=2),
              reference, problems)
    if name == "mlp":
        partial_sum_warns(m.workdir, problems)
    identical(f"{name} dp2tp2 --deterministic", m.train("dp2tp2-det", 2, 1, MOMENTUM, det, tp=2),
              m.train("one-k2", 1, 2, MOMENTUM), problems)


def main():
    workdir = sys.argv[1]
    problems = []
    for name, module, names, batch, plan in (
            ("mlp", export_mlp, ["x", "labels"], 8, "megatron-mlp.json"),
            ("gpt", export_gpt, ["idx", "targets"], 4, "megatron-gpt.json")):
        m = Model(name, module, names, batch, workdir)
        reference = m.train("one", 1, 1, MOMENTUM)
        with_plan = ["--plan", os.path.join(PLANS, plan)]
        runs = {}
        for label, dp, extra in (("tp2", 1, []), ("dp2tp2", 2, []),
                                 ("dp2tp2-z1", 2, ["--zero", "1"]),
                                 ("dp2tp2-z3", 2, ["--zero", "3"])):
            run = runs[label] = m.train(label, dp, 1, MOMENTUM, with_plan + extra, tp=2)
            close(f"{name} {label}", run, reference, problems)
            bytes_as_planned(f"{name} {label}", run, problems)
        overlapped_tp_sums(m, name, with_plan, runs, problems)
        whole_sums(m, name, with_plan, reference, problems)
        # --save-onnx puts the tp parts and ZeRO 3 slices back together.
        saved = os.path.join(workdir, f"{name}-saved.onnx")
        run = m.train("dp2tp2-z3-save", 2, 1, MOMENTUM, with_plan + ["--zero", "3"], tp=2,
                      save_onnx=saved)
        initializers = {t.name: numpy_helper.to_array(t) for t in onnx.load(saved).graph.initializer}
        for pname, value in run[1].items():
            if not np.array_equal(initializers[pname], value):
                problems.append(f"{name} --save-onnx: {pname} differs from the ranks' blobs")
                break
        # Mixed precision: products on bf16 factors, their partial sums
        # added in f32 (TP_BF16 below); the GPT in bf16 by default, the
        # rest in the long suite.
        for precision, flags in (("bf16", ["--precision", "bf16"]), ("fp16", FP16)):
            if not LONG and (name == "mlp" or precision == "fp16"):
                break
            run = m.train(f"tp2-{precision}", 1, 1, MOMENTUM, with_plan + flags, tp=2)
            one = m.train(f"one-{precision}", 1, 1, MOMENTUM, flags)
            close(f"{name} tp2 {precision}", run, one, problems, TP_BF16)
            if precision == "bf16":
                # Gathered whole, the products' bf16 factors are one device's.
                identical(f"{name} tp2 bf16 --deterministic",
                          m.train("tp2-bf16-det", 1, 1, MOMENTUM,
                                  with_plan + flags + ["--deterministic"], tp=2), one, problems)
            if [s.get("skipped") for s in run[2]["steps"]] != [s.get("skipped")
                                                                for s in one[2]["steps"]]:
                problems.append(f"{name} tp2 {precision}: skips other steps than one device")
        clipped = MOMENTUM + ["--clip-grad-norm", "0.5"]
        one_clipped = m.train("one-clip", 1, 1, clipped)
        close(f"{name} tp2 clipped", m.train("tp2-clip", 1, 1, clipped, with_plan, tp=2),
              one_clipped, problems)
        for stage in ("2", "3"):
            run = m.train(f"dp2tp2-z{stage}-clip", 2, 1, clipped, with_plan + ["--zero", stage],
                          tp=2)
            close(f"{name} dp2tp2 zero {stage} clipped", run, one_clipped, problems)
            bytes_as_planned(f"{name} dp2tp2 zero {stage} clipped", run, problems)
        # tp=2 without a plan would have both tp ranks compute everything:
        # refused, not a silent replication.
        run = subprocess.run(["cleave", "compile", m.export(batch), "-o",
                              os.path.join(workdir, f"{name}-tp2-noplan"), "--train",
                              "--batch-size", str(batch), "--mesh", "tp=2"],
                             capture_output=True, text=True)
        if run.returncode != 1 or "nothing is split over it" not in run.stderr:
            problems.append(f"{name} tp2 without a plan: exit {run.returncode}, "
                            f"stderr {run.stderr!r}")
        if name == "gpt":
            token_ids(m, with_plan, workdir, problems)
        print(f"{name}: checked against {reference[0][0]:.6f} -> {reference[0][-1]:.6f}")
    classifier_head(workdir, problems)
    dropout_on_split(workdir, problems)
    whole_input_sliced(workdir, problems)
    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
