# ONNX 1.18 multi-device annotations (IR version 11) are read: the model's
# DeviceConfigurationProto list, and each node's sharding specs and pipeline
# stage, kept on the ops the node produced and counted by --summary.
#
# RUN: %python %s %t.onnx
# RUN: cleave import %t.onnx | FileCheck %s
# RUN: cleave import %t.onnx --summary | FileCheck %s --check-prefix=SUMMARY

# CHECK: cleave.configurations = [{devices = ["gpu0", "gpu1"], name = "pair", num_devices = 2 : i64}]
# CHECK-LABEL: func.func @forward
# CHECK: cleave.matmul
# CHECK-SAME: cleave.device_config = [{configuration = "pair", pipeline_stage = 0 : i64,
# CHECK-SAME: sharding = [{device_groups = {}, devices = [0, 1], sharded_dims = [{axis = 1 : i64, num_shards = [2]}], tensor = "W"}]}]
# CHECK: cleave.relu
# CHECK-SAME: cleave.device_config = [{configuration = "pair", pipeline_stage = 1 : i64,
# CHECK-SAME: sharding = [{device_groups = {"-1" = [0, 1]}, devices = [-1], sharded_dims = [], tensor = "y"}]}]

# SUMMARY: devices:    pair (2 devices); 2 ops annotated with sharding or pipeline stage

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def annotate(node, stage, tensor, devices, sharded_axis=None, groups=None):
    config = node.device_configurations.add()
    config.configuration_id = "pair"
    config.pipeline_stage = stage
    spec = config.sharding_spec.add()
    spec.tensor_name = tensor
    spec.device.extend(devices)
    for key, value in (groups or {}).items():
        entry = spec.index_to_device_group_map.add()
        entry.key = key
        entry.value.extend(value)
    if sharded_axis is not None:
        dim = spec.sharded_dim.add()
        dim.axis = sharded_axis
        dim.simple_sharding.add().num_shards = 2


matmul = helper.make_node("MatMul", ["x", "W"], ["h"], name="mm")
annotate(matmul, 0, "W", [0, 1], sharded_axis=1)
relu = helper.make_node("Relu", ["h"], ["y"], name="act")
annotate(relu, 1, "y", [-1], groups={-1: [0, 1]})

graph = helper.make_graph(
    [matmul, relu], "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6])],
    [numpy_helper.from_array(np.ones((4, 6), np.float32), "W")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=11)
config = model.configuration.add()
config.name = "pair"
config.num_devices = 2
config.device.extend(["gpu0", "gpu1"])
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
