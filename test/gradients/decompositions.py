# Gradients of the ONNX operators cleave imports as formulas of other cleave
# ops (Softplus ... ReduceLogSumExp, docs/ops.md) against central finite
# differences (float64, onnx.reference): test/lib/gradcheck.py. Each case
# differentiates several nodes of one input at once (the loss weights every
# output element differently). The smooth ones are checked at 0 too, where
# Softplus' gradient is 1/2 and a formula through relu or abs could give 0;
# the piecewise ones at points away from their kinks.
#
# RUN: %python %s %t

import numpy as np
from onnx import helper

from gradcheck import Cases, rng

r = rng(0)
cases = Cases()


def nodes(*specs):
    return [helper.make_node(op, inputs, [out], **attrs) for op, inputs, out, attrs in specs]


smooth = np.concatenate([[0.0, -40.0, 35.0], r.standard_normal(9) * 3]).reshape(3, 4)
cases.add("smooth_activations",
          nodes=nodes(("Softplus", ["x"], "softplus", {}), ("Mish", ["x"], "mish", {}),
                      ("Softsign", ["x"], "softsign", {}), ("Elu", ["x"], "elu", {})),
          params={"x": smooth}, outputs=["softplus", "mish", "softsign", "elu"], opset=18)

# Kinks: Elu/Selu at 0 (alpha != 1), HardSigmoid at +-2.5 (its defaults) and
# at 0 and 10/7 (alpha 0.7, beta 0), HardSwish at +-3, ThresholdedRelu at 1,
# Clip at -1 and 2.
piecewise = np.array([[-3.7, -2.9, -1.6, -0.4], [0.3, 0.8, 1.2, 1.7], [2.2, 2.7, 3.4, 4.1]])
cases.add("piecewise_activations",
          nodes=nodes(("Elu", ["x"], "elu", {"alpha": 0.3}), ("Selu", ["x"], "selu", {}),
                      ("HardSigmoid", ["x"], "hard_sigmoid", {}),
                      ("HardSigmoid", ["x"], "hard_sigmoid_attrs", {"alpha": 0.7, "beta": 0.0}),
                      ("HardSwish", ["x"], "hard_swish", {}),
                      ("ThresholdedRelu", ["x"], "thresholded_relu", {}),
                      ("Clip", ["x", "lo", "hi"], "clip", {})),
          params={"x": piecewise},
          constants={"lo": np.array(-1.0), "hi": np.array(2.0)},
          outputs=["elu", "selu", "hard_sigmoid", "hard_sigmoid_attrs", "hard_swish",
                   "thresholded_relu", "clip"], opset=18)

cases.add("sum_mean",
          nodes=nodes(("Sum", ["a", "b", "c"], "sum", {}), ("Mean", ["a", "b", "c"], "mean", {})),
          params={"a": r.standard_normal((2, 3)), "b": r.standard_normal(3),
                  "c": r.standard_normal((2, 1))},
          outputs=["sum", "mean"])

x = r.standard_normal((2, 3, 4))
cases.add("reductions",
          nodes=nodes(("ReduceL1", ["x"], "l1", {"axes": [1]}),
                      ("ReduceL2", ["x"], "l2", {"axes": [0, 2], "keepdims": 0}),
                      ("ReduceSumSquare", ["x"], "sum_square", {"axes": [2]}),
                      ("ReduceLogSumExp", ["x"], "log_sum_exp", {"axes": [1], "keepdims": 0}),
                      ("ReduceLogSumExp", ["x"], "log_sum_exp_all", {})),
          params={"x": x}, outputs=["l1", "l2", "sum_square", "log_sum_exp", "log_sum_exp_all"])
cases.add("reduce_log_sum",
          nodes=nodes(("ReduceLogSum", ["x"], "log_sum", {"axes": [2]})),
          params={"x": np.abs(x) + 0.5}, outputs=["log_sum"])

# PRelu with a per-channel slope (both differentiated), away from its kink;
# Swish (opset 24) and CumSum in its four forms; ReduceMin at distinct values.
cases.add("prelu_swish",
          nodes=nodes(("PRelu", ["x", "slope"], "prelu", {}),
                      ("Swish", ["x"], "swish", {"alpha": 0.7})),
          params={"x": piecewise, "slope": np.array([0.2, -0.5, 1.5, 0.1])},
          outputs=["prelu", "swish"], opset=24)
cases.add("cumsum",
          nodes=nodes(("CumSum", ["x", "axis1"], "inclusive", {}),
                      ("CumSum", ["x", "axis0"], "exclusive", {"exclusive": 1}),
                      ("CumSum", ["x", "axis1"], "reverse", {"reverse": 1}),
                      ("CumSum", ["x", "axis0"], "both", {"exclusive": 1, "reverse": 1})),
          params={"x": r.standard_normal((3, 4))},
          constants={"axis0": np.array(0), "axis1": np.array(-1)},
          outputs=["inclusive", "exclusive", "reverse", "both"], opset=14)
cases.add("reduce_min",
          nodes=nodes(("ReduceMin", ["x"], "min", {"axes": [1]}),
                      ("ReduceMin", ["x"], "min_all", {"keepdims": 0})),
          params={"x": x}, outputs=["min", "min_all"])

# The movement decompositions: Tile, DepthToSpace (both modes), SpaceToDepth,
# Pad in each mode (and on given axes), and the gathers and scatters (negative and
# repeated indices; ScatterElements' data and updates both differentiated).
img = r.standard_normal((1, 8, 2, 3))
cases.add("tile_depth_space",
          nodes=nodes(("Tile", ["x", "reps"], "tile", {}),
                      ("DepthToSpace", ["img"], "dcr", {"blocksize": 2}),
                      ("DepthToSpace", ["img"], "crd", {"blocksize": 2, "mode": "CRD"}),
                      ("SpaceToDepth", ["img2"], "s2d", {"blocksize": 2})),
          params={"x": r.standard_normal((2, 3)), "img": img,
                  "img2": r.standard_normal((1, 2, 4, 6))},
          constants={"reps": np.array([2, 3])}, outputs=["tile", "dcr", "crd", "s2d"])
cases.add("pad",
          nodes=nodes(("Pad", ["x", "pads", "value"], "constant", {}),
                      ("Pad", ["x", "pads"], "reflect", {"mode": "reflect"}),
                      ("Pad", ["x", "pads"], "edge", {"mode": "edge"}),
                      ("Pad", ["x", "pads"], "wrap", {"mode": "wrap"}),
                      ("Pad", ["x", "crop", "", "axes"], "on_axes", {})),
          params={"x": r.standard_normal((3, 4)), "value": np.array(0.5)},
          constants={"pads": np.array([2, 1, 1, 3]), "crop": np.array([1, 2]),
                     "axes": np.array([1])},
          outputs=["constant", "reflect", "edge", "wrap", "on_axes"], opset=19)
data = r.standard_normal((3, 4))
cases.add("gathers",
          nodes=nodes(("GatherElements", ["data", "idx"], "elements", {"axis": 1}),
                      ("GatherND", ["data", "nd"], "gathered_nd", {}),
                      ("GatherND", ["data3", "nd1"], "nd_batch", {"batch_dims": 1})),
          params={"data": data, "data3": r.standard_normal((2, 3, 2))},
          constants={"idx": np.array([[0, -1, 0], [2, 2, 1], [3, 0, 0]]),
                     "nd": np.array([[1, 2], [-1, 0], [1, 2]]),
                     "nd1": np.array([[2], [0]])},
          outputs=["elements", "gathered_nd", "nd_batch"], opset=13)
cases.add("scatters",
          nodes=nodes(("ScatterElements", ["data", "idx", "upd"], "elements", {"axis": 0}),
                      ("ScatterElements", ["data", "dup", "upd"], "added",
                       {"axis": 1, "reduction": "add"}),
                      ("ScatterND", ["data", "nd", "rows"], "scattered_nd", {}),
                      ("ScatterND", ["data", "ndup", "rows"], "nd_added", {"reduction": "add"})),
          params={"data": data, "upd": r.standard_normal((2, 4)),
                  "rows": r.standard_normal((2, 4))},
          constants={"idx": np.array([[0, 2, -1, 1], [1, 0, 0, 2]]),
                     "dup": np.array([[0, 0, 3, 3], [1, 1, 1, -4]]),
                     "nd": np.array([[2], [0]]), "ndup": np.array([[1], [1]])},
          outputs=["elements", "added", "scattered_nd", "nd_added"], opset=18)

# The normalizations (input, scale and bias), LpNormalization and
# GlobalMaxPool (distinct values: its gradient goes to each maximum). L1 on
# positive values: onnx.reference sums x, not |x|, for p = 1 (onnxruntime
# and the spec take |x|: test/compile/ops_vs_onnxruntime.py).
cases.add("normalizations",
          nodes=nodes(("InstanceNormalization", ["img", "c8", "b8"], "instance",
                       {"epsilon": 0.01}),
                      ("RMSNormalization", ["img", "s23"], "rms", {"axis": 2}),
                      ("LpNormalization", ["pos"], "l1", {"axis": 1, "p": 1}),
                      ("LpNormalization", ["img"], "l2", {}),
                      ("GlobalMaxPool", ["img"], "max_pool", {})),
          params={"img": img, "c8": r.standard_normal(8), "b8": r.standard_normal(8),
                  "s23": r.standard_normal((2, 3)), "pos": np.abs(img) + 0.1},
          outputs=["instance", "rms", "l1", "l2", "max_pool"], opset=23)
# GroupNormalization 21's reference computes in float32 (its stash_type), so
# its differences are taken in float32.
cases.add("group_normalization_21",
          nodes=nodes(("GroupNormalization", ["img", "c8", "b8"], "group", {"num_groups": 4})),
          params={"img": img, "c8": r.standard_normal(8), "b8": r.standard_normal(8)},
          outputs=["group"], opset=21, dtype=np.float32, atol=1e-3, rtol=1e-2)
cases.add("group_normalization_18",
          nodes=nodes(("GroupNormalization", ["img", "c4", "b4"], "group", {"num_groups": 4})),
          params={"img": img, "c4": r.standard_normal(4), "b4": r.standard_normal(4)},
          outputs=["group"], opset=18)

cases.add("einsum",
          nodes=nodes(("Einsum", ["a", "b"], "batched", {"equation": "bij,bjk->bik"}),
                      ("Einsum", ["m", "n", "o"], "chain", {"equation": "ij,jk,kl->il"}),
                      ("Einsum", ["a", "m"], "summed", {"equation": "bij,ij->j"})),
          params={"a": r.standard_normal((2, 3, 4)), "b": r.standard_normal((2, 4, 5)),
                  "m": r.standard_normal((3, 4)), "n": r.standard_normal((4, 5)),
                  "o": r.standard_normal((5, 2))},
          outputs=["batched", "chain", "summed"], opset=13)

# The native ops with rules: ReduceProd with no zero, one zero and two zeros
# in a slice; float Mod away from its jumps (both operands); ConvTranspose
# (x, W, B) with strides, pads and output_padding (onnx.reference's
# ConvTranspose fails on groups).
cases.add("reduce_prod",
          nodes=nodes(("ReduceProd", ["x"], "prod", {"axes": [1], "keepdims": 0})),
          params={"x": np.array([[1.5, -2.0, 0.5], [0.0, 3.0, -1.2], [0.0, 0.0, 2.0]])},
          outputs=["prod"])
cases.add("mod_float",
          nodes=nodes(("Mod", ["x", "y"], "fmod", {"fmod": 1})),
          params={"x": np.array([5.3, -5.3, 7.9, -2.2]), "y": np.array([2.1, 2.1, -3.0, 1.5])},
          outputs=["fmod"])
cases.add("conv_transpose",
          nodes=nodes(("ConvTranspose", ["x", "w", "b"], "y",
                       {"strides": [2, 1], "pads": [1, 0, 0, 1], "output_padding": [1, 0]})),
          params={"x": r.standard_normal((1, 2, 3, 3)), "w": r.standard_normal((2, 3, 3, 2)),
                  "b": r.standard_normal(3)},
          outputs=["y"])

# Opset 23's RotaryEmbedding (both pairings, a partial rotation, position
# ids) and Attention (3-D with heads, grouped-query heads, a float mask, a
# causal mask after past keys, softcap), and Resize's linear interpolation.
cases.add("rotary_embedding",
          nodes=nodes(("RotaryEmbedding", ["x", "cos", "sin", "pos"], "halves", {}),
                      ("RotaryEmbedding", ["x", "cos", "sin", "pos"], "interleaved",
                       {"interleaved": 1}),
                      ("RotaryEmbedding", ["x3", "cos1", "sin1", "pos"], "partial",
                       {"num_heads": 2, "rotary_embedding_dim": 2})),
          params={"x": r.standard_normal((1, 2, 3, 4)), "x3": r.standard_normal((1, 3, 8)),
                  "cos": r.standard_normal((5, 2)), "sin": r.standard_normal((5, 2)),
                  "cos1": r.standard_normal((5, 1)), "sin1": r.standard_normal((5, 1))},
          constants={"pos": np.array([[4, 0, 2]])},
          outputs=["halves", "interleaved", "partial"], opset=23)
cases.add("attention",
          nodes=nodes(("Attention", ["q3", "k3", "v3"], "heads",
                       {"q_num_heads": 4, "kv_num_heads": 2}),
                      ("Attention", ["q", "k", "v", "mask"], "masked", {"softcap": 2.0}),
                      ("Attention", ["q", "k", "v", "", "pk", "pv"], "causal",
                       {"is_causal": 1, "scale": 0.3})),
          params={"q3": r.standard_normal((1, 3, 8)), "k3": r.standard_normal((1, 4, 4)),
                  "v3": r.standard_normal((1, 4, 6)), "q": r.standard_normal((1, 2, 3, 4)),
                  "k": r.standard_normal((1, 2, 3, 4)), "v": r.standard_normal((1, 2, 3, 5)),
                  "mask": r.standard_normal((3, 3)), "pk": r.standard_normal((1, 2, 2, 4)),
                  "pv": r.standard_normal((1, 2, 2, 5))},
          outputs=["heads", "masked", "causal"], opset=23)
cases.add("resize_linear",
          nodes=nodes(("Resize", ["x", "", "scales"], "up", {"mode": "linear"}),
                      ("Resize", ["x", "", "", "sizes"], "corners",
                       {"mode": "linear", "coordinate_transformation_mode": "align_corners"})),
          params={"x": r.standard_normal((1, 1, 3, 4))},
          constants={"scales": np.array([1.0, 1.0, 2.0, 1.5], np.float32),
                     "sizes": np.array([1, 1, 2, 7])},
          outputs=["up", "corners"], opset=19)

if __name__ == "__main__":
    cases.main()
