# Gradients of Conv (input, weights, bias), MaxPool and AveragePool against
# central finite differences (float64, onnx.reference): test/lib/gradcheck.py.
# Every tensor is a parameter here, so the input gradients (conv_grad_input,
# max_pool_grad, average_pool_grad) are checked as well as the weights'
# (conv_grad_weight) and the bias's. Random normal data has no ties, so the
# max-pool windows have one maximum each and finite differences are exact.
#
# RUN: %python %s %t

import numpy as np
from onnx import helper

from gradcheck import Cases, rng

r = rng(11)
cases = Cases()
N = helper.make_node

# Convolution: 1-D and 2-D, with bias, strides, asymmetric pads, dilations
# and groups.
cases.add("conv1d_bias_stride_pad_dilation",
          nodes=[N("Conv", ["x", "w", "b"], ["y"], strides=[2], pads=[1, 2], dilations=[2])],
          params={"x": r.standard_normal((2, 3, 9)), "w": r.standard_normal((4, 3, 3)),
                  "b": r.standard_normal(4)},
          outputs=["y"])
cases.add("conv1d_group2_no_bias",
          nodes=[N("Conv", ["x", "w"], ["y"], group=2, pads=[2, 0])],
          params={"x": r.standard_normal((1, 4, 7)), "w": r.standard_normal((6, 2, 3))},
          outputs=["y"])
cases.add("conv2d_bias_stride_pad_dilation",
          nodes=[N("Conv", ["x", "w", "b"], ["y"], strides=[2, 1], pads=[1, 0, 2, 1],
                   dilations=[1, 2])],
          params={"x": r.standard_normal((2, 2, 6, 5)), "w": r.standard_normal((3, 2, 3, 2)),
                  "b": r.standard_normal(3)},
          outputs=["y"])
cases.add("conv2d_group2_bias",
          nodes=[N("Conv", ["x", "w", "b"], ["y"], group=2, strides=[2, 2], pads=[1, 1, 1, 1])],
          params={"x": r.standard_normal((2, 4, 5, 5)), "w": r.standard_normal((4, 2, 3, 3)),
                  "b": r.standard_normal(4)},
          outputs=["y"])
# Stride 3 over 7: the last input row and column are read by no window, so
# their gradient is zero (conv_grad_input's shape attribute keeps them).
cases.add("conv2d_pointwise_and_unread_edge",
          nodes=[N("Conv", ["x", "w"], ["y"], strides=[3, 3]),
                 N("Conv", ["x", "v"], ["z"])],
          params={"x": r.standard_normal((1, 2, 7, 7)), "w": r.standard_normal((2, 2, 2, 2)),
                  "v": r.standard_normal((3, 2, 1, 1))},
          outputs=["y", "z"])

# Max pooling: overlapping windows (stride below the kernel), pads, ceil
# mode, dilations, 1-D.
cases.add("max_pool2d_overlap_pads",
          nodes=[N("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 1],
                   pads=[1, 1, 1, 1])],
          params={"x": r.standard_normal((2, 2, 5, 6))}, outputs=["y"])
cases.add("max_pool2d_ceil",
          nodes=[N("MaxPool", ["x"], ["y"], kernel_shape=[3, 2], strides=[2, 2],
                   pads=[1, 0, 0, 1], ceil_mode=1)],
          params={"x": r.standard_normal((1, 2, 6, 7))}, outputs=["y"])
cases.add("max_pool2d_dilated",
          nodes=[N("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[1, 2],
                   dilations=[2, 1])],
          params={"x": r.standard_normal((1, 2, 5, 6))}, outputs=["y"])
cases.add("max_pool1d_ceil_overlap",
          nodes=[N("MaxPool", ["x"], ["y"], kernel_shape=[3], strides=[2], pads=[1, 1],
                   ceil_mode=1)],
          params={"x": r.standard_normal((2, 3, 8))}, outputs=["y"])

# Average pooling: count_include_pad 0 and 1, with pads, and ceil mode where
# the last window runs past the end pads (its divisor counts only what lies
# inside the padded input); dilations need opset 19.
for include in (0, 1):
    cases.add(f"average_pool2d_pads_include{include}",
              nodes=[N("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                       pads=[1, 1, 1, 1], count_include_pad=include)],
              params={"x": r.standard_normal((2, 2, 5, 6))}, outputs=["y"])
    cases.add(f"average_pool2d_ceil_include{include}",
              nodes=[N("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                       pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=include)],
              params={"x": r.standard_normal((1, 2, 6, 6))}, outputs=["y"])
    cases.add(f"average_pool1d_ceil_include{include}",
              nodes=[N("AveragePool", ["x"], ["y"], kernel_shape=[2], strides=[3], pads=[0, 1],
                       ceil_mode=1, count_include_pad=include)],
              params={"x": r.standard_normal((2, 2, 8))}, outputs=["y"])
cases.add("average_pool2d_ceil_no_pads",
          nodes=[N("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                   ceil_mode=1)],
          params={"x": r.standard_normal((1, 1, 4, 4))}, outputs=["y"])
cases.add("average_pool2d_dilated_include1",
          nodes=[N("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2],
                   pads=[1, 0, 0, 1], dilations=[2, 2], count_include_pad=1)],
          params={"x": r.standard_normal((1, 2, 6, 6))}, outputs=["y"], opset=19)

# A small network: conv -> relu -> max pool -> conv (group 2) -> average pool.
cases.add("conv_pool_chain",
          nodes=[N("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
                 N("Relu", ["c1"], ["r1"]),
                 N("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
                 N("Conv", ["p1", "w2"], ["c2"], group=2, pads=[0, 0, 1, 1]),
                 N("AveragePool", ["c2"], ["y"], kernel_shape=[2, 2], count_include_pad=1,
                   pads=[0, 0, 1, 1])],
          params={"x": r.standard_normal((1, 2, 5, 5)), "w1": r.standard_normal((4, 2, 3, 3)),
                  "b1": r.standard_normal(4), "w2": r.standard_normal((4, 2, 2, 2))},
          outputs=["y"])

if __name__ == "__main__":
    cases.main()
