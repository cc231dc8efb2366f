# Gradients of the losses against central finite differences (float64,
# onnx.reference): test/lib/gradcheck.py. Covers weights, ignore_index (with
# ignored targets spread unevenly) and every reduction.
#
# RUN: %python %s %t

import numpy as np
from onnx import helper

from gradcheck import Cases, rng

r = rng(0)
cases = Cases()
labels = np.array([1, 4, 0, 4, 2])
labels_nd = np.array([[1, 0, 2], [2, 2, 1]])

for reduction in ("mean", "sum", "none"):
    cases.add(f"sce_{reduction}",
              nodes=[helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t"], ["y"],
                                      reduction=reduction)],
              params={"x": r.standard_normal((5, 5))}, constants={"t": labels}, outputs=["y"])
cases.add("sce_mean_weights_ignore",
          nodes=[helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t", "w"], ["y"],
                                  reduction="mean", ignore_index=4)],
          params={"x": r.standard_normal((5, 5)), "w": np.abs(r.standard_normal(5)) + 0.1},
          constants={"t": labels}, outputs=["y"])
cases.add("sce_spatial_log_prob",
          nodes=[helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t"], ["y", "lp"],
                                  reduction="mean", ignore_index=0)],
          params={"x": r.standard_normal((2, 3, 3))}, constants={"t": labels_nd},
          outputs=["y", "lp"])
for reduction in ("mean", "sum", "none"):
    cases.add(f"nll_{reduction}",
              nodes=[helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"],
                                      reduction=reduction)],
              params={"x": r.standard_normal((5, 5))}, constants={"t": labels}, outputs=["y"])
cases.add("nll_mean_weights_ignore",
          nodes=[helper.make_node("NegativeLogLikelihoodLoss", ["x", "t", "w"], ["y"],
                                  reduction="mean", ignore_index=1)],
          params={"x": r.standard_normal((2, 3, 3)), "w": np.abs(r.standard_normal(3)) + 0.1},
          constants={"t": labels_nd}, outputs=["y"])

if __name__ == "__main__":
    cases.main()
