//===- Normalization.cpp - softmax, layer and batch norm, dropout ---------===//

#include "runtime/cpu/Support.h"

#include "runtime/Random.h"

#include <algorithm>
#include <type_traits>
#include <vector>

namespace cleave::rt::cpu {
namespace {

int64_t normalizeAxis(const char *kernel, int64_t axis, int rank) {
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= std::max(rank, 1))
    fail(kernel, "axis %lld out of range for rank %d", static_cast<long long>(axis), rank);
  return axis;
}

/// The largest of x[0..n) (-inf for none; NaNs skipped), over kLanes
/// interleaved partial results combined in lane order: independent lanes
/// let GCC vectorise what one running value (a chain of dependent
/// instructions) cannot (sumRow, Support.h, does the same for sums).
constexpr int64_t kLanes = 16;

template <typename T> T rowMax(const T *x, int64_t n) {
  T lane[kLanes];
  std::fill(lane, lane + kLanes, -std::numeric_limits<T>::infinity());
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j)
      lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  for (; i < n; ++i)
    lane[0] = x[i] > lane[0] ? x[i] : lane[0];
  T m = lane[0];
  for (int64_t j = 1; j < kLanes; ++j)
    m = lane[j] > m ? lane[j] : m;
  return m;
}


/// y[i] = exp(x[i] - m) for x[i] <= m, flushed to zero where it is within
/// e of T's smallest normal (below 3.2e-38 in f32); y may be x. libmvec's
/// vector expf computes a vector holding any argument past about
/// ln(FLT_MIN) (a masked score's -inf) one lane at a time, at a tenth of
/// the speed here, so the arguments are clamped first, in a loop of their
/// own (in one loop GCC folds the clamp into a choice between exp(floor)
/// and exp(x)). The flushed values add nothing to sums of at least 1.
template <typename T> void shiftedExp(const T *x, int64_t n, T m, T *y) {
  const T floor = std::log(std::numeric_limits<T>::min()) + 1;
  const T flushBelow = T(1.5) * std::exp(floor);
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i] - m < floor ? floor : x[i] - m;
  for (int64_t i = 0; i < n; ++i) {
    const T e = std::exp(y[i]);
    y[i] = e < flushBelow ? T(0) : e;
  }
}

/// Numerically stable (log) softmax over one contiguous row of n. The
/// exponentials go into the result first (log softmax reads x again after,
/// so there y may not be x).
template <typename T, bool Log> void softmaxRow(const T *x, T *y, int64_t n) {
  const T m = rowMax(x, n);
  shiftedExp(x, n, m, y);
  const T sum = static_cast<T>(sumRow(y, n));
  if constexpr (Log) {
    const T logSum = std::log(sum);
    for (int64_t i = 0; i < n; ++i)
      y[i] = (x[i] - m) - logSum;
  } else {
    const T inv = T(1) / sum;
    for (int64_t i = 0; i < n; ++i)
      y[i] *= inv;
  }
}

/// Numerically stable (log) softmax over the middle dim of outer x n x inner.
template <typename T, bool Log>
void softmaxOver(const T *x, T *y, int64_t outer, int64_t n, int64_t inner) {
  const T lowest = -std::numeric_limits<T>::infinity();
  if (inner == 1) {
    for (int64_t o = 0; o < outer; ++o)
      softmaxRow<T, Log>(x + o * n, y + o * n, n);
    return;
  }
  // The axis is strided: walk chunks of the contiguous inner dim at once.
  constexpr int64_t kChunk = 256;
  T m[kChunk], sum[kChunk];
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j0 = 0; j0 < inner; j0 += kChunk) {
      int64_t w = std::min(kChunk, inner - j0);
      const T *xb = x + o * n * inner + j0;
      T *yb = y + o * n * inner + j0;
      for (int64_t j = 0; j < w; ++j) {
        m[j] = lowest;
        sum[j] = 0;
      }
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < w; ++j)
          m[j] = xb[i * inner + j] > m[j] ? xb[i * inner + j] : m[j];
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < w; ++j) {
          T e = std::exp(xb[i * inner + j] - m[j]);
          if constexpr (!Log)
            yb[i * inner + j] = e;
          sum[j] += e;
        }
      for (int64_t j = 0; j < w; ++j)
        sum[j] = Log ? std::log(sum[j]) : T(1) / sum[j];
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < w; ++j) {
          if constexpr (Log)
            yb[i * inner + j] = (xb[i * inner + j] - m[j]) - sum[j];
          else
            yb[i * inner + j] *= sum[j];
        }
    }
  }
}

/// A tensor's dims around `axis`: outer x n x inner.
struct AxisSplit {
  int64_t outer, n, inner;
};
AxisSplit splitAtAxis(const char *kernel, const Tensor &t, int64_t axis) {
  axis = normalizeAxis(kernel, axis, t.rank());
  return {product(t.shape, 0, static_cast<int>(axis)),
          t.rank() == 0 ? 1 : t.shape[static_cast<int>(axis)],
          product(t.shape, static_cast<int>(axis) + 1, t.rank())};
}

/// Calls f(begin, count) for runs of `count` outer slices starting at
/// element `begin`, split among the context's threads (each slice computed
/// alone, so the results do not depend on how many).
template <typename F> void forEachOuterSlices(const Context &ctx, const AxisSplit &split, F f) {
  const int64_t slice = split.n * split.inner;
  if (split.outer * slice == 0)
    return;
  forEachChunk(ctx, split.outer * slice, slice,
               [&](int64_t begin, int64_t end) { f(begin, (end - begin) / slice); });
}

template <bool Log>
void softmaxKernel(const Context &ctx, const char *kernel, const Tensor &in, const Tensor &out,
                   int64_t axis) {
  checkSameLayout(kernel, in, out);
  if (Log && in.data == out.data)
    fail(kernel, "the result may not be the input's buffer");
  AxisSplit split = splitAtAxis(kernel, in, axis);
  dispatch(kernel, in.dtype, FloatTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    forEachOuterSlices(ctx, split, [&](int64_t begin, int64_t count) {
      softmaxOver<T, Log>(in.as<T>() + begin, out.as<T>() + begin, count, split.n, split.inner);
    });
  });
}

/// sum(g y) over one contiguous row of n, each product rounded to T and
/// the products summed in double (as mul, then reduce_sum, would), in a loop
/// GCC vectorises over sumRow's lanes.
template <typename T> T productSum(const T *y, const T *g, int64_t n) {
  double lane[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j)
      lane[j] += static_cast<double>(T(g[i + j] * y[i + j]));
  for (; i < n; ++i)
    lane[0] += static_cast<double>(T(g[i] * y[i]));
  double total = lane[0];
  for (int j = 1; j < 8; ++j)
    total += lane[j];
  return static_cast<T>(total);
}

/// out = y (g - sum(g y)) over the middle dim of outer x n x inner. Each
/// product is rounded to T and the products summed in double (as mul, then
/// reduce_sum, would); every row's (column's) sum is taken before any of its
/// elements is written, so out may be y or g.
template <typename T>
void softmaxGradOver(const T *y, const T *g, T *out, int64_t outer, int64_t n, int64_t inner) {
  if (inner == 1) {
    for (int64_t o = 0; o < outer; ++o) {
      const T *yr = y + o * n, *gr = g + o * n;
      T *outRow = out + o * n;
      const T sum = productSum(yr, gr, n);
      for (int64_t k = 0; k < n; ++k)
        outRow[k] = yr[k] * (gr[k] - sum);
    }
    return;
  }
  // The axis is strided: chunks of the contiguous inner dim at once.
  constexpr int64_t kChunk = 256;
  double sum[kChunk];
  T rowSum[kChunk];
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j0 = 0; j0 < inner; j0 += kChunk) {
      int64_t w = std::min(kChunk, inner - j0), base = o * n * inner + j0;
      const T *yb = y + base, *gb = g + base;
      T *ob = out + base;
      std::fill(sum, sum + w, 0.0);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < w; ++j)
          sum[j] += static_cast<double>(T(gb[i * inner + j] * yb[i * inner + j]));
      for (int64_t j = 0; j < w; ++j)
        rowSum[j] = static_cast<T>(sum[j]);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < w; ++j)
          ob[i * inner + j] = yb[i * inner + j] * (gb[i * inner + j] - rowSum[j]);
    }
  }
}

/// out = inv (g - mean(g) - xhat mean(g xhat)), g = grad scale and xhat =
/// (x - mean) inv, over rows of `cols` (`scaleRow`: the scale broadcast to a
/// row). Each product and difference is rounded to T as the unfused rule's
/// kernels round it; the sums run in f32 lanes (f64 for f64 data), which
/// `omp simd` vectorises (GCC's own vectoriser kept the two sums in scalar
/// registers: 4-5 times slower). A row's sums are taken before any of it is
/// written, so out may be x or grad.
template <typename T>
void layerNormGradRows(const T *x, const T *scaleRow, const T *mean, const T *inv, const T *grad,
                       T *out, int64_t rowBegin, int64_t rowEnd, int64_t cols) {
  using Sum = std::conditional_t<std::is_same_v<T, double>, double, float>;
  for (int64_t r = rowBegin; r < rowEnd; ++r) {
    const T *xr = x + r * cols, *gr = grad + r * cols;
    T *outRow = out + r * cols;
    const T m = mean[r], s = inv[r];
    Sum sumG = 0, sumGXhat = 0;
#pragma omp simd reduction(+ : sumG, sumGXhat)
    for (int64_t k = 0; k < cols; ++k) {
      T g = gr[k] * scaleRow[k];
      T xhat = (xr[k] - m) * s;
      sumG += static_cast<Sum>(g);
      sumGXhat += static_cast<Sum>(T(g * xhat));
    }
    const auto n = static_cast<double>(cols);
    const T meanG = static_cast<T>(static_cast<double>(sumG) / n);
    const T meanGXhat = static_cast<T>(static_cast<double>(sumGXhat) / n);
    for (int64_t k = 0; k < cols; ++k) {
      T g = gr[k] * scaleRow[k];
      T xhat = (xr[k] - m) * s;
      outRow[k] = s * ((g - meanG) - xhat * meanGXhat);
    }
  }
}

/// Writes one statistic to an optional f32 or f64 output.
void storeStat(const char *kernel, const Tensor &t, int64_t i, double v) {
  if (!t.data)
    return;
  if (t.dtype == DType::F32)
    t.as<float>()[i] = static_cast<float>(v);
  else if (t.dtype == DType::F64)
    t.as<double>()[i] = v;
  else
    failType(kernel, t.dtype);
}

/// `param`'s shape without leading unit dims beyond `rank` (so it can
/// broadcast over the normalised dims only).
Dims trimmedTo(const char *kernel, const Dims &param, int rank) {
  Dims d;
  int skip = param.size - rank;
  for (int i = 0; i < param.size; ++i) {
    if (i < skip) {
      if (param[i] != 1)
        fail(kernel, "scale or bias broadcasts beyond the normalised dims");
      continue;
    }
    d.values[d.size++] = param[i];
  }
  return d;
}

/// `param` (a layer normalisation's scale or bias, broadcast over the
/// `normShape` dims from its axis on) as one row of `cols`, which every row
/// reads.
template <typename T>
std::vector<T> broadcastRow(const char *kernel, const Tensor &param, const Dims &normShape,
                            int64_t cols) {
  Dims shape = trimmedTo(kernel, param.shape, normShape.size);
  const Dims *only[1] = {&shape};
  LoopNest<2> nest = broadcastNest<2>(kernel, normShape, only);
  std::vector<T> row(static_cast<std::size_t>(cols));
  const T *p = param.as<T>();
  nest.forEachRow([&](const int64_t *off, int64_t n, const int64_t *step) {
    for (int64_t k = 0; k < n; ++k)
      row[static_cast<std::size_t>(off[0] + k)] = p[off[1] + k * step[1]];
  });
  return row;
}

/// The dims of `x` from `axis` on: what a layer normalisation normalises.
Dims normalisedDims(const Tensor &x, int axis) {
  Dims dims;
  for (int d = axis; d < x.rank(); ++d)
    dims.values[dims.size++] = x.shape[d];
  return dims;
}

/// An operand broadcast to x's shape (x has a dim), read along each of x's
/// rows (its last dim): where a row's first element is, and the step
/// between its elements (1, or 0 for an operand whose last dim is 1).
class BroadcastRows {
public:
  BroadcastRows() = default;
  BroadcastRows(const char *kernel, const Tensor &operand, const Tensor &x) {
    int64_t strides[kMaxRank];
    broadcastStrides(kernel, operand.shape, x.shape, strides);
    lead = x.shape;
    --lead.size;
    std::copy(strides, strides + lead.size, leadStrides);
    step = strides[lead.size];
  }

  /// The operand's offset of row `row`'s first element.
  int64_t offset(int64_t row) const {
    int64_t at = 0;
    for (int d = lead.size - 1; d >= 0; --d) {
      at += (row % lead[d]) * leadStrides[d];
      row /= lead[d];
    }
    return at;
  }

  int64_t step = 0;

private:
  Dims lead;
  int64_t leadStrides[kMaxRank] = {};
};

/// A mask broadcast to x's shape, read along each of x's rows: which value
/// of it hides an element (1, or 0 for a mask of the elements kept); no
/// mask hides nothing.
class MaskRows {
public:
  MaskRows(const char *kernel, const Tensor &x, const Tensor *mask, bool maskKeeps)
      : hides(maskKeeps ? 0 : 1) {
    if (x.rank() == 0)
      fail(kernel, "the input has no dim to normalise");
    if (!mask)
      return;
    checkType(kernel, *mask, DType::Bool);
    rows = BroadcastRows(kernel, *mask, x);
    data = mask->as<uint8_t>();
  }

  /// out[k] = fill where row r's mask hides k, else value(k), over the
  /// row's n elements. Every value(k) is computed, so the choice is a
  /// blend, which GCC vectorises with the mask read as bytes (it vectorises
  /// no load of bool); a mask whose last dim is 1 is read once a row.
  template <typename T, typename Value>
  void apply(int64_t r, T fill, T *out, int64_t n, Value value) const {
    const uint8_t *m = data ? data + rows.offset(r) : nullptr;
    if (!m || rows.step == 0) {
      if (m && m[0] == hides)
        std::fill(out, out + n, fill);
      else
        for (int64_t k = 0; k < n; ++k)
          out[k] = value(k);
      return;
    }
    for (int64_t k = 0; k < n; ++k) {
      const T v = value(k);
      out[k] = m[k] == hides ? fill : v;
    }
  }

private:
  const uint8_t *data = nullptr;
  uint8_t hides;
  BroadcastRows rows;
};

/// A bias of x's element type broadcast to x's shape and added to each row
/// of scaled scores; no bias adds nothing.
template <typename T> class BiasRows {
public:
  BiasRows(const char *kernel, const Tensor &x, const Tensor *bias) {
    if (!bias)
      return;
    checkType(kernel, *bias, x.dtype);
    rows = BroadcastRows(kernel, *bias, x);
    data = bias->as<T>();
  }

  /// Calls body(value) with value(k) the k-th score of row r plus its bias,
  /// rounded to T, or the score itself without a bias: the bias's step is a
  /// constant of the loop, so that GCC vectorises it.
  template <typename Score, typename Body> void apply(int64_t r, Score score, Body body) const {
    if (!data)
      return body(score);
    const T *b = data + rows.offset(r);
    if (rows.step == 0)
      return body([&](int64_t k) { return T(score(k) + b[0]); });
    body([&](int64_t k) { return T(score(k) + b[k]); });
  }

private:
  const T *data = nullptr;
  BroadcastRows rows;
};

/// Calls rows(first, last, n) over runs of x's rows along its last dim (n
/// long), split among the context's threads.
template <typename F> void forEachRows(const Context &ctx, const Tensor &x, F rows) {
  const int64_t n = x.shape[x.rank() - 1], total = x.numel();
  if (total == 0)
    return;
  forEachChunk(ctx, total, n, [&](int64_t begin, int64_t end) { rows(begin / n, end / n, n); });
}

/// v scale, or v / scale with Divide, rounded to T.
template <typename T, bool Divide> T scaled(T v, T scale) {
  return Divide ? T(v / scale) : T(v * scale);
}

/// Runs body(std::bool_constant<divide>), so that the rows' loops know at
/// compile time whether they divide.
template <typename F> void withDivide(bool divide, F body) {
  if (divide)
    body(std::true_type{});
  else
    body(std::false_type{});
}

} // namespace

void scaled_masked_softmax(Context &ctx, const Tensor &x, const Tensor *mask, const Tensor *bias,
                           const Tensor &out, float scale, bool divide, float fill,
                           bool maskKeeps) {
  const char *kernel = "scaled_masked_softmax";
  checkSameLayout(kernel, x, out);
  const MaskRows maskRows(kernel, x, mask, maskKeeps);
  dispatch(kernel, x.dtype, FloatTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const BiasRows<T> biasRows(kernel, x, bias);
    const T s = static_cast<T>(scale), f = static_cast<T>(fill);
    withDivide(divide, [&](auto divides) {
      forEachRows(ctx, x, [&](int64_t first, int64_t last, int64_t n) {
        for (int64_t r = first; r < last; ++r) {
          const T *xr = x.as<T>() + r * n;
          T *yr = out.as<T>() + r * n;
          auto score = [&](int64_t k) { return scaled<T, decltype(divides)::value>(xr[k], s); };
          biasRows.apply(r, score, [&](auto value) { maskRows.apply(r, f, yr, n, value); });
          softmaxRow<T, false>(yr, yr, n);
        }
      });
    });
  });
}

void scaled_masked_softmax_grad(Context &ctx, const Tensor &y, const Tensor &grad,
                                const Tensor *mask, const Tensor &out, float scale, bool divide,
                                bool maskKeeps) {
  const char *kernel = "scaled_masked_softmax_grad";
  checkSameLayout(kernel, y, grad);
  checkSameLayout(kernel, y, out);
  const MaskRows maskRows(kernel, y, mask, maskKeeps);
  dispatch(kernel, y.dtype, FloatTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T s = static_cast<T>(scale);
    withDivide(divide, [&](auto divides) {
      forEachRows(ctx, y, [&](int64_t first, int64_t last, int64_t n) {
        for (int64_t r = first; r < last; ++r) {
          const T *yr = y.as<T>() + r * n, *gr = grad.as<T>() + r * n;
          const T sum = productSum(yr, gr, n);
          maskRows.apply(r, T(0), out.as<T>() + r * n, n, [&](int64_t k) {
            return scaled<T, decltype(divides)::value>(T(yr[k] * (gr[k] - sum)), s);
          });
        }
      });
    });
  });
}

void softmax(Context &ctx, const Tensor &in, const Tensor &out, int64_t axis) {
  softmaxKernel<false>(ctx, "softmax", in, out, axis);
}

void log_softmax(Context &ctx, const Tensor &in, const Tensor &out, int64_t axis) {
  softmaxKernel<true>(ctx, "log_softmax", in, out, axis);
}

void softmax_grad(Context &ctx, const Tensor &y, const Tensor &grad, const Tensor &out,
                  int64_t axis) {
  const char *kernel = "softmax_grad";
  checkSameLayout(kernel, y, grad);
  checkSameLayout(kernel, y, out);
  AxisSplit split = splitAtAxis(kernel, y, axis);
  dispatch(kernel, y.dtype, FloatTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    forEachOuterSlices(ctx, split, [&](int64_t begin, int64_t count) {
      softmaxGradOver<T>(y.as<T>() + begin, grad.as<T>() + begin, out.as<T>() + begin, count,
                         split.n, split.inner);
    });
  });
}

void layer_normalization(Context &ctx, const Tensor &x, const Tensor &scale, const Tensor *bias,
                         const Tensor &y, const Tensor &mean, const Tensor &invStdDev, int64_t axis,
                         float epsilon) {
  const char *kernel = "layer_normalization";
  checkSameLayout(kernel, x, y);
  checkType(kernel, scale, x.dtype);
  if (bias)
    checkType(kernel, *bias, x.dtype);
  const int a = static_cast<int>(normalizeAxis(kernel, axis, x.rank()));
  const int64_t rows = product(x.shape, 0, a), cols = product(x.shape, a, x.rank());
  const Dims normShape = normalisedDims(x, a);
  dispatch(kernel, x.dtype, FloatTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const std::vector<T> scaleRow = broadcastRow<T>(kernel, scale, normShape, cols);
    const std::vector<T> biasRow =
        bias ? broadcastRow<T>(kernel, *bias, normShape, cols) : std::vector<T>();
    const T *s = scaleRow.data(), *b = bias ? biasRow.data() : nullptr;
    // Rows apart on the threads (an empty row still has its statistics).
    const int64_t grain = std::max<int64_t>(cols, 1);
    forEachChunk(ctx, rows * grain, grain, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin / grain; r < end / grain; ++r) {
        const T *xr = x.as<T>() + r * cols;
        T *yr = y.as<T>() + r * cols;
        // Statistics in at least single precision, accumulated in double.
        double mu = static_cast<double>(sumRow(xr, cols)) / static_cast<double>(cols);
        double sq[8] = {};
        int64_t i = 0;
        for (; i + 8 <= cols; i += 8)
          for (int j = 0; j < 8; ++j) {
            double d = static_cast<double>(xr[i + j]) - mu;
            sq[j] += d * d;
          }
        for (; i < cols; ++i) {
          double d = static_cast<double>(xr[i]) - mu;
          sq[0] += d * d;
        }
        double var = 0;
        for (double v : sq)
          var += v;
        var /= static_cast<double>(cols);
        // The statistic is computed in f32 (ONNX's default stash_type).
        double inv = std::is_same_v<T, float>
                         ? static_cast<double>(1.0f / std::sqrt(static_cast<float>(var) + epsilon))
                         : 1.0 / std::sqrt(var + static_cast<double>(epsilon));
        storeStat(kernel, mean, r, mu);
        storeStat(kernel, invStdDev, r, inv);
        const T tm = static_cast<T>(mu), ti = static_cast<T>(inv);
        if (b) {
          for (int64_t k = 0; k < cols; ++k)
            yr[k] = T((xr[k] - tm) * ti) * s[k] + b[k];
        } else {
          for (int64_t k = 0; k < cols; ++k)
            yr[k] = T((xr[k] - tm) * ti) * s[k];
        }
      }
    });
  });
}

void layer_normalization_grad(Context &ctx, const Tensor &x, const Tensor &scale,
                              const Tensor &mean, const Tensor &invStdDev, const Tensor &grad,
                              const Tensor &out, int64_t axis) {
  const char *kernel = "layer_normalization_grad";
  checkSameLayout(kernel, x, grad);
  checkSameLayout(kernel, x, out);
  for (const Tensor *t : {&scale, &mean, &invStdDev})
    checkType(kernel, *t, x.dtype);
  const int a = static_cast<int>(normalizeAxis(kernel, axis, x.rank()));
  const int64_t rows = product(x.shape, 0, a), cols = product(x.shape, a, x.rank());
  if (mean.numel() != rows || invStdDev.numel() != rows)
    fail(kernel, "mean and invStdDev must hold one value per row (%lld)",
         static_cast<long long>(rows));
  if (rows == 0 || cols == 0)
    return;
  const Dims normShape = normalisedDims(x, a);
  dispatch(kernel, x.dtype, FloatTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const std::vector<T> scaleRow = broadcastRow<T>(kernel, scale, normShape, cols);
    forEachChunk(ctx, rows * cols, cols, [&](int64_t begin, int64_t end) {
      layerNormGradRows<T>(x.as<T>(), scaleRow.data(), mean.as<T>(), invStdDev.as<T>(),
                           grad.as<T>(), out.as<T>(), begin / cols, end / cols, cols);
    });
  });
}

void batch_normalization(Context &, const Tensor &x, const Tensor &scale, const Tensor &bias,
                         const Tensor &mean, const Tensor &var, const Tensor &y,
                         const Tensor &runningMean, const Tensor &runningVar, float epsilon,
                         float momentum, bool training) {
  const char *kernel = "batch_normalization";
  checkSameLayout(kernel, x, y);
  if (x.rank() < 2)
    fail(kernel, "input rank %d is below 2", x.rank());
  int64_t n = x.shape[0], c = x.shape[1];
  int64_t spatial = product(x.shape, 2, x.rank());
  for (const Tensor *p : {&scale, &bias, &mean, &var}) {
    checkType(kernel, *p, x.dtype);
    if (p->numel() != c)
      fail(kernel, "per-channel operand has %lld elements, expected %lld",
           static_cast<long long>(p->numel()), static_cast<long long>(c));
  }
  for (const Tensor *p : {&runningMean, &runningVar})
    if (p->data) {
      checkType(kernel, *p, x.dtype);
      if (p->numel() != c)
        fail(kernel, "running statistic has %lld elements, expected %lld",
             static_cast<long long>(p->numel()), static_cast<long long>(c));
    }

  dispatch(kernel, x.dtype, FloatTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *xs = x.as<T>();
    T *ys = y.as<T>();
    for (int64_t ch = 0; ch < c; ++ch) {
      double mu = static_cast<double>(mean.as<T>()[ch]);
      double sigma2 = static_cast<double>(var.as<T>()[ch]);
      if (training) {
        double count = static_cast<double>(n * spatial);
        double total = 0;
        for (int64_t b = 0; b < n; ++b)
          total += sumRow(xs + (b * c + ch) * spatial, spatial);
        double batchMean = count > 0 ? total / count : 0.0;
        double sq = 0;
        for (int64_t b = 0; b < n; ++b) {
          const T *p = xs + (b * c + ch) * spatial;
          for (int64_t i = 0; i < spatial; ++i) {
            double d = static_cast<double>(p[i]) - batchMean;
            sq += d * d;
          }
        }
        double batchVar = count > 0 ? sq / count : 0.0; // biased, as ONNX
        double mom = static_cast<double>(momentum);
        if (runningMean.data)
          runningMean.as<T>()[ch] = static_cast<T>(mom * mu + (1.0 - mom) * batchMean);
        if (runningVar.data)
          runningVar.as<T>()[ch] = static_cast<T>(mom * sigma2 + (1.0 - mom) * batchVar);
        mu = batchMean;
        sigma2 = batchVar;
      } else {
        if (runningMean.data)
          runningMean.as<T>()[ch] = static_cast<T>(mu);
        if (runningVar.data)
          runningVar.as<T>()[ch] = static_cast<T>(sigma2);
      }
      double a = static_cast<double>(scale.as<T>()[ch]) / std::sqrt(sigma2 + epsilon);
      T ta = static_cast<T>(a);
      T tb = static_cast<T>(static_cast<double>(bias.as<T>()[ch]) - mu * a);
      for (int64_t b = 0; b < n; ++b) {
        const T *p = xs + (b * c + ch) * spatial;
        T *q = ys + (b * c + ch) * spatial;
        for (int64_t i = 0; i < spatial; ++i)
          q[i] = p[i] * ta + tb;
      }
    }
  });
}

void dropout(Context &ctx, const Tensor &in, const Tensor *coordinate, const Tensor &out,
             const Tensor &mask, float ratio, bool training, uint64_t seed, Dims split) {
  const char *kernel = "dropout";
  checkSameLayout(kernel, in, out);
  SplitIndex index;
  if (!splitIndexOf(in.shape, split, index) || (index.parts > 1 && !coordinate))
    fail(kernel, "split {dim, parts} does not fit the input, or has no coordinate");
  int64_t rank = 0;
  if (index.parts > 1) {
    checkType(kernel, *coordinate, DType::I64);
    rank = *coordinate->as<int64_t>();
    if (rank < 0 || rank >= index.parts)
      fail(kernel, "coordinate %lld is not one of the %lld parts",
           static_cast<long long>(rank), static_cast<long long>(index.parts));
  }
  bool *keep = nullptr;
  if (mask.data) {
    checkType(kernel, mask, DType::Bool);
    if (mask.numel() != in.numel())
      fail(kernel, "mask has %lld elements, expected %lld", static_cast<long long>(mask.numel()),
           static_cast<long long>(in.numel()));
    keep = mask.as<bool>();
  }
  int64_t n = in.numel();
  if (!training || ratio <= 0.0f) {
    if (in.data != out.data)
      std::memmove(out.data, in.data, in.bytes());
    if (keep)
      std::memset(keep, 1, static_cast<std::size_t>(n));
    return;
  }
  if (!(ratio == ratio) || ratio > 1.0f)
    fail(kernel, "ratio %g is outside [0, 1]", static_cast<double>(ratio));
  if (ratio == 1.0f) { // everything dropped (the 1 / (1 - ratio) scale is moot)
    std::memset(out.data, 0, out.bytes());
    if (keep)
      std::memset(keep, 0, static_cast<std::size_t>(n));
    return;
  }
  dispatch(kernel, in.dtype, FloatTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *x = in.as<T>();
    T *y = out.as<T>();
    T scale = static_cast<T>(1.0 / (1.0 - static_cast<double>(ratio)));
    double r = static_cast<double>(ratio);
    const uint64_t key = dropoutKey(seed, ctx.randomStream);
    for (int64_t i = 0; i < n; ++i) {
      bool kept = uniformDraw(key, index.global(i, rank)) >= r;
      y[i] = kept ? x[i] * scale : T(0);
      if (keep)
        keep[i] = kept;
    }
  });
}

} // namespace cleave::rt::cpu
