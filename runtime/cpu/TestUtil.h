//===- TestUtil.h - owned tensors and comparisons for the kernel tests ----===//
//
// Independent of the kernels' own helpers: the tests encode and decode
// elements themselves, so a conversion bug cannot cancel itself out.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_CPU_TESTUTIL_H
#define CLEAVE_RUNTIME_CPU_TESTUTIL_H

#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/ProductPrimitives.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>
#include <vector>

namespace cleave::rt::test {

namespace cpu = cleave::rt::cpu;

inline cpu::Context &ctx() {
  static cpu::Context context;
  return context;
}

/// The ways products and convolutions of bf16 factors can run here
/// (cpu::Context::bf16Primitives): widened to f32 anywhere, as oneDNN's bf16
/// primitives where it has bf16 instructions.
inline std::vector<bool> bf16PrimitiveChoices() {
  if (cpu::bf16Instructions())
    return {false, true};
  return {false};
}

template <typename T> constexpr DType dtypeOf();
template <> constexpr DType dtypeOf<float>() { return DType::F32; }
template <> constexpr DType dtypeOf<double>() { return DType::F64; }
template <> constexpr DType dtypeOf<int64_t>() { return DType::I64; }
template <> constexpr DType dtypeOf<int32_t>() { return DType::I32; }
template <> constexpr DType dtypeOf<int16_t>() { return DType::I16; }
template <> constexpr DType dtypeOf<int8_t>() { return DType::I8; }
template <> constexpr DType dtypeOf<uint8_t>() { return DType::U8; }
template <> constexpr DType dtypeOf<uint16_t>() { return DType::U16; }
template <> constexpr DType dtypeOf<uint32_t>() { return DType::U32; }
template <> constexpr DType dtypeOf<uint64_t>() { return DType::U64; }
template <> constexpr DType dtypeOf<bool>() { return DType::Bool; }

/// A tensor owning zero-initialised, 8-byte aligned storage.
class Buffer {
public:
  Buffer(DType type, Dims shape)
      : storage_(static_cast<std::size_t>(shape.product()) * dtypeSize(type) / 8 + 1),
        tensor_{storage_.data(), type, shape} {}
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  Buffer(Buffer &&) = default;

  const Tensor &t() const { return tensor_; }
  operator const Tensor &() const { return tensor_; }
  const Tensor *ptr() const { return &tensor_; }
  int64_t numel() const { return tensor_.numel(); }
  template <typename T> T *data() const { return tensor_.as<T>(); }
  template <typename T> std::vector<T> values() const {
    return std::vector<T>(data<T>(), data<T>() + numel());
  }
  /// F32 or F64 elements as doubles.
  std::vector<double> doubles() const {
    std::vector<double> v(static_cast<std::size_t>(numel()));
    for (int64_t i = 0; i < numel(); ++i)
      v[i] = tensor_.dtype == DType::F32 ? static_cast<double>(data<float>()[i]) : data<double>()[i];
    return v;
  }
  std::vector<int> bools() const {
    std::vector<int> v;
    for (int64_t i = 0; i < numel(); ++i)
      v.push_back(data<uint8_t>()[i]);
    return v;
  }

private:
  std::vector<uint64_t> storage_;
  Tensor tensor_;
};

template <typename T> Buffer make(Dims shape, const std::vector<T> &values) {
  Buffer b(dtypeOf<T>(), shape);
  EXPECT_EQ(static_cast<int64_t>(values.size()), shape.product()) << "test data size";
  for (std::size_t i = 0; i < values.size() && static_cast<int64_t>(i) < shape.product(); ++i)
    b.data<T>()[i] = values[i];
  return b;
}
template <typename T> Buffer make(Dims shape, std::initializer_list<T> values) {
  return make<T>(shape, std::vector<T>(values));
}
inline Buffer makeBool(Dims shape, std::initializer_list<int> values) {
  Buffer b(DType::Bool, shape);
  EXPECT_EQ(static_cast<int64_t>(values.size()), shape.product()) << "test data size";
  int64_t i = 0;
  for (int v : values)
    if (i < shape.product())
      b.data<uint8_t>()[i++] = static_cast<uint8_t>(v != 0);
  return b;
}
inline Buffer zeros(DType type, Dims shape) { return Buffer(type, shape); }

/// Deterministic values in [lo, hi).
inline std::vector<double> randoms(int64_t n, unsigned seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double &x : v)
    x = dist(gen);
  return v;
}
template <typename T> std::vector<T> castAll(const std::vector<double> &v) {
  return std::vector<T>(v.begin(), v.end());
}
template <typename T> Buffer makeRandom(Dims shape, unsigned seed, double lo = -1.0, double hi = 1.0) {
  return make<T>(shape, castAll<T>(randoms(shape.product(), seed, lo, hi)));
}

/// |actual - expected| <= tol * max(1, |expected|) elementwise; NaN matches NaN.
inline void expectNear(const Buffer &actual, const std::vector<double> &expected,
                       double tol = 1e-5) {
  std::vector<double> got = actual.doubles();
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
      continue;
    }
    if (std::isinf(expected[i])) {
      EXPECT_EQ(got[i], expected[i]) << "at " << i;
      continue;
    }
    double scale = std::max(1.0, std::abs(expected[i]));
    EXPECT_NEAR(got[i], expected[i], tol * scale) << "at " << i;
  }
}

template <typename T> void expectEqual(const Buffer &actual, const std::vector<T> &expected) {
  EXPECT_EQ(actual.values<T>(), expected);
}

/// Row-major strides of a shape.
inline std::vector<int64_t> stridesOf(const Dims &shape) {
  std::vector<int64_t> s(static_cast<std::size_t>(shape.size));
  int64_t acc = 1;
  for (int i = shape.size - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

/// The multi-index of flat element `flat` in `shape`.
inline std::vector<int64_t> unflatten(int64_t flat, const Dims &shape) {
  std::vector<int64_t> idx(static_cast<std::size_t>(shape.size));
  for (int i = shape.size - 1; i >= 0; --i) {
    idx[i] = flat % shape[i];
    flat /= shape[i];
  }
  return idx;
}

/// Flat offset of out-index `idx` read from a tensor of `in` shape broadcast
/// to the index's rank (numpy rules).
inline int64_t broadcastOffset(const std::vector<int64_t> &idx, const Dims &in) {
  int64_t off = 0, stride = 1;
  for (int i = in.size - 1; i >= 0; --i) {
    int64_t j = idx[idx.size() - (in.size - i)];
    off += (in[i] == 1 ? 0 : j) * stride;
    stride *= in[i];
  }
  return off;
}

} // namespace cleave::rt::test

#endif
