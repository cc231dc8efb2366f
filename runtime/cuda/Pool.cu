//===- Pool.cu - max, average and global average pooling; windows --------===//
//
// One thread per output element walks its window directly. The output dims
// (already final) decide how many windows there are, so ceil mode needs no
// flag: windows running past the padded input are clipped.
//
// The adjoints gather: one thread per input element visits the windows
// holding it (one per kernel index at most) and sums what they send it (the
// window's gradient when it is the window's first maximum, or the gradient
// over the window's divisor), so no atomics and a fixed order.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Common.cuh"

namespace cleave::rt::cuda {
namespace detail {

Window makeWindow(const char *name, const Tensor &x, const Tensor &y, const Dims &kernel,
                  const Dims &strides, const Dims &pads, const Dims &dilations,
                  const Tensor *w) {
  int rank = x.rank() - 2;
  if (rank < 1 || rank > kMaxSpatial)
    fail(name, "x has rank %d, expected N x C x 1 to %d spatial dims", x.rank(), kMaxSpatial);
  if (y.rank() != x.rank() || y.shape[0] != x.shape[0])
    fail(name, "y is not N x C x %d spatial dims like x", rank);
  if (w && w->rank() != x.rank())
    fail(name, "w has rank %d, expected %d", w->rank(), x.rank());
  if (!w && kernel.size != rank)
    fail(name, "%d kernel dims for %d spatial dims", kernel.size, rank);
  if (strides.size != 0 && strides.size != rank)
    fail(name, "%d strides for %d spatial dims", strides.size, rank);
  if (pads.size != 0 && pads.size != 2 * rank)
    fail(name, "%d pads for %d spatial dims", pads.size, rank);
  if (dilations.size != 0 && dilations.size != rank)
    fail(name, "%d dilations for %d spatial dims", dilations.size, rank);
  Window win;
  win.rank = rank;
  for (int d = 0; d < rank; ++d) {
    win.in[d] = x.shape[d + 2];
    win.out[d] = y.shape[d + 2];
    win.kernel[d] = w ? w->shape[d + 2] : kernel[d];
    win.stride[d] = strides.size ? strides[d] : 1;
    win.padBegin[d] = pads.size ? pads[d] : 0;
    win.padEnd[d] = pads.size ? pads[d + rank] : 0;
    win.dilation[d] = dilations.size ? dilations[d] : 1;
    if (win.kernel[d] < 1 || win.stride[d] < 1 || win.dilation[d] < 1)
      fail(name, "kernel dims, strides and dilations must be positive");
    win.inSize *= win.in[d];
    win.outSize *= win.out[d];
    win.kernelSize *= win.kernel[d];
  }
  return win;
}

namespace {

/// Calls f(offset in the plane) for every window element of output position
/// `p` inside the input; returns how many there were and, in `padded`, how
/// many lie inside the padded input (count_include_pad's divisor).
template <typename F>
__device__ int64_t forEachInWindow(const Window &win, int64_t p, int64_t &padded, F &&f) {
  int64_t start[kMaxSpatial];
  for (int d = win.rank - 1; d >= 0; --d) {
    start[d] = (p % win.out[d]) * win.stride[d] - win.padBegin[d];
    p /= win.out[d];
  }
  int64_t count = 0;
  padded = 0;
  for (int64_t k = 0; k < win.kernelSize; ++k) {
    int64_t rest = k, offset = 0, inner = 1;
    bool inside = true, inPadded = true;
    for (int d = win.rank - 1; d >= 0; --d) {
      int64_t coord = start[d] + (rest % win.kernel[d]) * win.dilation[d];
      rest /= win.kernel[d];
      inside = inside && coord >= 0 && coord < win.in[d];
      inPadded = inPadded && coord < win.in[d] + win.padEnd[d];
      offset += coord * inner;
      inner *= win.in[d];
    }
    padded += inPadded;
    if (inside) {
      ++count;
      f(offset);
    }
  }
  return count;
}

__global__ void maxPoolKernel(int64_t n, Window win, const float *x, float *y) {
  CLEAVE_GRID_LOOP(i, n) {
    int64_t plane = i / win.outSize;
    const float *xp = x + plane * win.inSize;
    float best = lowest<float>();
    int64_t padded;
    forEachInWindow(win, i % win.outSize, padded,
                    [&](int64_t offset) { best = MaxOp()(best, xp[offset]); });
    y[i] = best;
  }
}

__global__ void averagePoolKernel(int64_t n, Window win, bool countIncludePad, const float *x,
                                  float *y) {
  CLEAVE_GRID_LOOP(i, n) {
    int64_t plane = i / win.outSize;
    const float *xp = x + plane * win.inSize;
    double sum = 0;
    int64_t padded;
    int64_t count = forEachInWindow(win, i % win.outSize, padded,
                                    [&](int64_t offset) { sum += xp[offset]; });
    int64_t divisor = countIncludePad ? padded : count;
    y[i] = divisor ? static_cast<float>(sum / static_cast<double>(divisor)) : 0.0f;
  }
}

__global__ void globalAveragePoolKernel(int64_t planes, int64_t size, const float *x, float *y) {
  for (int64_t plane = blockIdx.x; plane < planes; plane += gridDim.x) {
    double sum = 0;
    for (int64_t j = threadIdx.x; j < size; j += blockDim.x)
      sum += x[plane * size + j];
    sum = blockReduce(sum, SumOp(), 0.0);
    if (threadIdx.x == 0)
      y[plane] = static_cast<float>(sum / static_cast<double>(size));
  }
}

/// The offset in the plane of window p's first maximum in window order, as
/// maxPoolKernel's MaxOp picks it (NaN wins, the first NaN); a window of
/// nothing but -inf gives its first element; -1 for a window outside the
/// input.
__device__ int64_t windowArgMax(const Window &win, int64_t p, const float *xp) {
  float best = lowest<float>();
  int64_t arg = -1, first = -1, padded;
  forEachInWindow(win, p, padded, [&](int64_t offset) {
    float v = xp[offset];
    if (first < 0)
      first = offset;
    if (v > best || (v != v && best == best)) {
      best = v;
      arg = offset;
    }
  });
  return arg >= 0 ? arg : first;
}

/// Window p's divisor in averagePoolKernel: its elements inside the input,
/// or with count_include_pad those inside the padded input; per dim, the
/// kernel indices landing there.
__device__ int64_t windowDivisor(const Window &win, int64_t p, bool countIncludePad) {
  int64_t valid = 1, padded = 1;
  for (int d = win.rank - 1; d >= 0; --d) {
    int64_t start = (p % win.out[d]) * win.stride[d] - win.padBegin[d];
    p /= win.out[d];
    int64_t dil = win.dilation[d], k = win.kernel[d];
    int64_t lo = start >= 0 ? 0 : (-start + dil - 1) / dil;
    int64_t hi = win.in[d] - 1 - start < 0 ? 0 : (win.in[d] - 1 - start) / dil + 1;
    int64_t end = win.in[d] + win.padEnd[d] - 1 - start;
    int64_t inPadded = end < 0 ? 0 : end / dil + 1;
    lo = lo < k ? lo : k;
    hi = hi < lo ? lo : (hi > k ? k : hi);
    valid *= hi - lo;
    padded *= inPadded < k ? inPadded : k;
  }
  return countIncludePad ? padded : valid;
}

/// One thread per input element: the gradients of the windows whose
/// maximum it is, summed in kernel order.
__global__ void maxPoolGradKernel(int64_t n, Window win, const float *x, const float *g,
                                  float *dx) {
  CLEAVE_GRID_LOOP(i, n) {
    int64_t plane = i / win.inSize, pos = i % win.inSize;
    const float *xp = x + plane * win.inSize;
    const float *gp = g + plane * win.outSize;
    float sum = 0.0f;
    forEachWindowHolding(win, pos, [&](int64_t o, int64_t) {
      if (windowArgMax(win, o, xp) == pos)
        sum += gp[o];
    });
    dx[i] = sum;
  }
}

/// One thread per input element: each window holding it contributes its
/// gradient over its divisor.
__global__ void averagePoolGradKernel(int64_t n, Window win, bool countIncludePad,
                                      const float *g, float *dx) {
  CLEAVE_GRID_LOOP(i, n) {
    int64_t plane = i / win.inSize, pos = i % win.inSize;
    const float *gp = g + plane * win.outSize;
    double sum = 0;
    forEachWindowHolding(win, pos, [&](int64_t o, int64_t) {
      int64_t divisor = windowDivisor(win, o, countIncludePad);
      if (divisor > 0)
        sum += static_cast<double>(gp[o]) / static_cast<double>(divisor);
    });
    dx[i] = static_cast<float>(sum);
  }
}

/// Launches `kernel` on the stream with a thread for each of `n` elements
/// (its first argument), unless there are none, and checks the launch.
template <typename... Params, typename... Args>
void launchPerElement(Context &ctx, const char *name, void (*kernel)(int64_t, Params...), int64_t n,
                      Args... args) {
  if (n == 0)
    return;
  kernel<<<blocksFor(n), kThreads, 0, ctx.stream>>>(n, args...);
  checkLaunch(name);
}

void requirePool(const char *kernel, const Tensor &x, const Tensor &y) {
  requireType(kernel, x, DType::F32, "x");
  requireType(kernel, y, DType::F32, "y");
  if (x.rank() < 2 || y.rank() != x.rank() || y.shape[1] != x.shape[1])
    fail(kernel, "y is not N x C x ... like x");
}

} // namespace
} // namespace detail

using namespace detail;

void max_pool(Context &ctx, const Tensor &x, const Tensor &y, Dims kernel, Dims strides,
              Dims pads, Dims dilations) {
  const char *name = "max_pool";
  requirePool(name, x, y);
  Window win = makeWindow(name, x, y, kernel, strides, pads, dilations);
  launchPerElement(ctx, name, maxPoolKernel, y.numel(), win, x.as<float>(), y.as<float>());
}

void average_pool(Context &ctx, const Tensor &x, const Tensor &y, Dims kernel, Dims strides,
                  Dims pads, Dims dilations, bool countIncludePad) {
  const char *name = "average_pool";
  requirePool(name, x, y);
  Window win = makeWindow(name, x, y, kernel, strides, pads, dilations);
  launchPerElement(ctx, name, averagePoolKernel, y.numel(), win, countIncludePad, x.as<float>(),
                   y.as<float>());
}

void max_pool_grad(Context &ctx, const Tensor &grad, const Tensor &x, const Tensor &out,
                   Dims kernel, Dims strides, Dims pads, Dims dilations) {
  const char *name = "max_pool_grad";
  requirePool(name, x, grad);
  requireType(name, out, DType::F32, "the result");
  bool same = out.rank() == x.rank();
  for (int d = 0; same && d < x.rank(); ++d)
    same = out.shape[d] == x.shape[d];
  if (!same)
    fail(name, "the result must have x's shape");
  Window win = makeWindow(name, x, grad, kernel, strides, pads, dilations);
  launchPerElement(ctx, name, maxPoolGradKernel, out.numel(), win, x.as<float>(), grad.as<float>(),
                   out.as<float>());
}

void average_pool_grad(Context &ctx, const Tensor &grad, const Tensor &out, Dims kernel,
                       Dims strides, Dims pads, Dims dilations, bool countIncludePad) {
  const char *name = "average_pool_grad";
  requirePool(name, out, grad);
  Window win = makeWindow(name, out, grad, kernel, strides, pads, dilations);
  launchPerElement(ctx, name, averagePoolGradKernel, out.numel(), win, countIncludePad,
                   grad.as<float>(), out.as<float>());
}

void global_average_pool(Context &ctx, const Tensor &x, const Tensor &y) {
  const char *name = "global_average_pool";
  requirePool(name, x, y);
  int64_t planes = x.rank() >= 2 ? x.shape[0] * x.shape[1] : 0;
  int64_t size = planes ? x.numel() / planes : 0;
  requireNumel(name, y, planes, "y");
  if (planes == 0)
    return;
  globalAveragePoolKernel<<<blocksForItems(planes), threadsForReduction(size), 0, ctx.stream>>>(
      planes, size, x.as<float>(), y.as<float>());
  checkLaunch(name);
}

} // namespace cleave::rt::cuda
