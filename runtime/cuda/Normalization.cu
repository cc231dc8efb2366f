//===- Normalization.cu - softmax, log-softmax, layer and batch norm ------===//
//
// One block per normalised row; floating sums accumulate in double.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Common.cuh"

namespace cleave::rt::cuda {
namespace detail {
namespace {

/// Rows are (outer, inner) pairs; a row's `len` elements are `inner` apart.
template <typename T, bool Log>
__global__ void softmaxKernel(int64_t rows, int64_t len, int64_t inner, const T *in, T *out) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    int64_t base = (row / inner) * len * inner + row % inner;
    T max = lowest<T>();
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
      max = MaxOp()(max, in[base + j * inner]);
    max = blockReduce(max, MaxOp(), lowest<T>());
    double sum = 0;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
      sum += static_cast<double>(mexp(in[base + j * inner] - max));
    sum = blockReduce(sum, SumOp(), 0.0);
    if constexpr (Log) {
      T logSum = static_cast<T>(::log(sum));
      for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
        out[base + j * inner] = in[base + j * inner] - max - logSum;
    } else {
      T scale = static_cast<T>(1.0 / sum);
      for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
        out[base + j * inner] = mexp(in[base + j * inner] - max) * scale;
    }
  }
}

/// out = y (g - sum(g y)) over rows as softmaxKernel's: each product rounded
/// to T, summed in double; a row is read whole before any of it is written,
/// so out may be y or g.
template <typename T>
__global__ void softmaxGradKernel(int64_t rows, int64_t len, int64_t inner, const T *y, const T *g,
                                  T *out) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    int64_t base = (row / inner) * len * inner + row % inner;
    double sum = 0;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
      sum += static_cast<double>(T(g[base + j * inner] * y[base + j * inner]));
    T rowSum = static_cast<T>(blockReduce(sum, SumOp(), 0.0));
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
      out[base + j * inner] = y[base + j * inner] * (g[base + j * inner] - rowSum);
  }
}

/// v scale, or v / scale with `divide`, rounded to T.
template <typename T> __device__ T scaled(T v, T scale, bool divide) {
  return divide ? T(v / scale) : T(v * scale);
}

/// A mask broadcast to the scores, read along their rows (their last dim):
/// row r's mask starts at data + rows.offsets(r), its elements `step` (1, or
/// 0 for a mask whose last dim is 1) apart, and `hideValue` (1, or 0 for a
/// mask of the elements kept) hides an element. No data hides nothing.
/// An operand broadcast to x's shape, read along x's rows (none: data
/// null): where each row's first element is, and the step between its
/// elements (1, or 0 for an operand whose last dim is 1).
template <typename E> struct RowOperand {
  const E *data = nullptr;
  Layout<1> rows;
  int64_t step = 0;

  __device__ const E *row(int64_t r) const {
    if (!data)
      return nullptr;
    int64_t at[1];
    rows.offsets(r, at);
    return data + at[0];
  }
};

struct RowMask {
  RowOperand<uint8_t> mask;
  uint8_t hideValue = 1;

  __device__ bool hides(const uint8_t *rowMask, int64_t j) const {
    return rowMask && rowMask[j * mask.step] == hideValue;
  }
};

/// softmax(where(mask, fill, x scale + bias)) (x / scale with `divide`)
/// over contiguous rows of `len`, each op rounded as the unfused chain's
/// kernels round it. `Kept`: the block's dynamic shared memory holds a row
/// (len elements), where each thread keeps the scores and then the
/// exponentials of its own elements, so that x, the mask and the bias are
/// read and each exponential computed once a row; otherwise they are
/// computed again in each of the three passes. The same values either way.
template <typename T, bool Kept>
__global__ void scaledMaskedSoftmaxKernel(int64_t rows, int64_t len, const T *x, RowMask mask,
                                          RowOperand<T> bias, T scale, bool divide, T fill,
                                          T *out) {
  extern __shared__ __align__(16) unsigned char sharedRow[];
  T *kept = reinterpret_cast<T *>(sharedRow);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const uint8_t *rowMask = mask.mask.row(row);
    const T *rowBias = bias.row(row);
    const T *xr = x + row * len;
    auto score = [&](int64_t j) {
      if (mask.hides(rowMask, j))
        return fill;
      const T s = scaled(xr[j], scale, divide);
      return rowBias ? T(s + rowBias[j * bias.step]) : s;
    };
    T max = lowest<T>();
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
      const T s = score(j);
      if constexpr (Kept)
        kept[j] = s;
      max = MaxOp()(max, s);
    }
    max = blockReduce(max, MaxOp(), lowest<T>());
    double sum = 0;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
      const T e = mexp((Kept ? kept[j] : score(j)) - max);
      if constexpr (Kept)
        kept[j] = e;
      sum += static_cast<double>(e);
    }
    const T inv = static_cast<T>(1.0 / blockReduce(sum, SumOp(), 0.0));
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
      out[row * len + j] = (Kept ? kept[j] : mexp(score(j) - max)) * inv;
  }
}

/// A row up to this size is kept in a block's shared memory
/// (scaledMaskedSoftmaxKernel): within the 48 KiB a block may have without
/// opting in, beside blockReduce's own.
constexpr int64_t kSharedRowBytes = 32 << 10;

/// where(mask, 0, y (g - sum(g y))) scale (/ scale with `divide`) over
/// scaledMaskedSoftmaxKernel's rows, rounded as the unfused chain's kernels
/// round it; a row is read whole before any of it is written, so out may be
/// y or g.
template <typename T>
__global__ void scaledMaskedSoftmaxGradKernel(int64_t rows, int64_t len, const T *y, const T *g,
                                              RowMask mask, T scale, bool divide, T *out) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const uint8_t *rowMask = mask.mask.row(row);
    const int64_t base = row * len;
    double sum = 0;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
      sum += static_cast<double>(T(g[base + j] * y[base + j]));
    const T rowSum = static_cast<T>(blockReduce(sum, SumOp(), 0.0));
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
      out[base + j] = mask.hides(rowMask, j)
                          ? T(0)
                          : scaled(T(y[base + j] * (g[base + j] - rowSum)), scale, divide);
  }
}

/// y = (x - mean) * invStd * scale + bias over rows of `inner` elements.
/// scaleMod / biasMod > 0: the parameter's offset is j % mod (its shape is a
/// suffix of x's); 0: the offset comes from `params` (general broadcast).
__global__ void layerNormKernel(int64_t rows, int64_t inner, const float *x, const float *scale,
                                const float *bias, float *y, float *mean, float *invStdDev,
                                float epsilon, int64_t scaleMod, int64_t biasMod,
                                Layout<2> params) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float *xr = x + row * inner;
    double sum = 0;
    for (int64_t j = threadIdx.x; j < inner; j += blockDim.x)
      sum += xr[j];
    double mu = blockReduce(sum, SumOp(), 0.0) / static_cast<double>(inner);
    double squares = 0;
    for (int64_t j = threadIdx.x; j < inner; j += blockDim.x) {
      double d = xr[j] - mu;
      squares += d * d;
    }
    double var = blockReduce(squares, SumOp(), 0.0) / static_cast<double>(inner);
    // The statistic in f32, ONNX's default stash_type (as the CPU kernel).
    float inv = 1.0f / ::sqrtf(static_cast<float>(var) + epsilon);
    float m = static_cast<float>(mu);
    for (int64_t j = threadIdx.x; j < inner; j += blockDim.x) {
      int64_t off[2] = {0, 0};
      if (scaleMod == 0 || (bias && biasMod == 0))
        params.offsets(row * inner + j, off);
      float s = scale[scaleMod ? j % scaleMod : off[0]];
      float b = bias ? bias[biasMod ? j % biasMod : off[1]] : 0.0f;
      y[row * inner + j] = (xr[j] - m) * inv * s + b;
    }
    if (threadIdx.x == 0) {
      if (mean)
        mean[row] = m;
      if (invStdDev)
        invStdDev[row] = inv;
    }
  }
}

/// Layer normalisation's input gradient over layerNormKernel's rows, its
/// scale broadcast the same way: out = inv (g - mean(g) - xhat mean(g
/// xhat)), g = grad scale, xhat = (x - mean) inv, each op rounded to f32 as
/// the unfused rule's kernels round it, the means summed in double; a row
/// is read whole before any of it is written, so out may be x or grad.
__global__ void layerNormGradKernel(int64_t rows, int64_t inner, const float *x, const float *scale,
                                    const float *mean, const float *inv, const float *grad,
                                    float *out, int64_t scaleMod, Layout<2> params) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float *xr = x + row * inner, *gr = grad + row * inner;
    const float m = mean[row], s = inv[row];
    auto gradAt = [&](int64_t j) {
      int64_t off[2] = {0, 0};
      if (scaleMod == 0)
        params.offsets(row * inner + j, off);
      return gr[j] * scale[scaleMod ? j % scaleMod : off[0]];
    };
    double sumG = 0, sumGXhat = 0;
    for (int64_t j = threadIdx.x; j < inner; j += blockDim.x) {
      float g = gradAt(j), xhat = (xr[j] - m) * s;
      sumG += g;
      sumGXhat += static_cast<double>(g * xhat);
    }
    const auto n = static_cast<double>(inner);
    const auto meanG = static_cast<float>(blockReduce(sumG, SumOp(), 0.0) / n);
    const auto meanGXhat = static_cast<float>(blockReduce(sumGXhat, SumOp(), 0.0) / n);
    for (int64_t j = threadIdx.x; j < inner; j += blockDim.x) {
      float g = gradAt(j), xhat = (xr[j] - m) * s;
      out[row * inner + j] = s * ((g - meanG) - xhat * meanGXhat);
    }
  }
}

/// Inference: per-element with the given statistics.
__global__ void batchNormInferenceKernel(int64_t n, int64_t channels, int64_t spatial,
                                         const float *x, const float *scale, const float *bias,
                                         const float *mean, const float *var, float *y,
                                         float epsilon) {
  CLEAVE_GRID_LOOP(i, n) {
    int64_t c = (i / spatial) % channels;
    y[i] = scale[c] * (x[i] - mean[c]) / ::sqrtf(var[c] + epsilon) + bias[c];
  }
}

/// Training: one block per channel computes the batch statistics, writes y
/// and the updated running statistics.
__global__ void batchNormTrainingKernel(int64_t batch, int64_t channels, int64_t spatial,
                                        const float *x, const float *scale, const float *bias,
                                        const float *mean, const float *var, float *y,
                                        float *runningMean, float *runningVar, float epsilon,
                                        float momentum) {
  int64_t count = batch * spatial;
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    auto at = [=](int64_t k) {
      return (k / spatial) * channels * spatial + c * spatial + k % spatial;
    };
    double sum = 0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x)
      sum += x[at(k)];
    double mu = blockReduce(sum, SumOp(), 0.0) / static_cast<double>(count);
    double squares = 0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      double d = x[at(k)] - mu;
      squares += d * d;
    }
    double batchVar = blockReduce(squares, SumOp(), 0.0) / static_cast<double>(count);
    float m = static_cast<float>(mu);
    float v = static_cast<float>(batchVar);
    float s = scale[c], b = bias[c];
    float denominator = ::sqrtf(v + epsilon);
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      int64_t i = at(k);
      y[i] = s * (x[i] - m) / denominator + b;
    }
    if (threadIdx.x == 0) {
      float oldMean = mean[c], oldVar = var[c];
      if (runningMean)
        runningMean[c] = oldMean * momentum + m * (1.0f - momentum);
      if (runningVar)
        runningVar[c] = oldVar * momentum + v * (1.0f - momentum);
    }
  }
}

/// The parameter's offset within the normalised block is j % mod when its
/// shape (leading 1s dropped) is a suffix of x's dims [axis, rank); else 0.
int64_t suffixMod(const Tensor &param, const Tensor &x, int64_t axis) {
  int lead = 0;
  while (lead < param.rank() && param.shape[lead] == 1)
    ++lead;
  int k = param.rank() - lead;
  if (k > x.rank() - axis)
    return 0;
  for (int d = 0; d < k; ++d)
    if (param.shape[lead + d] != x.shape[x.rank() - k + d])
      return 0;
  return param.numel();
}

} // namespace

/// A gradient kernel's operands: `grad` (the output's gradient) and `out`
/// (the input's) of `like`'s element type and count.
void requireGradOperands(const char *kernel, const Tensor &like, const Tensor &grad,
                         const Tensor &out) {
  requireSameType(kernel, like, grad);
  requireSameType(kernel, like, out);
  requireNumel(kernel, grad, like.numel(), "grad");
  requireNumel(kernel, out, like.numel(), "the result");
}

/// Softmax's rows along `axis` of `in`: (outer x inner) rows of `len`
/// elements `inner` apart; fails on an axis out of range.
struct SoftmaxRows {
  int64_t rows, len, inner;
};
SoftmaxRows softmaxRows(const char *kernel, const Tensor &in, int64_t axis) {
  if (axis < 0)
    axis += in.rank();
  if (axis < 0 || axis >= in.rank())
    fail(kernel, "axis %lld out of range for rank %d", static_cast<long long>(axis), in.rank());
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d)
    outer *= in.shape[d];
  for (int d = axis + 1; d < in.rank(); ++d)
    inner *= in.shape[d];
  return {outer * inner, in.shape[axis], inner};
}

/// Calls `launch(tag, blocks, threads)` for `dtype`'s element type with a
/// block per row of `r` (none when it has no element), then checks the launch.
template <typename Launch>
void launchOverRows(const char *kernel, DType dtype, const SoftmaxRows &r, Launch &&launch) {
  dispatch(kernel, dtype, FloatTypes{}, [&](auto tag) {
    if (r.rows == 0 || r.len == 0)
      return;
    launch(tag, blocksForItems(r.rows), threadsForReduction(r.len));
    checkLaunch(kernel);
  });
}

void softmaxImpl(Context &ctx, const char *kernel, const Tensor &in, const Tensor &out,
                 int64_t axis, bool log) {
  requireSameType(kernel, in, out);
  requireNumel(kernel, in, out.numel(), "the input");
  SoftmaxRows r = softmaxRows(kernel, in, axis);
  launchOverRows(kernel, in.dtype, r, [&](auto tag, unsigned blocks, int threads) {
    using T = typename decltype(tag)::type;
    if (log)
      softmaxKernel<T, true>
          <<<blocks, threads, 0, ctx.stream>>>(r.rows, r.len, r.inner, in.as<T>(), out.as<T>());
    else
      softmaxKernel<T, false>
          <<<blocks, threads, 0, ctx.stream>>>(r.rows, r.len, r.inner, in.as<T>(), out.as<T>());
  });
}

} // namespace detail

using namespace detail;

void softmax(Context &ctx, const Tensor &in, const Tensor &out, int64_t axis) {
  softmaxImpl(ctx, "softmax", in, out, axis, false);
}

void log_softmax(Context &ctx, const Tensor &in, const Tensor &out, int64_t axis) {
  softmaxImpl(ctx, "log_softmax", in, out, axis, true);
}

void softmax_grad(Context &ctx, const Tensor &y, const Tensor &grad, const Tensor &out,
                  int64_t axis) {
  const char *kernel = "softmax_grad";
  requireGradOperands(kernel, y, grad, out);
  SoftmaxRows r = softmaxRows(kernel, y, axis);
  launchOverRows(kernel, y.dtype, r, [&](auto tag, unsigned blocks, int threads) {
    using T = typename decltype(tag)::type;
    softmaxGradKernel<T><<<blocks, threads, 0, ctx.stream>>>(r.rows, r.len, r.inner, y.as<T>(),
                                                             grad.as<T>(), out.as<T>());
  });
}

namespace {

/// `operand` (or none) broadcast to x's shape (x has a dim), read along
/// x's rows.
template <typename E>
RowOperand<E> rowOperand(const char *kernel, const Tensor &x, const Tensor *operand) {
  RowOperand<E> r;
  if (!operand)
    return r;
  int64_t strides[kMaxRank];
  broadcastStrides(kernel, *operand, x.shape, strides);
  r.data = operand->as<E>();
  r.rows.rank = x.rank() - 1;
  for (int d = 0; d < r.rows.rank; ++d) {
    r.rows.dims[d] = x.shape[d];
    r.rows.strides[0][d] = strides[d];
  }
  r.rows.simplify();
  r.step = strides[x.rank() - 1];
  return r;
}

/// `mask` (or none) broadcast to x's shape, read along x's rows.
RowMask rowMask(const char *kernel, const Tensor &x, const Tensor *mask, bool maskKeeps) {
  if (x.rank() == 0)
    fail(kernel, "the input has no dim to normalise");
  if (mask)
    requireType(kernel, *mask, DType::Bool, "the mask");
  return RowMask{rowOperand<uint8_t>(kernel, x, mask), static_cast<uint8_t>(maskKeeps ? 0 : 1)};
}

} // namespace

void scaled_masked_softmax(Context &ctx, const Tensor &x, const Tensor *mask, const Tensor *bias,
                           const Tensor &out, float scale, bool divide, float fill,
                           bool maskKeeps) {
  const char *kernel = "scaled_masked_softmax";
  requireSameType(kernel, x, out);
  requireNumel(kernel, out, x.numel(), "the result");
  RowMask m = rowMask(kernel, x, mask, maskKeeps);
  if (bias)
    requireType(kernel, *bias, x.dtype, "the bias");
  SoftmaxRows r = softmaxRows(kernel, x, x.rank() - 1);
  launchOverRows(kernel, x.dtype, r, [&](auto tag, unsigned blocks, int threads) {
    using T = typename decltype(tag)::type;
    const int64_t rowBytes = r.len * static_cast<int64_t>(sizeof(T));
    const RowOperand<T> b = rowOperand<T>(kernel, x, bias);
    if (rowBytes <= kSharedRowBytes)
      scaledMaskedSoftmaxKernel<T, true><<<blocks, threads, rowBytes, ctx.stream>>>(
          r.rows, r.len, x.as<T>(), m, b, static_cast<T>(scale), divide, static_cast<T>(fill),
          out.as<T>());
    else
      scaledMaskedSoftmaxKernel<T, false><<<blocks, threads, 0, ctx.stream>>>(
          r.rows, r.len, x.as<T>(), m, b, static_cast<T>(scale), divide, static_cast<T>(fill),
          out.as<T>());
  });
}

void scaled_masked_softmax_grad(Context &ctx, const Tensor &y, const Tensor &grad,
                                const Tensor *mask, const Tensor &out, float scale, bool divide,
                                bool maskKeeps) {
  const char *kernel = "scaled_masked_softmax_grad";
  requireGradOperands(kernel, y, grad, out);
  RowMask m = rowMask(kernel, y, mask, maskKeeps);
  SoftmaxRows r = softmaxRows(kernel, y, y.rank() - 1);
  launchOverRows(kernel, y.dtype, r, [&](auto tag, unsigned blocks, int threads) {
    using T = typename decltype(tag)::type;
    scaledMaskedSoftmaxGradKernel<T><<<blocks, threads, 0, ctx.stream>>>(
        r.rows, r.len, y.as<T>(), grad.as<T>(), m, static_cast<T>(scale), divide, out.as<T>());
  });
}

namespace {

/// A layer normalisation's rows of `inner` elements, and how its scale and
/// bias broadcast over them: layerNormKernel's and layerNormGradKernel's
/// scaleMod, biasMod and params.
struct LayerNormRows {
  int64_t rows = 1, inner = 1, scaleMod = 1, biasMod = 1;
  Layout<2> params;
};

LayerNormRows layerNormRows(const char *kernel, const Tensor &x, int64_t axis, const Tensor &scale,
                            const Tensor *bias) {
  requireType(kernel, x, DType::F32, "x");
  requireType(kernel, scale, DType::F32, "the scale");
  if (bias)
    requireType(kernel, *bias, DType::F32, "the bias");
  if (axis < 0)
    axis += x.rank();
  if (axis < 0 || axis > x.rank())
    fail(kernel, "axis %lld out of range for rank %d", static_cast<long long>(axis), x.rank());
  LayerNormRows r;
  for (int d = 0; d < axis; ++d)
    r.rows *= x.shape[d];
  for (int d = static_cast<int>(axis); d < x.rank(); ++d)
    r.inner *= x.shape[d];
  r.scaleMod = suffixMod(scale, x, axis);
  r.biasMod = bias ? suffixMod(*bias, x, axis) : 1;
  r.params.rank = x.rank();
  for (int d = 0; d < x.rank(); ++d)
    r.params.dims[d] = x.shape[d];
  broadcastStrides(kernel, scale, x.shape, r.params.strides[0]);
  if (bias)
    broadcastStrides(kernel, *bias, x.shape, r.params.strides[1]);
  r.params.simplify();
  return r;
}

/// A statistic of `rows` values, optional where `optional`.
void requireStatistic(const char *kernel, const Tensor &stat, int64_t rows, bool optional) {
  if (optional && !stat.data)
    return;
  requireType(kernel, stat, DType::F32, "mean and invStdDev");
  requireNumel(kernel, stat, rows, "mean or invStdDev");
}

} // namespace

void layer_normalization(Context &ctx, const Tensor &x, const Tensor &scale, const Tensor *bias,
                         const Tensor &y, const Tensor &mean, const Tensor &invStdDev, int64_t axis,
                         float epsilon) {
  const char *kernel = "layer_normalization";
  LayerNormRows r = layerNormRows(kernel, x, axis, scale, bias);
  requireType(kernel, y, DType::F32, "y");
  requireNumel(kernel, y, x.numel(), "y");
  for (const Tensor *stat : {&mean, &invStdDev})
    requireStatistic(kernel, *stat, r.rows, /*optional=*/true);
  if (r.rows == 0 || r.inner == 0)
    return;
  layerNormKernel<<<blocksForItems(r.rows), threadsForReduction(r.inner), 0, ctx.stream>>>(
      r.rows, r.inner, x.as<float>(), scale.as<float>(), bias ? bias->as<float>() : nullptr,
      y.as<float>(), mean.as<float>(), invStdDev.as<float>(), epsilon, r.scaleMod, r.biasMod,
      r.params);
  checkLaunch(kernel);
}

void layer_normalization_grad(Context &ctx, const Tensor &x, const Tensor &scale,
                              const Tensor &mean, const Tensor &invStdDev, const Tensor &grad,
                              const Tensor &out, int64_t axis) {
  const char *kernel = "layer_normalization_grad";
  LayerNormRows r = layerNormRows(kernel, x, axis, scale, nullptr);
  requireGradOperands(kernel, x, grad, out);
  for (const Tensor *stat : {&mean, &invStdDev})
    requireStatistic(kernel, *stat, r.rows, /*optional=*/false);
  if (r.rows == 0 || r.inner == 0)
    return;
  layerNormGradKernel<<<blocksForItems(r.rows), threadsForReduction(r.inner), 0, ctx.stream>>>(
      r.rows, r.inner, x.as<float>(), scale.as<float>(), mean.as<float>(), invStdDev.as<float>(),
      grad.as<float>(), out.as<float>(), r.scaleMod, r.params);
  checkLaunch(kernel);
}

void batch_normalization(Context &ctx, const Tensor &x, const Tensor &scale, const Tensor &bias,
                         const Tensor &mean, const Tensor &var, const Tensor &y,
                         const Tensor &runningMean, const Tensor &runningVar, float epsilon,
                         float momentum, bool training) {
  const char *kernel = "batch_normalization";
  if (x.rank() < 2)
    fail(kernel, "x has rank %d, expected N x C x ...", x.rank());
  int64_t batch = x.shape[0], channels = x.shape[1], spatial = 1;
  for (int d = 2; d < x.rank(); ++d)
    spatial *= x.shape[d];
  for (const Tensor *t : {&x, &scale, &bias, &mean, &var, &y})
    requireType(kernel, *t, DType::F32, "every operand");
  requireNumel(kernel, y, x.numel(), "y");
  for (const Tensor *t : {&scale, &bias, &mean, &var})
    requireNumel(kernel, *t, channels, "a per-channel operand");
  for (const Tensor *t : {&runningMean, &runningVar}) {
    if (!t->data)
      continue;
    requireType(kernel, *t, DType::F32, "the running statistics");
    requireNumel(kernel, *t, channels, "a running statistic");
  }
  int64_t n = x.numel();
  if (training) {
    if (channels == 0)
      return;
    batchNormTrainingKernel<<<blocksForItems(channels), threadsForReduction(batch * spatial), 0,
                              ctx.stream>>>(
        batch, channels, spatial, x.as<float>(), scale.as<float>(), bias.as<float>(),
        mean.as<float>(), var.as<float>(), y.as<float>(), runningMean.as<float>(),
        runningVar.as<float>(), epsilon, momentum);
    checkLaunch(kernel);
    return;
  }
  if (n > 0) {
    batchNormInferenceKernel<<<blocksFor(n), kThreads, 0, ctx.stream>>>(
        n, channels, spatial, x.as<float>(), scale.as<float>(), bias.as<float>(),
        mean.as<float>(), var.as<float>(), y.as<float>(), epsilon);
    checkLaunch(kernel);
  }
  const Tensor *copies[2][2] = {{&mean, &runningMean}, {&var, &runningVar}};
  for (auto &pair : copies)
    if (pair[1]->data && pair[1]->data != pair[0]->data && channels > 0)
      check(cudaMemcpyAsync(pair[1]->data, pair[0]->data, channels * sizeof(float),
                            cudaMemcpyDeviceToDevice, ctx.stream),
            kernel);
}

} // namespace cleave::rt::cuda
