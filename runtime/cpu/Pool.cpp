//===- Pool.cpp - max, average and global average pooling -----------------===//
//
// The output dims are given (ceil mode already applied), so the last window
// may run past the padded input: windows are clipped to the input for the
// values, and average pooling with count_include_pad divides by the window
// positions inside the padded input (begin pads + input + end pads), not the
// part past the end pads, as onnxruntime and ONNX's reference do.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Support.h"

#include <algorithm>

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

/// Pools every N x C plane; Max picks the largest value, otherwise averages.
template <typename T, bool Max>
void poolPlanes(const PoolGeometry &g, const T *x, T *y, int64_t planes, bool countIncludePad) {
  int sp = g.sp, last = sp - 1;
  for (int64_t plane = 0; plane < planes; ++plane) {
    const T *xp = x + plane * g.inSize;
    T *yp = y + plane * g.outSize;
    int64_t o[kMaxRank] = {};
    for (int64_t pos = 0; pos < g.outSize; ++pos) {
      // Per dim: the window's first input coordinate and the kernel indices
      // [lo, hi) landing inside the input, and those inside the pads too.
      int64_t start[kMaxRank], lo[kMaxRank], hi[kMaxRank];
      int64_t valid = 1, padded = 1;
      for (int d = 0; d < sp; ++d) {
        int64_t st = o[d] * g.stride[d] - g.padBegin[d];
        int64_t dil = g.dilation[d];
        int64_t l = st >= 0 ? 0 : (-st + dil - 1) / dil;
        int64_t h = g.in[d] - 1 - st < 0 ? 0 : (g.in[d] - 1 - st) / dil + 1;
        int64_t e = g.in[d] + g.padEnd[d] - 1 - st < 0 ? 0 : (g.in[d] + g.padEnd[d] - 1 - st) / dil + 1;
        l = std::min(l, g.k[d]);
        h = std::clamp(h, l, g.k[d]);
        start[d] = st;
        lo[d] = l;
        hi[d] = h;
        valid *= h - l;
        padded *= std::min(e, g.k[d]);
      }
      T best = std::numeric_limits<T>::lowest();
      double sum = 0;
      if (valid > 0) {
        int64_t kk[kMaxRank];
        for (int d = 0; d < sp; ++d)
          kk[d] = lo[d];
        while (true) {
          int64_t offset = 0;
          for (int d = 0; d < last; ++d)
            offset += (start[d] + kk[d] * g.dilation[d]) * g.inStride[d];
          const T *row = xp + offset;
          for (int64_t j = lo[last]; j < hi[last]; ++j) {
            T v = row[start[last] + j * g.dilation[last]];
            if constexpr (Max)
              best = v > best ? v : best;
            else
              sum += static_cast<double>(v);
          }
          int d = last - 1;
          for (; d >= 0; --d) {
            if (++kk[d] < hi[d])
              break;
            kk[d] = lo[d];
          }
          if (d < 0)
            break;
        }
      }
      if constexpr (Max) {
        yp[pos] = best;
      } else {
        int64_t divisor = countIncludePad ? padded : valid;
        yp[pos] = divisor > 0 ? static_cast<T>(sum / static_cast<double>(divisor)) : T(0);
      }
      for (int d = last; d >= 0; --d) {
        if (++o[d] < g.out[d])
          break;
        o[d] = 0;
      }
    }
  }
}

} // namespace

void max_pool(Context &, const Tensor &x, const Tensor &y, Dims kernel, Dims strides, Dims pads,
              Dims dilations) {
  PoolGeometry g = poolGeometry("max_pool", x, y, kernel, strides, pads, dilations);
  int64_t planes = x.shape[0] * x.shape[1];
  dispatch("max_pool", x.dtype, TypeList<float, double, int8_t, uint8_t>{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    poolPlanes<T, true>(g, x.as<T>(), y.as<T>(), planes, false);
  });
}

void average_pool(Context &, const Tensor &x, const Tensor &y, Dims kernel, Dims strides,
                  Dims pads, Dims dilations, bool countIncludePad) {
  PoolGeometry g = poolGeometry("average_pool", x, y, kernel, strides, pads, dilations);
  int64_t planes = x.shape[0] * x.shape[1];
  dispatch("average_pool", x.dtype, FloatTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    poolPlanes<T, false>(g, x.as<T>(), y.as<T>(), planes, countIncludePad);
  });
}

void global_average_pool(Context &, const Tensor &x, const Tensor &y) {
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
    for (int64_t p = 0; p < planes; ++p)
      ys[p] = static_cast<T>(static_cast<double>(sumRow(xs + p * size, size)) /
                             static_cast<double>(size));
  });
}

} // namespace cleave::rt::cpu
