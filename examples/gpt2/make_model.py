"""Writes a GPT-2-size decoder as an ONNX graph with no weights, for planning.

    .venv/bin/python examples/gpt2/make_model.py OUT.onnx [--layers 12] [--width 768]
        [--heads 12] [--vocab 50304] [--seq 1024]

GPT-2 small's shapes by default (12 pre-LayerNorm blocks of width 768 with
12 heads, 1,024 positions; its 50,257 tokens padded to 50,304, a multiple of
128, as Megatron and nanoGPT pad them so the vocabulary splits over tensor-
parallel ranks) with an untied output head: 163 million parameters. Every parameter is an initializer stored as external
data in OUT's directory, in a file that is not written: `cleave plan` and
`cleave compile --emit plan` read only the parameters' shapes, so the graph
describes the model at its size in a few kilobytes. The linears are Gemms
with torch's (out, in) weights, named as plans/megatron-gpt.json expects
(`h.<i>.attn.qkv.weight`, `h.<i>.fc.weight`, `head.weight`,
`tok_emb.weight`...). Inputs idx and targets (batch x seq int64, a dynamic
batch); output the mean cross-entropy of every position's next token.
"""
import argparse
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(layers, width, heads, vocab, seq, data_file):
    nodes, initializers, offset = [], [], [0]

    def parameter(name, shape):
        tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=shape,
                             data_location=TensorProto.EXTERNAL)
        length = 4 * int(np.prod(shape))
        for key, value in (("location", data_file), ("offset", offset[0]),
                           ("length", length)):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, str(value)
        offset[0] += length
        initializers.append(tensor)
        return name

    def constant(name, array):
        nodes.append(helper.make_node("Constant", [], [name],
                                      value=numpy_helper.from_array(np.asarray(array), name)))
        return name

    def node(op, inputs, name, **attrs):
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    head_dim = width // heads
    rows = constant("rows", np.array([-1, width], np.int64))
    tokens = constant("tokens", np.array([-1, seq, width], np.int64))
    split_heads = constant("split_heads", np.array([-1, seq, heads, head_dim], np.int64))
    thirds = constant("thirds", np.array([width] * 3, np.int64))
    scale = constant("scale", np.array(1 / math.sqrt(head_dim), np.float32))
    half, one = constant("half", np.array(0.5, np.float32)), constant("one", np.array(1, np.float32))
    root2 = constant("root2", np.array(math.sqrt(2), np.float32))
    blocked = constant("blocked", np.array(-np.inf, np.float32))
    zero = constant("zero", np.array(0, np.float32))
    ones = node("ConstantOfShape", [constant("square", np.array([seq, seq], np.int64))], "ones",
                value=numpy_helper.from_array(np.array([1], np.float32)))
    future = node("Equal", [node("Trilu", [ones], "causal", upper=0), zero], "future")
    positions = constant("positions", np.arange(seq, dtype=np.int64))

    def linear(x, prefix, out_dim, in_dim):
        return node("Gemm", [x, parameter(f"{prefix}.weight", [out_dim, in_dim]),
                             parameter(f"{prefix}.bias", [out_dim])], f"{prefix}/Gemm", transB=1)

    def layer_norm(x, prefix):
        return node("LayerNormalization", [x, parameter(f"{prefix}.weight", [width]),
                                           parameter(f"{prefix}.bias", [width])],
                    f"{prefix}/LayerNorm", axis=-1)

    tok = node("Gather", [parameter("tok_emb.weight", [vocab, width]), "idx"], "tok/Gather")
    pos = node("Gather", [parameter("pos_emb.weight", [seq, width]), positions], "pos/Gather")
    x = node("Add", [tok, pos], "embed/Add")
    for i in range(layers):
        p = f"h.{i}"
        h = node("Reshape", [layer_norm(x, f"{p}.ln1"), rows], f"{p}/rows1")
        qkv = linear(h, f"{p}.attn.qkv", 3 * width, width)
        qkv = node("Reshape", [qkv, constant(f"{p}/qkv_shape", np.array([-1, seq, 3 * width],
                                                                       np.int64))], f"{p}/qkv3")
        nodes.append(helper.make_node("Split", [qkv, thirds], [f"{p}/q", f"{p}/k", f"{p}/v"],
                                      name=f"{p}/Split", axis=2))
        q, k, v = (node("Reshape", [f"{p}/{n}", split_heads], f"{p}/{n}_heads") for n in "qkv")
        q = node("Transpose", [q], f"{p}/qT", perm=[0, 2, 1, 3])
        k = node("Transpose", [k], f"{p}/kT", perm=[0, 2, 3, 1])
        v = node("Transpose", [v], f"{p}/vT", perm=[0, 2, 1, 3])
        scores = node("Mul", [node("MatMul", [q, k], f"{p}/scores"), scale], f"{p}/scaled")
        scores = node("Where", [future, blocked, scores], f"{p}/masked")
        y = node("MatMul", [node("Softmax", [scores], f"{p}/softmax", axis=-1), v], f"{p}/attend")
        y = node("Reshape", [node("Transpose", [y], f"{p}/yT", perm=[0, 2, 1, 3]), rows],
                 f"{p}/rows2")
        y = node("Reshape", [linear(y, f"{p}.attn.proj", width, width), tokens], f"{p}/attn_out")
        x = node("Add", [x, y], f"{p}/residual1")
        h = node("Reshape", [layer_norm(x, f"{p}.ln2"), rows], f"{p}/rows3")
        h = linear(h, f"{p}.fc", 4 * width, width)
        erf = node("Erf", [node("Div", [h, root2], f"{p}/gelu_div")], f"{p}/gelu_erf")
        h = node("Mul", [node("Mul", [h, half], f"{p}/gelu_half"),
                         node("Add", [erf, one], f"{p}/gelu_add")], f"{p}/gelu")
        h = node("Reshape", [linear(h, f"{p}.out", width, 4 * width), tokens], f"{p}/mlp_out")
        x = node("Add", [x, h], f"{p}/residual2")
    h = node("Reshape", [layer_norm(x, "ln_f"), rows], "final/rows")
    logits = node("Gemm", [h, parameter("head.weight", [vocab, width])], "head/Gemm", transB=1)
    flat_targets = node("Reshape", ["targets", constant("flat", np.array([-1], np.int64))],
                        "targets/flat")
    node("SoftmaxCrossEntropyLoss", [logits, flat_targets], "loss", reduction="mean")
    graph = helper.make_graph(
        nodes, "gpt2",
        [helper.make_tensor_value_info("idx", TensorProto.INT64, ["batch", seq]),
         helper.make_tensor_value_info("targets", TensorProto.INT64, ["batch", seq])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model, offset[0] // 4


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--vocab", type=int, default=50304)
    parser.add_argument("--seq", type=int, default=1024)
    args = parser.parse_args()
    model, parameters = build(args.layers, args.width, args.heads, args.vocab, args.seq,
                              "gpt2-weights.bin")
    onnx.save(model, args.out)
    print(f"{args.out}: {parameters:,} parameters (external data not written)")


if __name__ == "__main__":
    main()
