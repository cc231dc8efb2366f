//===- Conv.cpp - N-d grouped convolution and its adjoints: im2col + gemm -===//
//
// For each image and group, the input patches are unrolled (im2col) into a
// (C/group * prod(kernel)) x (output positions) matrix, a tile of whole
// output rows at a time so the scratch stays bounded, and multiplied by the
// group's M/group x (C/group * prod(kernel)) weights straight into y.
// Pointwise convolutions (1x1, stride 1, no padding) skip the unrolling.
//
// The adjoints use the same tiles: conv_grad_weight accumulates
// dy_g (M/group x tile) times the unrolled tile transposed into dw_g;
// conv_grad_input multiplies w_g transposed by a tile of dy_g into the
// scratch and folds it back onto dx (col2im, adding where windows overlap).
//
//===----------------------------------------------------------------------===//

#include "runtime/ConvScratch.h"
#include "runtime/cpu/ConvPrimitives.h"
#include "runtime/cpu/Support.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <type_traits>
#include <vector>

namespace cleave::rt::cpu {
namespace {

struct ConvGeometry {
  int sp;                                  // spatial rank
  int64_t in[kMaxRank], out[kMaxRank], k[kMaxRank];
  int64_t stride[kMaxRank], padBegin[kMaxRank], dilation[kMaxRank];
  int64_t inStride[kMaxRank]; // strides of the input's spatial dims
  int64_t inSize, outSize, kSize;
  int64_t n, c, m, cg, mg, group;
  int64_t kdim; // rows of a group's column matrix: cg * kSize
  bool pointwise;

  /// What sizes the column tiles (runtime/ConvScratch.h).
  ConvColumns columns() const { return {n, group, kdim, outSize, out[sp - 1], pointwise}; }
};

/// The geometry of conv(x, w) -> y from the three shapes (x N x C x in...,
/// w M x C/group x kernel..., y N x M x out...); fails naming `kernel` when
/// they do not agree.
ConvGeometry convGeometry(const char *kernel, const Dims &x, const Dims &w, const Dims &y,
                          Dims strides, Dims pads, Dims dilations, int64_t group) {
  int sp = x.size - 2;
  if (sp < 1 || w.size != x.size || y.size != x.size)
    fail(kernel, "x, w and y must be N x C x spatial with the same rank");
  strides = orDefault(kernel, "strides", strides, sp, 1);
  dilations = orDefault(kernel, "dilations", dilations, sp, 1);
  pads = orDefault(kernel, "pads", pads, 2 * sp, 0);
  ConvGeometry g;
  g.n = x[0];
  g.c = x[1];
  g.m = w[0];
  g.cg = w[1];
  g.group = group;
  if (group < 1 || g.c != g.cg * group || g.m % group != 0 || y[0] != g.n || y[1] != g.m)
    fail(kernel, "channels do not agree with group %lld", static_cast<long long>(group));
  g.mg = g.m / group;
  g.sp = sp;
  g.pointwise = true;
  for (int d = 0; d < sp; ++d) {
    g.in[d] = x[d + 2];
    g.out[d] = y[d + 2];
    g.k[d] = w[d + 2];
    g.stride[d] = strides[d];
    g.padBegin[d] = pads[d];
    g.dilation[d] = dilations[d];
    if (g.stride[d] < 1 || g.dilation[d] < 1)
      fail(kernel, "strides and dilations must be positive");
    g.pointwise &= g.k[d] == 1 && g.stride[d] == 1 && pads[d] == 0 && pads[d + sp] == 0 &&
                   g.out[d] == g.in[d];
  }
  int64_t spatialStrides[kMaxRank];
  Dims spatial;
  for (int d = 0; d < sp; ++d)
    spatial.values[spatial.size++] = g.in[d];
  rowMajorStrides(spatial, spatialStrides);
  for (int d = 0; d < sp; ++d)
    g.inStride[d] = spatialStrides[d];
  g.inSize = product(x, 2, x.size);
  g.outSize = product(y, 2, y.size);
  g.kSize = product(w, 2, w.size);
  g.kdim = g.cg * g.kSize;
  return g;
}

/// Between output rows [r0, r1) (rows: all output coords but the last) of
/// one input group `xg` (channels x spatial) and `col`, kdim x tn: unrolls
/// xg into col (Fold false: im2col, padding gives zeros), or adds col back
/// onto xg (Fold true: col2im, the adjoint).
template <bool Fold, typename T>
void unroll(const ConvGeometry &g, T *xg, int64_t r0, int64_t r1, T *col) {
  int last = g.sp - 1;
  int64_t olast = g.out[last], slast = g.in[last], stlast = g.stride[last];
  int64_t tn = (r1 - r0) * olast;
  for (int64_t kr = 0; kr < g.kdim; ++kr) {
    int64_t c = kr / g.kSize;
    int64_t kc[kMaxRank];
    for (int64_t rem = kr % g.kSize, d = last; d >= 0; --d) {
      kc[d] = rem % g.k[d];
      rem /= g.k[d];
    }
    T *xc = xg + c * g.inSize;
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
      if constexpr (Fold) {
        if (inside && lo < hi) {
          T *target = xc + offset;
          if (stlast == 1)
            for (int64_t ol = lo; ol < hi; ++ol)
              target[ol + shift] += row[ol];
          else
            for (int64_t ol = lo; ol < hi; ++ol)
              target[ol * stlast + shift] += row[ol];
        }
      } else if (!inside || lo == hi) {
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

/// Runs `problem` as a oneDNN primitive (ConvPrimitives.h) when its factors
/// are f32 or bf16 and oneDNN takes it; false otherwise. bf16 factors only
/// the primitives multiply, as bf16 primitives or widened to f32 in the
/// call's scratch (Context::bf16Primitives): where oneDNN does not take
/// them, the call fails. Constant weights (`b`, f32) are read from the
/// context's kept copy; without the context's primitives (a kernel test)
/// they are reordered as any operand is.
bool runPrimitive(Context &ctx, const char *kernel, const ConvProblem &problem, const void *a,
                  const void *b, const void *bias, void *out) {
  if (problem.factors != DType::F32 && problem.factors != DType::BF16)
    return false;
  const int threads = std::max(1, ctx.threads);
  const ConvProblem runs = primitiveProblem(problem, ctx.bf16Primitives);
  std::unique_ptr<ConvPrimitive> own;
  const ConvPrimitive *primitive = nullptr;
  if (ctx.convolutions) {
    primitive = ctx.convolutions->find(runs, threads);
  } else {
    ConvProblem reordered = runs;
    reordered.constantWeights = false;
    own = ConvPrimitive::create(reordered, threads);
    primitive = own.get();
  }
  if (!primitive && problem.factors == DType::BF16)
    fail(kernel, "oneDNN does not take this convolution of bf16 factors (1 to 3 spatial dims)");
  if (!primitive)
    return false;
  if (problem.constantWeights && ctx.convolutions) {
    b = ctx.convolutions->keptWeights(*primitive, b, threads, ctx.allocations);
    if (!b)
      fail(kernel, "no memory for the weights' copy in oneDNN's layout");
  }
  const WidenedFactors widened = widenedFactors(problem, runs);
  Scratch scratch(ctx, kernel, widened.bytes + primitive->scratchBytes());
  char *memory = scratch.as<char>();
  if (widened.bytes) {
    float *wideA = reinterpret_cast<float *>(memory);
    float *wideB = reinterpret_cast<float *>(memory + widened.secondOffset);
    cast(ctx, Tensor{const_cast<void *>(a), problem.factors, Dims{widened.first}},
         Tensor{wideA, DType::F32, Dims{widened.first}});
    cast(ctx, Tensor{const_cast<void *>(b), problem.factors, Dims{widened.second}},
         Tensor{wideB, DType::F32, Dims{widened.second}});
    a = wideA;
    b = wideB;
  }
  primitive->run(threads, a, b, bias, out, memory + widened.bytes);
  return true;
}

/// The result type of a convolution whose factors are `factors`: f32 for
/// bf16 factors (summed in f32), else theirs.
DType resultOf(DType factors) { return factors == DType::BF16 ? DType::F32 : factors; }

/// One block of a convolution's work: output rows [r0, r1) (rows: all
/// output coords but the last) of one image and group.
struct ConvBlock {
  int64_t image, group, r0, r1;

  /// Where the block's input group starts in x (channels x spatial).
  int64_t xOffset(const ConvGeometry &g) const { return (image * g.c + group * g.cg) * g.inSize; }
  /// Where the group's mg x kdim weights start in w.
  int64_t wOffset(const ConvGeometry &g) const { return group * g.mg * g.kdim; }
  /// Where the block's first output row starts in y (mg x positions).
  int64_t yOffset(const ConvGeometry &g) const {
    return (image * g.m + group * g.mg) * g.outSize + r0 * g.out[g.sp - 1];
  }
  /// The output positions the block covers: the columns of its im2col tile.
  int64_t columns(const ConvGeometry &g) const { return (r1 - r0) * g.out[g.sp - 1]; }
};

/// The product of one tile of `pass` (im2colProduct, which plan.json's
/// product scratchpad is predicted from): a times b into c.
template <typename T>
void tileProduct(Context &ctx, ConvPass pass, const ConvGeometry &g, int64_t columns, const T *a,
                 const T *b, T *c) {
  ProductProblem p = im2colProduct(pass, g.mg, g.kdim, g.outSize, columns);
  gemmCore<T>(ctx, p.transA, p.transB, p.m, p.n, p.k, p.alpha, a, p.lda, b, p.ldb, p.beta, c,
              p.ldc);
}

/// Calls f(block, col) for every block of the convolution and the adjoints.
/// Pointwise, a block is a whole image and group and col is null: the input
/// group (kdim x positions) is its own column matrix. Otherwise a block is a
/// tile of output rows and col its kdim x columns scratch.
template <typename T, typename F> void forEachBlock(Context &ctx, const ConvGeometry &g, F &&f) {
  int64_t rows = g.outSize / g.out[g.sp - 1];
  int64_t tileRows = g.pointwise ? rows : cpuTileRows(g.columns());
  Scratch col(ctx, "conv", cpuScratchElements(g.columns()) * static_cast<int64_t>(sizeof(T)));
  for (int64_t i = 0; i < g.n; ++i)
    for (int64_t gi = 0; gi < g.group; ++gi)
      for (int64_t r0 = 0; r0 < rows; r0 += tileRows)
        f(ConvBlock{i, gi, r0, std::min(rows, r0 + tileRows)}, col.as<T>());
}

/// One block of an adjoint, typed: the block's input group in x and its
/// group's weights in w (one of them the adjoint's result), its rows of dy,
/// and its column tile (null pointwise: the x group is its own).
template <typename T> struct AdjointBlock {
  T *x, *w;
  const T *dy;
  T *col;
  int64_t r0, r1, columns;
};

/// What the two adjoints share: the types checked against `out`'s (one of
/// `x` and `w`), the oneDNN primitive of `pass` where it takes the problem,
/// else (`out` zeroed first, since both add into it) unless there is nothing
/// to do, perBlock(g, block) over every block (forEachBlock).
template <typename F>
void convAdjoint(Context &ctx, ConvPass pass, const char *kernel, const Tensor &grad,
                 const Tensor &x, const Tensor &w, const Tensor &out, Dims strides, Dims pads,
                 Dims dilations, int64_t group, F &&perBlock) {
  // The factors: y's gradient and w (GradInput) or x (GradWeight).
  const Tensor &factor = pass == ConvPass::GradInput ? w : x;
  checkType(kernel, factor, grad.dtype);
  checkType(kernel, out, resultOf(grad.dtype));
  ConvGeometry g =
      convGeometry(kernel, x.shape, w.shape, grad.shape, strides, pads, dilations, group);
  if (runPrimitive(ctx, kernel,
                   convProblem(pass, x.shape, w.shape, grad.shape, strides, pads, dilations, group,
                               false, grad.dtype),
                   grad.data, factor.data, nullptr, out.data))
    return;
  dispatch(kernel, out.dtype, FloatTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T *result = out.as<T>();
    std::fill(result, result + out.numel(), T(0));
    if (g.outSize == 0 || g.n == 0 || g.m == 0 || g.kdim == 0)
      return;
    forEachBlock<T>(ctx, g, [&](const ConvBlock &block, T *col) {
      perBlock(g, AdjointBlock<T>{x.as<T>() + block.xOffset(g), w.as<T>() + block.wOffset(g),
                                  grad.as<T>() + block.yOffset(g), col, block.r0, block.r1,
                                  block.columns(g)});
    });
  });
}

} // namespace

void conv(Context &ctx, const Tensor &x, const Tensor &w, const Tensor *b, const Tensor &y,
          Dims strides, Dims pads, Dims dilations, int64_t group, Activation activation,
          bool constantWeights) {
  const char *kernel = "conv";
  checkType(kernel, w, x.dtype);
  checkType(kernel, y, resultOf(x.dtype));
  if (b)
    checkType(kernel, *b, resultOf(x.dtype));
  ConvGeometry g =
      convGeometry(kernel, x.shape, w.shape, y.shape, strides, pads, dilations, group);
  if (b && b->numel() != g.m)
    fail(kernel, "bias has %lld elements, expected %lld", static_cast<long long>(b->numel()),
         static_cast<long long>(g.m));
  if (runPrimitive(ctx, kernel,
                   convProblem(ConvPass::Forward, x.shape, w.shape, y.shape, strides, pads,
                               dilations, group, b != nullptr, x.dtype, activation,
                               constantWeights),
                   x.data, w.data, b ? b->data : nullptr, y.data))
    return;
  int64_t n = g.n, m = g.m, p = g.outSize;

  dispatch(kernel, x.dtype, FloatTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *xs = x.as<T>();
    const T *ws = w.as<T>();
    T *ys = y.as<T>();
    if (p == 0 || n == 0 || m == 0)
      return;
    forEachBlock<T>(ctx, g, [&](const ConvBlock &blk, T *col) {
      const T *xg = xs + blk.xOffset(g);
      if (col)
        unroll<false>(g, const_cast<T *>(xg), blk.r0, blk.r1, col);
      tileProduct<T>(ctx, ConvPass::Forward, g, blk.columns(g), ws + blk.wOffset(g), col ? col : xg,
                     ys + blk.yOffset(g));
    });
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
  applyActivation(ctx, activation, y);
}

void conv_grad_input(Context &ctx, const Tensor &grad, const Tensor &w, const Tensor &out,
                     Dims strides, Dims pads, Dims dilations, int64_t group) {
  // dcol_g (kdim x positions) = w_g^T (kdim x mg) dy_g (mg x positions),
  // folded back onto dx_g (col2im); pointwise, dcol_g is dx_g itself.
  convAdjoint(ctx, ConvPass::GradInput, "conv_grad_input", grad, out, w, out, strides, pads,
              dilations, group, [&](const ConvGeometry &g, auto dx) {
                using T = std::remove_pointer_t<decltype(dx.x)>;
                tileProduct<T>(ctx, ConvPass::GradInput, g, dx.columns, dx.w, dx.dy,
                               dx.col ? dx.col : dx.x);
                if (dx.col)
                  unroll<true>(g, dx.x, dx.r0, dx.r1, dx.col);
              });
}

void conv_grad_weight(Context &ctx, const Tensor &grad, const Tensor &x, const Tensor &out,
                      Dims strides, Dims pads, Dims dilations, int64_t group) {
  // dw_g (mg x kdim) += dy_g (mg x positions) col_g^T (positions x kdim),
  // summed over the images (and tiles); pointwise, col_g is x_g itself.
  convAdjoint(ctx, ConvPass::GradWeight, "conv_grad_weight", grad, x, out, out, strides, pads,
              dilations, group, [&](const ConvGeometry &g, auto dw) {
                using T = std::remove_pointer_t<decltype(dw.x)>;
                if (dw.col)
                  unroll<false>(g, dw.x, dw.r0, dw.r1, dw.col);
                tileProduct<T>(ctx, ConvPass::GradWeight, g, dw.columns, dw.dy,
                               dw.col ? dw.col : dw.x, dw.w);
              });
}

} // namespace cleave::rt::cpu
