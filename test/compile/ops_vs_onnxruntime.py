# Forward values of the operators cleave imports as formulas of other ops and
# of its newer native ops, against onnxruntime: each model below holds several
# nodes (one output each), is compiled and run by cleave on fixed inputs, and
# every output must match onnxruntime's on the same file (same shape and type;
# floats within 1e-5 relative + 1e-6 absolute, NaN where it has NaN; other
# types exactly). A case onnxruntime cannot run says why and is checked
# against onnx's reference evaluator instead. The inputs include the values where a naive formula goes
# wrong: large magnitudes (exp overflows), NaN and infinities, zeros.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from onnx_models import model, run_onnxruntime, save

WORK = sys.argv[1]
F32 = TensorProto.FLOAT

# Float inputs: ordinary values, big ones both ways, 0, NaN and both infinities.
EDGES = np.array([-200.0, -30.0, -2.5, -1.0, -0.5, 0.0, 0.25, 1.0, 3.0, 40.0, 150.0, np.nan,
                  np.inf, -np.inf], dtype=np.float32)


def node(op, inputs, output, **attrs):
    return helper.make_node(op, inputs, [output], name=output, **attrs)


MODELS = {}


def case(name, nodes, inputs, feeds, opset=18, ort=True):
    MODELS[name] = (model(nodes, inputs, [n.output[0] for n in nodes], opset=opset), feeds, ort)


activations = [node("Softplus", ["x"], "softplus"), node("Softsign", ["x"], "softsign"),
               node("Mish", ["x"], "mish"), node("Elu", ["x"], "elu"),
               node("Elu", ["x"], "elu_alpha", alpha=0.3), node("Selu", ["x"], "selu"),
               node("Selu", ["x"], "selu_attrs", alpha=2.0, gamma=0.5),
               node("HardSigmoid", ["x"], "hard_sigmoid"),
               node("HardSigmoid", ["x"], "hard_sigmoid_attrs", alpha=0.7, beta=0.1),
               node("HardSwish", ["x"], "hard_swish"),
               node("ThresholdedRelu", ["x"], "thresholded_relu"),
               node("ThresholdedRelu", ["x"], "thresholded_relu_alpha", alpha=-0.5)]
case("activations", activations, [("x", F32, [14])], {"x": EDGES})
case("activations_f64", activations, [("x", TensorProto.DOUBLE, [14])],
     {"x": EDGES.astype(np.float64)})

case("clip", [node("Clip", ["x", "lo", "hi"], "clip_both"), node("Clip", ["x", "lo"], "clip_min"),
              node("Clip", ["x", "", "hi"], "clip_max"), node("Clip", ["x"], "clip_none"),
              node("Clip", ["x", "hi", "lo"], "clip_crossed")],
     [("x", F32, [14]), ("lo", F32, []), ("hi", F32, [])],
     {"x": EDGES, "lo": np.array(-1.0, np.float32), "hi": np.array(2.0, np.float32)})
case("clip_i32", [node("Clip", ["x", "lo", "hi"], "clip_i32")],
     [("x", TensorProto.INT32, [5]), ("lo", TensorProto.INT32, []), ("hi", TensorProto.INT32, [])],
     {"x": np.array([-7, -1, 0, 4, 9], np.int32), "lo": np.array(-2, np.int32),
      "hi": np.array(5, np.int32)})

comparands = np.array([[1.0, np.nan, -3.0], [2.0, 2.0, np.inf]], np.float32)
case("comparisons", [node("LessOrEqual", ["a", "b"], "less_or_equal"),
                     node("GreaterOrEqual", ["a", "b"], "greater_or_equal")],
     [("a", F32, [2, 3]), ("b", F32, [3])],
     {"a": comparands, "b": np.array([1.0, 0.0, np.inf], np.float32)})
case("comparisons_u8", [node("LessOrEqual", ["a", "b"], "less_or_equal_u8"),
                        node("GreaterOrEqual", ["a", "b"], "greater_or_equal_u8")],
     [("a", TensorProto.UINT8, [4]), ("b", TensorProto.UINT8, [4])],
     {"a": np.array([0, 200, 7, 255], np.uint8), "b": np.array([1, 100, 7, 0], np.uint8)})

# Integer scatters (T5 shifts its labels right with a ScatterND of int64),
# values past 2^53 where a float detour would round.
big = 2**60 + 1
case("scatter_integers",
     [node("ScatterND", ["d", "nd", "u"], "scatter_nd_i64"),
      node("ScatterND", ["d", "nd", "u"], "scatter_nd_add_i64", reduction="add"),
      node("ScatterElements", ["d", "ei", "eu"], "scatter_elements_i64", axis=1),
      node("ScatterElements", ["d32", "ei", "eu32"], "scatter_elements_i32", axis=1,
           reduction="add")],
     [("d", TensorProto.INT64, [2, 4]), ("nd", TensorProto.INT64, [2, 2]),
      ("u", TensorProto.INT64, [2]), ("ei", TensorProto.INT64, [2, 2]),
      ("eu", TensorProto.INT64, [2, 2]), ("d32", TensorProto.INT32, [2, 4]),
      ("eu32", TensorProto.INT32, [2, 2])],
     {"d": np.array([[1, 2, 3, big], [-5, 6, -7, 8]], np.int64),
      "nd": np.array([[1, 3], [0, 0]], np.int64), "u": np.array([big, -9], np.int64),
      "ei": np.array([[3, 0], [1, 2]], np.int64),
      "eu": np.array([[big, -1], [40, 50]], np.int64),
      "d32": np.array([[1, 2, 3, 4], [-5, 6, -7, 8]], np.int32),
      "eu32": np.array([[10, -1], [40, 2**30]], np.int32)})

bools_a = np.array([[True, False, True, False]] * 2)
bools_b = np.array([True, True, False, False])
case("logical", [node("And", ["a", "b"], "and"), node("Or", ["a", "b"], "or"),
                 node("Xor", ["a", "b"], "xor")],
     [("a", TensorProto.BOOL, [2, 4]), ("b", TensorProto.BOOL, [4])],
     {"a": bools_a, "b": bools_b})

rng = np.random.default_rng(0)
case("variadic", [node("Sum", ["a"], "sum_one"), node("Sum", ["a", "b", "c"], "sum_three"),
                  node("Mean", ["a"], "mean_one"), node("Mean", ["a", "b", "c"], "mean_three")],
     [("a", F32, [2, 3]), ("b", F32, [3]), ("c", F32, [2, 1])],
     {"a": rng.standard_normal((2, 3)).astype(np.float32),
      "b": rng.standard_normal(3).astype(np.float32),
      "c": rng.standard_normal((2, 1)).astype(np.float32)})

case("casts", [node("CastLike", ["x", "like_i32"], "castlike_i32"),
               node("CastLike", ["x", "like_f64"], "castlike_f64"),
               node("Size", ["x"], "size")],
     [("x", F32, [2, 3]), ("like_i32", TensorProto.INT32, [1]),
      ("like_f64", TensorProto.DOUBLE, [])],
     {"x": np.array([[1.5, -2.25, 3.0], [0.0, 7.75, -9.5]], np.float32),
      "like_i32": np.array([0], np.int32), "like_f64": np.array(0.0)})

# Reductions: over one axis, over all (no axes), without keepdims, and the
# no-op of empty axes; L1 and SumSquare on int64 too.
reduce_input = rng.standard_normal((3, 4, 2)).astype(np.float32) * 3
positive_input = np.abs(reduce_input) + 0.1
axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
no_axes = helper.make_tensor("no_axes", TensorProto.INT64, [0], [])
reductions, reduce_inputs = [], [("x", F32, [3, 4, 2]), ("p", F32, [3, 4, 2])]
for op in ["ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]:
    data = "p" if op == "ReduceLogSum" else "x"
    short = op[len("Reduce"):].lower()
    reductions += [node(op, [data, "axes"], f"{short}_axis1"),
                   node(op, [data], f"{short}_all"),
                   node(op, [data, "axes"], f"{short}_axis1_nokeep", keepdims=0),
                   node(op, [data, "no_axes"], f"{short}_noop", noop_with_empty_axes=1)]
MODELS["reductions"] = (
    model([helper.make_node("Constant", [], ["axes"], value=axes),
           helper.make_node("Constant", [], ["no_axes"], value=no_axes)] + reductions,
          reduce_inputs, [n.output[0] for n in reductions], opset=18),
    {"x": reduce_input, "p": positive_input}, True)
case("reductions_i64", [node("ReduceL1", ["x"], "l1_i64", axes=[0]),
                        node("ReduceSumSquare", ["x"], "sumsquare_i64", axes=[0], keepdims=0)],
     [("x", TensorProto.INT64, [2, 3])], {"x": np.array([[1, -2, 3], [-4, 5, -6]], np.int64)},
     opset=17)
# LogSumExp where the maximum is infinite or large: a +inf row gives +inf, a
# row of -inf gives -inf, and a row of large values no overflow.
case("logsumexp_edges", [node("ReduceLogSumExp", ["x"], "logsumexp_edges", axes=[1], keepdims=0)],
     [("x", F32, [4, 3])],
     {"x": np.array([[1.0, np.inf, 2.0], [-np.inf, -np.inf, -np.inf], [500.0, 499.0, -3.0],
                     [0.5, -0.5, 1.5]], np.float32)}, opset=17)


# Native ops: the C library's functions, Sign, Max and Min (variadic, NaN
# propagating).
math = [node(op, ["x"], op.lower()) for op in
        ["Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
         "Floor", "Ceil", "Round", "Sign"]]
math_input = np.array([-2.5, -1.5, -0.5, -0.25, 0.0, 0.5, 0.75, 1.5, 2.5, 3.7, np.nan, -np.inf],
                      np.float32)
case("math", math, [("x", F32, [12])], {"x": math_input})
# onnxruntime has none of these ops on f64.
case("math_f64", math, [("x", TensorProto.DOUBLE, [12])], {"x": math_input.astype(np.float64)},
     ort=False)
case("sign_i32", [node("Sign", ["x"], "sign_i32")], [("x", TensorProto.INT32, [4])],
     {"x": np.array([-7, 0, 3, -1], np.int32)})
extrema = [node("Max", ["a"], "max_one"), node("Max", ["a", "b", "c"], "max_three"),
           node("Min", ["a"], "min_one"), node("Min", ["a", "b", "c"], "min_three")]
case("extrema", extrema, [("a", F32, [2, 3]), ("b", F32, [3]), ("c", F32, [2, 1])],
     {"a": np.array([[1.0, np.nan, -3.0], [2.0, 0.5, np.inf]], np.float32),
      "b": np.array([0.0, 1.0, np.nan], np.float32),
      "c": np.array([[-1.0], [4.0]], np.float32)})
# Unsigned: values above the signed range compare as unsigned.
case("extrema_u32", [node("Max", ["a", "b"], "max_u32"), node("Min", ["a", "b"], "min_u32")],
     [("a", TensorProto.UINT32, [4]), ("b", TensorProto.UINT32, [4])],
     {"a": np.array([0, 3_000_000_000, 7, 4_294_967_295], np.uint32),
      "b": np.array([1, 100, 7, 0], np.uint32)})


# The newer decompositions at their edges: ArgMax/ArgMin with ties and NaN
# (the first NaN wins), ReduceMin over NaN, infinities and the extremes of
# signed, unsigned and bool types, integer Mod with mixed signs, zero and
# the most negative value (onnxruntime traps on INT_MIN % -1), IsNaN/IsInf, L1 normalization of negative values,
# Pad cropping with negative pads.
ties = np.array([[1.0, 3.0, 3.0, -1.0], [np.nan, 2.0, np.nan, 5.0], [0.0, -0.0, np.inf, np.inf]],
                np.float32)
case("arg_extrema",
     [node("ArgMax", ["x"], "argmax", axis=1), node("ArgMin", ["x"], "argmin", axis=1),
      node("ArgMax", ["x"], "argmax_last", axis=1, select_last_index=1, keepdims=0),
      node("ArgMin", ["x"], "argmin_axis0", axis=0),
      node("ReduceMin", ["x"], "reduce_min", axes=[1], keepdims=0)],
     [("x", F32, [3, 4])], {"x": ties}, opset=17,
     ort=False)  # onnxruntime's arg extrema skip NaN; onnx.reference (numpy) takes it
case("reduce_min_integers",
     [node("ReduceMin", ["i"], "min_i64", axes=[1]), node("ReduceMin", ["u"], "min_u64", axes=[1]),
      node("ArgMin", ["u"], "argmin_u64", axis=1)],
     [("i", TensorProto.INT64, [2, 3]), ("u", TensorProto.UINT64, [2, 3])],
     {"i": np.array([[5, np.iinfo(np.int64).min, 7], [np.iinfo(np.int64).max, -1, 0]], np.int64),
      "u": np.array([[2**64 - 1, 2**63, 2**63 + 5], [0, 2**64 - 1, 3]], np.uint64)}, opset=17,
     ort=False)  # onnxruntime has no ReduceMin or ArgMin on u64
case("reduce_min_bool", [node("ReduceMin", ["b"], "min_bool", keepdims=0)],
     [("b", TensorProto.BOOL, [2, 3])], {"b": np.array([[True, True, True], [True, False, True]])},
     opset=20)
mod_x = np.array([7, -7, 7, -7, 0, 5, np.iinfo(np.int32).min, 9], np.int32)
mod_y = np.array([3, 3, -3, -3, 4, 5, 3, -4], np.int32)
case("mod_integers",
     [node("Mod", ["x", "y"], "mod"), node("Mod", ["x", "y"], "fmod", fmod=1)],
     [("x", TensorProto.INT32, [8]), ("y", TensorProto.INT32, [8])], {"x": mod_x, "y": mod_y},
     opset=13)
case("nan_inf",
     [node("IsNaN", ["x"], "isnan"), node("IsInf", ["x"], "isinf"),
      node("IsInf", ["x"], "isinf_negative", detect_positive=0),
      node("IsInf", ["x"], "isinf_positive", detect_negative=0)],
     [("x", F32, [14])], {"x": EDGES}, opset=20)
case("l1_normalization", [node("LpNormalization", ["x"], "l1", axis=1, p=1)],
     [("x", F32, [3, 4])], {"x": np.nan_to_num(ties, posinf=4.0, nan=-2.0)}, opset=17)
crop = [node("Pad", ["x", "crop"], "cropped"),
        node("Pad", ["x", "crop"], "crop_reflect", mode="reflect")]
MODELS["pad_crop"] = (
    model([helper.make_node("Constant", [], ["crop"], value=helper.make_tensor(
        "crop", TensorProto.INT64, [4], [-1, 2, 1, -1]))] + crop,
          [("x", F32, [3, 4])], [n.output[0] for n in crop], opset=18),
    {"x": np.arange(12, dtype=np.float32).reshape(3, 4)}, True)

# Einsum's forms: batched product, inner and outer products, sums,
# transposes, the implicit result, an ellipsis, three operands, a label
# summed in one operand alone, and attention's scores.
einsum_shapes = {"a": [2, 3, 4], "b": [2, 4, 5], "v": [4], "w": [4], "m": [3, 4], "n": [4, 5],
                 "o": [5, 2], "q": [2, 3, 6, 4], "k": [2, 3, 7, 4]}
einsums = [("bij,bjk->bik", "ab", "batch_matmul"), ("i,i", "vw", "inner"),
           ("i,j->ij", "vw", "outer"), ("ij->i", "m", "row_sum"), ("ij->ji", "m", "transposed"),
           ("ij,jk", "mn", "implicit"), ("...ij,...jk->...ik", "ab", "ellipsis"),
           ("ij,jk,kl->il", "mno", "chain"), ("bij,bjk->k", "ab", "summed"),
           ("ij,ij->ij", "mm", "hadamard"), ("bhqd,bhkd->bhqk", "qk", "scores"), ("ij->", "m", "total")]
case("einsum", [node("Einsum", list(names), out, equation=eq) for eq, names, out in einsums],
     [(k, F32, v) for k, v in einsum_shapes.items()],
     {k: np.random.default_rng(1).standard_normal(v).astype(np.float32)
      for k, v in einsum_shapes.items()}, opset=13)

# Native: float Mod (C's fmod, and fmod = 0's divisor sign on f64), ReduceProd
# (integer products wrap), TopK both ways along an inner axis with ties.
case("mod_float",
     [node("Mod", ["x", "y"], "fmod_f32", fmod=1)], [("x", F32, [6]), ("y", F32, [6])],
     {"x": np.array([5.5, -5.5, 5.5, -5.5, 0.0, 1e30], np.float32),
      "y": np.array([2.0, 2.0, -2.0, -2.0, 3.0, 7.0], np.float32)}, opset=13)
case("reduce_prod",
     [node("ReduceProd", ["x"], "prod_f32", axes=[1]), node("ReduceProd", ["i"], "prod_i32")],
     [("x", F32, [2, 3]), ("i", TensorProto.INT32, [3])],
     {"x": np.array([[1.5, -2.0, 4.0], [0.0, 3.0, -1.0]], np.float32),
      "i": np.array([65536, 65536, 3], np.int32)}, opset=17)
top_k_k = helper.make_tensor("k", TensorProto.INT64, [1], [2])
top_k = [helper.make_node("TopK", ["x", "k"], ["largest", "largest_at"], axis=1),
         helper.make_node("TopK", ["x", "k"], ["smallest", "smallest_at"], axis=1, largest=0)]
MODELS["top_k"] = (
    model([helper.make_node("Constant", [], ["k"], value=top_k_k)] + top_k, [("x", F32, [2, 4, 2])],
          ["largest", "largest_at", "smallest", "smallest_at"], opset=17),
    {"x": np.array([[[3, 1], [1, 1], [3, 0], [2, 5]], [[-1, 4], [0, 4], [7, 4], [-1, 2]]],
                   np.float32)}, True)

# OneHot (decomposed): int64 indices with negatives (counting from the end of
# depth) and ones outside [-depth, depth) (off everywhere), the new dim last,
# first and in the middle; then float indices with a float depth and int32
# values, which onnxruntime 1.x has no kernel for (checked against
# onnx.reference; whole numbers: the spec casts a float index to int64,
# onnx.reference compares the float itself, so 2.7 is 2 for cleave and no
# position for it; and in range: onnx.reference wraps an index past depth,
# where the spec and onnxruntime, above, leave it off everywhere).
one_hot_depth = helper.make_tensor("depth", TensorProto.INT64, [], [4])
one_hot_values = helper.make_tensor("values", F32, [2], [-1.5, 2.0])
MODELS["one_hot"] = (
    model([helper.make_node("Constant", [], ["depth"], value=one_hot_depth),
           helper.make_node("Constant", [], ["values"], value=one_hot_values),
           node("OneHot", ["i", "depth", "values"], "last"),
           node("OneHot", ["i", "depth", "values"], "first", axis=0),
           node("OneHot", ["i", "depth", "values"], "middle", axis=-2)],
          [("i", TensorProto.INT64, [2, 3])], ["last", "first", "middle"], opset=13),
    {"i": np.array([[0, 3, -1], [-4, 4, -5]], np.int64)}, True)
one_hot_depth_f = helper.make_tensor("depth_f", F32, [1], [3.0])
one_hot_values_i = helper.make_tensor("values_i", TensorProto.INT32, [2], [0, 7])
MODELS["one_hot_floats"] = (
    model([helper.make_node("Constant", [], ["depth_f"], value=one_hot_depth_f),
           helper.make_node("Constant", [], ["values_i"], value=one_hot_values_i),
           node("OneHot", ["f", "depth_f", "values_i"], "from_floats", axis=1)],
          [("f", F32, [4])], ["from_floats"], opset=13),
    {"f": np.array([0.0, 2.0, 1.0, -1.0], np.float32)}, False)

def compare(name, ours, theirs, reference):
    if ours.shape != theirs.shape or ours.dtype != theirs.dtype:
        return [f"{name}: cleave gives {ours.dtype}{list(ours.shape)}, "
                f"{reference} {theirs.dtype}{list(theirs.shape)}"]
    if np.issubdtype(theirs.dtype, np.floating):
        close = np.isclose(ours, theirs, rtol=1e-5, atol=1e-6, equal_nan=True)
    else:
        close = ours == theirs
    if close.all():
        return []
    bad = np.argwhere(~close)[:3]
    return [f"{name}[{list(i)}]: cleave {ours[tuple(i)]!r}, {reference} {theirs[tuple(i)]!r}"
            for i in bad]


def main():
    problems = []
    for name, (m, feeds, ort) in MODELS.items():
        path = os.path.join(WORK, name + ".onnx")
        save(m, path)
        out = os.path.join(WORK, name)
        compiled = subprocess.run(["cleave", "compile", path, "-o", out], capture_output=True,
                                  text=True)
        if compiled.returncode != 0:
            problems.append(f"{name}: cleave compile failed: {compiled.stderr.strip()}")
            continue
        flags = []
        for key, value in feeds.items():
            np.save(os.path.join(WORK, f"{name}.{key}.npy"), value)
            flags += ["--input", f"{key}={os.path.join(WORK, f'{name}.{key}.npy')}"]
        results = os.path.join(WORK, name + ".out")
        ran = subprocess.run(["cleave", "run", out, *flags, "--output-dir", results],
                             capture_output=True, text=True)
        if ran.returncode != 0:
            problems.append(f"{name}: cleave run failed: {ran.stderr.strip()}")
            continue
        with np.errstate(all="ignore"):
            expected = (run_onnxruntime(m, feeds) if ort else
                        ReferenceEvaluator(m).run(None, feeds))
        reference = "onnxruntime" if ort else "onnx.reference"
        for output, theirs in zip(m.graph.output, expected):
            ours = np.load(os.path.join(results, output.name + ".npy"))
            problems += compare(f"{name}/{output.name}", ours, theirs, reference)
        print(f"{name}: {len(m.graph.output)} outputs compared")
    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
