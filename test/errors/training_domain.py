# Refusals in the training domain ai.onnx.preview.training: each is one error
# line naming the file, the node, the op and the domain, exit 1. Attribute
# values and element types the ONNX spec does not allow, inputs that do not
# group, a domain version other than 1, and Gradient nodes cleave cannot
# evaluate. Other unknown domains stay refused (unsupported-domain.test).
#
# RUN: rm -rf %t && mkdir -p %t && %python %s --all %t
# RUN: not cleave import %t/momentum_mode_foo.onnx 2>&1 | FileCheck %s --check-prefix=MODE
# RUN: not cleave import %t/momentum_no_alpha.onnx 2>&1 | FileCheck %s --check-prefix=NOALPHA
# RUN: not cleave import %t/adam_int_alpha.onnx 2>&1 | FileCheck %s --check-prefix=INTALPHA
# RUN: not cleave import %t/adagrad_i32_x.onnx 2>&1 | FileCheck %s --check-prefix=I32X
# RUN: not cleave import %t/adagrad_f16_x.onnx 2>&1 | FileCheck %s --check-prefix=F16X
# RUN: not cleave import %t/adagrad_f32_t.onnx 2>&1 | FileCheck %s --check-prefix=F32T
# RUN: not cleave import %t/adagrad_vector_r.onnx 2>&1 | FileCheck %s --check-prefix=VECR
# RUN: not cleave import %t/adam_seven_inputs.onnx 2>&1 | FileCheck %s --check-prefix=SEVEN
# RUN: not cleave import %t/momentum_g_shape.onnx 2>&1 | FileCheck %s --check-prefix=GSHAPE
# RUN: not cleave import %t/training_version_2.onnx 2>&1 | FileCheck %s --check-prefix=VERSION
# RUN: not cleave import %t/training_unknown_op.onnx 2>&1 | FileCheck %s --check-prefix=UNKNOWN
# RUN: not cleave import %t/no_ai_onnx_opset.onnx 2>&1 | FileCheck %s --check-prefix=NOOPSET
# RUN: not cleave import %t/gradient_unknown_y.onnx 2>&1 | FileCheck %s --check-prefix=GRADY
# RUN: not cleave import %t/gradient_y_later.onnx 2>&1 | FileCheck %s --check-prefix=GRADLATER
# RUN: not cleave import %t/gradient_int_x.onnx 2>&1 | FileCheck %s --check-prefix=GRADINT
# RUN: not cleave import %t/gradient_input_count.onnx 2>&1 | FileCheck %s --check-prefix=GRADCOUNT
# RUN: not cleave import %t/gradient_input_type.onnx 2>&1 | FileCheck %s --check-prefix=GRADTYPE
# RUN: not cleave import %t/gradient_dependent_xs.onnx 2>&1 | FileCheck %s --check-prefix=GRADDEP
# RUN: not cleave import %t/gradient_constant_x.onnx 2>&1 | FileCheck %s --check-prefix=GRADCONST

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnx_models import Cases

F32, F16, F64, I32, I64 = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE,
                           TensorProto.INT32, TensorProto.INT64)
TRAINING = "ai.onnx.preview.training"
cases = Cases()


def model(nodes, inputs, outputs, opsets=((TRAINING, 1),), initializers=(), check=True):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs],
                              [numpy_helper.from_array(v, k) for k, v in initializers])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets],
                          producer_name="cleave-tests")
    m.ir_version = 8
    if check:
        onnx.checker.check_model(m)
    return m


def optimizer(op, groups, x_elem=F32, r=("R", F32, []), t=("T", I64, []), g_shape=(2,),
              check=True, opsets=((TRAINING, 1),), **attrs):
    inputs = [r, t, ("X", x_elem, [2]), ("G", x_elem, list(g_shape))]
    inputs += [(s, x_elem, [2]) for s in groups]
    outputs = [("X_new", x_elem, [2])] + [(s + "_new", x_elem, [2]) for s in groups]
    node = helper.make_node(op, [i[0] for i in inputs], [o[0] for o in outputs],
                            name=op.lower(), domain=TRAINING, **attrs)
    return model([node], inputs, outputs, opsets=opsets, check=check)


MOMENTUM = dict(alpha=0.9, beta=0.1, norm_coefficient=0.0)

# MODE: cleave: error: {{.*}}momentum_mode_foo.onnx: node 'momentum' (Momentum, domain 'ai.onnx.preview.training', opset 1): mode 'foo' is not one of standard, nesterov
cases.add("momentum_mode_foo")(lambda: optimizer("Momentum", ["V"], mode="foo", **MOMENTUM))

# NOALPHA: node 'momentum' (Momentum, domain 'ai.onnx.preview.training', opset 1): needs the float attribute 'alpha'
cases.add("momentum_no_alpha")(lambda: optimizer(
    "Momentum", ["V"], mode="standard", beta=0.1, norm_coefficient=0.0, check=False))

# INTALPHA: node 'adam' (Adam, domain 'ai.onnx.preview.training', opset 1): attribute 'alpha' must be a float
cases.add("adam_int_alpha")(lambda: optimizer("Adam", ["V", "H"], alpha=1, check=False))

# I32X: node 'adagrad' (Adagrad, domain 'ai.onnx.preview.training', opset 1): X 'X' is 'tensor<2xi32>': the optimizers take float or double tensors
cases.add("adagrad_i32_x")(lambda: optimizer("Adagrad", ["H"], x_elem=I32, check=False))

# F16X: node 'adagrad' (Adagrad, domain 'ai.onnx.preview.training', opset 1): X 'X' is 'tensor<2xf16>': the optimizers take float or double tensors
cases.add("adagrad_f16_x")(lambda: optimizer("Adagrad", ["H"], x_elem=F16, check=False))

# F32T: node 'adagrad' (Adagrad, domain 'ai.onnx.preview.training', opset 1): T 'T' is 'tensor<f32>', not an int64 scalar
cases.add("adagrad_f32_t")(lambda: optimizer("Adagrad", ["H"], t=("T", F32, []), check=False))

# VECR: node 'adagrad' (Adagrad, domain 'ai.onnx.preview.training', opset 1): R 'R' is 'tensor<1xf32>', not a float or double scalar
cases.add("adagrad_vector_r")(lambda: optimizer("Adagrad", ["H"], r=("R", F32, [1])))

# SEVEN: node 'adam' (Adam, domain 'ai.onnx.preview.training', opset 1): takes R, T and 4 groups of equally many tensors, got 7 inputs
cases.add("adam_seven_inputs")(lambda: optimizer("Adam", ["V", "H", "W"], check=False))

# GSHAPE: node 'momentum' (Momentum, domain 'ai.onnx.preview.training', opset 1): input 'G' is 'tensor<3xf32>', but X 'X' is 'tensor<2xf32>': each X's gradient and state must have its type
cases.add("momentum_g_shape")(lambda: optimizer(
    "Momentum", ["V"], g_shape=(3,), mode="standard", **MOMENTUM))

# VERSION: node 'adagrad' (Adagrad, domain 'ai.onnx.preview.training', opset 2): cleave imports version 1 of domain 'ai.onnx.preview.training'
cases.add("training_version_2")(lambda: optimizer(
    "Adagrad", ["H"], opsets=((TRAINING, 2),), check=False))

# UNKNOWN: node 'rmsprop' (RMSProp, domain 'ai.onnx.preview.training', opset 1): unsupported operator
cases.add("training_unknown_op")(lambda: model(
    [helper.make_node("RMSProp", ["X"], ["Y"], name="rmsprop", domain=TRAINING)],
    [("X", F32, [2])], [("Y", F32, [2])], check=False))

# Without an ai.onnx opset, only training-domain nodes are accepted.
# NOOPSET: cleave: error: {{.*}}no_ai_onnx_opset.onnx: the model imports no opset of domain 'ai.onnx'
cases.add("no_ai_onnx_opset")(lambda: model(
    [helper.make_node("Relu", ["X"], ["Y"])], [("X", F32, [2])], [("Y", F32, [2])],
    check=False))


def gradient_model(nodes, inputs, outputs, initializers=(), check=True):
    return model(nodes, inputs, outputs, opsets=(("", 17), (TRAINING, 1)),
                 initializers=initializers, check=check)


def G(inputs, outputs, **attrs):
    return helper.make_node("Gradient", inputs, outputs, name="grad", domain=TRAINING, **attrs)


# GRADY: node 'grad' (Gradient, domain 'ai.onnx.preview.training', opset 1): y 'nope' is not a graph input, an initializer or an output of an earlier node
cases.add("gradient_unknown_y")(lambda: gradient_model(
    [helper.make_node("Mul", ["a", "a"], ["y"]), G(["a"], ["da"], xs=["a"], y="nope")],
    [("a", F32, [])], [("y", F32, []), ("da", F32, [])]))

# A valid topological order may put the Gradient node before y's producer.
# GRADLATER: node 'grad' (Gradient, domain 'ai.onnx.preview.training', opset 1): y 'y' is not a graph input, an initializer or an output of an earlier node
cases.add("gradient_y_later")(lambda: gradient_model(
    [G(["a"], ["da"], xs=["a"], y="y"), helper.make_node("Mul", ["a", "a"], ["y"])],
    [("a", F32, [])], [("y", F32, []), ("da", F32, [])]))

# GRADINT: node 'grad' (Gradient, domain 'ai.onnx.preview.training', opset 1): xs 'k' is 'tensor<2xi64>': only float tensors have gradients
cases.add("gradient_int_x")(lambda: gradient_model(
    [helper.make_node("Cast", ["k"], ["kf"], to=F32), helper.make_node("Mul", ["kf", "a"], ["p"]),
     helper.make_node("ReduceSum", ["p"], ["y"], keepdims=0),
     G(["k"], ["dk"], xs=["k"], y="y")],
    [("a", F32, [2]), ("k", I64, [2])], [("y", F32, []), ("dk", F32, [2])]))

# GRADCOUNT: node 'grad' (Gradient, domain 'ai.onnx.preview.training', opset 1): takes one input per name in xs and zs (2), got 1
cases.add("gradient_input_count")(lambda: gradient_model(
    [helper.make_node("Mul", ["a", "b"], ["y"]), G(["a"], ["da"], xs=["a"], zs=["b"], y="y")],
    [("a", F32, []), ("b", F32, [])], [("y", F32, []), ("da", F32, [])]))

# GRADTYPE: node 'grad' (Gradient, domain 'ai.onnx.preview.training', opset 1): input 'a1' is 'tensor<3xf32>', but xs 'a', the tensor it gives a value for, is 'tensor<2xf32>'
cases.add("gradient_input_type")(lambda: gradient_model(
    [helper.make_node("ReduceSum", ["a"], ["y"], keepdims=0),
     G(["a1"], ["da"], xs=["a"], y="y")],
    [("a", F32, [2]), ("a1", F32, [3])], [("y", F32, []), ("da", F32, [2])]))

# ONNX: a tensor computed from others of xs and zs cannot be among them.
# GRADDEP: node 'grad' (Gradient, domain 'ai.onnx.preview.training', opset 1): 'h' of xs and zs is computed from another of them: they must be independent
cases.add("gradient_dependent_xs")(lambda: gradient_model(
    [helper.make_node("Mul", ["w", "w"], ["h"]), helper.make_node("Mul", ["h", "w"], ["y"]),
     G(["w", "h"], ["dw", "dh"], xs=["w", "h"], y="y")],
    [("w", F32, [])], [("y", F32, []), ("dw", F32, []), ("dh", F32, [])]))

# Cleave folds ops on constants at import: y no longer depends on them.
# GRADCONST: node 'grad' (Gradient, domain 'ai.onnx.preview.training', opset 1): xs 'c' is a constant, folded into the ops that read it: cleave cannot differentiate with respect to it or evaluate at another value
cases.add("gradient_constant_x")(lambda: gradient_model(
    [helper.make_node("Constant", [], ["c"], value_float=2.0),
     helper.make_node("Mul", ["c", "c"], ["y"]), G(["c"], ["dc"], xs=["c"], y="y")],
    [], [("y", F32, []), ("dc", F32, [])]))

if __name__ == "__main__":
    cases.main()
