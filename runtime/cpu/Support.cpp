//===- Support.cpp - errors, the strided copy, scratch, the float mode ----===//

#include "runtime/cpu/Support.h"

#include "runtime/cpu/ConvPrimitives.h"

#include <algorithm>
#include <array>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <vector>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace cleave::rt::cpu {

void failType(const char *kernel, DType type) {
  fail(kernel, "unsupported element type %s", dtypeName(type));
}

Dims orDefault(const char *kernel, const char *what, const Dims &attr, int n, int64_t fallback) {
  if (attr.size == n)
    return attr;
  if (attr.size != 0)
    fail(kernel, "%s has %d entries, expected %d", what, attr.size, n);
  Dims dims;
  dims.size = n;
  for (int i = 0; i < n; ++i)
    dims[i] = fallback;
  return dims;
}

void checkSameLayout(const char *kernel, const Tensor &a, const Tensor &b) {
  if (a.dtype != b.dtype)
    fail(kernel, "element types differ (%s and %s)", dtypeName(a.dtype), dtypeName(b.dtype));
  if (a.numel() != b.numel())
    fail(kernel, "element counts differ (%lld and %lld)", static_cast<long long>(a.numel()),
         static_cast<long long>(b.numel()));
}

void copyBytes(const Context &ctx, const void *from, void *to, int64_t bytes) {
  const auto *source = static_cast<const char *>(from);
  auto *target = static_cast<char *>(to);
  if (source == target)
    return;
  if (source < target + bytes && target < source + bytes) {
    std::memmove(target, source, static_cast<std::size_t>(bytes));
    return;
  }
  forEachChunk(ctx, bytes, 4096, [&](int64_t begin, int64_t end) {
    std::memcpy(target + begin, source + begin, static_cast<std::size_t>(end - begin));
  });
}

void checkType(const char *kernel, const Tensor &t, DType type) {
  if (t.dtype != type)
    fail(kernel, "expected element type %s, got %s", dtypeName(type), dtypeName(t.dtype));
}

void broadcastStrides(const char *kernel, const Dims &in, const Dims &out, int64_t *strides) {
  if (in.size > out.size)
    fail(kernel, "rank %d does not broadcast to rank %d", in.size, out.size);
  int64_t inStrides[kMaxRank];
  rowMajorStrides(in, inStrides);
  for (int d = 0; d < out.size; ++d) {
    int j = d - (out.size - in.size);
    if (j < 0 || (in[j] == 1 && out[d] != 1))
      strides[d] = 0;
    else if (in[j] == out[d])
      strides[d] = inStrides[j];
    else
      fail(kernel, "dim %d (%lld) does not broadcast to %lld", j, static_cast<long long>(in[j]),
           static_cast<long long>(out[d]));
  }
}

void stridedCopy(const Context &ctx, const char *kernel, const void *src, const int64_t *srcStrides,
                 const Tensor &out) {
  LoopNest<2> nest;
  int64_t outStrides[kMaxRank];
  rowMajorStrides(out.shape, outStrides);
  for (int d = 0; d < out.rank(); ++d)
    nest.push(out.shape[d], {outStrides[d], srcStrides[d]});
  nest.coalesce();
  std::size_t esize = dtypeSize(out.dtype);
  dispatchBySize(kernel, out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *from = static_cast<const T *>(src);
    T *to = out.as<T>();
    int r = nest.rank;
    if (r >= 2 && nest.strides[1][r - 2] == 1 && nest.strides[1][r - 1] > 1) {
      // The last two dims are a transpose (the source walks the result's
      // columns contiguously): copy in square tiles so both sides stay in
      // cache, the bands of tile rows of every matrix split among the
      // threads.
      constexpr int64_t kTile = 32;
      int64_t rows = nest.dims[r - 2], cols = nest.dims[r - 1];
      int64_t step = nest.strides[1][r - 1];
      LoopNest<2> outer;
      for (int d = 0; d + 2 < r; ++d)
        outer.push(nest.dims[d], {nest.strides[0][d], nest.strides[1][d]});
      // Where each matrix starts in the result and in the source.
      std::vector<std::array<int64_t, 2>> matrices;
      outer.forEachRow([&](const int64_t *offsets, int64_t n, const int64_t *inner) {
        for (int64_t k = 0; k < n; ++k)
          matrices.push_back({offsets[0] + k * inner[0], offsets[1] + k * inner[1]});
      });
      const int64_t bands = (rows + kTile - 1) / kTile, band = kTile * cols;
      const int64_t count = static_cast<int64_t>(matrices.size()) * bands;
      forEachChunk(ctx, count * band, band, [&](int64_t begin, int64_t end) {
        // Chunks are whole bands: forEachChunk splits at multiples of `band`.
        for (int64_t item = begin / band; item < end / band; ++item) {
          const auto &[outAt, srcAt] = matrices[static_cast<size_t>(item / bands)];
          T *o = to + outAt;
          const T *s = from + srcAt;
          const int64_t i0 = item % bands * kTile, i1 = std::min(rows, i0 + kTile);
          for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
            int64_t j1 = std::min(cols, j0 + kTile);
            for (int64_t i = i0; i < i1; ++i)
              for (int64_t j = j0; j < j1; ++j)
                o[i * cols + j] = s[i + j * step];
          }
        }
      });
      return;
    }
    nest.forEachRow([&](const int64_t *offsets, int64_t n, const int64_t *inner) {
      T *o = to + offsets[0];
      const T *s = from + offsets[1];
      int64_t step = inner[1];
      if (step == 1) {
        std::memmove(o, s, static_cast<std::size_t>(n) * esize);
      } else if (step == 0) {
        T v = *s;
        for (int64_t i = 0; i < n; ++i)
          o[i] = v;
      } else {
        for (int64_t i = 0; i < n; ++i)
          o[i] = s[i * step];
      }
    });
  });
}

Scratch::Scratch(Context &ctx, const char *kernel, int64_t bytes)
    : ctx(ctx), bytes(static_cast<std::size_t>(bytes)) {
  if (bytes == 0)
    return;
  if (ctx.convolutions) {
    memory = ctx.convolutions->workspace(bytes, ctx.allocations);
  } else {
    owned = std::aligned_alloc(64, (this->bytes + 63) / 64 * 64);
    memory = owned;
    if (owned && ctx.allocations)
      ctx.allocations->allocated(this->bytes);
  }
  if (!memory)
    fail(kernel, "no memory for %lld bytes of scratch", static_cast<long long>(bytes));
}

Scratch::~Scratch() {
  if (owned && ctx.allocations)
    ctx.allocations->released(bytes);
  std::free(owned);
}

bool flushSubnormals(int threads) {
#if defined(__SSE__)
  constexpr unsigned kFlushToZero = 0x8000, kDenormalsAreZero = 0x0040;
  auto flush = [] { _mm_setcsr(_mm_getcsr() | kFlushToZero | kDenormalsAreZero); };
  flush();
#pragma omp parallel num_threads(threads)
  flush();
  return true;
#else
  (void)threads;
  return false;
#endif
}

} // namespace cleave::rt::cpu
