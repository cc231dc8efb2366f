//===- Common.cuh - what the CUDA kernels share -----------------*- C++ -*-===//
//
// Errors, the dtype dispatch, launch shapes, the strided layout every
// elementwise and movement kernel indexes through, block reductions and
// device math. Private to runtime/cuda.
//
// Device code here lives in cleave::rt::cuda, where the kernels `exp`, `log`,
// `sqrt`... hide the C math functions: device math is always spelled with
// `::` (see the m* helpers below).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_CUDA_COMMON_CUH
#define CLEAVE_RUNTIME_CUDA_COMMON_CUH

#include "runtime/DTypeOf.h"
#include "runtime/KernelError.h"
#include "runtime/cuda/Kernels.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace cleave::rt::cuda::detail {

//===----------------------------------------------------------------------===//
// Errors: `cleave: error: kernel NAME: WHAT` on stderr, exit status 3.
//===----------------------------------------------------------------------===//

/// Fails unless `error` is cudaSuccess.
void check(cudaError_t error, const char *kernel);
/// Fails unless `status` is CUBLAS_STATUS_SUCCESS.
void checkBlas(cublasStatus_t status, const char *kernel);
/// Checks the last launch (cudaGetLastError; does not synchronise).
void checkLaunch(const char *kernel);
/// The cuBLAS handle of `ctx`, bound to ctx.stream.
cublasHandle_t blasHandle(Context &ctx, const char *kernel);
/// Fails unless the tensors have the same element type.
void requireSameType(const char *kernel, const Tensor &a, const Tensor &b);
/// Fails unless the tensor has this element type.
void requireType(const char *kernel, const Tensor &t, DType type, const char *what);
/// Fails unless the tensor has this many elements.
void requireNumel(const char *kernel, const Tensor &t, int64_t numel, const char *what);

//===----------------------------------------------------------------------===//
// Element types and the dispatch helper.
//===----------------------------------------------------------------------===//

template <typename T> struct Tag {
  using type = T;
};
template <typename... Ts> struct Types {};

template <typename T> struct DTypeOf {
  static constexpr DType value = dtypeOf<T, __half, __nv_bfloat16>();
};

using F32Types = Types<float>;
using FloatTypes = Types<float, double>;
using IndexTypes = Types<int32_t, int64_t>;
/// gather_grad's atomic adds (the dialect's Cleave_ScatterTensor).
using ScatterTypes = Types<float, double, int32_t, int64_t>;
/// Types with arithmetic: add, sub, mul, div, pow, neg, abs, relu,
/// comparisons, reductions (the dialect's Cleave_NumericTensor); with Bool,
/// equal and reduce_max (Cleave_ComparableTensor).
using NumericTypes = Types<float, double, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t,
                           uint32_t, uint64_t>;
using ComparableTypes = Types<float, double, int8_t, int16_t, int32_t, int64_t, uint8_t,
                              uint16_t, uint32_t, uint64_t, bool>;
/// Every element type of DType (cast, fill).
using AllTypes = Types<float, double, __half, __nv_bfloat16, int8_t, int16_t, int32_t, int64_t,
                       uint8_t, uint16_t, uint32_t, uint64_t, bool>;

/// Calls f(Tag<T>{}) for the T of `types` whose DType is `type`; fails with
/// "unsupported element type" otherwise. Only the listed types are
/// instantiated.
template <typename... Ts, typename F>
void dispatch(const char *kernel, DType type, Types<Ts...>, F &&f) {
  bool done = ((type == DTypeOf<Ts>::value && (f(Tag<Ts>{}), true)) || ...);
  if (!done)
    fail(kernel, "unsupported element type %s", dtypeName(type));
}

/// Calls f(Tag<U>{}) with the unsigned integer U of `type`'s size, for
/// kernels that only move elements.
template <typename F> void dispatchBySize(const char *kernel, DType type, F &&f) {
  switch (dtypeSize(type)) {
  case 1: f(Tag<uint8_t>{}); return;
  case 2: f(Tag<uint16_t>{}); return;
  case 4: f(Tag<uint32_t>{}); return;
  case 8: f(Tag<uint64_t>{}); return;
  default: fail(kernel, "unsupported element type %s", dtypeName(type));
  }
}

/// The type integer arithmetic on T wraps in: unsigned, and at least
/// unsigned int (16-bit operands would promote to int, whose product can
/// overflow); T itself for floats.
template <typename T, bool = std::is_integral_v<T> && !std::is_same_v<T, bool>> struct Wrap {
  using type = T;
};
template <typename T> struct Wrap<T, true> {
  using type = std::common_type_t<std::make_unsigned_t<T>, unsigned>;
};
template <typename T> using WrapT = typename Wrap<T>::type;

/// x < 0, without comparing an unsigned value (always false) with zero.
template <typename T> __host__ __device__ inline bool isNegative(T x) {
  if constexpr (std::is_unsigned_v<T>)
    return false;
  else
    return x < T(0);
}

template <typename T>
inline constexpr bool isHalf = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

/// The smallest value of T (-inf for floats): the identity of MaxOp.
template <typename T> __host__ __device__ inline T lowest() {
  if constexpr (std::is_floating_point_v<T>) {
    return -static_cast<T>(INFINITY);
  } else if constexpr (std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    T max = static_cast<T>(static_cast<U>(~U(0)) >> 1);
    return static_cast<T>(-max - 1);
  } else {
    return T(0);
  }
}

/// The largest value of an integer type.
template <typename T> __host__ __device__ inline T highest() {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(std::is_signed_v<T> ? static_cast<U>(~U(0)) >> 1 : static_cast<U>(~U(0)));
}

/// ONNX Cast between any two element types (through f32 for the 16-bit
/// floats; to Bool is x != 0; floating to integer saturates).
template <typename To, typename From> __host__ __device__ inline To convert(From x) {
  if constexpr (std::is_same_v<To, From>)
    return x;
  else if constexpr (isHalf<From>)
    return convert<To>(static_cast<float>(x));
  else if constexpr (isHalf<To>)
    return To(static_cast<float>(x));
  else if constexpr (std::is_same_v<To, bool>)
    return x != From(0);
  else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    // Truncates toward zero and saturates; NaN gives 0 (as the CPU kernels).
    if (x != x)
      return To(0);
    double d = static_cast<double>(x);
    if (d < static_cast<double>(lowest<To>()))
      return lowest<To>();
    if (d >= static_cast<double>(highest<To>()) + 1.0)
      return highest<To>();
    return static_cast<To>(d);
  } else
    return static_cast<To>(x);
}

//===----------------------------------------------------------------------===//
// Launch shapes.
//===----------------------------------------------------------------------===//

inline constexpr int kThreads = 256;

/// Blocks for a grid-stride loop over n elements.
inline unsigned blocksFor(int64_t n) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < (1 << 20) ? blocks : (1 << 20));
}
/// Blocks for one block per item (grid-stride over items).
inline unsigned blocksForItems(int64_t items) {
  return static_cast<unsigned>(items < (1 << 20) ? items : (1 << 20));
}
/// Threads for a block reducing `count` elements: a multiple of 32 up to 256.
inline int threadsForReduction(int64_t count) {
  int threads = 32;
  while (threads < 256 && threads < count)
    threads *= 2;
  return threads;
}

__device__ inline int64_t globalThread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t globalThreads() { return static_cast<int64_t>(blockDim.x) * gridDim.x; }

#define CLEAVE_GRID_LOOP(i, n)                                                                     \
  for (int64_t i = ::cleave::rt::cuda::detail::globalThread(); i < (n);                          \
       i += ::cleave::rt::cuda::detail::globalThreads())

//===----------------------------------------------------------------------===//
// Strided layouts.
//===----------------------------------------------------------------------===//

/// An iteration shape and, for K tensors, the element stride of each dim in
/// that tensor (0 where it is broadcast). offsets(i) maps the row-major index
/// i of the iteration shape to an element offset in each tensor.
template <int K> struct Layout {
  /// An element offset in each tensor.
  using Bases = std::array<int64_t, K>;
  int32_t rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[K][kMaxRank] = {};

  /// Drops dims of size 1 and merges neighbours that are contiguous in
  /// every tensor, so the common cases index with one or two divisions.
  void simplify() {
    Layout out;
    for (int d = 0; d < rank; ++d) {
      if (dims[d] == 1)
        continue;
      bool merge = out.rank > 0;
      for (int k = 0; k < K && merge; ++k)
        merge = out.strides[k][out.rank - 1] == strides[k][d] * dims[d];
      if (merge) {
        out.dims[out.rank - 1] *= dims[d];
        for (int k = 0; k < K; ++k)
          out.strides[k][out.rank - 1] = strides[k][d];
        continue;
      }
      out.dims[out.rank] = dims[d];
      for (int k = 0; k < K; ++k)
        out.strides[k][out.rank] = strides[k][d];
      ++out.rank;
    }
    *this = out;
  }

  /// I: int64_t, or int32_t within a part of forEachInt32Part (its
  /// divisions are several times cheaper).
  template <typename I> __host__ __device__ void offsets(I i, I (&off)[K]) const {
    for (int k = 0; k < K; ++k)
      off[k] = 0;
    for (int d = rank - 1; d >= 0; --d) {
      I c = i % static_cast<I>(dims[d]);
      i /= static_cast<I>(dims[d]);
      for (int k = 0; k < K; ++k)
        off[k] += c * static_cast<I>(strides[k][d]);
    }
  }

  /// The layout of dims [begin, end) alone, with their strides.
  Layout dimsIn(int begin, int end) const {
    Layout out;
    out.rank = end - begin;
    for (int d = begin; d < end; ++d) {
      out.dims[d - begin] = dims[d];
      for (int k = 0; k < K; ++k)
        out.strides[k][d - begin] = strides[k][d];
    }
    return out;
  }

  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d)
      n *= dims[d];
    return n;
  }
  /// The largest |offset| in tensor k.
  int64_t reach(int k) const {
    int64_t r = 0;
    for (int d = 0; d < rank; ++d)
      r += (dims[d] - 1) * (strides[k][d] < 0 ? -strides[k][d] : strides[k][d]);
    return r;
  }
};

/// The bound of a part's element count and offsets: unrolledLoop's index
/// runs up to 2^30 past its count (a grid's stride), inside int32_t.
inline constexpr int64_t kInt32Part = int64_t(1) << 30;

/// Calls launch(part, first, bases) over consecutive parts of `layout`'s
/// elements, each indexing in int32_t (its count and offsets below
/// kInt32Part): `first` is the row-major index of its first element,
/// bases[k] that element's offset in tensor k. One part when it fits; else
/// runs of dim 0's indices, or each index's rest split again.
template <int K, typename Launch>
void forEachInt32Part(const Layout<K> &layout, int64_t first, typename Layout<K>::Bases bases,
                      Launch &&launch) {
  int64_t n = layout.numel();
  bool fits = n < kInt32Part;
  for (int k = 0; k < K && fits; ++k)
    fits = layout.reach(k) < kInt32Part;
  if (fits)
    return launch(layout, first, bases);
  Layout<K> rest = layout.dimsIn(1, layout.rank);
  int64_t restN = rest.numel(), rows = (kInt32Part - 1) / restN;
  for (int k = 0; k < K; ++k) {
    int64_t stride = layout.strides[k][0] < 0 ? -layout.strides[k][0] : layout.strides[k][0];
    int64_t room = kInt32Part - 1 - rest.reach(k);
    if (stride > 0)
      rows = room < 0 ? 0 : std::min(rows, room / stride + 1);
  }
  for (int64_t row = 0; row < layout.dims[0]; row += std::max<int64_t>(rows, 1)) {
    typename Layout<K>::Bases at = bases;
    for (int k = 0; k < K; ++k)
      at[k] += row * layout.strides[k][0];
    if (rows < 1) {
      forEachInt32Part(rest, first + row * restN, at, launch);
      continue;
    }
    Layout<K> part = layout;
    part.dims[0] = std::min(rows, layout.dims[0] - row);
    launch(part, first + row * restN, at);
  }
}

//===----------------------------------------------------------------------===//
// The unrolled loop of the elementwise kernels and copies.
//===----------------------------------------------------------------------===//

/// Elements per thread: a thread computes kUnroll elements a block apart (a
/// warp's accesses stay coalesced) before it stores any, so several loads
/// are in flight at once.
inline constexpr int kUnroll = 4;

/// Blocks for unrolledLoop over n elements.
inline unsigned blocksForUnrolled(int64_t n) { return blocksFor((n + kUnroll - 1) / kUnroll); }

/// For each i < n, store(i, value(i)), the kUnroll values of a thread
/// computed before any is stored (the stores may alias the loads: an
/// in-place op). With I = int32_t, n < kInt32Part: the grid's stride is at
/// most 2^20 blocks of kThreads * kUnroll elements, so base stays in range.
template <typename I, typename Value, typename Store>
__device__ inline void unrolledLoop(I n, Value value, Store store) {
  using T = decltype(value(I(0)));
  const I tile = static_cast<I>(blockDim.x) * kUnroll;
  for (I base = static_cast<I>(blockIdx.x) * tile; base < n;
       base += static_cast<I>(gridDim.x) * tile) {
    T values[kUnroll];
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      I i = base + j * static_cast<I>(blockDim.x) + static_cast<I>(threadIdx.x);
      if (i < n)
        values[j] = value(i);
    }
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      I i = base + j * static_cast<I>(blockDim.x) + static_cast<I>(threadIdx.x);
      if (i < n)
        store(i, values[j]);
    }
  }
}

/// Row-major strides of a shape.
inline void denseStrides(const Dims &shape, int64_t *strides) {
  int64_t s = 1;
  for (int d = shape.size - 1; d >= 0; --d) {
    strides[d] = s;
    s *= shape[d];
  }
}

/// Strides of `in` broadcast (numpy rules, right-aligned) to `shape`; fails
/// when it does not broadcast.
void broadcastStrides(const char *kernel, const Tensor &in, const Dims &shape, int64_t *strides);

/// The layout of `out`'s shape with the broadcast strides of each input.
template <int N>
Layout<N> broadcastLayout(const char *kernel, const Tensor &out, const Tensor *const (&ins)[N]) {
  Layout<N> layout;
  layout.rank = out.rank();
  for (int d = 0; d < out.rank(); ++d)
    layout.dims[d] = out.shape[d];
  for (int k = 0; k < N; ++k)
    broadcastStrides(kernel, *ins[k], out.shape, layout.strides[k]);
  layout.simplify();
  return layout;
}

//===----------------------------------------------------------------------===//
// The broadcasting elementwise kernel: out[i] = op(in_k[offset_k(i)]...).
//===----------------------------------------------------------------------===//

template <typename Op, typename I, size_t... Is, typename... In>
__device__ inline auto applyAt(const Op &op, const I *off, std::index_sequence<Is...>,
                               const In *...in) {
  return op(in[off[Is]]...);
}

template <int N, typename Op, typename Out, typename... In>
__global__ void elementwiseKernel(int32_t n, Layout<N> layout, Op op, Out *out, const In *...in) {
  using I = int32_t;
  auto store = [&](I i, auto value) { out[i] = value; };
  if (layout.rank <= 1) {
    // One dim left: each input is dense (stride 1) or a scalar (stride 0).
    unrolledLoop<I>(
        n,
        [&](I i) {
          I off[N];
#pragma unroll
          for (int k = 0; k < N; ++k)
            off[k] = i * static_cast<I>(layout.strides[k][0]);
          return applyAt(op, off, std::index_sequence_for<In...>{}, in...);
        },
        store);
    return;
  }
  unrolledLoop<I>(
      n,
      [&](I i) {
        I off[N];
        layout.offsets(i, off);
        return applyAt(op, off, std::index_sequence_for<In...>{}, in...);
      },
      store);
}

/// One launch of elementwiseKernel over a part of forEachInt32Part.
template <int N, typename Op, typename Out, typename... In, size_t... Is>
void launchElementwisePart(Context &ctx, const Layout<N> &part, int64_t first,
                           const typename Layout<N>::Bases &bases, Op op, Out *out,
                           std::index_sequence<Is...>, const In *...in) {
  int64_t n = part.numel();
  elementwiseKernel<N, Op, Out, In...><<<blocksForUnrolled(n), kThreads, 0, ctx.stream>>>(
      static_cast<int32_t>(n), part, op, out + first, (in + bases[Is])...);
}

/// Runs op over out's elements, each input broadcast to out's shape. Out and
/// In... are the element types; `ins` the input tensors, one per In.
template <typename Out, typename... In, typename Op, typename... Ts>
void elementwise(Context &ctx, const char *kernel, const Tensor &out, Op op, const Ts &...ins) {
  static_assert(sizeof...(In) == sizeof...(Ts), "one element type per input");
  constexpr int N = sizeof...(In);
  if (out.numel() == 0)
    return;
  const Tensor *list[N] = {&ins...};
  Layout<N> layout = broadcastLayout<N>(kernel, out, list);
  forEachInt32Part(
      layout, 0, {},
      [&](const Layout<N> &part, int64_t first, const typename Layout<N>::Bases &bases) {
        launchElementwisePart(ctx, part, first, bases, op, out.as<Out>(),
                              std::index_sequence_for<In...>{},
                              static_cast<const In *>(ins.data)...);
        checkLaunch(kernel);
      });
}

//===----------------------------------------------------------------------===//
// Strided copies: dst[offset_0(i)] = src[offset_1(i)] over an iteration shape
// (transpose, slice, expand, concat, split).
//===----------------------------------------------------------------------===//

/// Copies over `layout` (strides[0] in dst, strides[1] in src) starting at
/// element `dstBase` of dst and `srcBase` of src, for any element type.
void stridedCopy(Context &ctx, const char *kernel, DType type, Layout<2> layout, void *dst,
                 int64_t dstBase, const void *src, int64_t srcBase);

//===----------------------------------------------------------------------===//
// Block reductions.
//===----------------------------------------------------------------------===//

/// Integer sums wrap, as numpy's do.
struct SumOp {
  template <typename T> __device__ T operator()(T a, T b) const {
    return static_cast<T>(static_cast<WrapT<T>>(a) + static_cast<WrapT<T>>(b));
  }
};
/// Max and min that propagate NaN (as numpy's maximum and minimum do).
struct MaxOp {
  template <typename T> __device__ T operator()(T a, T b) const {
    return (b > a || b != b) ? b : a;
  }
};
struct MinOp {
  template <typename T> __device__ T operator()(T a, T b) const {
    return (b < a || b != b) ? b : a;
  }
};

/// Reduces v over the block (blockDim.x a multiple of 32, at most 1024);
/// every thread gets the result. Safe to call repeatedly.
template <typename T, typename Combine>
__device__ T blockReduce(T v, Combine combine, T identity) {
  __shared__ T partial[32];
  for (int offset = 16; offset > 0; offset >>= 1)
    v = combine(v, __shfl_down_sync(0xffffffffu, v, offset));
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads(); // earlier readers of partial are done
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    int warps = (blockDim.x + 31) >> 5;
    v = lane < warps ? partial[lane] : identity;
    for (int offset = 16; offset > 0; offset >>= 1)
      v = combine(v, __shfl_down_sync(0xffffffffu, v, offset));
    if (lane == 0)
      partial[0] = v;
  }
  __syncthreads();
  return partial[0];
}

//===----------------------------------------------------------------------===//
// Device math for float and double.
//===----------------------------------------------------------------------===//

#define CLEAVE_MATH1(name, f32, f64)                                                               \
  template <typename T> __device__ inline T name(T x) {                                            \
    if constexpr (std::is_same_v<T, float>)                                                        \
      return ::f32(x);                                                                             \
    else                                                                                           \
      return ::f64(x);                                                                             \
  }
CLEAVE_MATH1(mexp, expf, exp)
CLEAVE_MATH1(mlog, logf, log)
CLEAVE_MATH1(msqrt, sqrtf, sqrt)
CLEAVE_MATH1(mtanh, tanhf, tanh)
CLEAVE_MATH1(merf, erff, erf)
CLEAVE_MATH1(mfabs, fabsf, fabs)
#undef CLEAVE_MATH1

//===----------------------------------------------------------------------===//
// Convolution and pooling windows.
//===----------------------------------------------------------------------===//

inline constexpr int kMaxSpatial = kMaxRank - 2;

/// The spatial dims of an N x C x spatial... input and output and the
/// window attributes (defaults filled in).
struct Window {
  int32_t rank = 0;
  int64_t in[kMaxSpatial] = {}, out[kMaxSpatial] = {}, kernel[kMaxSpatial] = {};
  int64_t stride[kMaxSpatial] = {}, padBegin[kMaxSpatial] = {}, padEnd[kMaxSpatial] = {};
  int64_t dilation[kMaxSpatial] = {};
  int64_t inSize = 1, outSize = 1, kernelSize = 1;
};

/// The output positions whose window holds input element `pos` of a plane:
/// calls f(output position, kernel index) for each, at most one per kernel
/// index (window o reads coordinate o * stride - padBegin + k * dilation).
template <typename F> __device__ void forEachWindowHolding(const Window &win, int64_t pos, F &&f) {
  int64_t coord[kMaxSpatial];
  for (int d = win.rank - 1; d >= 0; --d) {
    coord[d] = pos % win.in[d];
    pos /= win.in[d];
  }
  for (int64_t k = 0; k < win.kernelSize; ++k) {
    int64_t rest = k, o = 0, inner = 1;
    bool hit = true;
    for (int d = win.rank - 1; d >= 0; --d) {
      int64_t kd = rest % win.kernel[d];
      rest /= win.kernel[d];
      int64_t t = coord[d] + win.padBegin[d] - kd * win.dilation[d];
      int64_t od = t / win.stride[d];
      hit = hit && t >= 0 && t % win.stride[d] == 0 && od < win.out[d];
      o += od * inner;
      inner *= win.out[d];
    }
    if (hit)
      f(o, k);
  }
}

/// Builds the window of x -> y; `kernel` empty takes the kernel dims from
/// `w` (conv); strides, pads and dilations may be empty (1, 0, 1).
Window makeWindow(const char *name, const Tensor &x, const Tensor &y, const Dims &kernel,
                  const Dims &strides, const Dims &pads, const Dims &dilations,
                  const Tensor *w = nullptr);

/// Softmax or log-softmax over `axis` of a dense tensor (also used by the
/// cross-entropy loss).
void softmaxImpl(Context &ctx, const char *kernel, const Tensor &in, const Tensor &out,
                 int64_t axis, bool log);

} // namespace cleave::rt::cuda::detail

namespace cleave::rt::cuda {
#include "runtime/ActivationKernels.inc"
} // namespace cleave::rt::cuda

#endif
