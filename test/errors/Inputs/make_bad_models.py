"""Write one small ONNX model (or non-model file) for cleave's error tests.

Usage: make_bad_models.py KIND OUT

KIND is one of the names in KINDS below. Models are built with onnx.helper
(no torch, so the tests stay fast). Every model that is meant to be valid ONNX
apart from the one defect under test is checked with onnx.checker first, so a
failure in cleave points at that defect and nothing else. Prints nothing.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32 = TensorProto.FLOAT


def model(nodes, inputs, outputs, initializers=(), opset=17, extra_opsets=(),
          check=True):
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              initializer=list(initializers))
    opsets = [helper.make_opsetid("", opset)]
    opsets += [helper.make_opsetid(d, v) for d, v in extra_opsets]
    m = helper.make_model(graph, opset_imports=opsets,
                          producer_name="make_bad_models")
    m.ir_version = 8
    if check:
        onnx.checker.check_model(m, full_check=True)
    return m


def vi(name, shape, elem=F32):
    return helper.make_tensor_value_info(name, elem, shape)


def valid():
    """x (2x4) @ w (4x3) -> Relu -> y: a small valid model with a weight."""
    w = numpy_helper.from_array(
        np.arange(12, dtype=np.float32).reshape(4, 3) / 10, "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Relu", ["h"], ["y"], name="relu")]
    return model(nodes, [vi("x", [2, 4])], [vi("y", [2, 3])], [w])


def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)


def must_not_parse(data):
    try:
        onnx.ModelProto().ParseFromString(data)
    except Exception:
        return data
    raise SystemExit("make_bad_models: these bytes parse as a ModelProto")


def k_valid(out):
    onnx.save(valid(), out)


def k_empty(out):
    write_bytes(out, b"")


def k_truncated(out):
    data = valid().SerializeToString()
    write_bytes(out, must_not_parse(data[: len(data) // 2]))


def k_garbage(out):
    # Text, then bytes that are not a valid protobuf field sequence
    # (wire types 6 and 7 do not exist).
    data = b"this is not an ONNX model\n" + bytes([0xFF, 0xFE, 0x07, 0x06]) * 8
    write_bytes(out, must_not_parse(data))


def k_unsupported_op(out):
    # Hardmax is a standard ai.onnx operator that cleave does not import.
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="relu"),
             helper.make_node("Hardmax", ["h"], ["y"], name="hm", axis=-1)]
    onnx.save(model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3])]), out)


def k_unsupported_op_unnamed(out):
    # The same, but the unsupported node (graph.node[1]) has no name.
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="relu"),
             helper.make_node("Hardmax", ["h"], ["y"], axis=-1)]
    onnx.save(model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3])]), out)


def k_unsupported_domain(out):
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="relu"),
             helper.make_node("MyOp", ["h"], ["y"], name="custom",
                              domain="com.example")]
    m = model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3])],
              extra_opsets=[("com.example", 1)], check=False)
    onnx.checker.check_model(m)  # no schema for com.example: skip full check
    onnx.save(m, out)


def k_opset12(out):
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    onnx.save(model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3])], opset=12),
              out)


def k_dangling(out):
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="relu"),
             helper.make_node("Add", ["h", "foo"], ["y"], name="add")]
    m = model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3])], check=False)
    try:
        onnx.checker.check_model(m, full_check=True)
    except onnx.checker.ValidationError:
        pass
    else:
        raise SystemExit("make_bad_models: dangling model passed the checker")
    onnx.save(m, out)


def k_add_shapes(out):
    # 2x3 + 4x5: not broadcast-compatible. The output type is left without a
    # shape so that only the Add itself is inconsistent.
    nodes = [helper.make_node("Add", ["a", "b"], ["y"], name="add")]
    m = model(nodes, [vi("a", [2, 3]), vi("b", [4, 5])], [vi("y", None)],
              check=False)
    onnx.save(m, out)


def k_matmul_shapes(out):
    # (2x3) @ (4x5): inner dimensions 3 and 4 differ.
    nodes = [helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")]
    m = model(nodes, [vi("a", [2, 3]), vi("b", [4, 5])], [vi("y", None)],
              check=False)
    onnx.save(m, out)


def k_low_precision_product(op, elem):
    # A Conv multiplies 1 x 2 x 5 x 5 by 4 x 2 x 3 x 3; the others 2 x 3 by 3 x 4.
    shapes = ([1, 2, 5, 5], [4, 2, 3, 3], [1, 4, 3, 3]) if op == "Conv" else ([2, 3], [3, 4],
                                                                                [2, 4])

    def make(out):
        nodes = [helper.make_node(op, ["a", "b"], ["y"], name="product")]
        onnx.save(model(nodes, [vi("a", shapes[0], elem), vi("b", shapes[1], elem)],
                        [vi("y", shapes[2], elem)]), out)
    return make


def k_dynamic(out):
    # x: batch x 4 with a symbolic batch dim; y = Relu(x @ w).
    w = numpy_helper.from_array(
        np.arange(12, dtype=np.float32).reshape(4, 3) / 10, "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Relu", ["h"], ["y"], name="relu")]
    m = model(nodes, [vi("x", ["batch", 4])], [vi("y", ["batch", 3])], [w])
    onnx.save(m, out)


def k_external(out):
    # w (32x32 f32, 4 KiB) stored in weights.bin next to OUT.
    w = numpy_helper.from_array(
        np.linspace(-1, 1, 32 * 32, dtype=np.float32).reshape(32, 32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    m = model(nodes, [vi("x", [2, 32])], [vi("y", [2, 32])], [w])
    onnx.save(m, out, save_as_external_data=True,
              all_tensors_to_one_file=True, location="weights.bin",
              size_threshold=0)
    assert os.path.exists(os.path.join(os.path.dirname(out), "weights.bin"))


def k_two_dynamic(out):
    # y = a + b, both n x 3 with a symbolic n.
    nodes = [helper.make_node("Add", ["a", "b"], ["y"], name="add")]
    m = model(nodes, [vi("a", ["n", 3]), vi("b", ["n", 3])], [vi("y", ["n", 3])])
    onnx.save(m, out)


def k_fourteen_params(out):
    # x + b0 + b1 + ... + b13: fourteen 3-element parameters.
    biases = [numpy_helper.from_array(np.full(3, i, np.float32), f"b{i}")
              for i in range(14)]
    names = ["x"] + [f"h{i}" for i in range(13)] + ["y"]
    nodes = [helper.make_node("Add", [names[i], f"b{i}"], [names[i + 1]],
                              name=f"add{i}") for i in range(14)]
    onnx.save(model(nodes, [vi("x", [3])], [vi("y", [3])], biases), out)


def k_shared_bias(out):
    # torch's eval-mode export of two equal biases: b2 is b1 behind Identity.
    # loss = sum((x + b1) * (x + b2)).
    b1 = numpy_helper.from_array(np.zeros(3, np.float32), "b1")
    nodes = [helper.make_node("Identity", ["b1"], ["b2"], name="share"),
             helper.make_node("Add", ["x", "b1"], ["h1"], name="add1"),
             helper.make_node("Add", ["x", "b2"], ["h2"], name="add2"),
             helper.make_node("Mul", ["h1", "h2"], ["p"], name="mul"),
             helper.make_node("ReduceSum", ["p"], ["loss"], name="sum",
                              keepdims=0)]
    onnx.save(model(nodes, [vi("x", [2, 3])], [vi("loss", [])], [b1]), out)


def k_eval_batchnorm(out):
    # An inference-mode BatchNorm (training_mode 0) whose scale, bias, running
    # mean and variance are initializers; loss = sum(bn(x)^2).
    c = 2
    inits = [numpy_helper.from_array(v, n) for n, v in
             [("scale", np.ones(c, np.float32)), ("bias", np.zeros(c, np.float32)),
              ("mean", np.zeros(c, np.float32)), ("var", np.ones(c, np.float32))]]
    nodes = [helper.make_node("BatchNormalization",
                              ["x", "scale", "bias", "mean", "var"], ["y"],
                              name="bn"),
             helper.make_node("Mul", ["y", "y"], ["p"], name="square"),
             helper.make_node("ReduceSum", ["p"], ["loss"], name="sum",
                              keepdims=0)]
    onnx.save(model(nodes, [vi("x", [4, c, 3, 3])], [vi("loss", [])], inits),
              out)


def k_several_unsupported(out):
    # Three operators cleave does not import, Hardmax twice (the second node
    # unnamed), after a supported Relu.
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="relu"),
             helper.make_node("Hardmax", ["h"], ["a"], name="hm1"),
             helper.make_node("Det", ["a"], ["d"], name="det"),
             helper.make_node("Hardmax", ["a"], ["b"]),
             helper.make_node("MyOp", ["b"], ["y"], name="custom",
                              domain="com.example")]
    m = model(nodes, [vi("x", [2, 3, 3])], [vi("y", None), vi("d", None)],
              extra_opsets=[("com.example", 1)], check=False)
    onnx.save(m, out)


def external_model(out, location, offset=None):
    """The external model, with w's external_data rewritten to LOCATION (and
    OFFSET): the bytes it names are 4096 bytes of w."""
    k_external(out)
    m = onnx.load(out, load_external_data=False)
    entries = m.graph.initializer[0].external_data
    del entries[:]
    entries.add(key="location", value=location)
    if offset is not None:
        entries.add(key="offset", value=offset)
    onnx.save(m, out)


def secret_outside(out):
    """A 4096-byte file in the folder above OUT's: what must never be read."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(out))),
                        "secret.bin")
    write_bytes(path, bytes(range(256)) * 16)
    return path


def k_external_parent(out):
    secret_outside(out)
    external_model(out, "../secret.bin")


def k_external_absolute(out):
    external_model(out, secret_outside(out))


def k_external_symlink(out):
    # weights.bin in the model's folder is a link to the file outside.
    secret = secret_outside(out)
    external_model(out, "weights.bin")
    link = os.path.join(os.path.dirname(out), "weights.bin")
    os.remove(link)
    os.symlink(secret, link)


def k_external_offset(out):
    external_model(out, "weights.bin", offset="-1")


def k_folded_div(out):
    # INT64_MIN / -1, from two constants: the quotient overflows int64, and
    # hardware division traps on it.
    nodes = [helper.make_node("Constant", [], ["a"], name="a",
                              value=numpy_helper.from_array(
                                  np.array([-2**63, 7], dtype=np.int64))),
             helper.make_node("Constant", [], ["b"], name="b",
                              value=numpy_helper.from_array(
                                  np.array([-1, -2], dtype=np.int64))),
             helper.make_node("Div", ["a", "b"], ["y"], name="div")]
    onnx.save(model(nodes, [], [vi("y", [2], TensorProto.INT64)]), out)


def k_folded_pow(out):
    # 3 ** (2^62 + 5) in int64: a loop of one multiplication per unit of
    # the exponent never ends.
    nodes = [helper.make_node("Constant", [], ["a"], name="a",
                              value=numpy_helper.from_array(
                                  np.array([3], dtype=np.int64))),
             helper.make_node("Constant", [], ["b"], name="b",
                              value=numpy_helper.from_array(
                                  np.array([2**62 + 5], dtype=np.int64))),
             helper.make_node("Pow", ["a", "b"], ["y"], name="pow")]
    onnx.save(model(nodes, [], [vi("y", [1], TensorProto.INT64)]), out)


def k_huge_constant_of_shape(out):
    # A 2^20 x 2^20 f32 tensor (4 TiB) from a shape constant.
    nodes = [helper.make_node("Constant", [], ["shape"], name="shape",
                              value=numpy_helper.from_array(
                                  np.array([2**20, 2**20], dtype=np.int64))),
             helper.make_node("ConstantOfShape", ["shape"], ["z"], name="zeros"),
             helper.make_node("ReduceSum", ["z"], ["y"], name="sum",
                              keepdims=0)]
    onnx.save(model(nodes, [], [vi("y", [], F32)], opset=17, check=False), out)


def k_huge_range(out):
    # Range(0, 2^40, 1): 2^40 int64 elements.
    scalars = {"start": 0, "limit": 2**40, "delta": 1}
    nodes = [helper.make_node("Constant", [], [k], name=k,
                              value=numpy_helper.from_array(
                                  np.array(v, dtype=np.int64)))
             for k, v in scalars.items()]
    nodes.append(helper.make_node("Range", ["start", "limit", "delta"], ["y"],
                                  name="range"))
    onnx.save(model(nodes, [], [vi("y", [None], TensorProto.INT64)]), out)


def k_huge_pads(out):
    # A 3x3 convolution whose pads are 2^40 on every side.
    w = numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv",
                              pads=[2**40] * 4)]
    onnx.save(model(nodes, [vi("x", [1, 1, 4, 4])], [vi("y", None)], [w],
                    check=False), out)


def k_huge_initializer(out):
    # An initializer claiming 2^40 x 2^40 elements and holding none.
    w = helper.make_tensor("w", F32, [2**40, 2**40], vals=[])
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    onnx.save(model(nodes, [vi("x", [1])], [vi("y", None)], [w], check=False),
              out)


def k_huge_input(out):
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    onnx.save(model(nodes, [vi("x", [2**31, 2])], [vi("y", None)],
                    check=False), out)


def k_defined_twice(out):
    # Two nodes both define h (not SSA).
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="first"),
             helper.make_node("Neg", ["x"], ["h"], name="second"),
             helper.make_node("Abs", ["h"], ["y"], name="abs")]
    onnx.save(model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3])], check=False),
              out)


def k_defines_input(out):
    # A node's output has the name of a graph input.
    nodes = [helper.make_node("Relu", ["x"], ["x"], name="relu"),
             helper.make_node("Abs", ["x"], ["y"], name="abs")]
    onnx.save(model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3])], check=False),
              out)


def k_shadowed_input(out):
    # Initializer w (4x3) is also graph input w, declared 5x3.
    m = valid()
    m.graph.input.append(vi("w", [5, 3]))
    onnx.save(m, out)


def k_split_too_many(out):
    # Split 2 elements into 5 parts (opset 18's num_outputs).
    nodes = [helper.make_node("Split", ["x"], [f"y{i}" for i in range(5)],
                              name="split", axis=0, num_outputs=5)]
    onnx.save(model(nodes, [vi("x", [2])], [vi(f"y{i}", None) for i in range(5)],
                    opset=18, check=False), out)


def k_opset99(out):
    m = valid()
    m.opset_import[0].version = 99
    onnx.save(m, out)


def k_ir_huge(out):
    m = valid()
    m.ir_version = 2**62
    onnx.save(m, out)


KINDS = {
    "valid": k_valid,
    "empty": k_empty,
    "truncated": k_truncated,
    "garbage": k_garbage,
    "unsupported-op": k_unsupported_op,
    "unsupported-op-unnamed": k_unsupported_op_unnamed,
    "unsupported-domain": k_unsupported_domain,
    "opset12": k_opset12,
    "dangling": k_dangling,
    "add-shapes": k_add_shapes,
    "matmul-shapes": k_matmul_shapes,
    "dynamic": k_dynamic,
    "external": k_external,
    "two-dynamic": k_two_dynamic,
    "fourteen-params": k_fourteen_params,
    "shared-bias": k_shared_bias,
    "several-unsupported": k_several_unsupported,
    "eval-batchnorm": k_eval_batchnorm,
    "external-parent": k_external_parent,
    "external-absolute": k_external_absolute,
    "external-symlink": k_external_symlink,
    "external-offset": k_external_offset,
    "folded-div": k_folded_div,
    "folded-pow": k_folded_pow,
    "huge-constant-of-shape": k_huge_constant_of_shape,
    "huge-range": k_huge_range,
    "huge-pads": k_huge_pads,
    "huge-initializer": k_huge_initializer,
    "huge-input": k_huge_input,
    "defined-twice": k_defined_twice,
    "defines-input": k_defines_input,
    "shadowed-input": k_shadowed_input,
    "split-too-many": k_split_too_many,
    "opset99": k_opset99,
    "ir-huge": k_ir_huge,
    "bf16-matmul": k_low_precision_product("MatMul", TensorProto.BFLOAT16),
    "f16-gemm": k_low_precision_product("Gemm", TensorProto.FLOAT16),
    "f16-conv": k_low_precision_product("Conv", TensorProto.FLOAT16),
}

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in KINDS:
        raise SystemExit("usage: make_bad_models.py {%s} OUT"
                         % ",".join(KINDS))
    KINDS[sys.argv[1]](sys.argv[2])
