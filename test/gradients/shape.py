# Gradients of data-movement ops against central finite differences (float64,
# onnx.reference): test/lib/gradcheck.py.
#
# RUN: %python %s %t

import numpy as np
from onnx import helper

from gradcheck import Cases, rng

r = rng(0)
cases = Cases()
x = r.standard_normal((2, 3, 4))


def single(name, op, inputs, constants=None, params=None, outputs=("y",), **attrs):
    cases.add(name, nodes=[helper.make_node(op, inputs, list(outputs), **attrs)],
              params=params or {"x": x}, constants=constants, outputs=list(outputs))


single("reshape", "Reshape", ["x", "s"], constants={"s": np.array([6, -1])})
single("flatten", "Flatten", ["x"], axis=2)
single("transpose", "Transpose", ["x"], perm=[2, 0, 1])
single("squeeze", "Squeeze", ["x", "a"], params={"x": r.standard_normal((2, 1, 3))},
       constants={"a": np.array([1])})
single("unsqueeze", "Unsqueeze", ["x", "a"], constants={"a": np.array([0, 3])})
single("concat", "Concat", ["x", "z"], params={"x": x, "z": r.standard_normal((2, 2, 4))},
       axis=1)
single("split", "Split", ["x", "s"], constants={"s": np.array([1, 2])}, axis=1,
       outputs=("y0", "y1"))
single("slice", "Slice", ["x", "b", "e", "a", "st"],
       constants={"b": np.array([0, 3]), "e": np.array([2, 0]), "a": np.array([1, 2]),
                  "st": np.array([2, -2])})
single("gather_repeated", "Gather", ["x", "i"], constants={"i": np.array([[0, 2], [2, -1]])},
       axis=1)
single("gather_embedding", "Gather", ["w", "i"], params={"w": r.standard_normal((5, 3))},
       constants={"i": np.array([[1, 4, 1], [0, 0, 3]])}, axis=0)
single("expand", "Expand", ["x", "s"], params={"x": r.standard_normal((3, 1))},
       constants={"s": np.array([2, 3, 4])})
single("trilu_lower", "Trilu", ["x", "k"], constants={"k": np.array(1)}, upper=0)

if __name__ == "__main__":
    cases.main()
