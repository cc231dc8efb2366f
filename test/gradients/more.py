# More gradient checks: every output of LayerNormalization and
# BatchNormalization, weights and ignore_index under every reduction, integer
# exponents, 1-D and broadcast products, partial use of Split, negative-step
# slices (test/lib/gradcheck.py: finite differences with onnx.reference).
#
# RUN: %python %s %t

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from gradcheck import Cases, rng

r = rng(3)
cases = Cases()
N = helper.make_node

cases.add("ln_f64_all_outputs",
          nodes=[N("LayerNormalization", ["x", "s", "b"], ["y", "m", "i"], axis=1, epsilon=1e-3),
                 N("Cast", ["m"], ["md"], to=TensorProto.DOUBLE),
                 N("Cast", ["i"], ["id"], to=TensorProto.DOUBLE)],
          params={"x": r.standard_normal((2, 3, 4)), "s": r.standard_normal((4,)),
                  "b": r.standard_normal((3, 1))},
          outputs=["y", "md", "id"], atol=1e-5, rtol=1e-4)
cases.add("ln_f64_no_bias",
          nodes=[N("LayerNormalization", ["x", "s"], ["y"], axis=-1)],
          params={"x": r.standard_normal((3, 5)), "s": r.standard_normal((5,))},
          outputs=["y"])
cases.add("ln_scale_per_row",
          nodes=[N("LayerNormalization", ["x", "s"], ["y"], axis=1, epsilon=1e-4)],
          params={"x": r.standard_normal((2, 3, 4)), "s": r.standard_normal((3, 1))},
          outputs=["y"])
cases.add("bn_training_running",
          nodes=[N("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"],
                   epsilon=1e-5, momentum=0.7, training_mode=1)],
          params={"x": r.standard_normal((3, 2, 3)), "s": r.standard_normal((2,)),
                  "b": r.standard_normal((2,)), "m": r.standard_normal((2,)),
                  "v": np.abs(r.standard_normal((2,))) + 0.5},
          outputs=["y", "rm", "rv"])
cases.add("bn_inference_running",
          nodes=[N("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"],
                   epsilon=1e-5)],
          params={"x": r.standard_normal((3, 2)), "s": r.standard_normal((2,)),
                  "b": r.standard_normal((2,)), "m": r.standard_normal((2,)),
                  "v": np.abs(r.standard_normal((2,))) + 0.5},
          outputs=["y"], opset=14)
labels = np.array([[2, 0, 3], [1, 1, 2]])
for red in ("none", "sum", "mean"):
    cases.add(f"sce_w_ignore_{red}",
              nodes=[N("SoftmaxCrossEntropyLoss", ["x", "t", "w"], ["y", "lp"], reduction=red,
                       ignore_index=1)],
              params={"x": r.standard_normal((2, 4, 3)), "w": np.abs(r.standard_normal(4)) + 0.2},
              constants={"t": labels}, outputs=["y", "lp"])
    cases.add(f"nll_w_neg_ignore_{red}",
              nodes=[N("NegativeLogLikelihoodLoss", ["x", "t", "w"], ["y"], reduction=red,
                       ignore_index=-100)],
              params={"x": r.standard_normal((4, 3)), "w": np.abs(r.standard_normal(3)) + 0.2},
              constants={"t": np.array([2, -100, 0, 2], dtype=np.int32)}, outputs=["y"])
cases.add("pow_int_exponent", nodes=[N("Pow", ["a", "e"], ["y"])],
          params={"a": r.standard_normal((2, 3))}, constants={"e": np.array([3], dtype=np.int64)},
          outputs=["y"])
cases.add("pow_broadcast_base", nodes=[N("Pow", ["a", "b"], ["y"])],
          params={"a": np.abs(r.standard_normal((3, 1))) + 0.3, "b": r.standard_normal((2, 3, 4))},
          outputs=["y"])
for name, a, b in [("mm_vec_vec", (3,), (3,)), ("mm_vec_batched", (3,), (2, 3, 4)),
                   ("mm_batched_vec", (2, 2, 3), (3,)), ("mm_bcast_lhs", (3, 2), (4, 2, 5))]:
    cases.add(name, nodes=[N("MatMul", ["a", "b"], ["y"])],
              params={"a": r.standard_normal(a), "b": r.standard_normal(b)}, outputs=["y"])
cases.add("gemm_c_scalar_ta", nodes=[N("Gemm", ["a", "b", "c"], ["y"], alpha=1.5, beta=0.5, transA=1)],
          params={"a": r.standard_normal((3, 2)), "b": r.standard_normal((3, 4)),
                  "c": r.standard_normal((1, 1))}, outputs=["y"])
cases.add("gemm_c_column", nodes=[N("Gemm", ["a", "b", "c"], ["y"], transB=1)],
          params={"a": r.standard_normal((2, 3)), "b": r.standard_normal((4, 3)),
                  "c": r.standard_normal((2, 1))}, outputs=["y"])
cases.add("concat3", nodes=[N("Concat", ["a", "b", "c"], ["y"], axis=0)],
          params={"a": r.standard_normal((1, 2)), "b": r.standard_normal((3, 2)),
                  "c": r.standard_normal((2, 2))}, outputs=["y"])
cases.add("split_partial_use", nodes=[N("Split", ["x", "s"], ["y0", "y1", "y2"], axis=0)],
          params={"x": r.standard_normal((6, 2))}, constants={"s": np.array([1, 2, 3])},
          outputs=["y0", "y2"])
cases.add("slice_steps", nodes=[N("Slice", ["x", "b", "e", "a", "st"], ["y"])],
          params={"x": r.standard_normal((5, 6))},
          constants={"b": np.array([-1, 1]), "e": np.array([-10, 6]), "a": np.array([0, 1]),
                     "st": np.array([-2, 3])}, outputs=["y"])
cases.add("trilu_upper", nodes=[N("Trilu", ["x"], ["y"], upper=1)],
          params={"x": r.standard_normal((2, 3, 4))}, outputs=["y"])
cases.add("reduce_max_keep", nodes=[N("ReduceMax", ["x"], ["y"], axes=[0, 2], keepdims=1)],
          params={"x": r.standard_normal((2, 3, 4))}, outputs=["y"])
cases.add("reduce_sum_all", nodes=[N("ReduceSum", ["x"], ["y"], keepdims=0)],
          params={"x": r.standard_normal((2, 3))}, outputs=["y"])
cases.add("softmax_axis0", nodes=[N("Softmax", ["x"], ["y"], axis=0)],
          params={"x": r.standard_normal((3, 4))}, outputs=["y"])
cases.add("dropout_training_ratio0", nodes=[N("Dropout", ["x", "ratio", "tm"], ["y"])],
          params={"x": r.standard_normal((3, 4))},
          constants={"ratio": np.array(0.0, dtype=np.float32), "tm": np.array(True)},
          outputs=["y"])
cases.add("squeeze_unsqueeze_chain",
          nodes=[N("Unsqueeze", ["x", "a"], ["u"]), N("Transpose", ["u"], ["t"], perm=[1, 2, 0]),
                 N("Flatten", ["t"], ["y"], axis=1)],
          params={"x": r.standard_normal((2, 3))}, constants={"a": np.array([0])}, outputs=["y"])
cases.add("abs_relu_chain_fanout",
          nodes=[N("Abs", ["x"], ["a"]), N("Relu", ["x"], ["b"]), N("Mul", ["a", "b"], ["c"]),
                 N("Sub", ["c", "x"], ["y"])],
          params={"x": r.standard_normal((3, 3))}, outputs=["y"])
cases.add("gather_scalar_index", nodes=[N("Gather", ["x", "i"], ["y"], axis=1)],
          params={"x": r.standard_normal((2, 3, 4))}, constants={"i": np.array(-1)}, outputs=["y"])
cases.add("expand_rank_up", nodes=[N("Expand", ["x", "s"], ["y"])],
          params={"x": r.standard_normal((1, 3))}, constants={"s": np.array([2, 4, 1, 3])}, outputs=["y"])
cases.add("where_bcast_cond", nodes=[N("Where", ["c", "a", "b"], ["y"])],
          params={"a": r.standard_normal((3,)), "b": r.standard_normal(())},
          constants={"c": np.array([[True], [False]])}, outputs=["y"])
# The attention's scaled and masked softmax, which cleave-fuse-softmax makes
# one op each way in f32, the scale a product or (as torch exports it) a
# division, the mask of the positions hidden (torch's masked_fill), of those
# kept (transformers' GPT-2: where(mask, scores, lowest float)) or none
# (ViT): a causal-style mask that hides no whole row.
hidden = np.triu(np.ones((4, 5), bool), k=2)
for scaling, masking in (("Mul", "hidden"), ("Div", "hidden"), ("Div", "kept"), ("Div", "none")):
    masked = {"hidden": [N("Where", ["m", "fill", "s"], ["w"])],
              "kept": [N("Where", ["m", "s", "fill"], ["w"])],
              "none": [N("Identity", ["s"], ["w"])]}[masking]
    fill = np.float32(-np.inf) if masking == "hidden" else np.finfo(np.float32).min
    cases.add(f"scaled_masked_softmax_{scaling.lower()}_{masking}_f32",
              nodes=[N("Constant", [], ["c"], value=numpy_helper.from_array(np.float32(0.35))),
                     N("Constant", [], ["fill"], value=numpy_helper.from_array(fill)),
                     N(scaling, ["x", "c"], ["s"]), *masked,
                     N("Softmax", ["w"], ["y"], axis=-1)],
              params={"x": r.standard_normal((2, 3, 4, 5))},
              constants={} if masking == "none" else {"m": hidden if masking == "hidden"
                                                      else ~hidden},
              outputs=["y"], dtype=np.float32, atol=1e-3, rtol=1e-2)
# A bias added to the scores before the softmax, which cleave-fuse-softmax
# takes into the same op: BERT's additive mask after its scale (a trained
# bias here, so that its gradient, the add's summed over the heads and rows
# it broadcasts over, is checked too), and T5's position bias, no scale, as
# the add's first operand.
c = numpy_helper.from_array(np.float32(0.35))
cases.add("scaled_biased_softmax_div_f32",
          nodes=[N("Constant", [], ["c"], value=c), N("Div", ["x", "c"], ["s"]),
                 N("Add", ["s", "b"], ["w"]), N("Softmax", ["w"], ["y"], axis=-1)],
          params={"x": r.standard_normal((2, 3, 4, 5)), "b": r.standard_normal((2, 1, 1, 5))},
          outputs=["y"], dtype=np.float32, atol=1e-3, rtol=1e-2)
cases.add("position_biased_softmax_f32",
          nodes=[N("Add", ["b", "x"], ["w"]), N("Softmax", ["w"], ["y"], axis=-1)],
          params={"x": r.standard_normal((2, 3, 4, 5)), "b": r.standard_normal((3, 4, 5))},
          outputs=["y"], dtype=np.float32, atol=1e-3, rtol=1e-2)
if __name__ == "__main__":
    cases.main()
