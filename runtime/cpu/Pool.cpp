//===- Pool.cpp - max, average and global average pooling; their adjoints -===//
//
// The output dims are given (ceil mode already applied), so the last window
// may run past the padded input: windows are clipped to the input for the
// values, and average pooling with count_include_pad divides by the window
// positions inside the padded input (begin pads + input + end pads), not the
// part past the end pads, as onnxruntime and ONNX's reference do.
//
// The adjoints walk the same windows: max_pool_grad adds each gradient at
// its window's first maximum (the element max_pool returned), and
// average_pool_grad spreads it over the window with the forward's divisor.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Support.h"

#include <algorithm>
#include <vector>

namespace cleave::rt::cpu {
namespace {

struct PoolGeometry {
  int sp;
  int64_t in[kMaxRank], out[kMaxRank], k[kMaxRank];
  int64_t stride[kMaxRank], padBegin[kMaxRank], padEnd[kMaxRank], dilation[kMaxRank];
  int64_t inStride[kMaxRank];
  int64_t inSize, outSize;
};

PoolGeometry poolGeometry(const char *kernel, const Tensor &x, const Tensor &y, const Dims &kernelShape,
                          Dims strides, Dims pads, Dims dilations) {
  checkType(kernel, y, x.dtype);
  int sp = x.rank() - 2;
  if (sp < 1 || y.rank() != x.rank() || y.shape[0] != x.shape[0] || y.shape[1] != x.shape[1])
    fail(kernel, "x and y must be N x C x spatial with the same N, C and rank");
  if (kernelShape.size != sp)
    fail(kernel, "kernel shape has %d entries for %d spatial dims", kernelShape.size, sp);
  strides = orDefault(kernel, "strides", strides, sp, 1);
  dilations = orDefault(kernel, "dilations", dilations, sp, 1);
  pads = orDefault(kernel, "pads", pads, 2 * sp, 0);
  PoolGeometry g;
  g.sp = sp;
  int64_t s = 1;
  for (int d = sp - 1; d >= 0; --d) {
    g.in[d] = x.shape[d + 2];
    g.out[d] = y.shape[d + 2];
    g.k[d] = kernelShape[d];
    g.stride[d] = strides[d];
    g.padBegin[d] = pads[d];
    g.padEnd[d] = pads[d + sp];
    g.dilation[d] = dilations[d];
    if (g.stride[d] < 1 || g.dilation[d] < 1 || g.k[d] < 1)
      fail(kernel, "kernel, strides and dilations must be positive");
    g.inStride[d] = s;
    s *= g.in[d];
  }
  g.inSize = s;
  g.outSize = product(y.shape, 2, y.rank());
  return g;
}

/// One window of the output position with coords `o`: per dim the first
/// input coordinate and the kernel indices [lo, hi) landing inside the
/// input; `valid` counts the window's elements inside the input, `padded`
/// those inside the padded input (begin pads + input + end pads).
struct WindowSpan {
  int64_t start[kMaxRank], lo[kMaxRank], hi[kMaxRank];
  int64_t valid, padded;
};

/// One dim of a window: its first input coordinate, the kernel indices
/// [lo, hi) landing inside the input, and how many land inside the padded
/// input. A dim's spans do not depend on the other dims.
struct DimSpan {
  int64_t start, lo, hi, padded;
};

DimSpan dimSpan(const PoolGeometry &g, int d, int64_t o) {
  int64_t st = o * g.stride[d] - g.padBegin[d];
  int64_t dil = g.dilation[d];
  int64_t l = st >= 0 ? 0 : (-st + dil - 1) / dil;
  int64_t h = g.in[d] - 1 - st < 0 ? 0 : (g.in[d] - 1 - st) / dil + 1;
  int64_t e = g.in[d] + g.padEnd[d] - 1 - st < 0 ? 0 : (g.in[d] + g.padEnd[d] - 1 - st) / dil + 1;
  l = std::min(l, g.k[d]);
  h = std::clamp(h, l, g.k[d]);
  return {st, l, h, std::min(e, g.k[d])};
}

/// The spans of dim d at each of its output coordinates.
std::vector<DimSpan> dimSpans(const PoolGeometry &g, int d) {
  std::vector<DimSpan> spans;
  for (int64_t o = 0; o < g.out[d]; ++o)
    spans.push_back(dimSpan(g, d, o));
  return spans;
}

/// The window whose dim d spans spans[d], for d < count.
WindowSpan windowOf(const DimSpan *const *spans, int count) {
  WindowSpan w;
  w.valid = 1;
  w.padded = 1;
  for (int d = 0; d < count; ++d) {
    w.start[d] = spans[d]->start;
    w.lo[d] = spans[d]->lo;
    w.hi[d] = spans[d]->hi;
    w.valid *= spans[d]->hi - spans[d]->lo;
    w.padded *= spans[d]->padded;
  }
  return w;
}

/// Calls f(offset in the plane) for every element of the window inside the
/// input, in window order (row-major over the kernel indices).
template <typename F> void forEachInWindow(const PoolGeometry &g, const WindowSpan &w, F &&f) {
  if (w.valid == 0)
    return;
  if (g.sp == 2) { // images: rows, then columns, without the general odometer
    for (int64_t r = w.lo[0]; r < w.hi[0]; ++r) {
      int64_t row = (w.start[0] + r * g.dilation[0]) * g.inStride[0] + w.start[1];
      for (int64_t c = w.lo[1]; c < w.hi[1]; ++c)
        f(row + c * g.dilation[1]);
    }
    return;
  }
  int last = g.sp - 1;
  int64_t kk[kMaxRank];
  for (int d = 0; d < g.sp; ++d)
    kk[d] = w.lo[d];
  while (true) {
    int64_t offset = w.start[last];
    for (int d = 0; d < last; ++d)
      offset += (w.start[d] + kk[d] * g.dilation[d]) * g.inStride[d];
    for (int64_t j = w.lo[last]; j < w.hi[last]; ++j)
      f(offset + j * g.dilation[last]);
    int d = last - 1;
    for (; d >= 0; --d) {
      if (++kk[d] < w.hi[d])
        break;
      kk[d] = w.lo[d];
    }
    if (d < 0)
      break;
  }
}

/// Calls f(plane, pos, window) for every output position of every N x C
/// plane, pos counting the positions within the plane. Each dim's spans are
/// worked out once, not per position.
template <typename F> void forEachWindow(const PoolGeometry &g, int64_t planes, F &&f) {
  int last = g.sp - 1;
  std::vector<DimSpan> spans[kMaxRank];
  for (int d = 0; d < g.sp; ++d)
    spans[d] = dimSpans(g, d);
  if (g.sp == 2) { // images: rows, then columns, without the general odometer
    for (int64_t plane = 0; plane < planes; ++plane) {
      int64_t pos = 0;
      for (const DimSpan &row : spans[0])
        for (const DimSpan &column : spans[1]) {
          const DimSpan *both[2] = {&row, &column};
          f(plane, pos++, windowOf(both, 2));
        }
    }
    return;
  }
  for (int64_t plane = 0; plane < planes; ++plane) {
    int64_t o[kMaxRank] = {};
    for (int64_t pos = 0; pos < g.outSize; ++pos) {
      const DimSpan *each[kMaxRank];
      for (int d = 0; d < g.sp; ++d)
        each[d] = &spans[d][static_cast<size_t>(o[d])];
      f(plane, pos, windowOf(each, g.sp));
      for (int d = last; d >= 0; --d) {
        if (++o[d] < g.out[d])
          break;
        o[d] = 0;
      }
    }
  }
}

/// The first maximum of a window in window order (-1 when the window holds
/// nothing inside the input); a window of nothing but the lowest value or
/// NaN gives its first element, where max_pool's result came from too.
template <typename T>
int64_t argMax(const PoolGeometry &g, const WindowSpan &w, const T *xp) {
  T best = std::numeric_limits<T>::lowest();
  int64_t arg = -1, first = -1;
  forEachInWindow(g, w, [&](int64_t offset) {
    T v = xp[offset];
    if (first < 0)
      first = offset;
    if (v > best) {
      best = v;
      arg = offset;
    }
  });
  return arg >= 0 ? arg : first;
}

/// Whether the windows of images are 2 x 2 and tile them: stride 2, no
/// padding or dilation, and the windows cover every input element once.
bool twoByTwoTiles(const PoolGeometry &g) {
  for (int d = 0; d < 2; ++d)
    if (g.k[d] != 2 || g.stride[d] != 2 || g.dilation[d] != 1 || g.padBegin[d] != 0 ||
        g.padEnd[d] != 0 || g.out[d] * 2 != g.in[d])
      return false;
  return true;
}

/// The first maximum of a 2 x 2 window's taps in window order, as a tap
/// index kept as a T (so that a loop over windows has lanes of one width),
/// and its value in `best`: a later tap replaces it only when larger, so a
/// window of nothing but the lowest value or NaN keeps its first tap.
template <typename T> inline T firstMaximum(T v0, T v1, T v2, T v3, T &best) {
  best = v0 > std::numeric_limits<T>::lowest() ? v0 : std::numeric_limits<T>::lowest();
  T arg = 0;
  arg = v1 > best ? T(1) : arg;
  best = v1 > best ? v1 : best;
  arg = v2 > best ? T(2) : arg;
  best = v2 > best ? v2 : best;
  arg = v3 > best ? T(3) : arg;
  best = v3 > best ? v3 : best;
  return arg;
}

/// max_pool of images in 2 x 2 tiles (twoByTwoTiles), a row of windows at
/// a time in one loop GCC vectorises (maxPoolImages' strided taps it does
/// not).
template <typename T>
void maxPoolTwoByTwo(const PoolGeometry &g, const T *x, T *y, int64_t planes) {
  const int64_t outColumns = g.out[1], inColumns = g.in[1];
  for (int64_t row = 0; row < planes * g.out[0]; ++row) {
    const T *top = x + 2 * row * inColumns, *bottom = top + inColumns;
    T *yr = y + row * outColumns;
    for (int64_t j = 0; j < outColumns; ++j)
      firstMaximum(top[2 * j], top[2 * j + 1], bottom[2 * j], bottom[2 * j + 1], yr[j]);
  }
}

/// Max pooling of images, a kernel tap at a time over a whole row of
/// outputs: a loop GCC vectorises, where a window at a time is latency
/// bound. The largest of a window's values does not depend on the order
/// they are met in (a NaN is never taken), so this is max_pool's result.
template <typename T> void maxPoolImages(const PoolGeometry &g, const T *x, T *y, int64_t planes) {
  const int64_t outRows = g.out[0], outColumns = g.out[1], inColumns = g.in[1];
  const int64_t stride = g.stride[1], dilation = g.dilation[1], pad = g.padBegin[1];
  const std::vector<DimSpan> rows = dimSpans(g, 0), columns = dimSpans(g, 1);
  // The outputs [first, end) whose windows hold column tap c inside the input.
  std::vector<int64_t> first(static_cast<size_t>(g.k[1])), end(first.size());
  for (int64_t c = 0; c < g.k[1]; ++c) {
    int64_t lo = outColumns, hi = 0;
    for (int64_t o = 0; o < outColumns; ++o) {
      const DimSpan &span = columns[static_cast<size_t>(o)];
      if (span.lo <= c && c < span.hi) {
        lo = std::min(lo, o);
        hi = o + 1;
      }
    }
    first[static_cast<size_t>(c)] = lo;
    end[static_cast<size_t>(c)] = std::max(lo, hi);
  }
  for (int64_t plane = 0; plane < planes; ++plane) {
    const T *xp = x + plane * g.inSize;
    for (int64_t o = 0; o < outRows; ++o) {
      T *yr = y + (plane * outRows + o) * outColumns;
      std::fill(yr, yr + outColumns, std::numeric_limits<T>::lowest());
      const DimSpan &row = rows[static_cast<size_t>(o)];
      for (int64_t r = row.lo; r < row.hi; ++r) {
        const T *xr = xp + (row.start + r * g.dilation[0]) * inColumns;
        for (int64_t c = 0; c < g.k[1]; ++c) {
          const int64_t shift = c * dilation - pad;
          for (int64_t j = first[static_cast<size_t>(c)]; j < end[static_cast<size_t>(c)]; ++j) {
            T v = xr[j * stride + shift];
            yr[j] = v > yr[j] ? v : yr[j];
          }
        }
      }
    }
  }
}

/// max_pool_grad of images: each window's first maximum in window order,
/// found with selects rather than branches (a branch on the data is
/// mispredicted about every other element); a window of nothing but the
/// lowest value or NaN keeps its first element inside the input, as argMax
/// does. The gradients are added in output order, as the window walk adds
/// them.
template <typename T>
void maxPoolGradImages(const PoolGeometry &g, const T *x, const T *grad, T *dx, int64_t planes) {
  const int64_t outRows = g.out[0], outColumns = g.out[1], inColumns = g.in[1];
  const int64_t rowDilation = g.dilation[0], dilation = g.dilation[1];
  const std::vector<DimSpan> rows = dimSpans(g, 0), columns = dimSpans(g, 1);
  for (int64_t plane = 0; plane < planes; ++plane) {
    const T *xp = x + plane * g.inSize;
    T *dp = dx + plane * g.inSize;
    const T *gp = grad + plane * g.outSize;
    for (int64_t o = 0; o < outRows; ++o) {
      const DimSpan &row = rows[static_cast<size_t>(o)];
      for (int64_t j = 0; j < outColumns; ++j) {
        const DimSpan &column = columns[static_cast<size_t>(j)];
        if (row.lo == row.hi || column.lo == column.hi)
          continue;
        T best = std::numeric_limits<T>::lowest();
        int64_t arg =
            (row.start + row.lo * rowDilation) * inColumns + column.start + column.lo * dilation;
        for (int64_t r = row.lo; r < row.hi; ++r) {
          const int64_t rowOffset = (row.start + r * rowDilation) * inColumns + column.start;
          for (int64_t c = column.lo; c < column.hi; ++c) {
            const int64_t at = rowOffset + c * dilation;
            const T v = xp[at];
            const bool larger = v > best;
            best = larger ? v : best;
            arg = larger ? at : arg;
          }
        }
        dp[arg] += gp[o * outColumns + j];
      }
    }
  }
}

/// max_pool_grad of images in 2 x 2 tiles (twoByTwoTiles), a row of
/// windows at a time in one loop GCC vectorises (the general walk is a
/// window at a time): each window's first maximum (firstMaximum), and each
/// element written once, the gradient (added to 0, as the window walk adds
/// it) at the maximum and 0 elsewhere, with no zeroing first.
template <typename T>
void maxPoolGradTwoByTwo(const PoolGeometry &g, const T *x, const T *grad, T *dx, int64_t planes) {
  const int64_t outColumns = g.out[1], inColumns = g.in[1];
  for (int64_t row = 0; row < planes * g.out[0]; ++row) {
    const T *top = x + 2 * row * inColumns, *bottom = top + inColumns;
    T *dtop = dx + 2 * row * inColumns, *dbottom = dtop + inColumns;
    const T *gr = grad + row * outColumns;
    for (int64_t j = 0; j < outColumns; ++j) {
      T best;
      const T arg =
          firstMaximum(top[2 * j], top[2 * j + 1], bottom[2 * j], bottom[2 * j + 1], best);
      const T g = T(0) + gr[j];
      dtop[2 * j] = arg == T(0) ? g : T(0);
      dtop[2 * j + 1] = arg == T(1) ? g : T(0);
      dbottom[2 * j] = arg == T(2) ? g : T(0);
      dbottom[2 * j + 1] = arg == T(3) ? g : T(0);
    }
  }
}

/// Pools every N x C plane; Max picks the largest value, otherwise averages.
template <typename T, bool Max>
void poolPlanes(const PoolGeometry &g, const T *x, T *y, int64_t planes, bool countIncludePad) {
  if constexpr (Max)
    if (g.sp == 2)
      return twoByTwoTiles(g) ? maxPoolTwoByTwo(g, x, y, planes) : maxPoolImages(g, x, y, planes);
  forEachWindow(g, planes, [&](int64_t plane, int64_t pos, const WindowSpan &w) {
    const T *xp = x + plane * g.inSize;
    T *yp = y + plane * g.outSize;
    if constexpr (Max) {
      T best = std::numeric_limits<T>::lowest();
      forEachInWindow(g, w, [&](int64_t offset) {
        T v = xp[offset];
        best = v > best ? v : best;
      });
      yp[pos] = best;
    } else {
      double sum = 0;
      forEachInWindow(g, w, [&](int64_t offset) { sum += static_cast<double>(xp[offset]); });
      int64_t divisor = countIncludePad ? w.padded : w.valid;
      yp[pos] = divisor > 0 ? static_cast<T>(sum / static_cast<double>(divisor)) : T(0);
    }
  });
}

/// Calls f(first, count) for chunks of the N x C planes split among the
/// context's threads (forEachChunk), each plane of `planeElements` computed
/// whole by one thread as on one, so the results do not depend on the split.
template <typename F>
void forEachPlanes(const Context &ctx, int64_t planes, int64_t planeElements, F &&f) {
  const int64_t size = std::max<int64_t>(1, planeElements);
  forEachChunk(ctx, planes * size, size,
               [&](int64_t begin, int64_t end) { f(begin / size, (end - begin) / size); });
}

bool sameShape(const Dims &a, const Dims &b) {
  if (a.size != b.size)
    return false;
  for (int i = 0; i < a.size; ++i)
    if (a[i] != b[i])
      return false;
  return true;
}

} // namespace

void max_pool(Context &ctx, const Tensor &x, const Tensor &y, Dims kernel, Dims strides, Dims pads,
              Dims dilations) {
  PoolGeometry g = poolGeometry("max_pool", x, y, kernel, strides, pads, dilations);
  int64_t planes = x.shape[0] * x.shape[1];
  dispatch("max_pool", x.dtype, NumericTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    forEachPlanes(ctx, planes, g.inSize, [&](int64_t first, int64_t count) {
      poolPlanes<T, true>(g, x.as<T>() + first * g.inSize, y.as<T>() + first * g.outSize, count,
                          false);
    });
  });
}

void average_pool(Context &ctx, const Tensor &x, const Tensor &y, Dims kernel, Dims strides,
                  Dims pads, Dims dilations, bool countIncludePad) {
  PoolGeometry g = poolGeometry("average_pool", x, y, kernel, strides, pads, dilations);
  int64_t planes = x.shape[0] * x.shape[1];
  dispatch("average_pool", x.dtype, FloatTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    forEachPlanes(ctx, planes, g.inSize, [&](int64_t first, int64_t count) {
      poolPlanes<T, false>(g, x.as<T>() + first * g.inSize, y.as<T>() + first * g.outSize, count,
                           countIncludePad);
    });
  });
}

void max_pool_grad(Context &ctx, const Tensor &grad, const Tensor &x, const Tensor &out,
                   Dims kernel, Dims strides, Dims pads, Dims dilations) {
  const char *name = "max_pool_grad";
  PoolGeometry g = poolGeometry(name, x, grad, kernel, strides, pads, dilations);
  checkType(name, out, x.dtype);
  if (!sameShape(out.shape, x.shape))
    fail(name, "the result must have x's shape");
  int64_t planes = x.shape[0] * x.shape[1];
  dispatch(name, x.dtype, FloatTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    forEachPlanes(ctx, planes, g.inSize, [&](int64_t first, int64_t count) {
      const T *xs = x.as<T>() + first * g.inSize;
      const T *gs = grad.as<T>() + first * g.outSize;
      T *dx = out.as<T>() + first * g.inSize;
      if (g.sp == 2 && twoByTwoTiles(g))
        return maxPoolGradTwoByTwo(g, xs, gs, dx, count);
      std::fill(dx, dx + count * g.inSize, T(0));
      if (g.sp == 2)
        return maxPoolGradImages(g, xs, gs, dx, count);
      forEachWindow(g, count, [&](int64_t plane, int64_t pos, const WindowSpan &w) {
        int64_t arg = argMax(g, w, xs + plane * g.inSize);
        if (arg >= 0)
          dx[plane * g.inSize + arg] += gs[plane * g.outSize + pos];
      });
    });
  });
}

void average_pool_grad(Context &ctx, const Tensor &grad, const Tensor &out, Dims kernel,
                       Dims strides, Dims pads, Dims dilations, bool countIncludePad) {
  const char *name = "average_pool_grad";
  PoolGeometry g = poolGeometry(name, out, grad, kernel, strides, pads, dilations);
  int64_t planes = out.shape[0] * out.shape[1];
  dispatch(name, out.dtype, FloatTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    forEachPlanes(ctx, planes, g.inSize, [&](int64_t first, int64_t count) {
      const T *gs = grad.as<T>() + first * g.outSize;
      T *dx = out.as<T>() + first * g.inSize;
      std::fill(dx, dx + count * g.inSize, T(0));
      forEachWindow(g, count, [&](int64_t plane, int64_t pos, const WindowSpan &w) {
        int64_t divisor = countIncludePad ? w.padded : w.valid;
        if (divisor <= 0)
          return;
        T share = static_cast<T>(static_cast<double>(gs[plane * g.outSize + pos]) /
                                 static_cast<double>(divisor));
        T *dp = dx + plane * g.inSize;
        forEachInWindow(g, w, [&](int64_t offset) { dp[offset] += share; });
      });
    });
  });
}

void global_average_pool(Context &ctx, const Tensor &x, const Tensor &y) {
  const char *kernel = "global_average_pool";
  checkType(kernel, y, x.dtype);
  if (x.rank() < 3)
    fail(kernel, "input rank %d is below 3", x.rank());
  int64_t planes = x.shape[0] * x.shape[1];
  int64_t size = product(x.shape, 2, x.rank());
  if (y.numel() != planes)
    fail(kernel, "result has %lld elements, expected %lld", static_cast<long long>(y.numel()),
         static_cast<long long>(planes));
  dispatch(kernel, x.dtype, FloatTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *xs = x.as<T>();
    T *ys = y.as<T>();
    forEachPlanes(ctx, planes, size, [&](int64_t first, int64_t count) {
      for (int64_t p = first; p < first + count; ++p)
        ys[p] = static_cast<T>(static_cast<double>(sumRow(xs + p * size, size)) /
                               static_cast<double>(size));
    });
  });
}

} // namespace cleave::rt::cpu
