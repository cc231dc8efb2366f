# Gradients of normalisation ops and dropout against central finite
# differences (float64, onnx.reference): test/lib/gradcheck.py.
#
# RUN: %python %s %t

import numpy as np
from onnx import helper

from gradcheck import Cases, rng

r = rng(0)
cases = Cases()

cases.add("layer_normalization",
          nodes=[helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1,
                                  epsilon=1e-5)],
          params={"x": r.standard_normal((2, 3, 4)), "s": r.standard_normal((4,)),
                  "b": r.standard_normal((4,))},
          outputs=["y"])
cases.add("batch_normalization_inference",
          nodes=[helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                                  epsilon=1e-5)],
          params={"x": r.standard_normal((2, 3, 2, 2)), "s": r.standard_normal((3,)),
                  "b": r.standard_normal((3,)), "m": r.standard_normal((3,)),
                  "v": np.abs(r.standard_normal((3,))) + 0.5},
          outputs=["y"])
cases.add("batch_normalization_training",
          nodes=[helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"],
                                  ["y", "rm", "rv"], epsilon=1e-5, training_mode=1)],
          params={"x": r.standard_normal((2, 3, 2, 2)), "s": r.standard_normal((3,)),
                  "b": r.standard_normal((3,))},
          constants={"m": np.zeros(3), "v": np.ones(3)},
          outputs=["y"])
cases.add("dropout_inference",
          nodes=[helper.make_node("Dropout", ["x"], ["y"])],
          params={"x": r.standard_normal((2, 3))}, outputs=["y"])

if __name__ == "__main__":
    cases.main()
