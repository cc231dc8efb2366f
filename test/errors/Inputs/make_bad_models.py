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
}

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in KINDS:
        raise SystemExit("usage: make_bad_models.py {%s} OUT"
                         % ",".join(KINDS))
    KINDS[sys.argv[1]](sys.argv[2])
