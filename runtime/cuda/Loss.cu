//===- Loss.cu - softmax cross-entropy and negative log-likelihood -------===//
//
// Both gather -logProb[n, label, d] * weight[label] per position; ignored
// labels count zero. Mean divides the weighted sum by the total weight of the
// counted positions (ONNX): 0 / 0 (every label ignored) gives NaN as there.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Common.cuh"

namespace cleave::rt::cuda {
namespace detail {
namespace {

struct LossGeometry {
  int64_t positions; // N * D
  int64_t classes;   // C
  int64_t inner;     // D
  bool hasIgnoreIndex;
  int64_t ignoreIndex;
};

/// The geometry of N x C x d... log-probabilities and their N x d... labels.
LossGeometry lossGeometry(const char *kernel, const Tensor &logProb, const Tensor &labels,
                          bool hasIgnoreIndex, int64_t ignoreIndex) {
  if (logProb.rank() < 2)
    fail(kernel, "scores must be N x C x ...");
  LossGeometry g;
  g.classes = logProb.shape[1];
  g.inner = 1;
  for (int d = 2; d < logProb.rank(); ++d)
    g.inner *= logProb.shape[d];
  g.positions = logProb.shape[0] * g.inner;
  g.hasIgnoreIndex = hasIgnoreIndex;
  g.ignoreIndex = ignoreIndex;
  requireNumel(kernel, labels, g.positions, "the labels");
  return g;
}

/// The loss and weight of position p; NaN for a label outside [0, C).
template <typename L>
__device__ void lossAt(const LossGeometry &g, int64_t p, const float *logProb, const L *labels,
                       const float *weights, double &loss, double &weight) {
  int64_t label = static_cast<int64_t>(labels[p]);
  if (g.hasIgnoreIndex && label == g.ignoreIndex) {
    loss = 0;
    weight = 0;
    return;
  }
  if (label < 0 || label >= g.classes) {
    loss = weight = __longlong_as_double(0x7ff8000000000000ll); // NaN
    return;
  }
  int64_t n = p / g.inner, d = p % g.inner;
  weight = weights ? weights[label] : 1.0;
  loss = -static_cast<double>(logProb[(n * g.classes + label) * g.inner + d]) * weight;
}

template <typename L>
__global__ void lossPerPositionKernel(LossGeometry g, const float *logProb, const L *labels,
                                      const float *weights, float *loss) {
  CLEAVE_GRID_LOOP(p, g.positions) {
    double value, weight;
    lossAt(g, p, logProb, labels, weights, value, weight);
    loss[p] = static_cast<float>(value);
  }
}

/// One block sums every position's loss (and weight, for the mean).
template <typename L>
__global__ void lossReducedKernel(LossGeometry g, const float *logProb, const L *labels,
                                  const float *weights, float *loss, bool mean) {
  double sum = 0, total = 0;
  for (int64_t p = threadIdx.x; p < g.positions; p += blockDim.x) {
    double value, weight;
    lossAt(g, p, logProb, labels, weights, value, weight);
    sum += value;
    total += weight;
  }
  sum = blockReduce(sum, SumOp(), 0.0);
  total = blockReduce(total, SumOp(), 0.0);
  if (threadIdx.x == 0)
    loss[0] = static_cast<float>(mean ? sum / total : sum);
}

void lossImpl(Context &ctx, const char *kernel, const Tensor &logProb, const Tensor &labels,
              const Tensor *weights, const Tensor &loss, Reduction reduction, bool hasIgnoreIndex,
              int64_t ignoreIndex) {
  requireType(kernel, loss, DType::F32, "the loss");
  LossGeometry g = lossGeometry(kernel, logProb, labels, hasIgnoreIndex, ignoreIndex);
  if (weights) {
    requireType(kernel, *weights, DType::F32, "the weights");
    requireNumel(kernel, *weights, g.classes, "the weights");
  }
  requireNumel(kernel, loss, reduction == Reduction::None ? g.positions : 1, "the loss");
  const float *w = weights ? weights->as<float>() : nullptr;
  dispatch(kernel, labels.dtype, IndexTypes{}, [&](auto tag) {
    using L = typename decltype(tag)::type;
    if (reduction == Reduction::None) {
      if (g.positions == 0)
        return;
      lossPerPositionKernel<L><<<blocksFor(g.positions), kThreads, 0, ctx.stream>>>(
          g, logProb.as<float>(), labels.as<L>(), w, loss.as<float>());
    } else {
      lossReducedKernel<L><<<1, 1024, 0, ctx.stream>>>(g, logProb.as<float>(), labels.as<L>(), w,
                                                       loss.as<float>(),
                                                       reduction == Reduction::Mean);
    }
    checkLaunch(kernel);
  });
}

/// softmax_cross_entropy_grad: block b takes positions b, b + gridDim.x...,
/// its threads the classes of each. For the mean every block counts the
/// targets first (there is no scratch to share the count through).
template <typename L>
__global__ void crossEntropyGradKernel(LossGeometry g, const float *logProb, const L *labels,
                                       const float *grad, float *out, Reduction reduction) {
  auto counts = [&](int64_t p) {
    return !(g.hasIgnoreIndex && static_cast<int64_t>(labels[p]) == g.ignoreIndex);
  };
  float scaled = grad[0];
  if (reduction == Reduction::Mean) {
    float counted = 0;
    for (int64_t p = threadIdx.x; p < g.positions; p += blockDim.x)
      counted += counts(p) ? 1.0f : 0.0f;
    scaled = scaled / blockReduce(counted, SumOp(), 0.0f);
  }
  for (int64_t p = blockIdx.x; p < g.positions; p += gridDim.x) {
    const bool counted = counts(p);
    const int64_t label = counted ? static_cast<int64_t>(labels[p]) : -1;
    const float k = (counted ? 1.0f : 0.0f) * (reduction == Reduction::None ? grad[p] : scaled);
    const int64_t n = p / g.inner, d = p % g.inner;
    for (int64_t c = threadIdx.x; c < g.classes; c += blockDim.x) {
      const int64_t at = (n * g.classes + c) * g.inner + d;
      out[at] = (expf(logProb[at]) - (c == label ? 1.0f : 0.0f)) * k;
    }
  }
}

} // namespace
} // namespace detail

using namespace detail;

void softmax_cross_entropy_grad(Context &ctx, const Tensor &logProb, const Tensor &labels,
                                const Tensor &grad, const Tensor &out, Reduction reduction,
                                bool hasIgnoreIndex, int64_t ignoreIndex) {
  const char *kernel = "softmax_cross_entropy_grad";
  requireType(kernel, logProb, DType::F32, "the log-probabilities");
  requireType(kernel, grad, DType::F32, "the loss's gradient");
  requireType(kernel, out, DType::F32, "the output");
  requireNumel(kernel, out, logProb.numel(), "the output");
  LossGeometry g = lossGeometry(kernel, logProb, labels, hasIgnoreIndex, ignoreIndex);
  requireNumel(kernel, grad, reduction == Reduction::None ? g.positions : 1, "the loss's gradient");
  if (g.positions == 0)
    return;
  dispatch(kernel, labels.dtype, IndexTypes{}, [&](auto tag) {
    using L = typename decltype(tag)::type;
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(g.positions, 4096));
    crossEntropyGradKernel<L><<<blocks, kThreads, 0, ctx.stream>>>(
        g, logProb.as<float>(), labels.as<L>(), grad.as<float>(), out.as<float>(), reduction);
    checkLaunch(kernel);
  });
}

void softmax_cross_entropy_loss(Context &ctx, const Tensor &scores, const Tensor &labels,
                                const Tensor *weights, const Tensor &loss, const Tensor &logProb,
                                Reduction reduction, bool hasIgnoreIndex, int64_t ignoreIndex) {
  const char *kernel = "softmax_cross_entropy_loss";
  requireType(kernel, scores, DType::F32, "the scores");
  if (!logProb.data)
    fail(kernel, "the log-probability output has no storage");
  if (scores.rank() < 2)
    fail(kernel, "scores must be N x C x ...");
  softmaxImpl(ctx, kernel, scores, logProb, 1, true);
  lossImpl(ctx, kernel, logProb, labels, weights, loss, reduction, hasIgnoreIndex, ignoreIndex);
}

void negative_log_likelihood_loss(Context &ctx, const Tensor &input, const Tensor &target,
                                  const Tensor *weight, const Tensor &loss, Reduction reduction,
                                  bool hasIgnoreIndex, int64_t ignoreIndex) {
  const char *kernel = "negative_log_likelihood_loss";
  requireType(kernel, input, DType::F32, "the input");
  lossImpl(ctx, kernel, input, target, weight, loss, reduction, hasIgnoreIndex, ignoreIndex);
}

} // namespace cleave::rt::cuda
