# Gradients of elementwise ops against central finite differences (float64,
# onnx.reference): test/lib/gradcheck.py.
#
# RUN: %python %s %t

import numpy as np
from onnx import TensorProto, helper

from gradcheck import Cases, rng

r = rng(0)
cases = Cases()


# onnx.reference evaluates Erf (and so the exact Gelu) in float32: those
# cases take a float32-sized step and tolerance.
FLOAT32_REFERENCE = dict(epsilon=1e-3, atol=1e-4, rtol=1e-3)


def unary(op, x, **options):
    cases.add(op.lower(), nodes=[helper.make_node(op, ["x"], ["y"])], params={"x": x},
              outputs=["y"], opset=20 if op == "Gelu" else 17, **options)


normal = r.standard_normal((2, 3))
positive = np.abs(r.standard_normal((2, 3))) + 0.5
for op in ["Neg", "Exp", "Abs", "Tanh", "Sigmoid", "Relu", "Identity"]:
    unary(op, normal)
for op in ["Sqrt", "Reciprocal", "Log"]:
    unary(op, positive)
unary("Erf", normal, **FLOAT32_REFERENCE)
unary("Gelu", normal, **FLOAT32_REFERENCE)
cases.add("leaky_relu", nodes=[helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.2)],
          params={"x": normal}, outputs=["y"])
cases.add("gelu_tanh", nodes=[helper.make_node("Gelu", ["x"], ["y"], approximate="tanh")],
          params={"x": normal}, outputs=["y"], opset=20)

for op in ["Add", "Sub", "Mul", "Div"]:
    cases.add(op.lower() + "_broadcast",
              nodes=[helper.make_node(op, ["a", "b"], ["y"])],
              params={"a": r.standard_normal((2, 3, 4)), "b": r.standard_normal((3, 1)) + 3.0},
              outputs=["y"])
cases.add("mul_same_operand", nodes=[helper.make_node("Mul", ["a", "a"], ["y"])],
          params={"a": normal}, outputs=["y"])
cases.add("pow_both", nodes=[helper.make_node("Pow", ["a", "b"], ["y"])],
          params={"a": positive, "b": r.standard_normal((3,))}, outputs=["y"])
cases.add("where",
          nodes=[helper.make_node("Where", ["c", "a", "b"], ["y"])],
          params={"a": r.standard_normal((2, 3)), "b": r.standard_normal((1, 3))},
          constants={"c": np.array([[True, False, True], [False, False, True]])},
          outputs=["y"])
cases.add("cast_f32_roundtrip",
          nodes=[helper.make_node("Cast", ["a"], ["b"], to=TensorProto.FLOAT),
                 helper.make_node("Cast", ["b"], ["y"], to=TensorProto.DOUBLE)],
          params={"a": normal}, outputs=["y"], **FLOAT32_REFERENCE)

# The trigonometric family, inside each function's domain.
inside_unit = r.uniform(-0.9, 0.9, (2, 3))
for op in ["Sin", "Cos", "Tan", "Atan", "Sinh", "Cosh", "Asinh"]:
    unary(op, normal)
for op in ["Asin", "Acos", "Atanh"]:
    unary(op, inside_unit)
unary("Acosh", positive + 1.0)
# Max and Min broadcast; the gradient goes to the larger (smaller) operand,
# half to each on ties (b's first column equals a's).
a = r.standard_normal((2, 3))
b = r.standard_normal((3,))
b[0] = a[1, 0]
for op in ["Max", "Min"]:
    cases.add(op.lower() + "_broadcast", nodes=[helper.make_node(op, ["a", "b"], ["y"])],
              params={"a": a, "b": b}, outputs=["y"])

if __name__ == "__main__":
    cases.main()
