# Gradients of reductions and softmax against central finite differences
# (float64, onnx.reference): test/lib/gradcheck.py.
#
# RUN: %python %s %t

import numpy as np
from onnx import helper

from gradcheck import Cases, rng

r = rng(0)
cases = Cases()
x = r.standard_normal((2, 3, 4))

cases.add("reduce_sum_keepdims", nodes=[helper.make_node("ReduceSum", ["x", "a"], ["y"])],
          params={"x": x}, constants={"a": np.array([1])}, outputs=["y"])
cases.add("reduce_mean", nodes=[helper.make_node("ReduceMean", ["x"], ["y"], axes=[0, 2],
                                                 keepdims=0)],
          params={"x": x}, outputs=["y"])
cases.add("reduce_max", nodes=[helper.make_node("ReduceMax", ["x"], ["y"], axes=[2],
                                                keepdims=0)],
          params={"x": x}, outputs=["y"])
cases.add("softmax", nodes=[helper.make_node("Softmax", ["x"], ["y"], axis=1)],
          params={"x": x}, outputs=["y"])
cases.add("log_softmax", nodes=[helper.make_node("LogSoftmax", ["x"], ["y"], axis=-1)],
          params={"x": x}, outputs=["y"])
cases.add("global_average_pool",
          nodes=[helper.make_node("GlobalAveragePool", ["x"], ["y"])],
          params={"x": r.standard_normal((2, 3, 4, 5))}, outputs=["y"])

if __name__ == "__main__":
    cases.main()
