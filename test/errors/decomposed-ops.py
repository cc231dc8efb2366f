# Refusals of the operators cleave imports as formulas (docs/ops.md): an
# element type the formula's ops do not admit, and a Clip bound that is not a
# scalar of the input's type, are one error line naming the node and the
# input, exit 1 (never an unchecked op that fails verification later).
#
# RUN: rm -rf %t && mkdir -p %t && %python %s --all %t
# RUN: %refuses 1 cleave import %t/softplus_i32.onnx | FileCheck %s --check-prefix=SOFTPLUS
# RUN: %refuses 1 cleave import %t/reduce_l2_i64.onnx | FileCheck %s --check-prefix=L2
# RUN: %refuses 1 cleave import %t/reduce_l1_u8.onnx | FileCheck %s --check-prefix=L1
# RUN: %refuses 1 cleave import %t/clip_vector_min.onnx | FileCheck %s --check-prefix=CLIPVEC
# RUN: %refuses 1 cleave import %t/clip_bool.onnx | FileCheck %s --check-prefix=CLIPBOOL
# RUN: %refuses 1 cleave import %t/or_i32.onnx | FileCheck %s --check-prefix=OR
# RUN: %refuses 1 cleave import %t/sum_mismatch.onnx | FileCheck %s --check-prefix=SUM
# RUN: %refuses 1 cleave import %t/isnan_i32.onnx | FileCheck %s --check-prefix=ISNAN
# RUN: %refuses 1 cleave import %t/cumsum_u32.onnx | FileCheck %s --check-prefix=CUMSUM
# RUN: %refuses 1 cleave import %t/prelu_slope.onnx | FileCheck %s --check-prefix=PRELU
# RUN: %refuses 1 cleave import %t/scatternd_max.onnx | FileCheck %s --check-prefix=SCATTERMAX
# RUN: %refuses 1 cleave import %t/scatter_u8.onnx | FileCheck %s --check-prefix=SCATTERU8
# RUN: %refuses 1 cleave import %t/pad_reflect_far.onnx | FileCheck %s --check-prefix=REFLECT
# RUN: %refuses 1 cleave import %t/pad_cubic.onnx | FileCheck %s --check-prefix=PADMODE
# RUN: %refuses 1 cleave import %t/rms_stash.onnx | FileCheck %s --check-prefix=STASH
# RUN: %refuses 1 cleave import %t/convtranspose_far.onnx | FileCheck %s --check-prefix=CONVT
# RUN: %refuses 1 cleave import %t/einsum_diagonal.onnx | FileCheck %s --check-prefix=EINSUM
# RUN: %refuses 1 cleave import %t/einsum_broadcast.onnx | FileCheck %s --check-prefix=EINSUMB
# RUN: %refuses 1 cleave import %t/resize_cubic.onnx | FileCheck %s --check-prefix=RESIZE
# RUN: %refuses 1 cleave import %t/resize_no_scales.onnx | FileCheck %s --check-prefix=RESIZENONE
# RUN: %refuses 1 cleave import %t/attention_precision.onnx | FileCheck %s --check-prefix=ATTENTION
# RUN: %refuses 1 cleave import %t/attention_mask_heads.onnx | FileCheck %s --check-prefix=ATTNMASK
# RUN: %refuses 1 cleave import %t/attention_lengths_2d.onnx | FileCheck %s --check-prefix=ATTNLEN
# RUN: %refuses 1 cleave import %t/attention_value_heads.onnx | FileCheck %s --check-prefix=ATTNV
# RUN: %refuses 1 cleave import %t/attention_mask_scalar.onnx | FileCheck %s --check-prefix=ATTNSCALAR
# RUN: %refuses 1 cleave import %t/one_hot_depth_input.onnx | FileCheck %s --check-prefix=ONEHOTIN
# RUN: %refuses 1 cleave import %t/one_hot_depth_zero.onnx | FileCheck %s --check-prefix=ONEHOTZERO
# RUN: %refuses 1 cleave import %t/one_hot_depths.onnx | FileCheck %s --check-prefix=ONEHOTTWO
# RUN: %refuses 1 cleave import %t/one_hot_values.onnx | FileCheck %s --check-prefix=ONEHOTVAL
# RUN: %refuses 1 cleave import %t/one_hot_bool.onnx | FileCheck %s --check-prefix=ONEHOTBOOL
# RUN: %refuses 1 cleave import %t/one_hot_axis.onnx | FileCheck %s --check-prefix=ONEHOTAXIS
#
# SOFTPLUS: node 'softplus' (Softplus, domain 'ai.onnx', opset 17): input 'x' is 'tensor<2x3xi32>': cleave computes Softplus on f32 and f64 only
# L2: node 'reducel2' (ReduceL2, domain 'ai.onnx', opset 17): input 'x' is 'tensor<2x3xi64>': cleave computes ReduceL2 on f32 and f64 only
# L1: node 'reducel1' (ReduceL1, domain 'ai.onnx', opset 17): input 'x' is 'tensor<2x3xui8>': cleave computes ReduceL1 on f32, f64 and 32- and 64-bit integers only
# CLIPVEC: node 'clip' (Clip, domain 'ai.onnx', opset 17): input 'lo' (min) is 'tensor<3xf32>', not a scalar of the input's element type
# CLIPBOOL: node 'clip' (Clip, domain 'ai.onnx', opset 17): input 'x' is 'tensor<3xi1>': cleave computes Clip on numbers only
# OR: node 'or' (Or, domain 'ai.onnx', opset 17): input 'a' is 'tensor<2xi32>': cleave computes Or on bools only
# SUM: node 'sum' (Sum, domain 'ai.onnx', opset 17): operands are not broadcast-compatible: 2 and 3
# ISNAN: node 'isnan' (IsNaN, domain 'ai.onnx', opset 17): input 'x' is 'tensor<3xi32>': cleave computes IsNaN on f32 and f64 only
# CUMSUM: node 'cumsum' (CumSum, domain 'ai.onnx', opset 17): input 'x' is 'tensor<3xui32>': cleave computes CumSum on f32, f64, i32 and i64 only
# PRELU: node 'prelu' (PRelu, domain 'ai.onnx', opset 17): slope 3x1 does not broadcast to the input 3
# SCATTERMAX: node 'scatternd' (ScatterND, domain 'ai.onnx', opset 18): attribute 'reduction' 'max' is not supported
# SCATTERU8: node 'scatterelements' (ScatterElements, domain 'ai.onnx', opset 17): input 'x' is 'tensor<4xui8>': cleave computes ScatterElements on f32, f64, i32 and i64 only
# REFLECT: node 'pad' (Pad, domain 'ai.onnx', opset 17): attribute 'mode' 'reflect' with pads 3 and 0 on axis 0 of 3 elements (more than one reflection or wrap) is not supported
# PADMODE: node 'pad' (Pad, domain 'ai.onnx', opset 17): attribute 'mode' 'cubic' is not constant, reflect, edge or wrap
# STASH: node 'rmsnormalization' (RMSNormalization, domain 'ai.onnx', opset 23): attribute 'stash_type' 11 (other than FLOAT) is not supported
# EINSUM: node 'einsum' (Einsum, domain 'ai.onnx', opset 17): attribute 'equation' '...ii->...i' (a label repeated in one operand (a diagonal)) is not supported
# EINSUMB: node 'einsum' (Einsum, domain 'ai.onnx', opset 17): attribute 'equation' 'ij,ij->ij' (a label of different sizes (broadcasting)) is not supported
# RESIZE: node 'resize' (Resize, domain 'ai.onnx', opset 19): attribute 'mode' 'cubic' is not supported
# RESIZENONE: node 'resize' (Resize, domain 'ai.onnx', opset 19): has no input 2 (scales)
# ATTENTION: node 'attention' (Attention, domain 'ai.onnx', opset 23): attribute 'softmax_precision' 11 (other than the inputs' type) is not supported
# ATTNMASK: node 'attention' (Attention, domain 'ai.onnx', opset 23): operands are not broadcast-compatible
# ATTNLEN: node 'attention' (Attention, domain 'ai.onnx', opset 24): nonpad_kv_seqlen 'tensor<2x1xi64>' is not one length per batch
# ATTNV: node 'attention' (Attention, domain 'ai.onnx', opset 23): V 'tensor<2x43x6x8xf32>' does not have K's 'tensor<2x3x6x8xf32>' batch, heads and keys
# ONEHOTIN: node 'onehot' (OneHot, domain 'ai.onnx', opset 17): input 'd' (depth) must be a constant: cleave resolves it at import
# ONEHOTZERO: node 'onehot' (OneHot, domain 'ai.onnx', opset 17): depth 0 is not positive
# ONEHOTTWO: node 'onehot' (OneHot, domain 'ai.onnx', opset 17): input 'd' (depth) must hold one value
# ONEHOTVAL: node 'onehot' (OneHot, domain 'ai.onnx', opset 17): input 'v' (values) must hold two values, off and on
# ONEHOTBOOL: node 'onehot' (OneHot, domain 'ai.onnx', opset 17): input 'i' is 'tensor<3xi1>': cleave computes OneHot on numbers only
# ONEHOTAXIS: node 'onehot' (OneHot, domain 'ai.onnx', opset 17): axis 2 is out of range for rank 2
# ATTNSCALAR: node 'attention' (Attention, domain 'ai.onnx', opset 23): attn_mask 'tensor<f32>' is not of rank 1 to 4: it broadcasts to (batch, heads, queries, keys)
# CONVT: node 'convtranspose' (ConvTranspose, domain 'ai.onnx', opset 17): attribute 'output_shape' or 'pads' gives output dim 9 for input dim 3, which a transposed convolution with these strides does not reach: this form is not supported

from onnx import helper

from onnx_models import BOOL, F32, I32, I64, U8, U32, Cases, value_info

cases = Cases()


def one(op, inputs, opset=17, constants=None, **attrs):
    """One node on `inputs`, unchecked: ONNX's shape inference refuses these too.
    Inputs named in `constants` are int64 initializers with those values; an
    input named "" is an optional one left out."""
    constants = constants or {}
    node = helper.make_node(op, [name for name, _, _ in inputs], ["y"], name=op.lower(), **attrs)
    graph = helper.make_graph([node], "test",
                              [value_info(*i) for i in inputs if i[0] and i[0] not in constants],
                              [helper.make_empty_tensor_value_info("y")],
                              [helper.make_tensor(k, I64, [len(v)], v)
                               for k, v in constants.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


cases.add("softplus_i32")(lambda: one("Softplus", [("x", I32, [2, 3])]))
cases.add("reduce_l2_i64")(lambda: one("ReduceL2", [("x", I64, [2, 3])]))
cases.add("reduce_l1_u8")(lambda: one("ReduceL1", [("x", U8, [2, 3])]))
cases.add("clip_vector_min")(lambda: one("Clip", [("x", F32, [3]), ("lo", F32, [3])]))
cases.add("clip_bool")(lambda: one("Clip", [("x", BOOL, [3])]))
cases.add("or_i32")(lambda: one("Or", [("a", I32, [2]), ("b", I32, [2])]))
cases.add("sum_mismatch")(lambda: one("Sum", [("a", F32, [2]), ("b", F32, [3])]))
cases.add("isnan_i32")(lambda: one("IsNaN", [("x", I32, [3])]))
cases.add("cumsum_u32")(lambda: one("CumSum", [("x", U32, [3]), ("axis", I64, [])]))
cases.add("scatternd_max")(lambda: one(
    "ScatterND", [("x", F32, [4]), ("i", I64, [1, 1]), ("u", F32, [1])], opset=18,
    reduction="max"))
cases.add("scatter_u8")(lambda: one(
    "ScatterElements", [("x", U8, [4]), ("i", I64, [1]), ("u", U8, [1])]))
cases.add("pad_reflect_far")(lambda: one(
    "Pad", [("x", F32, [3]), ("pads", I64, [2])], constants={"pads": [3, 0]}, mode="reflect"))
cases.add("pad_cubic")(lambda: one(
    "Pad", [("x", F32, [3]), ("pads", I64, [2])], constants={"pads": [1, 0]}, mode="cubic"))
cases.add("rms_stash")(lambda: one(
    "RMSNormalization", [("x", F32, [2, 3]), ("s", F32, [3])], opset=23, stash_type=11))
cases.add("convtranspose_far")(lambda: one(
    "ConvTranspose", [("x", F32, [1, 1, 3]), ("w", F32, [1, 1, 2])], output_shape=[9]))
cases.add("einsum_diagonal")(lambda: one(
    "Einsum", [("x", F32, [3, 5, 5])], equation="...ii->...i"))
cases.add("einsum_broadcast")(lambda: one(
    "Einsum", [("a", F32, [2, 3]), ("b", F32, [1, 3])], equation="ij,ij->ij"))
cases.add("resize_cubic")(lambda: one(
    "Resize", [("x", F32, [1, 1, 2, 2]), ("roi", F32, [0]), ("scales", F32, [4])], opset=19,
    mode="cubic"))
# The importer fuzzer's finding: neither scales nor sizes (the error read
# the name of an input past the node's last).
cases.add("resize_no_scales")(lambda: one(
    "Resize", [("x", F32, [1, 1, 2, 2]), ("", F32, [])], opset=19))
cases.add("attention_precision")(lambda: one(
    "Attention", [("q", F32, [1, 1, 2, 4]), ("k", F32, [1, 1, 2, 4]), ("v", F32, [1, 1, 2, 4])],
    opset=23, softmax_precision=11))
# The importer fuzzer's finding: a mask of 67 heads for 3 (it used to abort).
cases.add("attention_mask_heads")(lambda: one(
    "Attention", [("q", F32, [2, 3, 4, 8]), ("k", F32, [2, 3, 6, 8]), ("v", F32, [2, 3, 6, 10]),
                  ("m", F32, [2, 67, 4, 4])], opset=23))
# A second finding: V with 43 heads for K's 3 (grouped-query attention
# repeats K's and V's heads alike).
cases.add("attention_value_heads")(lambda: one(
    "Attention", [("q", F32, [2, 9, 4, 8]), ("k", F32, [2, 3, 6, 8]), ("v", F32, [2, 43, 6, 8])],
    opset=23))
# A third: a scalar mask (it read past the end of its empty shape).
cases.add("attention_mask_scalar")(lambda: one(
    "Attention", [("q", F32, [2, 3, 4, 8]), ("k", F32, [2, 3, 6, 8]), ("v", F32, [2, 3, 6, 8]),
                  ("m", F32, [])], opset=23))
cases.add("attention_lengths_2d")(lambda: one(
    "Attention", [("q", F32, [2, 3, 4, 8]), ("k", F32, [2, 3, 6, 8]), ("v", F32, [2, 3, 6, 10]),
                  ("", F32, []), ("", F32, []), ("", F32, []), ("n", I64, [2, 1])], opset=24))
cases.add("one_hot_depth_input")(lambda: one(
    "OneHot", [("i", I64, [3]), ("d", I64, []), ("v", F32, [2])]))
cases.add("one_hot_depth_zero")(lambda: one(
    "OneHot", [("i", I64, [3]), ("d", I64, [1]), ("v", F32, [2])], constants={"d": [0]}))
cases.add("one_hot_depths")(lambda: one(
    "OneHot", [("i", I64, [3]), ("d", I64, [2]), ("v", F32, [2])], constants={"d": [2, 3]}))
cases.add("one_hot_values")(lambda: one(
    "OneHot", [("i", I64, [3]), ("d", I64, [1]), ("v", F32, [3])], constants={"d": [4]}))
cases.add("one_hot_bool")(lambda: one(
    "OneHot", [("i", BOOL, [3]), ("d", I64, [1]), ("v", F32, [2])], constants={"d": [4]}))
cases.add("one_hot_axis")(lambda: one(
    "OneHot", [("i", I64, [3]), ("d", I64, [1]), ("v", F32, [2])], constants={"d": [4]}, axis=2))
cases.add("prelu_slope")(lambda: one("PRelu", [("x", F32, [3]), ("slope", F32, [3, 1])]))

if __name__ == "__main__":
    cases.main()
