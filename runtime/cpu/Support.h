//===- Support.h - what the CPU kernels share -------------------*- C++ -*-===//
//
// Private to runtime/cpu: the one error function, element types and their
// conversions, the dtype dispatch helper, the strided loop nest every
// broadcasting, permuting and reducing kernel walks, and the matrix product
// the matmul, gemm and conv kernels share.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_CPU_SUPPORT_H
#define CLEAVE_RUNTIME_CPU_SUPPORT_H

#include "runtime/DTypeOf.h"
#include "runtime/KernelError.h"
#include "runtime/LowPrecision.h"
#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

// glibc's vector math library (libmvec, linked with every program) has
// SSE, AVX2 and AVX-512 versions of these float functions: declaring them
// `simd` lets GCC vectorise the kernels' loops over them (expf 4.6, erff 10
// times faster). A result may differ from the scalar function's in its last
// bits (as accurate against float64: docs/performance.md); every kernel that
// calls one runs the same loop shape, so a fused chain still computes what
// the standalone kernels compute.
#if defined(__GNUC__) && !defined(__clang__)
extern "C" {
__attribute__((simd("notinbranch"))) float expf(float);
__attribute__((simd("notinbranch"))) float logf(float);
__attribute__((simd("notinbranch"))) float tanhf(float);
__attribute__((simd("notinbranch"))) float erff(float);
}
#endif

// GNU OpenMP's (libgomp), on whose threads Debian's oneDNN runs: declared
// here so that no compiler's OpenMP support is needed to build the kernels.
extern "C" void omp_set_num_threads(int numThreads);

namespace cleave::rt::cpu {

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

/// fail() for an element type the kernel does not implement.
[[noreturn]] void failType(const char *kernel, DType type);

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

template <typename T> struct DTypeOf {
  static constexpr DType value = dtypeOf<T, Half, BFloat16>();
};

template <typename T>
inline constexpr bool isFloat = std::is_floating_point_v<T> || std::is_same_v<T, Half> ||
                                std::is_same_v<T, BFloat16>;
template <typename T>
inline constexpr bool isInteger = std::is_integral_v<T> && !std::is_same_v<T, bool>;

/// Any element as a float or double (half types widen to float).
template <typename T> inline auto widen(T v) {
  if constexpr (std::is_same_v<T, Half>)
    return fromHalf(v);
  else if constexpr (std::is_same_v<T, BFloat16>)
    return fromBFloat16(v);
  else
    return v;
}

/// ONNX Cast of one element. Floating to integer truncates toward zero and
/// saturates (NaN gives 0; ONNX leaves out-of-range values undefined);
/// integer to narrower integer wraps; anything to Bool is `!= 0`.
template <typename To, typename From> inline To convert(From from) {
  auto v = widen(from);
  using V = decltype(v);
  if constexpr (std::is_same_v<To, V>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != V(0);
  } else if constexpr (std::is_same_v<To, Half>) {
    return toHalf(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, BFloat16>) {
    return toBFloat16(static_cast<float>(v));
  } else if constexpr (isInteger<To> && std::is_floating_point_v<V>) {
    if (v != v)
      return 0;
    constexpr double lo = static_cast<double>(std::numeric_limits<To>::min());
    constexpr double hi = static_cast<double>(std::numeric_limits<To>::max()) + 1.0; // 2^bits
    double d = static_cast<double>(v);
    if (d < lo)
      return std::numeric_limits<To>::min();
    if (d >= hi)
      return std::numeric_limits<To>::max();
    return static_cast<To>(d);
  } else {
    return static_cast<To>(v);
  }
}

/// Integer arithmetic that wraps (as onnxruntime and numpy do) instead of
/// overflowing; plain arithmetic for floating types.
template <typename T> inline T wrapAdd(T a, T b) {
  if constexpr (isInteger<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename T> inline T wrapSub(T a, T b) {
  if constexpr (isInteger<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return a - b;
  }
}
template <typename T> inline T wrapMul(T a, T b) {
  if constexpr (isInteger<T>) {
    // At least unsigned int: 16-bit operands would promote to int, whose
    // product can overflow.
    using U = std::common_type_t<std::make_unsigned_t<T>, unsigned>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}
template <typename T> inline T wrapNeg(T a) { return wrapSub(T(0), a); }

/// The larger and the smaller of a and b; NaN in either gives NaN (numpy's
/// maximum and minimum).
template <typename T> inline T maximum(T a, T b) { return (b > a || b != b) ? b : a; }
template <typename T> inline T minimum(T a, T b) { return (b < a || b != b) ? b : a; }

/// v < 0, without comparing an unsigned value (always false) with zero.
template <typename T> inline bool isNegative(T v) {
  if constexpr (std::is_unsigned_v<T>)
    return false;
  else
    return v < T(0);
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

template <typename T> struct Tag {
  using type = T;
};
template <typename... Ts> struct TypeList {};

// The element types of the dialect's constraints (dialects/Cleave/CleaveOps.td):
// Cleave_FloatTensor, Cleave_IndexTensor, Cleave_NumericTensor (arithmetic,
// comparisons, reductions, max pooling), Cleave_ComparableTensor (equal,
// reduce_max) and Cleave_MatrixTensor (matmul, gemm).
using FloatTypes = TypeList<float, double>;
using IntTypes = TypeList<int64_t, int32_t>;
using NumericTypes = TypeList<float, double, int8_t, int16_t, int32_t, int64_t, uint8_t,
                              uint16_t, uint32_t, uint64_t>;
using ComparableTypes = TypeList<float, double, int8_t, int16_t, int32_t, int64_t, uint8_t,
                                 uint16_t, uint32_t, uint64_t, bool>;
using MatrixTypes = TypeList<float, double, int64_t, int32_t>;
/// gather_grad's (the dialect's Cleave_ScatterTensor).
using ScatterTypes = TypeList<float, double, int32_t, int64_t>;
using AllTypes = TypeList<float, double, Half, BFloat16, int8_t, int16_t, int32_t, int64_t,
                          uint8_t, uint16_t, uint32_t, uint64_t, bool>;

/// Calls `f(Tag<T>{})` for the T of `types` whose DType is `type`; fails
/// naming the kernel when none is.
template <typename... Ts, typename F>
inline void dispatch(const char *kernel, DType type, TypeList<Ts...>, F &&f) {
  bool found = ((type == DTypeOf<Ts>::value ? (f(Tag<Ts>{}), true) : false) || ...);
  if (!found)
    failType(kernel, type);
}

/// Movement ops care only about element size: one unsigned type per size.
template <typename F> inline void dispatchBySize(const char *kernel, DType type, F &&f) {
  switch (dtypeSize(type)) {
  case 1: return f(Tag<uint8_t>{});
  case 2: return f(Tag<uint16_t>{});
  case 4: return f(Tag<uint32_t>{});
  case 8: return f(Tag<uint64_t>{});
  default: failType(kernel, type);
  }
}

//===----------------------------------------------------------------------===//
// Shapes and loops
//===----------------------------------------------------------------------===//

/// Product of shape[begin, end).
inline int64_t product(const Dims &shape, int begin, int end) {
  int64_t n = 1;
  for (int i = begin; i < end; ++i)
    n *= shape[i];
  return n;
}

/// Row-major strides, in elements.
inline void rowMajorStrides(const Dims &shape, int64_t *strides) {
  int64_t s = 1;
  for (int i = shape.size - 1; i >= 0; --i) {
    strides[i] = s;
    s *= shape[i];
  }
}

/// `attr` when it has `n` entries, `n` copies of `fallback` when it is empty.
Dims orDefault(const char *kernel, const char *what, const Dims &attr, int n, int64_t fallback);

/// Fails unless `a` and `b` have the same element type and count.
void checkSameLayout(const char *kernel, const Tensor &a, const Tensor &b);
/// Fails unless `t` has element type `type`.
void checkType(const char *kernel, const Tensor &t, DType type);

/// Elements below which a kernel stays on one thread: starting OpenMP's
/// threads on a loop costs microseconds, what tens of thousands of float
/// operations take.
inline constexpr int64_t kParallelElements = int64_t(1) << 15;

/// Calls body(begin, end) on disjoint chunks that cover [0, n), each a
/// multiple of `grain` elements but the last, one per thread on up to
/// ctx.threads of OpenMP's threads (libgomp's, which oneDNN's products use
/// too) when n is large enough to pay. Every element is computed as on one
/// thread, so the results do not depend on the thread count.
template <typename F> void forEachChunk(const Context &ctx, int64_t n, int64_t grain, F &&body) {
  const int64_t grains = (n + grain - 1) / grain;
  const int64_t chunks = std::min<int64_t>(
      {static_cast<int64_t>(std::max(1, ctx.threads)), grains, n / kParallelElements});
  if (chunks <= 1) {
    body(int64_t(0), n);
    return;
  }
  const int64_t per = (grains + chunks - 1) / chunks * grain;
#pragma omp parallel for num_threads(static_cast <int>(chunks)) schedule(static, 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * per, end = std::min(n, begin + per);
    if (begin < end)
      body(begin, end);
  }
}

/// K strided operands walked over the same dims. Operand 0 is usually the
/// output (contiguous); others carry their own strides (0 where broadcast, a
/// permutation, a slice's steps). Construction drops unit dims and merges
/// adjacent dims every operand walks contiguously, so a plain elementwise
/// op is one long row and a broadcast bias add is rows of stride 1 and 0.
template <int K> struct LoopNest {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[K][kMaxRank] = {};
  bool empty = false;

  /// Adds a dim with each operand's stride.
  void push(int64_t dim, const int64_t (&dimStrides)[K]) {
    if (dim == 0)
      empty = true;
    if (dim == 1)
      return;
    dims[rank] = dim;
    for (int k = 0; k < K; ++k)
      strides[k][rank] = dimStrides[k];
    ++rank;
  }

  /// Merges dims every operand walks contiguously; call after the pushes.
  void coalesce() {
    if (rank == 0)
      return;
    int out = 0;
    for (int i = 1; i < rank; ++i) {
      bool mergeable = true;
      for (int k = 0; k < K; ++k)
        mergeable &= strides[k][out] == strides[k][i] * dims[i];
      if (mergeable) {
        dims[out] *= dims[i];
        for (int k = 0; k < K; ++k)
          strides[k][out] = strides[k][i];
      } else {
        ++out;
        dims[out] = dims[i];
        for (int k = 0; k < K; ++k)
          strides[k][out] = strides[k][i];
      }
    }
    rank = out + 1;
  }

  /// forEachRow with the work split among up to ctx.threads threads
  /// (forEachChunk): whole rows, or pieces of a single row. Only for an f
  /// that computes each element of a row on its own (elementwise), so that
  /// the results do not depend on the split.
  template <typename F> void forEachRowSplit(const Context &ctx, F &&f) const {
    if (empty)
      return;
    int64_t inner[K];
    for (int k = 0; k < K; ++k)
      inner[k] = rank == 0 ? 1 : strides[k][rank - 1];
    const int64_t n = rank == 0 ? 1 : dims[rank - 1];
    if (rank <= 1) {
      forEachChunk(ctx, n, 64, [&](int64_t begin, int64_t end) {
        int64_t offsets[K];
        for (int k = 0; k < K; ++k)
          offsets[k] = begin * inner[k];
        f(offsets, end - begin, inner);
      });
      return;
    }
    int64_t rows = 1;
    for (int d = 0; d + 1 < rank; ++d)
      rows *= dims[d];
    forEachChunk(ctx, rows * n, n, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin / n; r < end / n; ++r) {
        int64_t offsets[K] = {};
        for (int64_t rest = r, d = rank - 2; d >= 0; --d) {
          for (int k = 0; k < K; ++k)
            offsets[k] += rest % dims[d] * strides[k][d];
          rest /= dims[d];
        }
        f(offsets, n, inner);
      }
    });
  }

  /// Calls f(offsets, n, innerStrides) for every innermost row: operand k's
  /// row starts at element offsets[k] and steps by innerStrides[k].
  template <typename F> void forEachRow(F &&f) const {
    if (empty)
      return;
    int64_t inner[K];
    int64_t offsets[K] = {};
    if (rank == 0) {
      for (int k = 0; k < K; ++k)
        inner[k] = 1;
      f(offsets, int64_t(1), inner);
      return;
    }
    for (int k = 0; k < K; ++k)
      inner[k] = strides[k][rank - 1];
    int64_t n = dims[rank - 1];
    int64_t rows = 1;
    for (int d = 0; d + 1 < rank; ++d)
      rows *= dims[d];
    int64_t index[kMaxRank] = {};
    for (int64_t r = 0; r < rows; ++r) {
      f(offsets, n, inner);
      for (int d = rank - 2; d >= 0; --d) {
        for (int k = 0; k < K; ++k)
          offsets[k] += strides[k][d];
        if (++index[d] < dims[d])
          break;
        for (int k = 0; k < K; ++k)
          offsets[k] -= strides[k][d] * dims[d];
        index[d] = 0;
      }
    }
  }
};

/// Strides (in elements) that read `in` broadcast to `out`'s dims (numpy
/// rules): 0 on broadcast dims. Fails naming the kernel on a mismatch.
void broadcastStrides(const char *kernel, const Dims &in, const Dims &out, int64_t *strides);

/// The loop nest of a contiguous `out` (operand 0) and `inputs` broadcast to
/// it (operands 1...).
template <int K>
LoopNest<K> broadcastNest(const char *kernel, const Dims &out, const Dims *const (&inputs)[K - 1]) {
  int64_t strides[K][kMaxRank];
  rowMajorStrides(out, strides[0]);
  for (int k = 1; k < K; ++k)
    broadcastStrides(kernel, *inputs[k - 1], out, strides[k]);
  LoopNest<K> nest;
  for (int d = 0; d < out.size; ++d) {
    int64_t dimStrides[K];
    for (int k = 0; k < K; ++k)
      dimStrides[k] = strides[k][d];
    nest.push(out[d], dimStrides);
  }
  nest.coalesce();
  return nest;
}

/// Copies `bytes` from `from` to `to`, split among the threads where the two
/// do not overlap (one core's copy does not reach the memory's bandwidth:
/// 4 MB took 310 us on one of this machine's two, loss scaling's guard
/// copying each moment); overlapping ones as one memmove.
void copyBytes(const Context &ctx, const void *from, void *to, int64_t bytes);

/// Copies elements of `esize` bytes from `src` (walked with `srcStrides`, in
/// elements, over `out`'s dims) to the contiguous `out`. Transpose, slice,
/// expand and gemm's bias all reduce to this.
void stridedCopy(const Context &ctx, const char *kernel, const void *src, const int64_t *srcStrides,
                 const Tensor &out);

/// Integer division rounding toward negative infinity (b > 0).
inline int64_t floorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

/// Sum of n elements with independent partial sums (so it vectorises without
/// reassociating a single chain); floats accumulate in double.
template <typename T> inline auto sumRow(const T *x, int64_t n, int64_t stride = 1) {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
  Acc acc[8] = {};
  int64_t i = 0;
  if (stride == 1) {
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j)
        acc[j] = wrapAdd(acc[j], static_cast<Acc>(x[i + j]));
  }
  for (; i < n; ++i)
    acc[0] = wrapAdd(acc[0], static_cast<Acc>(x[i * stride]));
  Acc total = acc[0];
  for (int j = 1; j < 8; ++j)
    total = wrapAdd(total, acc[j]);
  return total;
}

//===----------------------------------------------------------------------===//
// Scratch
//===----------------------------------------------------------------------===//

/// One kernel call's scratch (an im2col tile, a convolution's operands in
/// oneDNN's layouts, a product's widened operands), 64-byte aligned and
/// counted in the run's allocations: the run's workspace where the backend
/// keeps one (ConvPrimitives::workspace), else memory of the call's own.
/// `kernel` names the caller when there is no memory for it.
class Scratch {
public:
  Scratch(Context &ctx, const char *kernel, int64_t bytes);
  ~Scratch();
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  template <typename T> T *as() { return static_cast<T *>(memory); }

private:
  Context &ctx;
  std::size_t bytes;
  void *memory = nullptr, *owned = nullptr;
};

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

/// C = alpha * op(A) * op(B) + beta * C, row-major, op(A) M x K, op(B) K x N.
/// float goes to oneDNN's matmul primitives (ProductPrimitives.h) and double
/// to OpenBLAS, with ctx.threads threads; integers loop.
template <typename T>
void gemmCore(Context &ctx, bool transA, bool transB, int64_t m, int64_t n, int64_t k,
              double alpha, const T *a, int64_t lda, const T *b, int64_t ldb, double beta,
              T *c, int64_t ldc);

//===----------------------------------------------------------------------===//
// Fused activations
//===----------------------------------------------------------------------===//

#include "runtime/ActivationKernels.inc"

} // namespace cleave::rt::cpu

#endif
