//===- Conv.cpp - N-d grouped convolution: im2col + gemm ------------------===//
//
// For each image and group, the input patches are unrolled (im2col) into a
// (C/group * prod(kernel)) x (output positions) matrix, a tile of whole
// output rows at a time so the scratch stays bounded, and multiplied by the
// group's M/group x (C/group * prod(kernel)) weights straight into y.
// Pointwise convolutions (1x1, stride 1, no padding) skip the unrolling.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Support.h"

#include <algorithm>
#include <vector>

namespace cleave::rt::cpu {
namespace {

/// Scratch elements per im2col tile (4 MiB of f32), at least one output row.
constexpr int64_t kTileElements = int64_t(1) << 20;

struct ConvGeometry {
  int sp;                                  // spatial rank
  int64_t in[kMaxRank], out[kMaxRank], k[kMaxRank];
  int64_t stride[kMaxRank], padBegin[kMaxRank], dilation[kMaxRank];
  int64_t inStride[kMaxRank]; // strides of the input's spatial dims
  int64_t inSize, outSize, kSize;
};

/// Unrolls output rows [r0, r1) (rows: all output coords but the last) of
/// one input group `xg` (channels x spatial) into `col`, kdim x tn.
template <typename T>
void im2col(const ConvGeometry &g, const T *xg, int64_t kdim, int64_t r0, int64_t r1, T *col) {
  int last = g.sp - 1;
  int64_t olast = g.out[last], slast = g.in[last], stlast = g.stride[last];
  int64_t tn = (r1 - r0) * olast;
  for (int64_t kr = 0; kr < kdim; ++kr) {
    int64_t c = kr / g.kSize;
    int64_t kc[kMaxRank];
    for (int64_t rem = kr % g.kSize, d = last; d >= 0; --d) {
      kc[d] = rem % g.k[d];
      rem /= g.k[d];
    }
    const T *xc = xg + c * g.inSize;
    T *dst = col + kr * tn;
    // Valid output columns of the last dim: 0 <= ol * stride + shift < slast.
    int64_t shift = kc[last] * g.dilation[last] - g.padBegin[last];
    int64_t lo = shift >= 0 ? 0 : (-shift + stlast - 1) / stlast;
    int64_t hi = slast - 1 - shift < 0 ? 0 : (slast - 1 - shift) / stlast + 1;
    lo = std::min(lo, olast);
    hi = std::clamp(hi, lo, olast);
    // Output coords of the leading dims for row r0, then counted up.
    int64_t o[kMaxRank];
    for (int64_t rem = r0, d = last - 1; d >= 0; --d) {
      o[d] = rem % g.out[d];
      rem /= g.out[d];
    }
    for (int64_t r = r0; r < r1; ++r) {
      T *row = dst + (r - r0) * olast;
      bool inside = true;
      int64_t offset = 0;
      for (int d = 0; d < last; ++d) {
        int64_t i = o[d] * g.stride[d] - g.padBegin[d] + kc[d] * g.dilation[d];
        inside &= i >= 0 && i < g.in[d];
        offset += i * g.inStride[d];
      }
      if (!inside || lo == hi) {
        std::fill(row, row + olast, T(0));
      } else {
        const T *src = xc + offset;
        std::fill(row, row + lo, T(0));
        if (stlast == 1)
          std::copy(src + lo + shift, src + hi + shift, row + lo);
        else
          for (int64_t ol = lo; ol < hi; ++ol)
            row[ol] = src[ol * stlast + shift];
        std::fill(row + hi, row + olast, T(0));
      }
      for (int d = last - 1; d >= 0; --d) {
        if (++o[d] < g.out[d])
          break;
        o[d] = 0;
      }
    }
  }
}

} // namespace

void conv(Context &ctx, const Tensor &x, const Tensor &w, const Tensor *b, const Tensor &y,
          Dims strides, Dims pads, Dims dilations, int64_t group) {
  const char *kernel = "conv";
  checkType(kernel, w, x.dtype);
  checkType(kernel, y, x.dtype);
  if (b)
    checkType(kernel, *b, x.dtype);
  int sp = x.rank() - 2;
  if (sp < 1 || w.rank() != x.rank() || y.rank() != x.rank())
    fail(kernel, "x, w and y must be N x C x spatial with the same rank");
  strides = orDefault(kernel, "strides", strides, sp, 1);
  dilations = orDefault(kernel, "dilations", dilations, sp, 1);
  pads = orDefault(kernel, "pads", pads, 2 * sp, 0);
  int64_t n = x.shape[0], c = x.shape[1], m = w.shape[0], cg = w.shape[1];
  if (group < 1 || c != cg * group || m % group != 0 || y.shape[0] != n || y.shape[1] != m)
    fail(kernel, "channels do not agree with group %lld", static_cast<long long>(group));
  if (b && b->numel() != m)
    fail(kernel, "bias has %lld elements, expected %lld", static_cast<long long>(b->numel()),
         static_cast<long long>(m));
  int64_t mg = m / group;

  ConvGeometry g;
  g.sp = sp;
  bool pointwise = true;
  for (int d = 0; d < sp; ++d) {
    g.in[d] = x.shape[d + 2];
    g.out[d] = y.shape[d + 2];
    g.k[d] = w.shape[d + 2];
    g.stride[d] = strides[d];
    g.padBegin[d] = pads[d];
    g.dilation[d] = dilations[d];
    if (g.stride[d] < 1 || g.dilation[d] < 1)
      fail(kernel, "strides and dilations must be positive");
    pointwise &= g.k[d] == 1 && g.stride[d] == 1 && pads[d] == 0 && pads[d + sp] == 0 &&
                 g.out[d] == g.in[d];
  }
  int64_t spatialStrides[kMaxRank];
  Dims spatial;
  for (int d = 0; d < sp; ++d)
    spatial.values[spatial.size++] = g.in[d];
  rowMajorStrides(spatial, spatialStrides);
  for (int d = 0; d < sp; ++d)
    g.inStride[d] = spatialStrides[d];
  g.inSize = product(x.shape, 2, x.rank());
  g.outSize = product(y.shape, 2, y.rank());
  g.kSize = product(w.shape, 2, w.rank());
  int64_t kdim = cg * g.kSize;
  int64_t p = g.outSize;

  dispatch(kernel, x.dtype, FloatTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *xs = x.as<T>();
    const T *ws = w.as<T>();
    T *ys = y.as<T>();
    if (p == 0 || n == 0 || m == 0)
      return;
    if (pointwise) {
      for (int64_t i = 0; i < n; ++i)
        for (int64_t gi = 0; gi < group; ++gi)
          gemmCore<T>(ctx, false, false, mg, p, cg, 1.0, ws + gi * mg * kdim, kdim,
                      xs + (i * c + gi * cg) * g.inSize, p, 0.0, ys + (i * m + gi * mg) * p, p);
    } else {
      int64_t olast = g.out[sp - 1];
      int64_t rows = p / olast;
      int64_t tileRows = std::clamp<int64_t>(kTileElements / std::max<int64_t>(1, kdim * olast),
                                             1, rows);
      std::vector<T> col(static_cast<std::size_t>(kdim * tileRows * olast));
      for (int64_t i = 0; i < n; ++i)
        for (int64_t gi = 0; gi < group; ++gi) {
          const T *xg = xs + (i * c + gi * cg) * g.inSize;
          T *yg = ys + (i * m + gi * mg) * p;
          for (int64_t r0 = 0; r0 < rows; r0 += tileRows) {
            int64_t r1 = std::min(rows, r0 + tileRows);
            int64_t tn = (r1 - r0) * olast;
            im2col(g, xg, kdim, r0, r1, col.data());
            gemmCore<T>(ctx, false, false, mg, tn, kdim, 1.0, ws + gi * mg * kdim, kdim,
                        col.data(), tn, 0.0, yg + r0 * olast, p);
          }
        }
    }
    if (b) {
      const T *bs = b->template as<T>();
      for (int64_t i = 0; i < n; ++i)
        for (int64_t oc = 0; oc < m; ++oc) {
          T *yr = ys + (i * m + oc) * p;
          T bv = bs[oc];
          for (int64_t j = 0; j < p; ++j)
            yr[j] += bv;
        }
    }
  });
}

} // namespace cleave::rt::cpu
