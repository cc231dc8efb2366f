//===- Elementwise.cu - unary, binary, where, cast, fill, range, dropout --===//
//
// Every unary and binary op and where is a functor run by the one
// broadcasting elementwise kernel (Common.cuh).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Common.cuh"

#include "runtime/Random.h"

namespace cleave::rt::cuda {
namespace detail {
namespace {

//===----------------------------------------------------------------------===//
// Functors. Integer arithmetic wraps (through WrapT, Common.cuh), as numpy
// and onnxruntime do.
//===----------------------------------------------------------------------===//

struct NegOp {
  template <typename T> __device__ T operator()(T x) const {
    return static_cast<T>(WrapT<T>(0) - static_cast<WrapT<T>>(x));
  }
};
struct AbsOp {
  template <typename T> __device__ T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>)
      return mfabs(x);
    else
      return isNegative(x) ? NegOp()(x) : x;
  }
};
struct ReluOp {
  // NaN stays NaN, as np.maximum(x, 0) keeps it.
  template <typename T> __device__ T operator()(T x) const { return isNegative(x) ? T(0) : x; }
};
struct SqrtOp {
  template <typename T> __device__ T operator()(T x) const { return msqrt(x); }
};
struct ReciprocalOp {
  template <typename T> __device__ T operator()(T x) const { return T(1) / x; }
};
struct ExpOp {
  template <typename T> __device__ T operator()(T x) const { return mexp(x); }
};
struct LogOp {
  template <typename T> __device__ T operator()(T x) const { return mlog(x); }
};
struct TanhOp {
  template <typename T> __device__ T operator()(T x) const { return mtanh(x); }
};
struct SigmoidOp {
  template <typename T> __device__ T operator()(T x) const {
    // exp of a non-positive argument only: no overflow either way.
    if (x >= T(0))
      return T(1) / (T(1) + mexp(-x));
    T e = mexp(x);
    return e / (T(1) + e);
  }
};
struct ErfOp {
  template <typename T> __device__ T operator()(T x) const { return merf(x); }
};
struct LeakyReluOp {
  float alpha;
  template <typename T> __device__ T operator()(T x) const {
    return x < T(0) ? static_cast<T>(alpha) * x : x;
  }
};
struct GeluOp {
  bool tanhApproximation;
  template <typename T> __device__ T operator()(T x) const {
    if (tanhApproximation) {
      const T k = T(0.7978845608028654); // sqrt(2 / pi)
      return T(0.5) * x * (T(1) + mtanh(k * (x + T(0.044715) * x * x * x)));
    }
    return T(0.5) * x * (T(1) + merf(x * T(0.7071067811865476))); // 1 / sqrt(2)
  }
};
struct NotOp {
  __device__ bool operator()(bool x) const { return !x; }
};
struct SignOp {
  template <typename T> __device__ T operator()(T x) const {
    return x > T(0) ? T(1) : isNegative(x) ? static_cast<T>(-1) : x; // 0 and NaN stay
  }
};
// One functor per function of runtime/FloatMath.def.
#define CLEAVE_FLOAT_MATH(name, f32, f64)                                                          \
  struct name##Functor {                                                                           \
    template <typename T> __device__ T operator()(T x) const {                                     \
      if constexpr (std::is_same_v<T, float>)                                                      \
        return ::f32(x);                                                                           \
      else                                                                                         \
        return ::f64(x);                                                                           \
    }                                                                                              \
  };
#include "runtime/FloatMath.def"
#undef CLEAVE_FLOAT_MATH

struct AddOp {
  template <typename T> __device__ T operator()(T a, T b) const {
    return static_cast<T>(static_cast<WrapT<T>>(a) + static_cast<WrapT<T>>(b));
  }
};
struct SubOp {
  template <typename T> __device__ T operator()(T a, T b) const {
    return static_cast<T>(static_cast<WrapT<T>>(a) - static_cast<WrapT<T>>(b));
  }
};
struct MulOp {
  template <typename T> __device__ T operator()(T a, T b) const {
    return static_cast<T>(static_cast<WrapT<T>>(a) * static_cast<WrapT<T>>(b));
  }
};
struct DivOp {
  // Integer division truncates toward zero (ONNX: numpy's true division cast
  // back to the integer type). Division by zero gives 0 for integers rather
  // than the hardware's unspecified value.
  template <typename T> __device__ T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == T(0))
        return T(0);
      if constexpr (std::is_signed_v<T>)
        if (b == T(-1))
          return NegOp()(a);
    }
    return static_cast<T>(a / b);
  }
};
struct FmodOp {
  // The remainder with the dividend's sign; for integers x % 0 and x % -1
  // are 0 (the hardware traps or leaves them unspecified).
  template <typename T> __device__ T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == T(0))
        return T(0);
      if constexpr (std::is_signed_v<T>)
        if (b == T(-1))
          return T(0);
      return static_cast<T>(a % b);
    } else {
      return ::fmod(a, b);
    }
  }
};
struct PowOp {
  // ONNX Pow: the result has the base's type. Integer powers by squaring
  // (wrapping; a negative exponent gives the truncated reciprocal), f32 with
  // an f32 or integer exponent in f32, the rest through double.
  template <typename A, typename B> __device__ A operator()(A a, B b) const {
    if constexpr (std::is_integral_v<A> && std::is_integral_v<B>) {
      A y = static_cast<A>(b);
      if (isNegative(y))
        return a == 1 ? A(1) : a == A(-1) ? ((y & 1) ? A(-1) : A(1)) : A(0);
      A result = 1;
      while (y) {
        if (y & 1)
          result = MulOp()(result, a);
        a = MulOp()(a, a);
        y >>= 1;
      }
      return result;
    } else if constexpr (std::is_same_v<A, float> && !std::is_same_v<B, double>) {
      return ::powf(a, static_cast<float>(b));
    } else {
      return convert<A>(::pow(static_cast<double>(a), static_cast<double>(b)));
    }
  }
};
struct EqualOp {
  template <typename T> __device__ bool operator()(T a, T b) const { return a == b; }
};
struct LessOp {
  template <typename T> __device__ bool operator()(T a, T b) const { return a < b; }
};
struct GreaterOp {
  template <typename T> __device__ bool operator()(T a, T b) const { return a > b; }
};
struct SelectOp {
  template <typename U> __device__ U operator()(bool c, U x, U y) const { return c ? x : y; }
};

//===----------------------------------------------------------------------===//
// Launchers.
//===----------------------------------------------------------------------===//

/// out = op(in), in and out of one type from `types`.
template <typename Op, typename TypeSet>
void unary(Context &ctx, const char *kernel, const Tensor &in, const Tensor &out, Op op,
           TypeSet types) {
  requireSameType(kernel, in, out);
  requireNumel(kernel, in, out.numel(), "the input");
  dispatch(kernel, in.dtype, types, [&](auto tag) {
    using T = typename decltype(tag)::type;
    elementwise<T, T>(ctx, kernel, out, op, in);
  });
}

/// out = op(lhs, rhs) broadcast, all three of one type from `types`.
template <typename Op, typename TypeSet>
void binary(Context &ctx, const char *kernel, const Tensor &lhs, const Tensor &rhs,
            const Tensor &out, Op op, TypeSet types) {
  requireSameType(kernel, lhs, rhs);
  requireSameType(kernel, lhs, out);
  dispatch(kernel, lhs.dtype, types, [&](auto tag) {
    using T = typename decltype(tag)::type;
    elementwise<T, T, T>(ctx, kernel, out, op, lhs, rhs);
  });
}

/// out (Bool) = op(lhs, rhs) broadcast.
template <typename Op, typename TypeSet>
void compare(Context &ctx, const char *kernel, const Tensor &lhs, const Tensor &rhs,
             const Tensor &out, Op op, TypeSet types) {
  requireSameType(kernel, lhs, rhs);
  requireType(kernel, out, DType::Bool, "the result");
  dispatch(kernel, lhs.dtype, types, [&](auto tag) {
    using T = typename decltype(tag)::type;
    elementwise<bool, T, T>(ctx, kernel, out, op, lhs, rhs);
  });
}

/// Dense: no divisions, so int64_t indices cost little (no int32_t parts).
template <typename To, typename From>
__global__ void castKernel(int64_t n, const From *in, To *out) {
  unrolledLoop<int64_t>(
      n, [&](int64_t i) { return convert<To>(in[i]); },
      [&](int64_t i, To value) { out[i] = value; });
}

template <typename T> __global__ void fillKernel(int64_t n, T value, T *out) {
  CLEAVE_GRID_LOOP(i, n) out[i] = value;
}

template <typename T> __global__ void rangeKernel(int64_t n, double start, double delta, T *out) {
  CLEAVE_GRID_LOOP(i, n) {
    if constexpr (std::is_floating_point_v<T>)
      out[i] = static_cast<T>(start + static_cast<double>(i) * delta);
    else
      out[i] = static_cast<T>(static_cast<int64_t>(start) + i * static_cast<int64_t>(delta));
  }
}

//===----------------------------------------------------------------------===//
// Dropout: the generator both backends share (runtime/Random.h), so a seed
// drops the same elements on either backend.
//===----------------------------------------------------------------------===//

/// Element i is kept when uniformDraw(key, i) (runtime/Random.h) is at least
/// `ratio`, and then scaled by 1 / (1 - ratio).
template <typename T>
__global__ void dropoutKernel(int64_t n, const T *in, T *out, bool *mask, double ratio,
                              T scale, uint64_t key, SplitIndex index,
                              const int64_t *coordinate) {
  int64_t rank = coordinate ? *coordinate : 0;
  CLEAVE_GRID_LOOP(i, n) {
    bool kept = uniformDraw(key, index.global(i, rank)) >= ratio;
    out[i] = kept ? in[i] * scale : T(0);
    if (mask)
      mask[i] = kept;
  }
}

} // namespace

} // namespace detail

using namespace detail;

//===----------------------------------------------------------------------===//
// Unary.
//===----------------------------------------------------------------------===//

void neg(Context &ctx, const Tensor &in, const Tensor &out) {
  unary(ctx, "neg", in, out, NegOp{}, NumericTypes{});
}
void sqrt(Context &ctx, const Tensor &in, const Tensor &out) {
  unary(ctx, "sqrt", in, out, SqrtOp{}, FloatTypes{});
}
void reciprocal(Context &ctx, const Tensor &in, const Tensor &out) {
  unary(ctx, "reciprocal", in, out, ReciprocalOp{}, FloatTypes{});
}
void exp(Context &ctx, const Tensor &in, const Tensor &out) {
  unary(ctx, "exp", in, out, ExpOp{}, FloatTypes{});
}
void log(Context &ctx, const Tensor &in, const Tensor &out) {
  unary(ctx, "log", in, out, LogOp{}, FloatTypes{});
}
void abs(Context &ctx, const Tensor &in, const Tensor &out) {
  unary(ctx, "abs", in, out, AbsOp{}, NumericTypes{});
}
void tanh(Context &ctx, const Tensor &in, const Tensor &out) {
  unary(ctx, "tanh", in, out, TanhOp{}, FloatTypes{});
}
void sigmoid(Context &ctx, const Tensor &in, const Tensor &out) {
  unary(ctx, "sigmoid", in, out, SigmoidOp{}, FloatTypes{});
}
void relu(Context &ctx, const Tensor &in, const Tensor &out) {
  unary(ctx, "relu", in, out, ReluOp{}, NumericTypes{});
}
void erf(Context &ctx, const Tensor &in, const Tensor &out) {
  unary(ctx, "erf", in, out, ErfOp{}, FloatTypes{});
}
void logical_not(Context &ctx, const Tensor &in, const Tensor &out) {
  unary(ctx, "logical_not", in, out, NotOp{}, Types<bool>{});
}
void leaky_relu(Context &ctx, const Tensor &in, const Tensor &out, float alpha) {
  unary(ctx, "leaky_relu", in, out, LeakyReluOp{alpha}, FloatTypes{});
}
void gelu(Context &ctx, const Tensor &in, const Tensor &out, bool tanhApproximation) {
  unary(ctx, "gelu", in, out, GeluOp{tanhApproximation}, FloatTypes{});
}

void sign(Context &ctx, const Tensor &in, const Tensor &out) {
  unary(ctx, "sign", in, out, SignOp{}, NumericTypes{});
}
#define CLEAVE_FLOAT_MATH(name, f32, f64)                                                          \
  void name(Context &ctx, const Tensor &in, const Tensor &out) {                                   \
    unary(ctx, #name, in, out, name##Functor{}, FloatTypes{});                                     \
  }
#include "runtime/FloatMath.def"
#undef CLEAVE_FLOAT_MATH

void copy(Context &ctx, const Tensor &in, const Tensor &out) {
  const char *kernel = "copy";
  requireSameType(kernel, in, out);
  requireNumel(kernel, in, out.numel(), "the input");
  if (in.data == out.data || out.numel() == 0)
    return;
  check(cudaMemcpyAsync(out.data, in.data, out.bytes(), cudaMemcpyDeviceToDevice, ctx.stream),
        kernel);
}

void cast(Context &ctx, const Tensor &in, const Tensor &out) {
  const char *kernel = "cast";
  requireNumel(kernel, in, out.numel(), "the input");
  int64_t n = out.numel();
  if (n == 0)
    return;
  if (in.dtype == out.dtype) {
    copy(ctx, in, out);
    return;
  }
  dispatch(kernel, in.dtype, AllTypes{}, [&](auto fromTag) {
    using From = typename decltype(fromTag)::type;
    dispatch(kernel, out.dtype, AllTypes{}, [&](auto toTag) {
      using To = typename decltype(toTag)::type;
      castKernel<To, From>
          <<<blocksForUnrolled(n), kThreads, 0, ctx.stream>>>(n, in.as<From>(), out.as<To>());
      checkLaunch(kernel);
    });
  });
}

void fill(Context &ctx, const Tensor &out, double value) {
  const char *kernel = "fill";
  int64_t n = out.numel();
  dispatch(kernel, out.dtype, AllTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (n == 0)
      return;
    fillKernel<T><<<blocksFor(n), kThreads, 0, ctx.stream>>>(n, convert<T>(value), out.as<T>());
    checkLaunch(kernel);
  });
}

void range(Context &ctx, const Tensor &out, double start, double delta) {
  const char *kernel = "range";
  int64_t n = out.numel();
  dispatch(kernel, out.dtype, NumericTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (n == 0)
      return;
    rangeKernel<T><<<blocksFor(n), kThreads, 0, ctx.stream>>>(n, start, delta, out.as<T>());
    checkLaunch(kernel);
  });
}

//===----------------------------------------------------------------------===//
// Binary.
//===----------------------------------------------------------------------===//

void add(Context &ctx, const Tensor &lhs, const Tensor &rhs, const Tensor &out) {
  binary(ctx, "add", lhs, rhs, out, AddOp{}, NumericTypes{});
}
void sub(Context &ctx, const Tensor &lhs, const Tensor &rhs, const Tensor &out) {
  binary(ctx, "sub", lhs, rhs, out, SubOp{}, NumericTypes{});
}
void mul(Context &ctx, const Tensor &lhs, const Tensor &rhs, const Tensor &out) {
  binary(ctx, "mul", lhs, rhs, out, MulOp{}, NumericTypes{});
}
void div(Context &ctx, const Tensor &lhs, const Tensor &rhs, const Tensor &out) {
  binary(ctx, "div", lhs, rhs, out, DivOp{}, NumericTypes{});
}

void pow(Context &ctx, const Tensor &lhs, const Tensor &rhs, const Tensor &out) {
  const char *kernel = "pow";
  requireSameType(kernel, lhs, out);
  dispatch(kernel, lhs.dtype, NumericTypes{}, [&](auto baseTag) {
    using A = typename decltype(baseTag)::type;
    dispatch(kernel, rhs.dtype, NumericTypes{}, [&](auto exponentTag) {
      using B = typename decltype(exponentTag)::type;
      elementwise<A, A, B>(ctx, kernel, out, PowOp{}, lhs, rhs);
    });
  });
}

void max(Context &ctx, const Tensor &lhs, const Tensor &rhs, const Tensor &out) {
  binary(ctx, "max", lhs, rhs, out, MaxOp{}, NumericTypes{});
}
void min(Context &ctx, const Tensor &lhs, const Tensor &rhs, const Tensor &out) {
  binary(ctx, "min", lhs, rhs, out, MinOp{}, NumericTypes{});
}

void fmod(Context &ctx, const Tensor &lhs, const Tensor &rhs, const Tensor &out) {
  binary(ctx, "fmod", lhs, rhs, out, FmodOp{}, NumericTypes{});
}

void equal(Context &ctx, const Tensor &lhs, const Tensor &rhs, const Tensor &out) {
  compare(ctx, "equal", lhs, rhs, out, EqualOp{}, ComparableTypes{});
}
void less(Context &ctx, const Tensor &lhs, const Tensor &rhs, const Tensor &out) {
  compare(ctx, "less", lhs, rhs, out, LessOp{}, NumericTypes{});
}
void greater(Context &ctx, const Tensor &lhs, const Tensor &rhs, const Tensor &out) {
  compare(ctx, "greater", lhs, rhs, out, GreaterOp{}, NumericTypes{});
}

void where(Context &ctx, const Tensor &condition, const Tensor &x, const Tensor &y,
           const Tensor &out) {
  const char *kernel = "where";
  requireType(kernel, condition, DType::Bool, "the condition");
  requireSameType(kernel, x, y);
  requireSameType(kernel, x, out);
  dispatchBySize(kernel, out.dtype, [&](auto tag) {
    using U = typename decltype(tag)::type;
    elementwise<U, bool, U, U>(ctx, kernel, out, SelectOp{}, condition, x, y);
  });
}

//===----------------------------------------------------------------------===//
// Dropout.
//===----------------------------------------------------------------------===//

void dropout(Context &ctx, const Tensor &in, const Tensor *coordinate, const Tensor &out,
             const Tensor &mask, float ratio, bool training, uint64_t seed, Dims split) {
  const char *kernel = "dropout";
  requireSameType(kernel, in, out);
  requireNumel(kernel, in, out.numel(), "the input");
  SplitIndex index;
  if (!splitIndexOf(in.shape, split, index) || (index.parts > 1 && !coordinate))
    fail(kernel, "split {dim, parts} does not fit the input, or has no coordinate");
  if (index.parts > 1)
    requireType(kernel, *coordinate, DType::I64, "the coordinate");
  bool *keep = nullptr;
  if (mask.data) {
    requireType(kernel, mask, DType::Bool, "the mask");
    requireNumel(kernel, mask, out.numel(), "the mask");
    keep = mask.as<bool>();
  }
  int64_t n = out.numel();
  if (n == 0)
    return;
  if (!training || ratio <= 0.0f) { // a copy; every element kept
    copy(ctx, in, out);
    if (keep)
      check(cudaMemsetAsync(keep, 1, static_cast<size_t>(n), ctx.stream), kernel);
    return;
  }
  if (!(ratio == ratio) || ratio > 1.0f)
    fail(kernel, "ratio %g is outside [0, 1]", static_cast<double>(ratio));
  dispatch(kernel, in.dtype, FloatTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (ratio == 1.0f) { // everything dropped (the scale is moot)
      check(cudaMemsetAsync(out.data, 0, out.bytes(), ctx.stream), kernel);
      if (keep)
        check(cudaMemsetAsync(keep, 0, static_cast<size_t>(n), ctx.stream), kernel);
      return;
    }
    T scale = static_cast<T>(1.0 / (1.0 - static_cast<double>(ratio)));
    dropoutKernel<T><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
        n, in.as<T>(), out.as<T>(), keep, static_cast<double>(ratio), scale,
        dropoutKey(seed, ctx.randomStream), index,
        index.parts > 1 ? coordinate->as<int64_t>() : nullptr);
    checkLaunch(kernel);
  });
}

} // namespace cleave::rt::cuda
