//===- NNOps.cpp - softmax, normalization, convolution, pooling, losses --===//

#include "compiler/onnx/NodeContext.h"

#include "dialects/Cleave/CleaveBuilder.h"

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

/// ConvTranspose: the adjoint of a convolution in its input, which
/// conv_grad_input computes: x plays the convolution's output gradient and W
/// (C_in x C_out/group x kernel...) its weights; the result has the shape
/// the spec gives, from pads (or auto_pad, or output_shape), strides,
/// dilations and output_padding. Positions no window reaches (from
/// output_padding) are zero, as in the reference, then the bias is added.
Results importConvTranspose(NodeContext &n) {
  Value x = n.input(0), w = n.input(1);
  ArrayRef<int64_t> input = n.shape(x), weight = n.shape(w);
  if (input.size() < 3 || weight.size() != input.size()) {
    n.error() << "input " << shapeString(input) << " and weight " << shapeString(weight)
              << " must be N x C x spatial... of the same rank";
    return failure();
  }
  size_t spatial = input.size() - 2;
  ArrayRef<int64_t> kernel = weight.drop_front(2);
  auto strides = n.getInts("strides").value_or(SmallVector<int64_t>(spatial, 1));
  auto dilations = n.getInts("dilations").value_or(SmallVector<int64_t>(spatial, 1));
  auto outputPadding = n.getInts("output_padding").value_or(SmallVector<int64_t>(spatial, 0));
  auto outputShape = n.getInts("output_shape");
  std::string autoPad = n.getString("auto_pad", "NOTSET");
  if (strides.size() != spatial || dilations.size() != spatial ||
      outputPadding.size() != spatial || (outputShape && outputShape->size() != spatial)) {
    n.error() << "strides, dilations, output_padding and output_shape must have " << spatial
              << " values";
    return failure();
  }
  if (autoPad != "NOTSET" && autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER" &&
      autoPad != "VALID") {
    n.error() << "auto_pad '" << autoPad << "' is not one of NOTSET, SAME_UPPER, "
              << "SAME_LOWER, VALID";
    return failure();
  }
  SmallVector<int64_t> pads = n.getInts("pads").value_or(SmallVector<int64_t>(2 * spatial, 0));
  if (pads.size() != 2 * spatial) {
    n.error() << "pads must have " << 2 * spatial << " values";
    return failure();
  }
  // The size a window reach gives before padding, per spatial dim.
  SmallVector<int64_t> reach(spatial), result{input[0], weight[1] * n.getInt("group", 1)};
  for (size_t i = 0; i < spatial; ++i)
    reach[i] = strides[i] * (input[2 + i] - 1) + outputPadding[i] +
               (kernel[i] - 1) * dilations[i] + 1;
  bool same = autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER";
  for (size_t i = 0; i < spatial; ++i) {
    if (same) { // as onnx.reference: the output is the input times the stride
      int64_t out = outputShape ? (*outputShape)[i] : input[2 + i] * strides[i];
      int64_t total = reach[i] - out;
      pads[i] = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[spatial + i] = total - pads[i];
    } else if (autoPad == "VALID") {
      pads[i] = pads[spatial + i] = 0;
    }
    result.push_back(outputShape && !same ? (*outputShape)[i]
                                          : reach[i] - pads[i] - pads[spatial + i]);
  }
  // conv_grad_input reads the output as a convolution's input: every
  // position must be one a window of x's positions covers, or one of the
  // fewer than `stride` after the last (what output_padding adds).
  for (size_t i = 0; i < spatial; ++i) {
    int64_t extra = result[2 + i] - (reach[i] - outputPadding[i] - pads[i] - pads[spatial + i]);
    if (pads[i] < 0 || pads[spatial + i] < 0 || extra < 0 || extra >= std::max(strides[i], int64_t(1))) {
      n.error() << "attribute 'output_shape' or 'pads' gives output dim " << result[2 + i]
                << " for input dim " << input[2 + i] << ", which a transposed convolution "
                << "with these strides does not reach: this form is not supported";
      return failure();
    }
  }
  auto y = n.buildOne<ConvGradInputOp>(
      {x, w}, {n.ints("strides", strides), n.ints("pads", pads), n.ints("dilations", dilations),
               n.i64("group", n.getInt("group", 1)), n.ints("shape", result)});
  if (failed(y))
    return failure();
  if (!n.input(2))
    return SmallVector<Value>{*y};
  SmallVector<int64_t> biasShape(result.size() - 1, 1);
  biasShape[0] = result[1];
  auto bias = n.buildOne<ReshapeOp>(n.input(2), {n.ints("shape", biasShape)});
  if (failed(bias))
    return failure();
  return n.build<AddOp>({*y, *bias});
}

//===----------------------------------------------------------------------===//
// Decompositions: normalizations the spec defines by a formula become the
// cleave ops of the formula (their kernels, gradients and sharding).
//===----------------------------------------------------------------------===//

/// (x - mean) / sqrt(var + epsilon) over `axes`: the statistics that
/// InstanceNormalization and GroupNormalization normalize with.
Value standardize(CleaveBuilder &b, Value x, ArrayRef<int64_t> axes, double epsilon) {
  Value centered = b.sub(x, b.mean(x, axes));
  Value variance = b.mean(b.mul(centered, centered), axes);
  return b.div(centered, b.sqrt(b.add(variance, epsilon)));
}

/// The scale and bias of a per-channel normalization (shape C) reshaped to
/// C x 1 x ... to broadcast over an N x C x spatial... input.
FailureOr<Value> perChannel(NodeContext &n, CleaveBuilder &b, unsigned i, int64_t rank,
                            int64_t channels) {
  Value v = n.input(i);
  if (n.shape(v) != ArrayRef<int64_t>{channels} || n.elementType(v) != n.elementType(n.input(0))) {
    n.error() << "input '" << n.node.input(i) << "' is " << v.getType() << ", not " << channels
              << " values of the input's element type";
    return failure();
  }
  SmallVector<int64_t> shape(rank - 1, 1);
  shape[0] = channels;
  return b.reshape(v, shape);
}

Results importInstanceNormalization(NodeContext &n) {
  if (failed(n.requireFloat(0)))
    return failure();
  Value x = n.input(0);
  int64_t rank = n.rank(x);
  if (rank < 3) {
    n.error() << "input " << shapeString(n.shape(x)) << " is not N x C x spatial...";
    return failure();
  }
  CleaveBuilder b(n.builder, n.loc, /*foldConstants=*/true);
  auto scale = perChannel(n, b, 1, rank, n.shape(x)[1]);
  auto bias = perChannel(n, b, 2, rank, n.shape(x)[1]);
  if (failed(scale) || failed(bias))
    return failure();
  SmallVector<int64_t> spatial = llvm::to_vector(llvm::seq<int64_t>(2, rank));
  Value y = standardize(b, x, spatial, n.getFloat("epsilon", 1e-5f));
  return SmallVector<Value>{b.add(b.mul(y, *scale), *bias)};
}

/// GroupNormalization (18, 21): each group of C / num_groups channels
/// standardized over its channels and positions, then scaled per channel
/// (opset 21) or per group (18, whose scale and bias have num_groups values).
Results importGroupNormalization(NodeContext &n) {
  if (failed(n.requireFloat(0)))
    return failure();
  if (n.getInt("stash_type", 1) != onnx::TensorProto::FLOAT) {
    n.error() << "attribute 'stash_type' " << n.getInt("stash_type", 1)
              << " (other than FLOAT) is not supported";
    return failure();
  }
  Value x = n.input(0);
  ArrayRef<int64_t> shape = n.shape(x);
  int64_t groups = n.getInt("num_groups", 0);
  if (shape.size() < 3 || groups < 1 || shape[1] % groups != 0) {
    n.error() << "input " << shapeString(shape) << " is not N x C x spatial... with C a multiple "
              << "of num_groups " << groups;
    return failure();
  }
  int64_t channels = shape[1], rank = shape.size();
  CleaveBuilder b(n.builder, n.loc, /*foldConstants=*/true);
  int64_t perGroup = channels / groups;
  for (int64_t d : shape.drop_front(2))
    perGroup *= d;
  auto grouped = n.buildOne<ReshapeOp>(x, {n.ints("shape", {shape[0], groups, perGroup})});
  if (failed(grouped))
    return failure();
  Value y = b.reshape(standardize(b, *grouped, {2}, n.getFloat("epsilon", 1e-5f)), shape);
  int64_t perScale = n.opset >= 21 ? channels : groups;
  auto scale = perChannel(n, b, 1, 2, perScale);
  auto bias = perChannel(n, b, 2, 2, perScale);
  if (failed(scale) || failed(bias))
    return failure();
  SmallVector<int64_t> channelShape(rank - 1, 1);
  channelShape[0] = channels;
  auto toChannels = [&](Value v) {
    // Opset 18: each group's value repeated over its channels.
    Value perChannelValue =
        perScale == channels ? v : b.reshape(b.expand(b.reshape(v, {groups, 1}),
                                                      {groups, channels / groups}),
                                             {channels});
    return b.reshape(perChannelValue, channelShape);
  };
  return SmallVector<Value>{b.add(b.mul(y, toChannels(*scale)), toChannels(*bias))};
}

/// RMSNormalization (23): x / sqrt(mean(x^2) + epsilon) over the dims from
/// `axis` on, times scale, in onnx.reference's order (x times the
/// reciprocal).
Results importRMSNormalization(NodeContext &n) {
  if (failed(n.requireFloat(0)))
    return failure();
  if (n.getInt("stash_type", 1) != onnx::TensorProto::FLOAT) {
    n.error() << "attribute 'stash_type' " << n.getInt("stash_type", 1)
              << " (other than FLOAT) is not supported";
    return failure();
  }
  Value x = n.input(0), scale = n.input(1);
  int64_t rank = n.rank(x);
  auto axis = n.normalizeAxis(n.getInt("axis", -1), rank);
  if (failed(axis))
    return failure();
  if (n.elementType(scale) != n.elementType(x)) {
    n.error() << "scale " << scale.getType() << " does not have the input's element type";
    return failure();
  }
  CleaveBuilder b(n.builder, n.loc, /*foldConstants=*/true);
  SmallVector<int64_t> axes = llvm::to_vector(llvm::seq<int64_t>(*axis, rank));
  Value rms = b.sqrt(b.add(b.mean(b.mul(x, x), axes), n.getFloat("epsilon", 1e-5f)));
  return n.build<MulOp>({b.mul(x, b.reciprocal(rms)), scale});
}

/// LpNormalization: x divided by its L1 (sum of |x|) or L2 norm along `axis`.
Results importLpNormalization(NodeContext &n) {
  if (failed(n.requireFloat(0)))
    return failure();
  Value x = n.input(0);
  auto axis = n.normalizeAxis(n.getInt("axis", -1), n.rank(x));
  if (failed(axis))
    return failure();
  int64_t p = n.getInt("p", 2);
  if (p != 1 && p != 2) {
    n.error() << "attribute 'p' " << p << " is not 1 or 2";
    return failure();
  }
  CleaveBuilder b(n.builder, n.loc, /*foldConstants=*/true);
  Value norm = p == 1 ? b.sum(b.abs(x), {*axis}, true) : b.sqrt(b.sum(b.mul(x, x), {*axis}, true));
  return SmallVector<Value>{b.div(x, norm)};
}

/// GlobalMaxPool: the maximum over the spatial dims, kept as size 1.
Results importGlobalMaxPool(NodeContext &n) {
  int64_t rank = n.rank(n.input(0));
  if (rank < 3) {
    n.error() << "input " << shapeString(n.shape(n.input(0))) << " is not N x C x spatial...";
    return failure();
  }
  return n.build<ReduceMaxOp>(n.input(0), {n.ints("axes", llvm::to_vector(llvm::seq<int64_t>(2, rank))),
                                           n.boolean("keepdims", true)});
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
  table.add("GlobalMaxPool", importGlobalMaxPool, 1, 1);
  table.add("ConvTranspose", importConvTranspose, 2, 3);
  table.add("InstanceNormalization", importInstanceNormalization, 3, 3);
  table.add("GroupNormalization", importGroupNormalization, 3, 3);
  table.add("RMSNormalization", importRMSNormalization, 2, 2);
  table.add("LpNormalization", importLpNormalization, 1, 1);
  table.add("SoftmaxCrossEntropyLoss", importLoss<SoftmaxCrossEntropyLossOp>, 2, 3);
  table.add("NegativeLogLikelihoodLoss", importLoss<NegativeLogLikelihoodLossOp>, 2, 3);
}

} // namespace cleave
