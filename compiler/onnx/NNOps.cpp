//===- NNOps.cpp - softmax, normalization, convolution, pooling, losses --===//

#include "compiler/OnnxTensor.h"
#include "compiler/onnx/NodeContext.h"

#include <cmath>

using namespace mlir;

namespace cleave {
namespace {

template <typename OpTy> Results importAxisOp(NodeContext &n) {
  auto axis = n.normalizeAxis(n.getInt("axis", -1), n.rank(n.input(0)));
  if (failed(axis))
    return failure();
  return n.build<OpTy>(n.input(0), {n.i64("axis", *axis)});
}

/// Normalizations compute their statistics in float32 only.
LogicalResult requireFloatStash(NodeContext &n) {
  if (n.getInt("stash_type", 1) == onnx::TensorProto::FLOAT)
    return success();
  n.error() << "attribute 'stash_type' " << n.getInt("stash_type", 1)
            << " (other than FLOAT) is not supported";
  return failure();
}

Results importLayerNormalization(NodeContext &n) {
  if (failed(requireFloatStash(n)))
    return failure();
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
  if (lowPrecisionProductRefused(n))
    return failure();
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
  if (lowPrecisionProductRefused(n))
    return failure();
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
  CleaveBuilder b = n.decomposer();
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
  if (failed(n.requireFloat(0)) || failed(requireFloatStash(n)))
    return failure();
  Value x = n.input(0);
  ArrayRef<int64_t> shape = n.shape(x);
  int64_t groups = n.getInt("num_groups", 0);
  if (shape.size() < 3 || groups < 1 || shape[1] % groups != 0) {
    n.error() << "input " << shapeString(shape) << " is not N x C x spatial... with C a multiple "
              << "of num_groups " << groups;
    return failure();
  }
  int64_t channels = shape[1], rank = shape.size();
  CleaveBuilder b = n.decomposer();
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
  if (failed(n.requireFloat(0)) || failed(requireFloatStash(n)))
    return failure();
  Value x = n.input(0), scale = n.input(1);
  int64_t rank = n.rank(x);
  auto axis = n.normalizeAxis(n.getInt("axis", -1), rank);
  if (failed(axis))
    return failure();
  if (n.elementType(scale) != n.elementType(x)) {
    n.error() << "scale " << scale.getType() << " does not have the input's element type";
    return failure();
  }
  CleaveBuilder b = n.decomposer();
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
  CleaveBuilder b = n.decomposer();
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

/// Resize (13, 18, 19) in nearest or linear mode, one axis after another
/// (the interpolation is separable, as onnx.reference computes it): each
/// output position maps to a source coordinate by the
/// coordinate_transformation_mode, and takes the nearest source element
/// (a gather) or the two around it weighted (two gathers, edge elements
/// repeated past the ends). Cubic, antialias and tf_crop_and_resize are
/// refused.
Results importResize(NodeContext &n) {
  Value x = n.input(0);
  ArrayRef<int64_t> shape = n.shape(x);
  int64_t rank = shape.size();
  std::string mode = n.getString("mode", "nearest");
  std::string transform = n.getString("coordinate_transformation_mode", "half_pixel");
  std::string nearest = n.getString("nearest_mode", "round_prefer_floor");
  std::string policy = n.getString("keep_aspect_ratio_policy", "stretch");
  auto refuse = [&](StringRef attribute, StringRef value) {
    n.error() << "attribute '" << attribute << "' '" << value << "' is not supported";
    return failure();
  };
  if (mode != "nearest" && mode != "linear")
    return refuse("mode", mode);
  if (mode == "linear" && failed(n.requireFloat(0)))
    return failure();
  if (n.getInt("antialias", 0) != 0)
    return refuse("antialias", "1");
  if (transform != "half_pixel" && transform != "half_pixel_symmetric" &&
      transform != "pytorch_half_pixel" && transform != "align_corners" &&
      transform != "asymmetric")
    return refuse("coordinate_transformation_mode", transform);
  if (nearest != "round_prefer_floor" && nearest != "round_prefer_ceil" && nearest != "floor" &&
      nearest != "ceil")
    return refuse("nearest_mode", nearest);
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    return refuse("keep_aspect_ratio_policy", policy);
  SmallVector<int64_t> axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  if (auto given = n.getInts("axes")) {
    auto normalized = n.normalizeAxes(*given, rank);
    if (failed(normalized))
      return failure();
    axes = *normalized;
  }
  // Scale and output size per dim, as onnx.reference works them out.
  SmallVector<double> scales(rank, 1.0);
  SmallVector<int64_t> sizes(shape);
  if (n.input(3)) {
    auto given = n.constantInts(3, "sizes");
    if (failed(given))
      return failure();
    if (given->size() != axes.size()) {
      n.error() << "sizes has " << given->size() << " values for " << axes.size() << " axes";
      return failure();
    }
    for (auto [axis, size] : llvm::zip(axes, *given)) {
      sizes[axis] = size;
      scales[axis] = static_cast<double>(size) / static_cast<double>(shape[axis]);
    }
    if (policy != "stretch") {
      double scale = scales[axes[0]];
      for (int64_t axis : axes)
        scale = policy == "not_larger" ? std::min(scale, scales[axis]) : std::max(scale, scales[axis]);
      for (int64_t axis : axes) {
        scales[axis] = scale;
        sizes[axis] = static_cast<int64_t>(scale * static_cast<double>(shape[axis]) + 0.5);
      }
    }
  } else {
    auto given = n.constant(2, "scales");
    if (failed(given))
      return failure();
    if (!isa<FloatType>(given->getElementType()) ||
        given->getNumElements() != static_cast<int64_t>(axes.size())) {
      n.error() << "scales must hold " << axes.size() << " floats";
      return failure();
    }
    for (auto [axis, scale] : llvm::zip(axes, given->getValues<APFloat>())) {
      scales[axis] = scale.convertToDouble();
      sizes[axis] = static_cast<int64_t>(scales[axis] * static_cast<double>(shape[axis]));
    }
  }
  CleaveBuilder b = n.decomposer();
  Type element = n.elementType(x);
  for (int64_t axis = 0; axis < rank; ++axis) {
    int64_t in = shape[axis], out = sizes[axis];
    double scale = scales[axis];
    if (out == in && scale == 1.0)
      continue;
    if (in < 1 || out < 1 || scale <= 0) {
      n.error() << "cannot resize axis " << axis << " of " << in << " to " << out;
      return failure();
    }
    // The source coordinate of each output position, then the elements
    // below and above it (clamped) and the weight of the one above.
    SmallVector<int64_t> below(out), above(out);
    SmallVector<double> weight(out);
    double width = scale * static_cast<double>(in);
    for (int64_t o = 0; o < out; ++o) {
      double p = static_cast<double>(o), source;
      if (transform == "align_corners")
        source = width == 1 ? 0.0 : p * static_cast<double>(in - 1) / (width - 1);
      else if (transform == "asymmetric")
        source = p / scale;
      else if (transform == "pytorch_half_pixel")
        source = width == 1 ? -0.5 : (p + 0.5) / scale - 0.5;
      else if (transform == "half_pixel_symmetric")
        source = static_cast<double>(in) / 2 * (1 - static_cast<double>(out) / width) +
                 (p + 0.5) / scale - 0.5;
      else
        source = (p + 0.5) / scale - 0.5;
      double floor = std::floor(source), ratio = source - floor;
      auto clamp = [&](double i) { return std::clamp<int64_t>(int64_t(i), 0, in - 1); };
      below[o] = clamp(floor);
      above[o] = clamp(floor + 1);
      weight[o] = ratio;
      if (mode == "nearest") {
        bool up = ratio != 0 && (nearest == "ceil" ||
                                 (nearest == "round_prefer_floor" && ratio > 0.5) ||
                                 (nearest == "round_prefer_ceil" && ratio >= 0.5));
        below[o] = up ? above[o] : below[o];
      }
    }
    auto low = n.buildOne<GatherOp>({x, n.indexConstant({out}, below)}, {n.i64("axis", axis)});
    if (failed(low))
      return failure();
    if (mode == "nearest") {
      x = *low;
      continue;
    }
    auto high = n.buildOne<GatherOp>({x, n.indexConstant({out}, above)}, {n.i64("axis", axis)});
    if (failed(high))
      return failure();
    SmallVector<int64_t> weightShape(rank, 1);
    weightShape[axis] = out;
    SmallVector<Attribute> highWeights, lowWeights;
    for (double w : weight) {
      highWeights.push_back(FloatAttr::get(element, w));
      lowWeights.push_back(FloatAttr::get(element, 1 - w));
    }
    auto weightType = RankedTensorType::get(weightShape, element);
    Value wHigh = ConstantOp::create(n.builder, n.loc, DenseElementsAttr::get(weightType, highWeights));
    Value wLow = ConstantOp::create(n.builder, n.loc, DenseElementsAttr::get(weightType, lowWeights));
    x = b.add(b.mul(*low, wLow), b.mul(*high, wHigh));
  }
  return n.build<IdentityOp>(x);
}

/// A 3-D B x S x (heads * D) input as B x heads x S x D (4-D inputs are
/// that already).
FailureOr<Value> splitHeads(NodeContext &n, CleaveBuilder &b, Value x, int64_t heads) {
  ArrayRef<int64_t> shape = n.shape(x);
  if (shape.size() == 4)
    return x;
  if (shape.size() != 3 || heads < 1 || shape[2] % heads != 0) {
    n.error() << "input " << shapeString(shape) << " is neither B x heads x S x D nor "
              << "B x S x (heads * D) with " << heads << " heads";
    return failure();
  }
  return b.transpose(b.reshape(x, {shape[0], shape[1], heads, shape[2] / heads}), {0, 2, 1, 3});
}

/// RotaryEmbedding (23): the first rotary_embedding_dim features of each
/// head, in pairs (interleaved, or the two halves), rotated by the cos and
/// sin caches (indexed by position_ids when given); the rest pass through.
Results importRotaryEmbedding(NodeContext &n) {
  if (failed(n.requireFloat(0)))
    return failure();
  Value input = n.input(0);
  ArrayRef<int64_t> inputShape = n.shape(input);
  CleaveBuilder b = n.decomposer();
  // As B x S x heads x D.
  FailureOr<Value> x = splitHeads(n, b, input, n.getInt("num_heads", 0));
  if (failed(x))
    return failure();
  x = b.transpose(*x, {0, 2, 1, 3});
  ArrayRef<int64_t> shape = n.shape(*x);
  int64_t headSize = shape[3];
  int64_t rotated = n.getInt("rotary_embedding_dim", 0);
  rotated = rotated == 0 ? headSize : rotated;
  if (rotated % 2 != 0 || rotated > headSize) {
    n.error() << "rotary_embedding_dim " << rotated << " is not an even count of at most the "
              << headSize << " features of a head";
    return failure();
  }
  int64_t half = rotated / 2;
  Value caches[2] = {n.input(1), n.input(2)};
  for (Value &cache : caches) {
    if (n.input(3)) {
      auto gathered = n.buildOne<GatherOp>({cache, n.input(3)}, {n.i64("axis", 0)});
      if (failed(gathered))
        return failure();
      cache = *gathered;
    }
    if (n.shape(cache) != ArrayRef<int64_t>{shape[0], shape[1], half} ||
        n.elementType(cache) != n.elementType(input)) {
      n.error() << "cos and sin caches (after position_ids) are " << cache.getType()
                << ", not B x S x " << half << " of the input's type";
      return failure();
    }
    cache = b.reshape(cache, {shape[0], shape[1], 1, half});
  }
  bool interleaved = n.getInt("interleaved", 0) != 0;
  auto x1 = interleaved ? n.sliceAxis(*x, 3, 0, rotated, 2) : n.sliceAxis(*x, 3, 0, half);
  auto x2 = interleaved ? n.sliceAxis(*x, 3, 1, rotated, 2) : n.sliceAxis(*x, 3, half, rotated);
  if (failed(x1) || failed(x2))
    return failure();
  Value cos = caches[0], sin = caches[1];
  Value real = b.sub(b.mul(cos, *x1), b.mul(sin, *x2));
  Value imaginary = b.add(b.mul(sin, *x1), b.mul(cos, *x2));
  SmallVector<int64_t> rotatedShape{shape[0], shape[1], shape[2], rotated};
  FailureOr<Value> parts;
  if (interleaved) {
    SmallVector<int64_t> pairShape{shape[0], shape[1], shape[2], half, 1};
    parts = n.buildOne<ConcatOp>({b.reshape(real, pairShape), b.reshape(imaginary, pairShape)},
                                 {n.i64("axis", 4)});
    if (succeeded(parts))
      parts = b.reshape(*parts, rotatedShape);
  } else {
    parts = n.buildOne<ConcatOp>({real, imaginary}, {n.i64("axis", 3)});
  }
  if (failed(parts))
    return failure();
  Value y = *parts;
  if (rotated < headSize) {
    auto kept = n.sliceAxis(*x, 3, rotated, headSize);
    auto joined = failed(kept) ? kept : n.buildOne<ConcatOp>({y, *kept}, {n.i64("axis", 3)});
    if (failed(joined))
      return failure();
    y = *joined;
  }
  if (inputShape.size() == 3)
    return n.build<ReshapeOp>(y, {n.ints("shape", inputShape)});
  return n.build<TransposeOp>(y, {n.ints("perm", {0, 2, 1, 3})});
}

/// Attention (23, 24): softmax(Q K^T scale + bias) V with the spec's
/// options, as onnx.reference computes them: 3-D inputs split into heads,
/// the past keys and values concatenated before the new ones (the present
/// outputs), grouped-query heads repeated, a mask (bool: where to attend;
/// float: added) padded to the keys, a causal mask from the past on, the
/// padding of nonpad_kv_seqlen, softcap, and the qk_matmul_output modes.
Results importAttention(NodeContext &n) {
  if (failed(n.requireFloat(0)))
    return failure();
  Value q = n.input(0);
  Type element = n.elementType(q);
  int64_t precision = n.getInt("softmax_precision", 0);
  if (precision != 0 && elementTypeFromOnnx(n.builder.getContext(), precision) != element) {
    n.error() << "attribute 'softmax_precision' " << precision
              << " (other than the inputs' type) is not supported";
    return failure();
  }
  int64_t mode = n.getInt("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3) {
    n.error() << "qk_matmul_output_mode " << mode << " is not 0, 1, 2 or 3";
    return failure();
  }
  bool threeD = n.rank(q) == 3;
  CleaveBuilder b = n.decomposer();
  auto query = splitHeads(n, b, q, n.getInt("q_num_heads", 0));
  auto key = splitHeads(n, b, n.input(1), n.getInt("kv_num_heads", 0));
  auto value = splitHeads(n, b, n.input(2), n.getInt("kv_num_heads", 0));
  if (failed(query) || failed(key) || failed(value))
    return failure();
  Value k = *key, v = *value;
  for (auto [past, current] : {std::pair{n.input(4), &k}, std::pair{n.input(5), &v}}) {
    if (!past)
      continue;
    auto joined = n.buildOne<ConcatOp>({past, *current}, {n.i64("axis", 2)});
    if (failed(joined))
      return failure();
    *current = *joined;
  }
  Value presentKey = k, presentValue = v;
  ArrayRef<int64_t> qShape = n.shape(*query), kShape = n.shape(k);
  ArrayRef<int64_t> vShape = n.shape(v);
  if (vShape[0] != kShape[0] || vShape[1] != kShape[1] || vShape[2] != kShape[2]) {
    n.error() << "V " << v.getType() << " does not have K's " << k.getType()
              << " batch, heads and keys";
    return failure();
  }
  int64_t queries = qShape[2], keys = kShape[2], heads = qShape[1], kvHeads = kShape[1];
  int64_t pastLength = n.input(4) ? n.shape(n.input(4))[2] : 0;
  double scale = n.attr("scale") ? n.getFloat("scale", 1.0f) : 1.0 / std::sqrt(double(qShape[3]));
  float rootScale = static_cast<float>(std::sqrt(static_cast<float>(scale)));

  // The bias added to the scores: the mask (padded to the keys), causal
  // -inf above the diagonal from the past on, and the keys' padding. Their
  // shapes come from the model: each sum is checked (an error, not a crash,
  // when they do not broadcast).
  Value minusInf = b.scalar(element, -INFINITY), zero = b.scalar(element, 0.0);
  Value bias;
  auto addChecked = [&](Value sum, Value term) -> FailureOr<Value> {
    return sum ? n.buildOne<AddOp>({sum, term}) : FailureOr<Value>(term);
  };
  if (Value mask = n.input(3)) {
    if (n.rank(mask) < 1 || n.rank(mask) > 4) {
      n.error() << "attn_mask " << mask.getType()
                << " is not of rank 1 to 4: it broadcasts to (batch, heads, queries, keys)";
      return failure();
    }
    int64_t missing = keys - n.shape(mask).back();
    if (missing < 0) {
      n.error() << "attn_mask " << mask.getType() << " has more than the " << keys << " keys";
      return failure();
    }
    bool isBool = n.elementType(mask).isInteger(1);
    if (missing > 0) {
      SmallVector<int64_t> padShape(n.shape(mask));
      padShape.back() = missing;
      Value fill = isBool ? b.scalar(n.builder.getI1Type(), 0.0) : minusInf;
      auto padded = n.buildOne<ConcatOp>({mask, b.expand(fill, padShape)},
                                         {n.i64("axis", n.rank(mask) - 1)});
      if (failed(padded))
        return failure();
      mask = *padded;
    }
    bias = isBool ? b.where(mask, zero, minusInf) : mask;
  }
  if (n.getInt("is_causal", 0) != 0) {
    auto type = RankedTensorType::get({queries, keys}, element);
    SmallVector<Attribute> causal;
    for (int64_t i = 0; i < queries; ++i)
      for (int64_t j = 0; j < keys; ++j)
        causal.push_back(FloatAttr::get(element, j > i + pastLength ? -INFINITY : 0.0));
    auto withCausal = addChecked(
        bias, ConstantOp::create(n.builder, n.loc, DenseElementsAttr::get(type, causal)));
    if (failed(withCausal))
      return failure();
    bias = *withCausal;
  }
  if (Value lengths = n.input(6)) {
    if (n.rank(lengths) != 1) {
      n.error() << "nonpad_kv_seqlen " << lengths.getType() << " is not one length per batch";
      return failure();
    }
    SmallVector<int64_t> positions = llvm::to_vector(llvm::seq<int64_t>(0, keys));
    Value batchLengths =
        b.reshape(b.castTo(lengths, n.builder.getI64Type()), {n.shape(lengths)[0], 1, 1, 1});
    Value padding = b.where(b.less(n.indexConstant({keys}, positions), batchLengths), zero,
                            minusInf);
    auto withPadding = addChecked(bias, padding);
    if (failed(withPadding))
      return failure();
    bias = *withPadding;
  }

  // Grouped-query attention: each key and value head serves heads / kvHeads
  // query heads in a row (numpy's repeat along the heads).
  if (heads != kvHeads) {
    if (kvHeads < 1 || heads % kvHeads != 0) {
      n.error() << heads << " query heads are not a multiple of " << kvHeads << " key heads";
      return failure();
    }
    for (Value *t : {&k, &v}) {
      ArrayRef<int64_t> shape = n.shape(*t);
      SmallVector<int64_t> grouped{shape[0], kvHeads, 1, shape[2], shape[3]};
      SmallVector<int64_t> repeated{shape[0], kvHeads, heads / kvHeads, shape[2], shape[3]};
      *t = b.reshape(b.expand(b.reshape(*t, grouped), repeated),
                     {shape[0], heads, shape[2], shape[3]});
    }
  }
  auto scores = n.buildOne<MatMulOp>(
      {b.mul(*query, rootScale), b.transpose(b.mul(k, rootScale), {0, 1, 3, 2})});
  if (failed(scores))
    return failure();
  Value qk = *scores;
  auto biased = addChecked(bias, qk);
  if (failed(biased))
    return failure();
  Value withBias = *biased;
  Value capped = withBias;
  if (float softcap = n.getFloat("softcap", 0.0f); softcap > 0)
    capped = b.mul(b.tanh(b.mul(withBias, 1.0 / softcap)), softcap);
  auto weights = n.buildOne<SoftmaxOp>(capped, {n.i64("axis", 3)});
  if (failed(weights))
    return failure();
  auto y = n.buildOne<MatMulOp>({*weights, v});
  if (failed(y))
    return failure();
  Value output = *y;
  if (threeD) {
    ArrayRef<int64_t> shape = n.shape(output);
    output = b.reshape(b.transpose(output, {0, 2, 1, 3}), {shape[0], shape[2], shape[1] * shape[3]});
  }
  Value qkOutput = mode == 0 ? qk : mode == 1 ? withBias : mode == 2 ? capped : *weights;
  SmallVector<Value> results{output, presentKey, presentValue, qkOutput};
  results.resize(std::min<size_t>(results.size(), n.numOutputs()));
  return results;
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
  table.add("RotaryEmbedding", importRotaryEmbedding, 3, 4);
  table.add("Resize", importResize, 1, 4, {2, 3});
  table.add("Attention", importAttention, 3, 7);
  table.add("SoftmaxCrossEntropyLoss", importLoss<SoftmaxCrossEntropyLossOp>, 2, 3);
  table.add("NegativeLogLikelihoodLoss", importLoss<NegativeLogLikelihoodLossOp>, 2, 3);
}

} // namespace cleave
