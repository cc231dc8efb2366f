# Import of the training domain ai.onnx.preview.training, version 1 (ONNX's
# onnx/defs/training/defs.cc). Adam, Momentum and Adagrad become elementwise
# cleave ops following the pseudo code of the operator docs in onnx.reference's
# order: tensor arithmetic in X's type with each coefficient rounded to it,
# the factors of R and T in f64 (T cast once), T > 0 selected by cleave.where.
# Gradient becomes the reverse-mode rules' ops. A model whose nodes all come
# from the training domain needs no ai.onnx opset. Numerics:
# test/compile/onnx_training_ops.py.
#
# The coefficients below are the float32 attribute values and what numpy makes
# of them ('%.9g' of the float32, '%.17g' of the double): np.float32(0.95)
# 0.949999988, np.float32(1 - float(np.float32(0.95))) 0.0500000119,
# np.float32(1 - float(np.float32(0.9))) 0.100000024, np.float32(0.999)
# 0.999000013, np.float32(1 - float(np.float32(0.999))) 0.000999987125,
# np.float32(1 - float(np.float32(0.02))) 0.980000019, float(np.float32(0.95))
# 0.94999998807907104. MLIR prints a float in the short form 9.990000e-01
# when that reads back as the same float, as for 0.999000013 and 0.980000019.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s --all %t
# RUN: cleave import %t/momentum_standard.onnx | FileCheck %s --check-prefix=MOM
# RUN: cleave import %t/momentum_nesterov_f64.onnx | FileCheck %s --check-prefix=NEST
# RUN: cleave import %t/adagrad_multiple.onnx | FileCheck %s --check-prefix=ADAGRAD
# RUN: cleave import %t/adam_defaults.onnx | FileCheck %s --check-prefix=ADAM
# RUN: cleave import %t/adam_multiple_post.onnx | FileCheck %s --check-prefix=ADAMMULTI
# RUN: cleave import %t/with_ai_onnx.onnx | FileCheck %s --check-prefix=MIXED
# RUN: cleave import %t/gradient.onnx | FileCheck %s --check-prefix=GRAD
# RUN: cleave import %t/gradient_at_inputs.onnx | FileCheck %s --check-prefix=GRADAT
# RUN: cleave import --summary %t/momentum_standard.onnx | FileCheck %s --check-prefix=SUMMARY

import onnx
from onnx import helper

from onnx_models import F32, F64, I64, Cases

TRAINING = "ai.onnx.preview.training"
cases = Cases()


def training_model(nodes, inputs, outputs, default_opset=None):
    """A checked model; inputs and outputs are (name, elem_type, shape)."""
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs])
    opsets = [helper.make_opsetid(TRAINING, 1)]
    if default_opset:
        opsets.append(helper.make_opsetid("", default_opset))
    m = helper.make_model(graph, opset_imports=opsets, producer_name="cleave-tests")
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def optimizer(op, state, shapes, elem=F32, **attrs):
    """One `op` node over X..., G..., then the `state` groups (V, H)."""
    groups = ["X", "G"] + state
    suffix = [""] if len(shapes) == 1 else [str(i + 1) for i in range(len(shapes))]
    inputs = [("R", elem, []), ("T", I64, [])]
    for g in groups:
        inputs += [(g + s, elem, shape) for s, shape in zip(suffix, shapes)]
    outputs = []
    for g in ["X"] + state:
        outputs += [(g + s + "_new", elem, shape) for s, shape in zip(suffix, shapes)]
    node = helper.make_node(op, [i[0] for i in inputs], [o[0] for o in outputs], name=op.lower(),
                            domain=TRAINING, **attrs)
    return training_model([node], inputs, outputs)


# MOM-LABEL: func.func @forward(%arg0: tensor<f32> {cleave.kind = "input", cleave.name = "R"}, %arg1: tensor<i64> {cleave.kind = "input", cleave.name = "T"}, %arg2: tensor<2xf32> {cleave.kind = "input", cleave.name = "X"}, %arg3: tensor<2xf32> {cleave.kind = "input", cleave.name = "G"}, %arg4: tensor<2xf32> {cleave.kind = "input", cleave.name = "V"}) -> (tensor<2xf32> {cleave.name = "X_new"}, tensor<2xf32> {cleave.name = "V_new"})
# MOM-NEXT: %[[T:.+]] = cleave.cast %arg1 {to = f64} : (tensor<i64>) -> tensor<f64>
# MOM-NEXT: %[[ZERO:.+]] = cleave.constant {value = dense<0.000000e+00> : tensor<f64>} : tensor<f64>
# MOM-NEXT: %[[POS:.+]] = cleave.greater %[[T]], %[[ZERO]] : (tensor<f64>, tensor<f64>) -> tensor<i1>
# G_regularized = norm_coefficient * X + G
# MOM-NEXT: %[[NORM:.+]] = cleave.constant {value = dense<1.000000e-03> : tensor<f32>} : tensor<f32>
# MOM-NEXT: %[[NX:.+]] = cleave.mul %[[NORM]], %arg2 : (tensor<f32>, tensor<2xf32>) -> tensor<2xf32>
# MOM-NEXT: %[[GREG:.+]] = cleave.add %[[NX]], %arg3 : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
# beta_adjusted = T > 0 ? beta : 1
# MOM-NEXT: %[[BETA:.+]] = cleave.constant {value = dense<1.000000e-01> : tensor<f32>} : tensor<f32>
# MOM-NEXT: %[[ONE:.+]] = cleave.constant {value = dense<1.000000e+00> : tensor<f32>} : tensor<f32>
# MOM-NEXT: %[[BADJ:.+]] = cleave.where %[[POS]], %[[BETA]], %[[ONE]] : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
# V_new = alpha * V + beta_adjusted * G_regularized
# MOM-NEXT: %[[ALPHA:.+]] = cleave.constant {value = dense<0.949999988> : tensor<f32>} : tensor<f32>
# MOM-NEXT: %[[AV:.+]] = cleave.mul %[[ALPHA]], %arg4 : (tensor<f32>, tensor<2xf32>) -> tensor<2xf32>
# MOM-NEXT: %[[BG:.+]] = cleave.mul %[[BADJ]], %[[GREG]] : (tensor<f32>, tensor<2xf32>) -> tensor<2xf32>
# MOM-NEXT: %[[VNEW:.+]] = cleave.add %[[AV]], %[[BG]] : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
# X_new = X - R * V_new
# MOM-NEXT: %[[STEP:.+]] = cleave.mul %arg0, %[[VNEW]] : (tensor<f32>, tensor<2xf32>) -> tensor<2xf32>
# MOM-NEXT: %[[XNEW:.+]] = cleave.sub %arg2, %[[STEP]] : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
# MOM-NEXT: return %[[XNEW]], %[[VNEW]] : tensor<2xf32>, tensor<2xf32>
cases.add("momentum_standard")(lambda: optimizer(
    "Momentum", ["V"], [[2]], alpha=0.95, beta=0.1, mode="standard", norm_coefficient=0.001))

# Nesterov, in double: X_new = X - R * (G_regularized + alpha * V_new).
# NEST-LABEL: func.func @forward(%arg0: tensor<f64> {{.*}}, %arg1: tensor<i64> {{.*}}, %arg2: tensor<3xf64> {{.*}}, %arg3: tensor<3xf64> {{.*}}, %arg4: tensor<3xf64> {{.*}})
# NEST: %[[GREG:.+]] = cleave.add %{{.+}}, %arg3 : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
# NEST: %[[ALPHA:.+]] = cleave.constant {value = dense<0.94999998807907104> : tensor<f64>} : tensor<f64>
# NEST-NEXT: %[[AV:.+]] = cleave.mul %[[ALPHA]], %arg4
# NEST-NEXT: %[[BG:.+]] = cleave.mul %{{.+}}, %[[GREG]]
# NEST-NEXT: %[[VNEW:.+]] = cleave.add %[[AV]], %[[BG]] : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
# NEST-NEXT: %[[ALPHA2:.+]] = cleave.constant {value = dense<0.94999998807907104> : tensor<f64>} : tensor<f64>
# NEST-NEXT: %[[AVNEW:.+]] = cleave.mul %[[ALPHA2]], %[[VNEW]]
# NEST-NEXT: %[[DIR:.+]] = cleave.add %[[GREG]], %[[AVNEW]]
# NEST-NEXT: %[[STEP:.+]] = cleave.mul %arg0, %[[DIR]]
# NEST-NEXT: %[[XNEW:.+]] = cleave.sub %arg2, %[[STEP]] : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
# NEST-NEXT: return %[[XNEW]], %[[VNEW]] : tensor<3xf64>, tensor<3xf64>
cases.add("momentum_nesterov_f64")(lambda: optimizer(
    "Momentum", ["V"], [[3]], elem=F64, alpha=0.95, beta=1.0, mode="nesterov",
    norm_coefficient=0.01))

# Two tensors: r = R / (1 + T * decay_factor) is built once, in f64, and cast
# to f32 for each; X_new = X - r * G_regularized / (Sqrt(H_new) + epsilon).
# ADAGRAD-LABEL: func.func @forward(
# ADAGRAD-SAME: %arg2: tensor<1xf32> {cleave.kind = "input", cleave.name = "X1"}, %arg3: tensor<2x2xf32> {cleave.kind = "input", cleave.name = "X2"}
# ADAGRAD-SAME: -> (tensor<1xf32> {cleave.name = "X1_new"}, tensor<2x2xf32> {cleave.name = "X2_new"}, tensor<1xf32> {cleave.name = "H1_new"}, tensor<2x2xf32> {cleave.name = "H2_new"})
# ADAGRAD: %[[T:.+]] = cleave.cast %arg1 {to = f64}
# ADAGRAD: %[[R64:.+]] = cleave.cast %arg0 {to = f64} : (tensor<f32>) -> tensor<f64>
# ADAGRAD-NEXT: %[[DECAY:.+]] = cleave.constant {value = dense<0.10000000149011612> : tensor<f64>} : tensor<f64>
# ADAGRAD-NEXT: %[[TD:.+]] = cleave.mul %[[T]], %[[DECAY]] : (tensor<f64>, tensor<f64>) -> tensor<f64>
# ADAGRAD-NEXT: %[[ONE:.+]] = cleave.constant {value = dense<1.000000e+00> : tensor<f64>} : tensor<f64>
# ADAGRAD-NEXT: %[[DEN:.+]] = cleave.add %[[ONE]], %[[TD]] : (tensor<f64>, tensor<f64>) -> tensor<f64>
# ADAGRAD-NEXT: %[[R:.+]] = cleave.div %[[R64]], %[[DEN]] : (tensor<f64>, tensor<f64>) -> tensor<f64>
# ADAGRAD: %[[G1:.+]] = cleave.add %{{.+}}, %arg4 : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
# ADAGRAD-NEXT: %[[SQ1:.+]] = cleave.mul %[[G1]], %[[G1]]
# ADAGRAD-NEXT: %[[H1:.+]] = cleave.add %arg6, %[[SQ1]] : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
# ADAGRAD-NEXT: %[[S1:.+]] = cleave.sqrt %[[H1]]
# ADAGRAD-NEXT: %[[EPS:.+]] = cleave.constant {value = dense<1.000000e-03> : tensor<f32>}
# ADAGRAD-NEXT: %[[A1:.+]] = cleave.add %[[S1]], %[[EPS]]
# ADAGRAD-NEXT: %[[R1:.+]] = cleave.cast %[[R]] {to = f32} : (tensor<f64>) -> tensor<f32>
# ADAGRAD-NEXT: %[[RG1:.+]] = cleave.mul %[[R1]], %[[G1]]
# ADAGRAD-NEXT: %[[D1:.+]] = cleave.div %[[RG1]], %[[A1]]
# ADAGRAD-NEXT: %[[X1:.+]] = cleave.sub %arg2, %[[D1]] : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
# ADAGRAD: %[[H2:.+]] = cleave.add %arg7, %{{.+}} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
# ADAGRAD: cleave.cast %[[R]] {to = f32}
# ADAGRAD: %[[X2:.+]] = cleave.sub %arg3, %{{.+}} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
# ADAGRAD-NEXT: return %[[X1]], %[[X2]], %[[H1]], %[[H2]]
cases.add("adagrad_multiple")(lambda: optimizer(
    "Adagrad", ["H"], [[1], [2, 2]], decay_factor=0.1, epsilon=1e-3, norm_coefficient=0.02))

# Every attribute at its default (alpha 0.9, beta 0.999, epsilon 1e-6,
# norm_coefficient 0, norm_coefficient_post 0: no final scaling).
# ADAM-LABEL: func.func @forward(
# ADAM: %[[POS:.+]] = cleave.greater %[[T:.+]], %{{.+}} : (tensor<f64>, tensor<f64>) -> tensor<i1>
# ADAM: %[[NORM:.+]] = cleave.constant {value = dense<0.000000e+00> : tensor<f32>}
# ADAM-NEXT: %[[NX:.+]] = cleave.mul %[[NORM]], %arg2
# ADAM-NEXT: %[[GREG:.+]] = cleave.add %[[NX]], %arg3
# V_new = alpha * V + (1 - alpha) * G_regularized
# ADAM-NEXT: %[[ALPHA:.+]] = cleave.constant {value = dense<0.899999976> : tensor<f32>}
# ADAM-NEXT: %[[AV:.+]] = cleave.mul %[[ALPHA]], %arg4
# ADAM-NEXT: %[[ALPHAC:.+]] = cleave.constant {value = dense<0.100000024> : tensor<f32>}
# ADAM-NEXT: %[[AG:.+]] = cleave.mul %[[ALPHAC]], %[[GREG]]
# ADAM-NEXT: %[[VNEW:.+]] = cleave.add %[[AV]], %[[AG]]
# H_new = beta * H + (1 - beta) * G_regularized * G_regularized
# ADAM-NEXT: %[[BETA:.+]] = cleave.constant {value = dense<9.990000e-01> : tensor<f32>}
# ADAM-NEXT: %[[BH:.+]] = cleave.mul %[[BETA]], %arg5
# ADAM-NEXT: %[[SQ:.+]] = cleave.mul %[[GREG]], %[[GREG]]
# ADAM-NEXT: %[[BETAC:.+]] = cleave.constant {value = dense<9.99987125E-4> : tensor<f32>}
# ADAM-NEXT: %[[BSQ:.+]] = cleave.mul %[[BETAC]], %[[SQ]]
# ADAM-NEXT: %[[HNEW:.+]] = cleave.add %[[BH]], %[[BSQ]]
# H_sqrt = Sqrt(H_new) + epsilon
# ADAM-NEXT: %[[HS:.+]] = cleave.sqrt %[[HNEW]]
# ADAM-NEXT: %[[EPS:.+]] = cleave.constant {value = dense<9.99999997E-7> : tensor<f32>}
# ADAM-NEXT: %[[HSQRT:.+]] = cleave.add %[[HS]], %[[EPS]]
# R_adjusted = T > 0 ? R * Sqrt(1 - beta^T) / (1 - alpha^T) : R, in f64
# ADAM-NEXT: %[[R:.+]] = cleave.cast %arg0 {to = f64}
# ADAM-NEXT: %[[ONE:.+]] = cleave.constant {value = dense<1.000000e+00> : tensor<f64>}
# ADAM-NEXT: %[[BETA64:.+]] = cleave.constant {value = dense<0.99900001287460327> : tensor<f64>}
# ADAM-NEXT: %[[BT:.+]] = cleave.pow %[[BETA64]], %[[T]] : (tensor<f64>, tensor<f64>) -> tensor<f64>
# ADAM-NEXT: %[[OMBT:.+]] = cleave.sub %[[ONE]], %[[BT]]
# ADAM-NEXT: %[[SQRT:.+]] = cleave.sqrt %[[OMBT]] : (tensor<f64>) -> tensor<f64>
# ADAM-NEXT: %[[RS:.+]] = cleave.mul %[[R]], %[[SQRT]]
# ADAM-NEXT: %[[ALPHA64:.+]] = cleave.constant {value = dense<0.89999997615814208> : tensor<f64>}
# ADAM-NEXT: %[[AT:.+]] = cleave.pow %[[ALPHA64]], %[[T]]
# ADAM-NEXT: %[[OMAT:.+]] = cleave.sub %[[ONE]], %[[AT]]
# ADAM-NEXT: %[[CORR:.+]] = cleave.div %[[RS]], %[[OMAT]]
# ADAM-NEXT: %[[RADJ:.+]] = cleave.where %[[POS]], %[[CORR]], %[[R]] : (tensor<i1>, tensor<f64>, tensor<f64>) -> tensor<f64>
# X_new = X - R_adjusted * (V_new / H_sqrt)
# ADAM-NEXT: %[[DIR:.+]] = cleave.div %[[VNEW]], %[[HSQRT]]
# ADAM-NEXT: %[[RADJ32:.+]] = cleave.cast %[[RADJ]] {to = f32} : (tensor<f64>) -> tensor<f32>
# ADAM-NEXT: %[[STEP:.+]] = cleave.mul %[[RADJ32]], %[[DIR]]
# ADAM-NEXT: %[[XNEW:.+]] = cleave.sub %arg2, %[[STEP]]
# ADAM-NEXT: return %[[XNEW]], %[[VNEW]], %[[HNEW]] : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
cases.add("adam_defaults")(lambda: optimizer("Adam", ["V", "H"], [[3]]))

# Two tensors: R_adjusted built once (one pair of pows); X_final =
# (1 - norm_coefficient_post) * X_new for each.
# ADAMMULTI-LABEL: func.func @forward(
# ADAMMULTI-COUNT-2: cleave.pow
# ADAMMULTI-NOT: cleave.pow
# ADAMMULTI: %[[POST1:.+]] = cleave.constant {value = dense<9.800000e-01> : tensor<f32>}
# ADAMMULTI-NEXT: %[[XF1:.+]] = cleave.mul %[[POST1]], %{{.+}} : (tensor<f32>, tensor<2xf32>) -> tensor<2xf32>
# ADAMMULTI-NOT: cleave.pow
# ADAMMULTI: %[[POST2:.+]] = cleave.constant {value = dense<9.800000e-01> : tensor<f32>}
# ADAMMULTI-NEXT: %[[XF2:.+]] = cleave.mul %[[POST2]], %{{.+}} : (tensor<f32>, tensor<1x2xf32>) -> tensor<1x2xf32>
# ADAMMULTI-NEXT: return %[[XF1]], %[[XF2]], {{.+}} : tensor<2xf32>, tensor<1x2xf32>, tensor<2xf32>, tensor<1x2xf32>, tensor<2xf32>, tensor<1x2xf32>
cases.add("adam_multiple_post")(lambda: optimizer(
    "Adam", ["V", "H"], [[2], [1, 2]], alpha=0.85, beta=0.9, norm_coefficient_post=0.02))


# ai.onnx and the training domain together: the gradient input comes from an
# ai.onnx node, the optimizer output feeds another.
# MIXED-LABEL: func.func @forward(
# MIXED: %[[G:.+]] = cleave.neg %arg3 : (tensor<4xf32>) -> tensor<4xf32>
# MIXED: %[[GREG:.+]] = cleave.add %{{.+}}, %[[G]]
# MIXED: %[[XNEW:.+]] = cleave.sub %arg2, %{{.+}} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
# MIXED-NEXT: %[[OUT:.+]] = cleave.relu %[[XNEW]]
# MIXED-NEXT: return %[[OUT]], %{{.+}} : tensor<4xf32>, tensor<4xf32>
@cases.add("with_ai_onnx")
def _():
    nodes = [helper.make_node("Neg", ["D"], ["G"]),
             helper.make_node("Adagrad", ["R", "T", "X", "G", "H"], ["X_new", "H_new"],
                              domain=TRAINING),
             helper.make_node("Relu", ["X_new"], ["Y"])]
    return training_model(
        nodes, [("R", F32, []), ("T", I64, []), ("X", F32, [4]), ("D", F32, [4]),
                ("H", F32, [4])], [("Y", F32, [4]), ("H_new", F32, [4])], default_opset=17)


# Gradient of d = (a + b) * a: dd/da = (a + b) + a, dd/db = a. The seed is a
# scalar 1; Mul's rule gives each operand the seed times the other (in an
# order of its own), and Add passes dd/dc on to both a and b.
# GRAD-LABEL: func.func @forward(%arg0: tensor<f32> {{.*}}"a"}, %arg1: tensor<f32> {{.*}}"b"}) -> (tensor<f32> {cleave.name = "d"}, tensor<f32> {cleave.name = "dd_da"}, tensor<f32> {cleave.name = "dd_db"})
# GRAD-NEXT: %[[C:.+]] = cleave.add %arg0, %arg1
# GRAD-NEXT: %[[D:.+]] = cleave.mul %[[C]], %arg0
# GRAD-NEXT: %[[SEED:.+]] = cleave.constant {value = dense<1.000000e+00> : tensor<f32>} : tensor<f32>
# GRAD-DAG: %[[DA1:.+]] = cleave.mul %[[SEED]], %[[C]]
# GRAD-DAG: %[[DC:.+]] = cleave.mul %[[SEED]], %arg0
# GRAD: %[[DA:.+]] = cleave.add %[[DA1]], %[[DC]]
# GRAD-NEXT: return %[[D]], %[[DA]], %[[DC]]
@cases.add("gradient")
def _():
    nodes = [helper.make_node("Add", ["a", "b"], ["c"]),
             helper.make_node("Mul", ["c", "a"], ["d"]),
             helper.make_node("Gradient", ["a", "b"], ["dd_da", "dd_db"], xs=["a", "b"], y="d",
                              domain=TRAINING)]
    return training_model(nodes, [("a", F32, []), ("b", F32, [])],
                          [("d", F32, []), ("dd_da", F32, []), ("dd_db", F32, [])],
                          default_opset=17)


# Gradient at inputs other than the named tensors: the ops between xs/zs and
# y are rebuilt on copies of the inputs (a1 for a, b for zs's b) and
# differentiated there, dd/da = 2 a1 b; the rebuilt ops that no rule reads are
# removed as dead, and d itself stays computed at a.
# GRADAT-LABEL: func.func @forward(%arg0: tensor<2xf32> {{.*}}"a"}, %arg1: tensor<2xf32> {{.*}}"b"}, %arg2: tensor<2xf32> {{.*}}"a1"})
# GRADAT-NEXT: %[[Q:.+]] = cleave.mul %arg0, %arg0
# GRADAT-NEXT: %[[S:.+]] = cleave.mul %[[Q]], %arg1
# GRADAT-NEXT: %[[D:.+]] = cleave.reduce_sum %[[S]]
# GRADAT-NEXT: %[[A1:.+]] = cleave.identity %arg2
# GRADAT-NEXT: %[[B:.+]] = cleave.identity %arg1
# GRADAT: %[[DQ:.+]] = cleave.mul %{{.+}}, %[[B]]
# GRADAT-NEXT: cleave.mul %[[DQ]], %[[A1]]
# GRADAT-NEXT: cleave.mul %[[DQ]], %[[A1]]
# GRADAT-NEXT: %[[G:.+]] = cleave.add
# GRADAT-NEXT: return %[[D]], %[[G]] : tensor<f32>, tensor<2xf32>
@cases.add("gradient_at_inputs")
def _():
    nodes = [helper.make_node("Mul", ["a", "a"], ["q"]),
             helper.make_node("Mul", ["q", "b"], ["s"]),
             helper.make_node("ReduceSum", ["s"], ["d"], keepdims=0),
             helper.make_node("Gradient", ["a1", "b"], ["dd_da"], xs=["a"], zs=["b"], y="d",
                              domain=TRAINING)]
    return training_model(nodes, [("a", F32, [2]), ("b", F32, [2]), ("a1", F32, [2])],
                          [("d", F32, []), ("dd_da", F32, [2])], default_opset=17)


# A model without ai.onnx prints its opset as "-".
# SUMMARY: model: {{.*}}momentum_standard.onnx (IR version 8, opset -, producer cleave-tests)
# SUMMARY: ops: {{.*}}(7 kinds)

if __name__ == "__main__":
    cases.main()
