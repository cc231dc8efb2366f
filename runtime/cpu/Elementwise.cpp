//===- Elementwise.cpp - unary, broadcasting binary, where, cast ----------===//
//
// One template per shape of computation (unary map, broadcast binary map,
// where), instantiated per op with a lambda and a list of element types.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Support.h"

#include "runtime/ElementwiseProgram.h"
#include "runtime/cpu/FusedChain.h"

#include <algorithm>
#include <cstring>

namespace cleave::rt::cpu {
namespace {

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

/// out[i] = op(in[i]) for the element types in `types`; same type in and out.
template <typename Types, typename Op>
void unary(const char *kernel, const Tensor &in, const Tensor &out, Types types, Op op) {
  checkSameLayout(kernel, in, out);
  dispatch(kernel, in.dtype, types, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *x = in.as<T>();
    T *y = out.as<T>();
    int64_t n = in.numel();
    for (int64_t i = 0; i < n; ++i)
      y[i] = static_cast<T>(op(x[i]));
  });
}

template <typename T> T sigmoidOf(T x) {
  if (x >= T(0))
    return T(1) / (T(1) + std::exp(-x));
  T e = std::exp(x);
  return e / (T(1) + e);
}

//===----------------------------------------------------------------------===//
// Broadcasting binary
//===----------------------------------------------------------------------===//

/// out = op(lhs, rhs) with lhs and rhs broadcast to out's shape. After
/// coalescing, each row reads an operand either contiguously or as one
/// repeated scalar; those cases get their own loops so they vectorise.
template <typename A, typename B, typename O, typename Op>
void broadcastBinary(const Context &ctx, const char *kernel, const Tensor &lhs, const Tensor &rhs,
                     const Tensor &out, Op op) {
  const Dims *inputs[2] = {&lhs.shape, &rhs.shape};
  LoopNest<3> nest = broadcastNest<3>(kernel, out.shape, inputs);
  const A *a = lhs.as<A>();
  const B *b = rhs.as<B>();
  O *o = out.as<O>();
  nest.forEachRowSplit(ctx, [&](const int64_t *off, int64_t n, const int64_t *step) {
    O *y = o + off[0];
    const A *x0 = a + off[1];
    const B *x1 = b + off[2];
    if (step[1] == 1 && step[2] == 1) {
      for (int64_t i = 0; i < n; ++i)
        y[i] = op(x0[i], x1[i]);
    } else if (step[1] == 0 && step[2] == 1) {
      A s = *x0;
      for (int64_t i = 0; i < n; ++i)
        y[i] = op(s, x1[i]);
    } else if (step[1] == 1 && step[2] == 0) {
      B s = *x1;
      for (int64_t i = 0; i < n; ++i)
        y[i] = op(x0[i], s);
    } else {
      for (int64_t i = 0; i < n; ++i)
        y[i] = op(x0[i * step[1]], x1[i * step[2]]);
    }
  });
}

/// Arithmetic: lhs, rhs and out share one element type from `types`.
template <typename Types, typename Op>
void arithmetic(const Context &ctx, const char *kernel, const Tensor &lhs, const Tensor &rhs,
                const Tensor &out, Types types, Op op) {
  checkType(kernel, rhs, lhs.dtype);
  checkType(kernel, out, lhs.dtype);
  dispatch(kernel, lhs.dtype, types, [&](auto tag) {
    using T = typename decltype(tag)::type;
    broadcastBinary<T, T, T>(ctx, kernel, lhs, rhs, out,
                             [&](T x, T y) { return static_cast<T>(op(x, y)); });
  });
}

/// Comparisons: lhs and rhs share one element type, out is Bool.
template <typename Types, typename Op>
void comparison(const Context &ctx, const char *kernel, const Tensor &lhs, const Tensor &rhs,
                const Tensor &out, Types types, Op op) {
  checkType(kernel, rhs, lhs.dtype);
  checkType(kernel, out, DType::Bool);
  dispatch(kernel, lhs.dtype, types, [&](auto tag) {
    using T = typename decltype(tag)::type;
    broadcastBinary<T, T, bool>(ctx, kernel, lhs, rhs, out, [&](T x, T y) { return op(x, y); });
  });
}

/// Integer division truncating toward zero like onnxruntime; division by
/// zero gives 0 and INT_MIN / -1 wraps, rather than trapping.
template <typename T> T divide(T x, T y) {
  if constexpr (isInteger<T>) {
    if (y == 0)
      return 0;
    if constexpr (std::is_signed_v<T>)
      if (y == T(-1))
        return wrapNeg(x);
    return static_cast<T>(x / y);
  } else {
    return x / y;
  }
}

/// x^y for integers by squaring (wrapping); negative exponents give the
/// truncated reciprocal.
template <typename T> T integerPower(T x, T y) {
  if (isNegative(y))
    return x == 1 ? T(1) : x == T(-1) ? ((y & 1) ? T(-1) : T(1)) : T(0);
  T result = 1;
  while (y) {
    if (y & 1)
      result = wrapMul(result, x);
    x = wrapMul(x, x);
    y >>= 1;
  }
  return result;
}

/// ONNX Pow: the exponent may have another type; the result has the base's.
template <typename A, typename B> A power(A x, B y) {
  if constexpr (isInteger<A> && isInteger<B>) {
    return integerPower(x, static_cast<A>(y));
  } else if constexpr (std::is_same_v<A, float> && !std::is_same_v<B, double>) {
    return std::pow(x, static_cast<float>(y));
  } else {
    return convert<A>(std::pow(static_cast<double>(x), static_cast<double>(y)));
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

void neg(Context &, const Tensor &in, const Tensor &out) {
  unary("neg", in, out, NumericTypes{}, [](auto v) { return wrapNeg(v); });
}

void sqrt(Context &, const Tensor &in, const Tensor &out) {
  unary("sqrt", in, out, FloatTypes{}, [](auto v) { return std::sqrt(v); });
}

void reciprocal(Context &, const Tensor &in, const Tensor &out) {
  unary("reciprocal", in, out, FloatTypes{}, [](auto v) { return decltype(v)(1) / v; });
}

void exp(Context &, const Tensor &in, const Tensor &out) {
  unary("exp", in, out, FloatTypes{}, [](auto v) { return std::exp(v); });
}

void log(Context &, const Tensor &in, const Tensor &out) {
  unary("log", in, out, FloatTypes{}, [](auto v) { return std::log(v); });
}

void abs(Context &, const Tensor &in, const Tensor &out) {
  unary("abs", in, out, NumericTypes{}, [](auto v) {
    if constexpr (isFloat<decltype(v)>)
      return std::abs(v);
    else
      return isNegative(v) ? wrapNeg(v) : v;
  });
}

void tanh(Context &, const Tensor &in, const Tensor &out) {
  unary("tanh", in, out, FloatTypes{}, [](auto v) { return std::tanh(v); });
}

void sigmoid(Context &, const Tensor &in, const Tensor &out) {
  unary("sigmoid", in, out, FloatTypes{}, [](auto v) { return sigmoidOf(v); });
}

void relu(Context &, const Tensor &in, const Tensor &out) {
  // NaN stays NaN, as in ONNX's max(0, x) reference.
  unary("relu", in, out, NumericTypes{}, [](auto v) { return isNegative(v) ? decltype(v)(0) : v; });
}

void erf(Context &, const Tensor &in, const Tensor &out) {
  unary("erf", in, out, FloatTypes{}, [](auto v) { return std::erf(v); });
}

void logical_not(Context &, const Tensor &in, const Tensor &out) {
  unary("logical_not", in, out, TypeList<bool>{}, [](bool v) { return !v; });
}

void leaky_relu(Context &, const Tensor &in, const Tensor &out, float alpha) {
  unary("leaky_relu", in, out, FloatTypes{}, [alpha](auto v) {
    using T = decltype(v);
    return v < T(0) ? v * static_cast<T>(alpha) : v;
  });
}

void gelu(Context &, const Tensor &in, const Tensor &out, bool tanhApproximation) {
  if (tanhApproximation) {
    unary("gelu", in, out, FloatTypes{}, [](auto v) {
      using T = decltype(v);
      const T k = static_cast<T>(0.79788456080286535587989211986876); // sqrt(2 / pi)
      return T(0.5) * v * (T(1) + std::tanh(k * (v + T(0.044715) * v * v * v)));
    });
  } else {
    unary("gelu", in, out, FloatTypes{}, [](auto v) {
      using T = decltype(v);
      const T r = static_cast<T>(0.70710678118654752440084436210485); // 1 / sqrt(2)
      return T(0.5) * v * (T(1) + std::erf(v * r));
    });
  }
}

void sign(Context &, const Tensor &in, const Tensor &out) {
  unary("sign", in, out, NumericTypes{}, [](auto v) {
    using T = decltype(v);
    return v > T(0) ? T(1) : isNegative(v) ? static_cast<T>(-1) : v; // 0 and NaN stay
  });
}

#define CLEAVE_FLOAT_MATH(name, f32, f64)                                                          \
  void name(Context &, const Tensor &in, const Tensor &out) {                                      \
    unary(#name, in, out, FloatTypes{}, [](auto v) { return std::f64(v); });                       \
  }
#include "runtime/FloatMath.def"
#undef CLEAVE_FLOAT_MATH

void copy(Context &ctx, const Tensor &in, const Tensor &out) {
  checkSameLayout("copy", in, out);
  copyBytes(ctx, in.data, out.data, in.bytes());
}

void cast(Context &ctx, const Tensor &in, const Tensor &out) {
  if (in.numel() != out.numel())
    fail("cast", "element counts differ (%lld and %lld)", static_cast<long long>(in.numel()),
         static_cast<long long>(out.numel()));
  dispatch("cast", in.dtype, AllTypes{}, [&](auto fromTag) {
    using From = typename decltype(fromTag)::type;
    dispatch("cast", out.dtype, AllTypes{}, [&](auto toTag) {
      using To = typename decltype(toTag)::type;
      const From *x = in.as<From>();
      To *y = out.as<To>();
      int64_t n = in.numel();
      if constexpr (std::is_same_v<From, To>) {
        copyBytes(ctx, x, y, in.bytes());
      } else if (in.data != out.data) {
        forEachChunk(ctx, n, 1 << 14, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i)
            y[i] = convert<To>(x[i]);
        });
      } else if (sizeof(From) >= sizeof(To)) {
        // In place, elements that do not grow: forward order is safe (and
        // one thread, where a later chunk's writes would land on an earlier
        // chunk's unread elements).
        for (int64_t i = 0; i < n; ++i)
          y[i] = convert<To>(x[i]);
      } else {
        for (int64_t i = n - 1; i >= 0; --i)
          y[i] = convert<To>(x[i]);
      }
    });
  });
}

void fill(Context &, const Tensor &out, double value) {
  dispatch("fill", out.dtype, AllTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v = convert<T>(value);
    T *y = out.as<T>();
    int64_t n = out.numel();
    for (int64_t i = 0; i < n; ++i)
      y[i] = v;
  });
}

void range(Context &, const Tensor &out, double start, double delta) {
  dispatch("range", out.dtype, NumericTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T *y = out.as<T>();
    int64_t n = out.numel();
    if constexpr (isInteger<T>) {
      int64_t s = convert<int64_t>(start), d = convert<int64_t>(delta);
      for (int64_t i = 0; i < n; ++i)
        y[i] = static_cast<T>(wrapAdd(s, wrapMul(i, d)));
    } else {
      for (int64_t i = 0; i < n; ++i)
        y[i] = static_cast<T>(start + static_cast<double>(i) * delta);
    }
  });
}

void add(Context &ctx, const Tensor &lhs, const Tensor &rhs, const Tensor &out) {
  arithmetic(ctx, "add", lhs, rhs, out, NumericTypes{},
             [](auto x, auto y) { return wrapAdd(x, y); });
}

void sub(Context &ctx, const Tensor &lhs, const Tensor &rhs, const Tensor &out) {
  arithmetic(ctx, "sub", lhs, rhs, out, NumericTypes{},
             [](auto x, auto y) { return wrapSub(x, y); });
}

void mul(Context &ctx, const Tensor &lhs, const Tensor &rhs, const Tensor &out) {
  arithmetic(ctx, "mul", lhs, rhs, out, NumericTypes{},
             [](auto x, auto y) { return wrapMul(x, y); });
}

void div(Context &ctx, const Tensor &lhs, const Tensor &rhs, const Tensor &out) {
  arithmetic(ctx, "div", lhs, rhs, out, NumericTypes{},
             [](auto x, auto y) { return divide(x, y); });
}

void pow(Context &ctx, const Tensor &lhs, const Tensor &rhs, const Tensor &out) {
  // ONNX Pow lets the exponent's type differ; the result has the base's.
  checkType("pow", out, lhs.dtype);
  dispatch("pow", lhs.dtype, NumericTypes{}, [&](auto baseTag) {
    using A = typename decltype(baseTag)::type;
    dispatch("pow", rhs.dtype, NumericTypes{}, [&](auto expTag) {
      using B = typename decltype(expTag)::type;
      broadcastBinary<A, B, A>(ctx, "pow", lhs, rhs, out, [](A x, B y) { return power(x, y); });
    });
  });
}

void max(Context &ctx, const Tensor &lhs, const Tensor &rhs, const Tensor &out) {
  arithmetic(ctx, "max", lhs, rhs, out, NumericTypes{},
             [](auto x, auto y) { return maximum(x, y); });
}

void min(Context &ctx, const Tensor &lhs, const Tensor &rhs, const Tensor &out) {
  arithmetic(ctx, "min", lhs, rhs, out, NumericTypes{},
             [](auto x, auto y) { return minimum(x, y); });
}

void fmod(Context &ctx, const Tensor &lhs, const Tensor &rhs, const Tensor &out) {
  arithmetic(ctx, "fmod", lhs, rhs, out, NumericTypes{}, [](auto x, auto y) {
    using T = decltype(x);
    if constexpr (isInteger<T>) {
      if (y == 0)
        return T(0);
      if constexpr (std::is_signed_v<T>)
        if (y == T(-1)) // INT_MIN % -1 traps
          return T(0);
      return static_cast<T>(x % y);
    } else {
      return std::fmod(x, y);
    }
  });
}

void equal(Context &ctx, const Tensor &lhs, const Tensor &rhs, const Tensor &out) {
  comparison(ctx, "equal", lhs, rhs, out, ComparableTypes{}, [](auto x, auto y) { return x == y; });
}

void less(Context &ctx, const Tensor &lhs, const Tensor &rhs, const Tensor &out) {
  comparison(ctx, "less", lhs, rhs, out, NumericTypes{}, [](auto x, auto y) { return x < y; });
}

void greater(Context &ctx, const Tensor &lhs, const Tensor &rhs, const Tensor &out) {
  comparison(ctx, "greater", lhs, rhs, out, NumericTypes{}, [](auto x, auto y) { return x > y; });
}

void where(Context &ctx, const Tensor &condition, const Tensor &x, const Tensor &y,
           const Tensor &out) {
  checkType("where", condition, DType::Bool);
  checkType("where", x, out.dtype);
  checkType("where", y, out.dtype);
  if (condition.numel() == 1 && x.numel() == out.numel() && y.numel() == out.numel()) {
    // One choice for every element (loss scaling's guarded update of each
    // parameter and moment): the chosen operand copied whole, or nothing
    // where it is the result already.
    copy(ctx, *condition.as<bool>() ? x : y, out);
    return;
  }
  const Dims *inputs[3] = {&condition.shape, &x.shape, &y.shape};
  LoopNest<4> nest = broadcastNest<4>("where", out.shape, inputs);
  const bool *c = condition.as<bool>();
  dispatchBySize("where", out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *a = x.as<T>();
    const T *b = y.as<T>();
    T *o = out.as<T>();
    // The elements move as unsigned integers of their size, so the choice
    // is a mask over the bits of both values, not a branch: GCC vectorises
    // it, and a condition of random bits (relu's adjoint) mispredicts
    // nothing (2.2 ms a step on the bench CNN as a branch).
    auto select = [](bool condition, T yes, T no) {
      const T mask = T(0) - static_cast<T>(condition);
      return static_cast<T>((yes & mask) | (no & static_cast<T>(~mask)));
    };
    nest.forEachRowSplit(ctx, [&](const int64_t *off, int64_t n, const int64_t *step) {
      T *dst = o + off[0];
      const bool *cc = c + off[1];
      const T *aa = a + off[2];
      const T *bb = b + off[3];
      if (step[1] == 1 && step[2] == 1 && step[3] == 1) {
        for (int64_t i = 0; i < n; ++i)
          dst[i] = select(cc[i], aa[i], bb[i]);
      } else if (step[1] == 1 && step[2] == 1 && step[3] == 0) {
        // A gradient masked by a scalar zero (relu's, dropout's adjoint).
        const T s = *bb;
        for (int64_t i = 0; i < n; ++i)
          dst[i] = select(cc[i], aa[i], s);
      } else if (step[1] == 1 && step[2] == 0 && step[3] == 1) {
        const T s = *aa;
        for (int64_t i = 0; i < n; ++i)
          dst[i] = select(cc[i], s, bb[i]);
      } else {
        for (int64_t i = 0; i < n; ++i)
          dst[i] = select(cc[i * step[1]], aa[i * step[2]], bb[i * step[3]]);
      }
    });
  });
}

//===----------------------------------------------------------------------===//
// Fused chains
//===----------------------------------------------------------------------===//

void forEachChainChunk(const Context &ctx, int64_t n,
                       void (*tiles)(const void *call, int64_t begin, int64_t end),
                       const void *call) {
  forEachChunk(ctx, n, kChainTile, [&](int64_t begin, int64_t end) { tiles(call, begin, end); });
}

void chainTile(ElementwiseOpcode op, const float *a, float *y, int64_t n) {
  switch (op) {
  case ElementwiseOpcode::Exp:
    for (int64_t j = 0; j < n; ++j)
      y[j] = std::exp(a[j]);
    return;
  case ElementwiseOpcode::Tanh:
    for (int64_t j = 0; j < n; ++j)
      y[j] = std::tanh(a[j]);
    return;
  case ElementwiseOpcode::Erf:
    for (int64_t j = 0; j < n; ++j)
      y[j] = std::erf(a[j]);
    return;
  default:
    fail("fused_elementwise", "chainTile computes exp, tanh and erf, not %s",
         kElementwiseOpcodeNames[static_cast<int>(op)]);
  }
}

} // namespace cleave::rt::cpu
