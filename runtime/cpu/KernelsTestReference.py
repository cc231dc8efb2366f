"""Expected values for KernelsTest.cpp from ONNX's reference implementation.

Run: /work/main/.venv/bin/python runtime/cpu/KernelsTestReference.py [SECTION]

Each section builds one-node models, runs them with
onnx.reference.ReferenceEvaluator and prints the inputs and outputs as C++
initialisers; the tests paste them, citing the section.
"""

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

F32 = TensorProto.FLOAT


def run(op, inputs, outputs, opset=21, **attrs):
    """Runs one node; inputs is a list of (name, array) or (name, None)."""
    node = helper.make_node(op, [n for n, _ in inputs], outputs, **attrs)
    graph_inputs = []
    feeds = {}
    for name, value in inputs:
        if value is None:
            continue
        graph_inputs.append(
            helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape
            )
        )
        feeds[name] = value
    graph = helper.make_graph(
        [node],
        op,
        graph_inputs,
        [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return ReferenceEvaluator(model).run(None, feeds)


def show(name, array):
    flat = np.asarray(array).reshape(-1)
    if flat.dtype.kind == "f":
        body = ", ".join(f"{float(v):.9g}" for v in flat)
    else:
        body = ", ".join(str(int(v)) for v in flat)
    print(f"  // {name}: shape {list(np.shape(array))}")
    print(f"  {{{body}}}")


def gelu():
    x = np.array([-3, -1, -0.5, 0, 0.5, 1, 3], dtype=np.float32)
    show("x", x)
    for approximate in ("none", "tanh"):
        (y,) = run("Gelu", [("x", x)], ["y"], opset=20, approximate=approximate)
        show(f"gelu approximate={approximate}", y)


def layer_norm():
    x = (np.sin(np.arange(24, dtype=np.float32)) * 3 + 1).reshape(2, 3, 4)
    scale = np.array([0.5, 1, 1.5, 2], dtype=np.float32)
    bias = (np.arange(12, dtype=np.float32) * 0.1 - 0.5).reshape(3, 4)
    show("x", x)
    show("scale", scale)
    show("bias", bias)
    y, mean, inv = run(
        "LayerNormalization",
        [("x", x), ("s", scale), ("b", bias)],
        ["y", "mean", "inv"],
        opset=17,
        axis=1,
        epsilon=1e-5,
    )
    show("axis=1 y", y)
    show("axis=1 mean", mean)
    show("axis=1 inv_std_dev", inv)
    y, mean, inv = run(
        "LayerNormalization",
        [("x", x), ("s", scale)],
        ["y", "mean", "inv"],
        opset=17,
        axis=-1,
        epsilon=1e-3,
    )
    show("axis=-1 no bias eps=1e-3 y", y)
    show("axis=-1 mean", mean)
    show("axis=-1 inv_std_dev", inv)


def batch_norm():
    x = (np.cos(np.arange(12, dtype=np.float32)) * 2).reshape(2, 3, 2)
    scale = np.array([1, 0.5, 2], dtype=np.float32)
    bias = np.array([0, 1, -1], dtype=np.float32)
    mean = np.array([0.1, -0.2, 0.3], dtype=np.float32)
    var = np.array([1, 2, 0.5], dtype=np.float32)
    for name, value in [("x", x), ("scale", scale), ("bias", bias), ("mean", mean), ("var", var)]:
        show(name, value)
    inputs = [("x", x), ("s", scale), ("b", bias), ("m", mean), ("v", var)]
    (y,) = run("BatchNormalization", inputs, ["y"], opset=15, epsilon=1e-5)
    show("inference y", y)
    y, rm, rv = run(
        "BatchNormalization",
        inputs,
        ["y", "rm", "rv"],
        opset=15,
        epsilon=1e-5,
        momentum=0.9,
        training_mode=1,
    )
    show("training y", y)
    show("training running_mean", rm)
    show("training running_var", rv)


def pools():
    x = np.arange(1, 37, dtype=np.float32).reshape(1, 1, 6, 6)
    x[0, 0, 2, 3] = -4  # not monotonic
    show("x (6x6)", x)
    for cip in (0, 1):
        (y,) = run(
            "AveragePool",
            [("x", x)],
            ["y"],
            opset=19,
            kernel_shape=[3, 3],
            strides=[2, 2],
            pads=[1, 1, 1, 1],
            ceil_mode=1,
            count_include_pad=cip,
        )
        show(f"average k3 s2 pads1 ceil count_include_pad={cip}", y)
    (y,) = run(
        "AveragePool",
        [("x", x)],
        ["y"],
        opset=19,
        kernel_shape=[2, 2],
        strides=[2, 3],
        pads=[1, 0, 0, 1],
        dilations=[2, 2],
        ceil_mode=1,
        count_include_pad=1,
    )
    show("average k2 s(2,3) pads(1,0,0,1) d2 ceil count_include_pad=1", y)
    (y,) = run(
        "MaxPool",
        [("x", x)],
        ["y"],
        opset=12,
        kernel_shape=[3, 2],
        strides=[2, 2],
        pads=[1, 0, 0, 1],
        dilations=[1, 2],
        ceil_mode=1,
    )
    show("max k(3,2) s2 pads(1,0,0,1) d(1,2) ceil", y)
    x1 = np.array([[[3, -1, 4, 1, -5, 9, 2]]], dtype=np.float32)
    show("x1", x1)
    (y,) = run("MaxPool", [("x", x1)], ["y"], opset=12, kernel_shape=[2], strides=[2], ceil_mode=1)
    show("max 1-D k2 s2 ceil", y)
    x3 = np.arange(2 * 3 * 3 * 3, dtype=np.float32).reshape(1, 2, 3, 3, 3) * 0.5
    (y,) = run(
        "AveragePool",
        [("x", x3)],
        ["y"],
        opset=19,
        kernel_shape=[2, 2, 2],
        strides=[2, 2, 2],
        pads=[1, 0, 1, 0, 1, 0],
        count_include_pad=0,
    )
    show("x3 = arange(54) * 0.5 as 1x2x3x3x3; average 3-D k2 s2 pads(1,0,1,0,1,0)", y)


def losses():
    scores = (np.sin(np.arange(15, dtype=np.float32) * 1.3) * 2).reshape(3, 5)
    labels = np.array([1, 4, 2], dtype=np.int64)
    weights = np.array([0.5, 1, 2, 1.5, 0.25], dtype=np.float32)
    show("scores", scores)
    show("labels", labels)
    show("weights", weights)
    loss, log_prob = run(
        "SoftmaxCrossEntropyLoss",
        [("s", scores), ("l", labels)],
        ["loss", "lp"],
        opset=13,
        reduction="none",
    )
    show("sce none loss", loss)
    show("sce log_prob", log_prob)
    (loss,) = run(
        "SoftmaxCrossEntropyLoss",
        [("s", scores), ("l", labels), ("w", weights)],
        ["loss"],
        opset=13,
        reduction="mean",
        ignore_index=4,
    )
    show("sce mean weights ignore_index=4", loss)
    (loss,) = run(
        "SoftmaxCrossEntropyLoss",
        [("s", scores), ("l", labels)],
        ["loss"],
        opset=13,
        reduction="sum",
        ignore_index=2,
    )
    show("sce sum ignore_index=2", loss)
    (loss,) = run(
        "SoftmaxCrossEntropyLoss",
        [("s", scores), ("l", labels)],
        ["loss"],
        opset=13,
        reduction="mean",
        ignore_index=1,
    )
    show("sce mean ignore_index=1 (no weights)", loss)
    scores3 = (np.cos(np.arange(12, dtype=np.float32) * 0.7) * 3).reshape(2, 3, 2)
    labels3 = np.array([[0, 2], [-1, 1]], dtype=np.int64)
    weights3 = np.array([0.2, 0.3, 0.5], dtype=np.float32)
    show("scores3", scores3)
    show("labels3", labels3)
    show("weights3", weights3)
    loss, log_prob = run(
        "SoftmaxCrossEntropyLoss",
        [("s", scores3), ("l", labels3), ("w", weights3)],
        ["loss", "lp"],
        opset=13,
        reduction="mean",
        ignore_index=-1,
    )
    show("sce3 mean weights ignore_index=-1", loss)
    show("sce3 log_prob", log_prob)
    (loss,) = run(
        "SoftmaxCrossEntropyLoss",
        [("s", scores3), ("l", labels3), ("w", weights3)],
        ["loss"],
        opset=13,
        reduction="none",
        ignore_index=-1,
    )
    show("sce3 none weights ignore_index=-1", loss)

    inp = (np.cos(np.arange(15, dtype=np.float32)) - 2).reshape(3, 5)
    show("nll input", inp)
    for reduction in ("none", "sum", "mean"):
        (loss,) = run(
            "NegativeLogLikelihoodLoss",
            [("x", inp), ("t", labels), ("w", weights)],
            ["loss"],
            opset=13,
            reduction=reduction,
            ignore_index=4,
        )
        show(f"nll {reduction} weights ignore_index=4", loss)
    (loss,) = run(
        "NegativeLogLikelihoodLoss",
        [("x", inp), ("t", labels)],
        ["loss"],
        opset=13,
        reduction="mean",
    )
    show("nll mean no weights", loss)
    inp4 = (np.sin(np.arange(24, dtype=np.float32) * 0.9) - 1).reshape(2, 3, 2, 2)
    target4 = np.array([[[0, 1], [2, 1]], [[1, 0], [2, 2]]], dtype=np.int64)
    show("nll4 input", inp4)
    show("nll4 target", target4)
    (loss,) = run(
        "NegativeLogLikelihoodLoss",
        [("x", inp4), ("t", target4)],
        ["loss"],
        opset=13,
        reduction="mean",
        ignore_index=2,
    )
    show("nll4 mean ignore_index=2", loss)


def cross_entropy_grad():
    """softmax_cross_entropy_grad's expected outputs: the scores' gradient of
    PyTorch's cross_entropy (autograd, float64), for the scores of `losses`."""
    import torch

    scores = (np.sin(np.arange(15, dtype=np.float32) * 1.3) * 2).reshape(3, 5)
    labels = np.array([1, 4, 2], dtype=np.int64)
    spatial = np.array([3, 2.29452658, 0.509901464, -1.51453805, -2.82666683, -2.80937004,
                        -1.470783, 0.559537411, 2.32669735, 2.99957585, 2.26170683,
                        0.460122138], dtype=np.float32).reshape(2, 3, 2)
    cases = [
        ("sum ignore 2, grad 1.5", scores, labels, "sum", 2, 1.5),
        ("mean ignore 1, grad 0.75", scores, labels, "mean", 1, 0.75),
        ("none, grad 0.5 -1 2", scores, labels, "none", -100, [0.5, -1, 2]),
        ("spatial mean ignore -1, grad 1", spatial, np.array([[0, 2], [-1, 1]]), "mean", -1, 1),
    ]
    for name, s, t, reduction, ignore, grad in cases:
        x = torch.tensor(s, dtype=torch.float64, requires_grad=True)
        loss = torch.nn.functional.cross_entropy(x, torch.tensor(t), reduction=reduction,
                                                 ignore_index=ignore)
        loss.backward(torch.tensor(grad, dtype=torch.float64))
        show(name, x.grad.numpy())


def trilu():
    x = np.array(
        [[4, 7, 3, 7, 9], [1, 2, 8, 6, 9], [9, 4, 0, 8, 7], [4, 1, 8, 3, 9]], dtype=np.int64
    )
    show("x", x)
    for upper in (1, 0):
        for k in (0, 1, -1, 7):
            kk = np.array(k, dtype=np.int64)
            (y,) = run("Trilu", [("x", x), ("k", kk)], ["y"], opset=14, upper=upper)
            show(f"upper={upper} k={k}", y)


SECTIONS = {
    "gelu": gelu,
    "layer_norm": layer_norm,
    "batch_norm": batch_norm,
    "pools": pools,
    "losses": losses,
    "cross_entropy_grad": cross_entropy_grad,
    "trilu": trilu,
}

if __name__ == "__main__":
    names = sys.argv[1:] or list(SECTIONS)
    for section in names:
        print(f"== {section} (onnx {onnx.__version__})")
        SECTIONS[section]()
