# training_info (IR version 7) is read and kept on the module for the
# training-step builder, and shown by --summary. The model follows the ONNX
# spec's example: a Gradient node and an Adagrad update with update_binding.
#
# RUN: %python %s %t.onnx
# RUN: cleave import %t.onnx | FileCheck %s
# RUN: cleave import %t.onnx --summary | FileCheck %s --check-prefix=SUMMARY

# CHECK: module attributes {
# CHECK-SAME: cleave.training_info = [{
# CHECK-SAME: algorithm = [{attributes = {xs = ["W"], y = "loss"}, domain = "ai.onnx.preview.training", inputs = ["X", "W"], name = "grad", op = "Gradient", outputs = ["G"]},
# CHECK-SAME: {attributes = {epsilon = 9.99999997E-7 : f32}, domain = "ai.onnx.preview.training", inputs = ["R", "T", "W", "G", "H"], name = "adagrad", op = "Adagrad", outputs = ["W_new", "H_new"]}]
# CHECK-SAME: algorithm_initializers = ["R", "T"]
# CHECK-SAME: update_binding = {H = "H_new", W = "W_new"}
# CHECK-LABEL: func.func @forward
# CHECK-SAME: {cleave.kind = "param", cleave.name = "W"}
# CHECK-SAME: {cleave.kind = "param", cleave.name = "H"}

# SUMMARY: training:   1 training_info algorithm(s)
# SUMMARY-NEXT: algorithm: 2 nodes; Gradient Adagrad
# SUMMARY-NEXT: update_binding: H <- H_new W <- W_new

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

main = helper.make_graph(
    [helper.make_node("MatMul", ["X", "W"], ["Y"], name="mm"),
     helper.make_node("Mul", ["Y", "Y"], ["Y2"], name="sq"),
     helper.make_node("ReduceSum", ["Y2"], ["loss"], name="sum", keepdims=0)],
    "main",
    [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 2])],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
    [numpy_helper.from_array(np.ones((2, 1), np.float32), "W"),
     numpy_helper.from_array(np.zeros((2, 1), np.float32), "H")])

algorithm = helper.make_graph(
    [helper.make_node("Gradient", ["X", "W"], ["G"], name="grad",
                      domain="ai.onnx.preview.training", xs=["W"], y="loss"),
     helper.make_node("Adagrad", ["R", "T", "W", "G", "H"], ["W_new", "H_new"],
                      name="adagrad", domain="ai.onnx.preview.training", epsilon=1e-6)],
    "algorithm", [], [],
    [numpy_helper.from_array(np.array(0.1, np.float32), "R"),
     numpy_helper.from_array(np.array(0, np.int64), "T")])

model = helper.make_model(
    main, opset_imports=[helper.make_opsetid("", 17),
                         helper.make_opsetid("ai.onnx.preview.training", 1)])
model.training_info.append(helper.make_training_info(
    algorithm, [("W", "W_new"), ("H", "H_new")], None, []))
onnx.save(model, sys.argv[1])
