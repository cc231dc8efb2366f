//===- NNOps.cpp - softmax, normalization, convolution, pooling, losses --===//

#include "compiler/onnx/NodeContext.h"

using namespace mlir;

namespace cleave {
namespace {

template <typename OpTy> Results importAxisOp(NodeContext &n) {
  auto axis = n.normalizeAxis(n.getInt("axis", -1), n.rank(n.input(0)));
  if (failed(axis))
    return failure();
  return n.build<OpTy>(n.input(0), {n.i64("axis", *axis)});
}

Results importLayerNormalization(NodeContext &n) {
  if (n.getInt("stash_type", 1) != onnx::TensorProto::FLOAT) {
    n.error() << "stash_type other than FLOAT is not supported";
    return failure();
  }
  auto axis = n.normalizeAxis(n.getInt("axis", -1), n.rank(n.input(0)));
  if (failed(axis))
    return failure();
  return n.build<LayerNormalizationOp>(
      n.presentInputs(), {n.i64("axis", *axis), n.f32("epsilon", n.getFloat("epsilon", 1e-5f))});
}

Results importBatchNormalization(NodeContext &n) {
  bool training = n.opset >= 14 ? n.getInt("training_mode", 0) != 0 : n.numOutputs() > 1;
  return n.build<BatchNormalizationOp>(
      n.presentInputs(),
      {n.f32("epsilon", n.getFloat("epsilon", 1e-5f)),
       n.f32("momentum", n.getFloat("momentum", 0.9f)), n.boolean("training_mode", training)});
}

Results importDropout(NodeContext &n) {
  float ratio = 0.5f;
  bool training = false;
  if (n.input(1)) {
    auto value = n.constant(1, "ratio");
    if (failed(value))
      return failure();
    if (value->getNumElements() != 1 || !isa<FloatType>(value->getElementType())) {
      n.error() << "ratio must be a float scalar";
      return failure();
    }
    ratio = static_cast<float>((*value->getValues<APFloat>().begin()).convertToDouble());
  }
  if (n.input(2)) {
    auto value = n.constant(2, "training_mode");
    if (failed(value))
      return failure();
    if (value->getNumElements() != 1 || !value->getElementType().isInteger(1)) {
      n.error() << "training_mode must be a bool scalar";
      return failure();
    }
    training = (*value->getValues<APInt>().begin()).getBoolValue();
  }
  SmallVector<NamedAttribute> attributes{n.f32("ratio", ratio),
                                         n.boolean("training_mode", training)};
  if (n.attr("seed"))
    attributes.push_back(n.i64("seed", n.getInt("seed", 0)));
  return n.build<DropoutOp>(n.input(0), attributes);
}

/// Spatial attributes shared by Conv and the pools, with auto_pad resolved to
/// explicit pads.
struct Window {
  SmallVector<int64_t> kernel, strides, pads, dilations;
};

FailureOr<Window> resolveWindow(NodeContext &n, ArrayRef<int64_t> kernel) {
  ArrayRef<int64_t> input = n.shape(n.input(0));
  size_t spatial = kernel.size();
  if (input.size() != spatial + 2) {
    n.error() << "input " << shapeString(input) << " does not have " << spatial
              << " spatial dims after N and C";
    return failure();
  }
  Window w;
  w.kernel.assign(kernel.begin(), kernel.end());
  w.strides = n.getInts("strides").value_or(SmallVector<int64_t>(spatial, 1));
  w.dilations = n.getInts("dilations").value_or(SmallVector<int64_t>(spatial, 1));
  w.pads = n.getInts("pads").value_or(SmallVector<int64_t>(2 * spatial, 0));
  if (w.strides.size() != spatial || w.dilations.size() != spatial ||
      w.pads.size() != 2 * spatial) {
    n.error() << "strides, dilations and pads must have " << spatial << ", " << spatial
              << " and " << 2 * spatial << " values";
    return failure();
  }
  std::string autoPad = n.getString("auto_pad", "NOTSET");
  if (autoPad == "VALID") {
    std::fill(w.pads.begin(), w.pads.end(), 0);
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (size_t i = 0; i < spatial; ++i) {
      int64_t in = input[2 + i];
      int64_t out = (in + w.strides[i] - 1) / w.strides[i];
      int64_t window = (w.kernel[i] - 1) * w.dilations[i] + 1;
      int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + window - in);
      int64_t small = total / 2;
      w.pads[i] = autoPad == "SAME_UPPER" ? small : total - small;
      w.pads[spatial + i] = total - w.pads[i];
    }
  } else if (autoPad != "NOTSET") {
    n.error() << "auto_pad '" << autoPad << "' is not one of NOTSET, SAME_UPPER, "
              << "SAME_LOWER, VALID";
    return failure();
  }
  return w;
}

Results importConv(NodeContext &n) {
  ArrayRef<int64_t> weight = n.shape(n.input(1));
  if (weight.size() < 3) {
    n.error() << "weight " << shapeString(weight) << " must be M x C/group x kernel...";
    return failure();
  }
  auto w = resolveWindow(n, weight.drop_front(2));
  if (failed(w))
    return failure();
  return n.build<ConvOp>(n.presentInputs(),
                         {n.ints("strides", w->strides), n.ints("pads", w->pads),
                          n.ints("dilations", w->dilations),
                          n.i64("group", n.getInt("group", 1))});
}

FailureOr<Window> poolWindow(NodeContext &n) {
  auto kernel = n.getInts("kernel_shape");
  if (!kernel) {
    n.error() << "needs kernel_shape";
    return failure();
  }
  return resolveWindow(n, *kernel);
}

Results importMaxPool(NodeContext &n) {
  if (n.wantsOutput(1)) {
    n.error() << "the Indices output is not supported";
    return failure();
  }
  auto w = poolWindow(n);
  if (failed(w))
    return failure();
  return n.build<MaxPoolOp>(
      n.input(0), {n.ints("kernel_shape", w->kernel), n.ints("strides", w->strides),
                   n.ints("pads", w->pads), n.ints("dilations", w->dilations),
                   n.boolean("ceil_mode", n.getInt("ceil_mode", 0) != 0)});
}

Results importAveragePool(NodeContext &n) {
  auto w = poolWindow(n);
  if (failed(w))
    return failure();
  return n.build<AveragePoolOp>(
      n.input(0),
      {n.ints("kernel_shape", w->kernel), n.ints("strides", w->strides),
       n.ints("pads", w->pads), n.ints("dilations", w->dilations),
       n.boolean("ceil_mode", n.getInt("ceil_mode", 0) != 0),
       n.boolean("count_include_pad", n.getInt("count_include_pad", 0) != 0)});
}

template <typename OpTy> Results importLoss(NodeContext &n) {
  SmallVector<NamedAttribute> attributes{n.string("reduction", n.getString("reduction", "mean"))};
  if (n.attr("ignore_index"))
    attributes.push_back(n.i64("ignore_index", n.getInt("ignore_index", 0)));
  return n.build<OpTy>(n.presentInputs(), attributes);
}

} // namespace

void populateNNImporters(OpImporterTable &table) {
  table.add("Softmax", importAxisOp<SoftmaxOp>, 1, 1);
  table.add("LogSoftmax", importAxisOp<LogSoftmaxOp>, 1, 1);
  table.add("LayerNormalization", importLayerNormalization, 2, 3);
  table.add("BatchNormalization", importBatchNormalization, 5, 5);
  table.add("Dropout", importDropout, 1, 3, {1, 2});
  table.add("Conv", importConv, 2, 3);
  table.add("MaxPool", importMaxPool, 1, 1);
  table.add("AveragePool", importAveragePool, 1, 1);
  table.add("GlobalAveragePool", importInputsOnly<GlobalAveragePoolOp>, 1, 1);
  table.add("SoftmaxCrossEntropyLoss", importLoss<SoftmaxCrossEntropyLossOp>, 2, 3);
  table.add("NegativeLogLikelihoodLoss", importLoss<NegativeLogLikelihoodLossOp>, 2, 3);
}

} // namespace cleave
