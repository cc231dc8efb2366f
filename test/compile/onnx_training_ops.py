# The training domain ai.onnx.preview.training, compiled and run. Adam,
# Momentum (standard and Nesterov) and Adagrad at T = 0 and T > 0, in float
# and double, with one and several tensors, every attribute set away from its
# default, must equal onnx.reference's evaluation of the same model (to a few
# float ulps). Gradient must equal numpy's analytic derivatives: through
# MatMul and Tanh, with zs, at inputs other than the named tensors, for a y
# that does not depend on an x (zeros), for a non-scalar y (the gradient of
# its sum), and feeding a Momentum step in the same graph.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.ops.aionnx_preview_training.op_momentum import _apply_momentum

TRAINING = "ai.onnx.preview.training"
RTOL = {np.float32: 4e-7, np.float64: 1e-14}
rng = np.random.default_rng(7)


def make_model(nodes, inputs, outputs, initializers=(), default_opset=None):
    """inputs / outputs: (name, numpy dtype, shape)."""
    def info(name, dtype, shape):
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                                             shape)
    graph = helper.make_graph(nodes, "g", [info(*i) for i in inputs],
                              [info(*o) for o in outputs],
                              [numpy_helper.from_array(v, k) for k, v in initializers])
    opsets = [helper.make_opsetid(TRAINING, 1)]
    if default_opset:
        opsets.append(helper.make_opsetid("", default_opset))
    m = helper.make_model(graph, opset_imports=opsets, producer_name="cleave-tests")
    m.ir_version = 8
    return m


def run_cleave(workdir, name, model, feeds):
    """Compiles `model` and runs it on `feeds`; its outputs by name."""
    path = os.path.join(workdir, name + ".onnx")
    onnx.save(model, path)
    out = os.path.join(workdir, name)
    subprocess.run(["cleave", "compile", path, "-o", out], check=True)
    flags = []
    for key, value in feeds.items():
        npy = os.path.join(workdir, f"{name}.{key}.npy")
        np.save(npy, value)
        flags += ["--input", f"{key}={npy}"]
    results = os.path.join(workdir, name + ".out")
    subprocess.run(["cleave", "run", out, *flags, "--output-dir", results], check=True,
                   capture_output=True)
    return {o.name: np.load(os.path.join(results, o.name + ".npy")) for o in model.graph.output}


def compare(problems, case, name, got, want, dtype):
    want = np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        problems.append(f"{case}: {name} is {got.dtype}{got.shape}, expected "
                        f"{want.dtype}{want.shape}")
        return
    if not np.allclose(got, want, rtol=RTOL[dtype], atol=0):
        problems.append(f"{case}: {name} = {got.tolist()}, expected {want.tolist()}")


#===-------------------------------------------------------------------------===#
# Optimizers against onnx.reference
#===-------------------------------------------------------------------------===#

# op: the state tensors each X carries (besides X and G).
STATE = {"Adam": ["V", "H"], "Momentum": ["V"], "Adagrad": ["H"]}


def optimizer_case(op, shapes, dtype, rate_dtype=None, **attrs):
    groups = ["X", "G"] + STATE[op]
    names = {g: [f"{g}{i}" for i in range(len(shapes))] for g in groups}
    inputs = [("R", rate_dtype or dtype, []), ("T", np.int64, [])]
    for g in groups:
        inputs += [(n, dtype, s) for n, s in zip(names[g], shapes)]
    outputs = []
    for g in ["X"] + STATE[op]:
        outputs += [(n + "_new", dtype, s) for n, s in zip(names[g], shapes)]
    node = helper.make_node(op, [i[0] for i in inputs], [o[0] for o in outputs], domain=TRAINING,
                            **attrs)
    return make_model([node], inputs, outputs)


def optimizer_feeds(model, step):
    feeds = {}
    for vi in model.graph.input:
        dtype = helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if vi.name == "T":
            feeds["T"] = np.array(step, dtype=np.int64)
        elif vi.name == "R":
            feeds["R"] = np.array(0.25, dtype=dtype)
        elif vi.name.startswith("H"):  # accumulated squares are not negative
            feeds[vi.name] = np.abs(rng.standard_normal(shape)).astype(dtype)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


OPTIMIZERS = [
    ("adam_defaults_f32", "Adam", [[3, 2]], np.float32, None, {}),
    ("adam_all_attributes_f32", "Adam", [[4]], np.float32, None,
     dict(alpha=0.8, beta=0.95, epsilon=1e-3, norm_coefficient=0.01,
          norm_coefficient_post=0.02)),
    ("adam_multiple_f32", "Adam", [[2], [2, 3]], np.float32, None,
     dict(alpha=0.85, beta=0.9, norm_coefficient=0.1)),
    ("adam_f64", "Adam", [[5]], np.float64, None,
     dict(alpha=0.8, beta=0.95, epsilon=1e-3, norm_coefficient=0.01,
          norm_coefficient_post=0.02)),
    ("momentum_standard_f32", "Momentum", [[3, 2]], np.float32, None,
     dict(alpha=0.9, beta=0.5, mode="standard", norm_coefficient=0.01)),
    ("momentum_nesterov_multiple_f32", "Momentum", [[2], [3]], np.float32, None,
     dict(alpha=0.7, beta=0.25, mode="nesterov", norm_coefficient=0.03)),
    ("momentum_nesterov_f64", "Momentum", [[4]], np.float64, None,
     dict(alpha=0.7, beta=0.25, mode="nesterov", norm_coefficient=0.03)),
    ("momentum_f32_rate_f64", "Momentum", [[3]], np.float32, np.float64,
     dict(alpha=0.9, beta=0.1, mode="standard", norm_coefficient=0.0)),
    ("adagrad_defaults_f32", "Adagrad", [[3, 2]], np.float32, None, {}),
    ("adagrad_multiple_f32", "Adagrad", [[1], [2, 2]], np.float32, None,
     dict(decay_factor=0.1, epsilon=1e-3, norm_coefficient=0.02)),
    ("adagrad_f64", "Adagrad", [[4]], np.float64, None,
     dict(decay_factor=0.1, epsilon=1e-3, norm_coefficient=0.02)),
    ("adagrad_f32_rate_f64", "Adagrad", [[3]], np.float32, np.float64,
     dict(decay_factor=0.5)),
]


def check_optimizers(workdir):
    problems = []
    for case, op, shapes, dtype, rate_dtype, attrs in OPTIMIZERS:
        model = optimizer_case(op, shapes, dtype, rate_dtype, **attrs)
        onnx.checker.check_model(model, full_check=True)
        for step in (0, 3):
            feeds = optimizer_feeds(model, step)
            want = ReferenceEvaluator(model).run(None, feeds)
            got = run_cleave(workdir, f"{case}_T{step}", model, feeds)
            for o, w in zip(model.graph.output, want):
                compare(problems, f"{case} T={step}", o.name, got[o.name], w, dtype)
        print(f"{case}: checked at T = 0 and 3")
    return problems


#===-------------------------------------------------------------------------===#
# Gradient against numpy's analytic derivatives
#===-------------------------------------------------------------------------===#

def N(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, **attrs)


def G(inputs, outputs, xs, y, zs=None):
    attrs = dict(xs=xs, y=y)
    if zs:
        attrs["zs"] = zs
    return helper.make_node("Gradient", inputs, outputs, domain=TRAINING, **attrs)


def gradient_cases():
    cases = []
    for dtype in (np.float32, np.float64):
        # y = sum(tanh(x @ w) * c): dy/dw = x^T (c (1 - h^2)), dy/dx = (c (1 - h^2)) w^T.
        x = rng.standard_normal((2, 3)).astype(dtype)
        w = rng.standard_normal((3, 4)).astype(dtype)
        c = rng.standard_normal((2, 4)).astype(dtype)
        h = np.tanh(x @ w)
        back = c * (1 - h * h)
        cases.append((f"tanh_matmul_{np.dtype(dtype).name}", make_model(
            [N("MatMul", ["x", "w"], ["m"]), N("Tanh", ["m"], ["h"]), N("Mul", ["h", "c"], ["p"]),
             N("ReduceSum", ["p"], ["y"], keepdims=0),
             G(["w", "x"], ["dy_dw", "dy_dx"], xs=["w", "x"], y="y")],
            [("x", dtype, [2, 3]), ("w", dtype, [3, 4])],
            [("y", dtype, []), ("dy_dw", dtype, [3, 4]), ("dy_dx", dtype, [2, 3])],
            initializers=[("c", c)], default_opset=17),
            {"x": x, "w": w}, {"y": np.array((h * c).sum(), dtype=dtype), "dy_dw": x.T @ back,
                               "dy_dx": back @ w.T}, dtype))

    dtype = np.float32
    # y = sum(a * a * b) with zs = [b], evaluated at a1 instead of a: 2 a1 b.
    a, a1, b = (rng.standard_normal(3).astype(dtype) for _ in range(3))
    cases.append(("zs_and_other_inputs", make_model(
        [N("Mul", ["a", "a"], ["q"]), N("Mul", ["q", "b"], ["s"]),
         N("ReduceSum", ["s"], ["y"], keepdims=0),
         G(["a1", "b"], ["dy_da"], xs=["a"], zs=["b"], y="y")],
        [("a", dtype, [3]), ("b", dtype, [3]), ("a1", dtype, [3])],
        [("y", dtype, []), ("dy_da", dtype, [3])], default_opset=17),
        {"a": a, "b": b, "a1": a1},
        {"y": np.array((a * a * b).sum(), dtype=dtype), "dy_da": 2 * a1 * b}, dtype))

    # y = sum(exp(u)) does not depend on v: dy/dv = 0. A non-scalar y2 = u * v
    # gives the gradient of its sum: dy2/du = v.
    u, v = (rng.standard_normal((2, 2)).astype(dtype) for _ in range(2))
    cases.append(("independent_and_tensor_y", make_model(
        [N("Exp", ["u"], ["e"]), N("ReduceSum", ["e"], ["y"], keepdims=0),
         N("Mul", ["u", "v"], ["y2"]),
         G(["u", "v"], ["dy_du", "dy_dv"], xs=["u", "v"], y="y"),
         G(["u", "v"], ["dy2_du"], xs=["u"], zs=["v"], y="y2")],
        [("u", dtype, [2, 2]), ("v", dtype, [2, 2])],
        [("dy_du", dtype, [2, 2]), ("dy_dv", dtype, [2, 2]), ("dy2_du", dtype, [2, 2])],
        default_opset=17),
        {"u": u, "v": v}, {"dy_du": np.exp(u), "dy_dv": np.zeros_like(v), "dy2_du": v}, dtype))

    # One SGD-with-momentum step in the graph: loss = sum((w - t)^2),
    # Gradient gives 2 (w - t), Momentum applies it (onnx.reference's rule).
    w, t, vel = (rng.standard_normal(4).astype(dtype) for _ in range(3))
    rate, step = np.array(0.1, dtype=dtype), np.array(2, dtype=np.int64)
    grad = 2 * (w - t)
    w_new, v_new = _apply_momentum(rate, step, w, grad, vel, 0.01, 0.9, 0.5)
    cases.append(("gradient_into_momentum", make_model(
        [N("Sub", ["w", "t"], ["d"]), N("Mul", ["d", "d"], ["sq"]),
         N("ReduceSum", ["sq"], ["loss"], keepdims=0),
         G(["w", "t"], ["dloss_dw"], xs=["w"], zs=["t"], y="loss"),
         helper.make_node("Momentum", ["R", "T", "w", "dloss_dw", "V"], ["w_new", "V_new"],
                          domain=TRAINING, alpha=0.9, beta=0.5, mode="standard",
                          norm_coefficient=0.01)],
        [("R", dtype, []), ("T", np.int64, []), ("w", dtype, [4]), ("t", dtype, [4]),
         ("V", dtype, [4])],
        [("loss", dtype, []), ("w_new", dtype, [4]), ("V_new", dtype, [4])], default_opset=17),
        {"R": rate, "T": step, "w": w, "t": t, "V": vel},
        {"loss": np.array(((w - t) ** 2).sum(), dtype=dtype), "w_new": w_new, "V_new": v_new},
        dtype))
    return cases


def check_gradients(workdir):
    problems = []
    for case, model, feeds, want, dtype in gradient_cases():
        onnx.checker.check_model(model)
        got = run_cleave(workdir, case, model, feeds)
        for name, value in want.items():
            # Analytic values are computed in a different order than the
            # reverse sweep: allow a few ulps of the largest element.
            value = np.asarray(value, dtype=dtype)
            scale = max(1.0, float(np.abs(value).max()))
            if got[name].shape != value.shape or not np.allclose(
                    got[name], value, rtol=0, atol=8 * np.finfo(dtype).eps * scale):
                problems.append(f"{case}: {name} = {got[name].tolist()}, expected "
                                f"{value.tolist()}")
        print(f"{case}: checked {', '.join(want)}")
    return problems


def main():
    workdir = sys.argv[1]
    problems = check_optimizers(workdir) + check_gradients(workdir)
    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
