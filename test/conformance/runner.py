# What cleave conformance counts as what, on cases written here: a pass; an
# explicit refusal at import (a skip, counted under its reason: an operator,
# an element type, a form such as a decomposition's attribute); a wrong
# output and a program that exits non-zero (failures, not skips); and with
# --expected, every case whose status differs from the file's, and every
# case the file names that is not there.
#
# RUN: rm -rf %t && %python %s %t
# RUN: not cleave conformance --expected %t/expected.txt %t/cases > %t/out
# RUN: FileCheck %s < %t/out
# CHECK: PASS test_add_int8
# CHECK: SKIP test_exp_f16: Exp element type f16: node #0 (Exp, domain 'ai.onnx', opset 17): 'cleave.exp' op operand #0 must be
# CHECK: FAIL test_exp_wrong_output: test_data_set_0: output 'y' element 0: got 2.718282, expected 1.000000
# CHECK: FAIL test_gather_out_of_range: the program exited with 1: cleave: error: kernel gather:
# CHECK: SKIP test_isnan_f16: IsNaN element type f16: node #0 (IsNaN, domain 'ai.onnx', opset 17): input 'x' is 'tensor<2xf16>': cleave computes IsNaN on f32 and f64 only
# CHECK: SKIP test_scatternd_mul: ScatterND attribute reduction: node #0 (ScatterND, domain 'ai.onnx', opset 17): attribute 'reduction' 'mul' is not supported
# CHECK: 1 passed, 2 failed, 3 skipped
# CHECK-NEXT: skipped by reason:
# CHECK-NEXT: 1 Exp element type f16
# CHECK-NEXT: 1 IsNaN element type f16
# CHECK-NEXT: 1 ScatterND attribute reduction
# CHECK-NEXT: DIFFERS test_exp_f16: expected 'skip: unsupported operator Exp', got 'skip: Exp element type f16'
# CHECK-NEXT: DIFFERS test_exp_wrong_output: expected 'pass', got 'fail'
# CHECK-NEXT: DIFFERS test_gather_out_of_range: not in the expected statuses, got 'fail'
# CHECK-NEXT: DIFFERS test_gone: expected 'pass', but there is no such case
# CHECK-NEXT: 4 differ from {{.*}}expected.txt
#
# --record writes what --expected then finds the same:
# RUN: rm -rf %t/cases/test_exp_wrong_output %t/cases/test_gather_out_of_range
# RUN: cleave conformance --record %t/recorded.txt %t/cases > /dev/null
# RUN: FileCheck %s --check-prefix=RECORDED < %t/recorded.txt
# RECORDED: test_add_int8 pass
# RECORDED-NEXT: test_exp_f16 skip: Exp element type f16
# RECORDED-NEXT: test_isnan_f16 skip: IsNaN element type f16
# RECORDED-NEXT: test_scatternd_mul skip: ScatterND attribute reduction
# RUN: cleave conformance --expected %t/recorded.txt %t/cases | FileCheck %s --check-prefix=SAME
# SAME: 0 differ from

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def write_case(root, name, node, inputs, outputs, feeds, expected):
    """A backend-test case: model.onnx and test_data_set_0 with its .pb files."""
    graph = helper.make_graph([node], name,
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    data = os.path.join(root, name, "test_data_set_0")
    os.makedirs(data)
    onnx.save(model, os.path.join(root, name, "model.onnx"))
    for kind, arrays in (("input", feeds), ("output", expected)):
        for i, (tensor_name, array) in enumerate(arrays):
            with open(os.path.join(data, f"{kind}_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(array, tensor_name).SerializeToString())


def main():
    out = sys.argv[1]
    cases = os.path.join(out, "cases")
    a = np.array([127, -128, 5], np.int8)
    b = np.array([1, -1, 3], np.int8)
    write_case(cases, "test_add_int8", helper.make_node("Add", ["a", "b"], ["y"]),
               [("a", TensorProto.INT8, [3]), ("b", TensorProto.INT8, [3])],
               [("y", TensorProto.INT8, [3])], [("a", a), ("b", b)], [("y", a + b)])
    ones = np.ones([2], np.float32)
    write_case(cases, "test_exp_wrong_output", helper.make_node("Exp", ["x"], ["y"]),
               [("x", TensorProto.FLOAT, [2])], [("y", TensorProto.FLOAT, [2])],
               [("x", ones)], [("y", ones)])
    halves = np.ones([2], np.float16)
    write_case(cases, "test_exp_f16", helper.make_node("Exp", ["x"], ["y"]),
               [("x", TensorProto.FLOAT16, [2])], [("y", TensorProto.FLOAT16, [2])],
               [("x", halves)], [("y", np.exp(halves))])
    write_case(cases, "test_gather_out_of_range", helper.make_node("Gather", ["x", "i"], ["y"]),
               [("x", TensorProto.FLOAT, [2]), ("i", TensorProto.INT64, [1])],
               [("y", TensorProto.FLOAT, [1])],
               [("x", ones), ("i", np.array([5], np.int64))], [("y", ones[:1])])
    write_case(cases, "test_isnan_f16", helper.make_node("IsNaN", ["x"], ["y"]),
               [("x", TensorProto.FLOAT16, [2])], [("y", TensorProto.BOOL, [2])],
               [("x", halves)], [("y", np.isnan(halves))])
    write_case(cases, "test_scatternd_mul",
               helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction="mul"),
               [("x", TensorProto.FLOAT, [2]), ("i", TensorProto.INT64, [1, 1]),
                ("u", TensorProto.FLOAT, [1])], [("y", TensorProto.FLOAT, [2])],
               [("x", ones), ("i", np.array([[1]], np.int64)), ("u", ones[:1])], [("y", ones)])
    with open(os.path.join(out, "expected.txt"), "w") as f:
        f.write("# a comment\n"
                "test_add_int8 pass\n"
                "test_exp_wrong_output pass\n"
                "test_exp_f16 skip: unsupported operator Exp\n"
                "test_isnan_f16 skip: IsNaN element type f16\n"
                "test_scatternd_mul skip: ScatterND attribute reduction\n"
                "test_gone pass\n")


if __name__ == "__main__":
    main()
