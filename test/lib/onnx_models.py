"""Small builders for the ONNX models that Cleave's import tests feed to `cleave import`.

A test file registers cases and ends with `cases.main()`:

    from onnx_models import Cases, single_node, F32

    cases = Cases()

    @cases.add("relu_13")
    def _():
        return single_node("Relu", [("x", F32, [2, 3])], ["y"], opset=13)

    if __name__ == "__main__":
        cases.main()

and its RUN lines call it as

    %python %s CASE OUT.onnx     (writes one case)
    %python %s --all DIR         (writes DIR/CASE.onnx for every case)
    %python %s --list            (prints the case names)

Every model is checked with onnx.checker.check_model(full_check=True) before it
is written, and its ir_version is the oldest one that carries its opsets
(onnx.helper.VERSION_TABLE), so onnxruntime 1.22 loads it.
"""

import importlib.util
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32 = TensorProto.FLOAT
F64 = TensorProto.DOUBLE
F16 = TensorProto.FLOAT16
BF16 = TensorProto.BFLOAT16
I8 = TensorProto.INT8
I16 = TensorProto.INT16
I32 = TensorProto.INT32
I64 = TensorProto.INT64
U8 = TensorProto.UINT8
U16 = TensorProto.UINT16
U32 = TensorProto.UINT32
U64 = TensorProto.UINT64
BOOL = TensorProto.BOOL

# ONNX element type -> the MLIR element type Cleave prints (docs/ops.md).
MLIR_ELEMENT_TYPE = {
    F32: "f32", F64: "f64", F16: "f16", BF16: "bf16",
    I8: "i8", I16: "i16", I32: "i32", I64: "i64",
    U8: "ui8", U16: "ui16", U32: "ui32", U64: "ui64",
    BOOL: "i1",
}

# numpy dtype name -> the MLIR element type (for onnxruntime's outputs).
NUMPY_TO_MLIR = {
    "float32": "f32", "float64": "f64", "float16": "f16",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "ui8", "uint16": "ui16", "uint32": "ui32", "uint64": "ui64",
    "bool": "i1",
}

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


def i64(values):
    """An int64 array (scalar when `values` is a plain int)."""
    return np.array(values, dtype=np.int64)


def _elem_type(t):
    if isinstance(t, int):
        return t
    return helper.np_dtype_to_tensor_dtype(np.dtype(t))


def value_info(name, elem_type, shape):
    return helper.make_tensor_value_info(name, _elem_type(elem_type), shape)


def constant_node(name, array):
    """A Constant node whose single output is `name`, holding `array`."""
    return helper.make_node("Constant", [], [name], name=name + "_const",
                            value=numpy_helper.from_array(np.asarray(array), name + "_value"))


def model(nodes, inputs, outputs, initializers=None, opset=17, output_shapes=True,
          output_types=None, extra_opsets=None, check=True):
    """A checked ModelProto for a graph.

    nodes: NodeProtos (helper.make_node, constant_node).
    inputs: graph inputs as (name, elem_type, shape); elem_type is a TensorProto
        enum or a numpy dtype; shape entries may be strings (dynamic dims).
    outputs: graph output names. Their types come from ONNX's own strict shape
        inference, or from output_types (name -> (elem_type, shape)) where
        inference cannot tell. With output_shapes=False the outputs declare
        their element type and rank only (every dim unknown), so an importer
        has to infer the dims itself.
    initializers: dict name -> numpy array.
    """
    graph = helper.make_graph(
        list(nodes), "test",
        [value_info(*i) for i in inputs],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        initializer=[numpy_helper.from_array(np.asarray(v), n)
                     for n, v in (initializers or {}).items()])
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v)
                                                 for d, v in (extra_opsets or {}).items()]
    m = helper.make_model(graph, opset_imports=opsets, producer_name="cleave-tests")
    m.ir_version = helper.find_min_ir_version_for(opsets, ignore_unknown=True)

    inferred = onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True,
                                                 data_prop=True)
    types = {vi.name: vi.type for vi in list(inferred.graph.value_info) + list(inferred.graph.output)}
    for name, (elem, shape) in (output_types or {}).items():
        types[name] = value_info(name, elem, shape).type
    for out in m.graph.output:
        t = types.get(out.name)
        if t is None or not t.tensor_type.elem_type or not t.tensor_type.HasField("shape"):
            raise ValueError(f"ONNX shape inference gave no type for output '{out.name}'; "
                             "pass output_types")
        out.type.CopyFrom(t)
    if not output_shapes:
        _forget_output_dims(m)
    if check:
        onnx.checker.check_model(m, full_check=True)
    return m


def _forget_output_dims(m):
    for out in m.graph.output:
        for d in out.type.tensor_type.shape.dim:
            d.Clear()


def single_node(op_type, inputs, outputs, attrs=None, opset=17, initializers=None,
                const_inputs=None, const_style="initializer", node_inputs=None,
                domain="", node_name=None, output_shapes=True, output_types=None):
    """A checked model made of one `op_type` node (plus Constant nodes).

    inputs: graph inputs (name, elem_type, shape).
    outputs: the node's output names (all become graph outputs; use "" for an
        optional output the node does not produce).
    attrs: the node's attributes.
    initializers: dict name -> numpy array, added as graph initializers (float
        ones are parameters for Cleave, integer ones constants).
    const_inputs: dict name -> numpy array for inputs that must be constant at
        import (shapes, axes, starts, ratio, ...); with const_style="initializer"
        they are initializers, with "constant" each is a Constant node.
    node_inputs: the node's input names in order ("" skips an optional input);
        by default the graph inputs, then const_inputs, then initializers.
    """
    const_inputs = dict(const_inputs or {})
    initializers = dict(initializers or {})
    if node_inputs is None:
        node_inputs = [i[0] for i in inputs] + list(const_inputs) + list(initializers)
    nodes = []
    if const_style == "initializer":
        for name, value in const_inputs.items():
            initializers[name] = np.asarray(value)
    elif const_style == "constant":
        nodes += [constant_node(n, v) for n, v in const_inputs.items()]
    else:
        raise ValueError(f"unknown const_style {const_style!r}")
    nodes.append(helper.make_node(op_type, node_inputs, outputs, name=node_name or op_type.lower(),
                                  domain=domain, **(attrs or {})))
    return model(nodes, inputs, [o for o in outputs if o], initializers=initializers,
                 opset=opset, output_shapes=output_shapes, output_types=output_types)


def strip_output_shapes(m):
    """A copy of `m` whose graph outputs declare their element type and rank
    but no dim (the checker wants a shape field on graph outputs)."""
    m2 = onnx.ModelProto()
    m2.CopyFrom(m)
    _forget_output_dims(m2)
    return m2


def save(m, path):
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    onnx.save(m, path)


class Case:
    def __init__(self, name, build, feeds=None, ort=True, why=None):
        self.name = name
        self.build = build
        self.feeds = feeds      # optional: a function giving {input name: numpy array}
        self.ort = ort          # False: onnxruntime cannot run it (self.why says why)
        self.why = why


class Cases:
    """A registry of named model builders with a command-line dispatcher."""

    def __init__(self):
        self.cases = {}

    def add(self, name, feeds=None, ort=True, why=None):
        def register(fn):
            if name in self.cases:
                raise ValueError(f"case {name!r} registered twice")
            self.cases[name] = Case(name, fn, feeds=feeds, ort=ort, why=why)
            return fn
        return register

    def build(self, name):
        return self.cases[name].build()

    def main(self, argv=None):
        argv = sys.argv[1:] if argv is None else argv
        usage = "usage: CASE OUT.onnx | --all DIR | --list"
        if argv == ["--list"]:
            print("\n".join(self.cases))
            return 0
        if len(argv) != 2:
            sys.exit(usage)
        if argv[0] == "--all":
            for name in self.cases:
                save(self.build(name), os.path.join(argv[1], name + ".onnx"))
            return 0
        if argv[0] not in self.cases:
            sys.exit(f"unknown case {argv[0]!r}; known: {', '.join(self.cases)}")
        save(self.build(argv[0]), argv[1])
        return 0


def load_cases(path):
    """The `cases` registry (a Cases) of the test file at `path`."""
    mod_name = "cleave_cases_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(mod_name, path)
    mod = importlib.util.module_from_spec(spec)
    keep, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ in test/
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.dont_write_bytecode = keep
    return mod.cases


def random_feeds(m, seed=0):
    """Random values for the graph inputs of `m` (that are not initializers).

    Floats are standard normal; integers are 0 or 1 (valid as indices and as
    class labels whenever the indexed dimension has at least 2 entries); bools
    are random.
    """
    rng = np.random.default_rng(seed)
    inits = {t.name for t in m.graph.initializer}
    feeds = {}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        shape = [d.dim_value for d in tt.shape.dim]
        if dtype == np.bool_:
            feeds[vi.name] = rng.random(shape) < 0.5
        elif np.issubdtype(dtype, np.integer):
            feeds[vi.name] = rng.integers(0, 2, size=shape).astype(dtype)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def run_onnxruntime(m, feeds):
    """onnxruntime's outputs for `m`, as a list of numpy arrays in graph order."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def mlir_tensor_type(shape, mlir_elem):
    """The MLIR spelling of a ranked tensor type: tensor<2x3xf32>, tensor<f32>."""
    return "tensor<" + "".join(f"{d}x" for d in shape) + mlir_elem + ">"


def numpy_mlir_type(array):
    return mlir_tensor_type(array.shape, NUMPY_TO_MLIR[array.dtype.name])
