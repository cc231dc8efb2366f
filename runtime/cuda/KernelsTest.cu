//===- KernelsTest.cu - the CUDA kernels against hand-computed values -----===//
//
// Each test uploads small inputs, runs one kernel on a stream and compares
// with values worked out by hand or from a formula evaluated on the host
// (never from a kernel's own output). Without a CUDA device the device tests
// skip; the argument-checking tests run anywhere.
//
//===----------------------------------------------------------------------===//

#include "runtime/FusedBFloat16Case.h"
#include "runtime/LowPrecision.h"
#include "runtime/cuda/Common.cuh"
#include "runtime/cuda/FusedChain.cuh"
#include "runtime/cuda/Kernels.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

using namespace cleave::rt;
namespace kc = cleave::rt::cuda;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();

bool haveDevice() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

void expectClose(const std::vector<float> &got, const std::vector<float> &want,
                 float tolerance = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
      continue;
    }
    float scale = std::fabs(want[i]) > 1.0f ? std::fabs(want[i]) : 1.0f;
    EXPECT_NEAR(got[i], want[i], tolerance * scale) << "at " << i;
  }
}

class CudaKernels : public ::testing::Test {
protected:
  void SetUp() override {
    if (!haveDevice())
      GTEST_SKIP() << "no CUDA device";
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    ASSERT_EQ(cublasCreate(&blas), CUBLAS_STATUS_SUCCESS);
    ctx.stream = stream;
    ctx.blas = blas;
  }

  void TearDown() override {
    if (stream)
      EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    for (void *p : buffers)
      cudaFree(p);
    if (blas)
      cublasDestroy(blas);
    if (stream)
      cudaStreamDestroy(stream);
  }

  /// Device memory for a tensor, filled with 0xff bytes (NaN for floats) so
  /// unwritten elements show.
  Tensor alloc(DType type, Dims shape) {
    Tensor t{nullptr, type, shape};
    std::size_t bytes = t.bytes() ? t.bytes() : 1;
    EXPECT_EQ(cudaMalloc(&t.data, bytes), cudaSuccess);
    EXPECT_EQ(cudaMemset(t.data, 0xff, bytes), cudaSuccess);
    buffers.push_back(t.data);
    return t;
  }

  template <typename T> Tensor put(DType type, Dims shape, const std::vector<T> &values) {
    Tensor t = alloc(type, shape);
    EXPECT_EQ(values.size() * sizeof(T), t.bytes());
    EXPECT_EQ(cudaMemcpy(t.data, values.data(), t.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
    return t;
  }
  Tensor f32(Dims shape, const std::vector<float> &v) { return put(DType::F32, shape, v); }
  Tensor f64(Dims shape, const std::vector<double> &v) { return put(DType::F64, shape, v); }
  Tensor i64(Dims shape, const std::vector<int64_t> &v) { return put(DType::I64, shape, v); }
  Tensor i32(Dims shape, const std::vector<int32_t> &v) { return put(DType::I32, shape, v); }
  Tensor boolean(Dims shape, const std::vector<uint8_t> &v) { return put(DType::Bool, shape, v); }

  /// Waits for the stream and copies a tensor back.
  template <typename T> std::vector<T> get(const Tensor &t) {
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    EXPECT_EQ(t.bytes() % sizeof(T), 0u);
    std::vector<T> values(t.bytes() / sizeof(T));
    if (!values.empty())
      EXPECT_EQ(cudaMemcpy(values.data(), t.data, t.bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    return values;
  }

  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  kc::Context ctx;
  std::vector<void *> buffers;
};

std::vector<float> iota(int64_t n, float start = 0.0f, float step = 1.0f) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[i] = start + step * static_cast<float>(i);
  return v;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

TEST_F(CudaKernels, UnaryFloat) {
  using Kernel = void (*)(kc::Context &, const Tensor &, const Tensor &);
  struct Case {
    Kernel kernel;
    std::function<float(float)> expected;
    std::vector<float> input;
  };
  std::vector<float> mixed = {-2.0f, -0.5f, 0.0f, 0.5f, 3.0f};
  std::vector<float> positive = {0.25f, 1.0f, 4.0f, 9.0f};
  std::vector<Case> cases = {
      {kc::neg, [](float x) { return -x; }, mixed},
      {kc::sqrt, [](float x) { return std::sqrt(x); }, positive},
      {kc::reciprocal, [](float x) { return 1.0f / x; }, positive},
      {kc::exp, [](float x) { return std::exp(x); }, mixed},
      {kc::log, [](float x) { return std::log(x); }, positive},
      {kc::abs, [](float x) { return std::fabs(x); }, mixed},
      {kc::tanh, [](float x) { return std::tanh(x); }, mixed},
      {kc::sigmoid, [](float x) { return 1.0f / (1.0f + std::exp(-x)); }, mixed},
      {kc::relu, [](float x) { return x > 0 ? x : 0.0f; }, mixed},
      {kc::erf, [](float x) { return std::erf(x); }, mixed},
      {kc::sign, [](float x) { return float((x > 0) - (x < 0)); }, mixed},
  // Outside a function's domain both sides are NaN.
#define CLEAVE_FLOAT_MATH(name, f32, f64) {kc::name, [](float x) { return std::f64(x); }, mixed},
#include "runtime/FloatMath.def"
#undef CLEAVE_FLOAT_MATH
  };
  for (const Case &c : cases) {
    int64_t n = static_cast<int64_t>(c.input.size());
    Tensor in = f32({n}, c.input), out = alloc(DType::F32, {n});
    c.kernel(ctx, in, out);
    std::vector<float> want;
    for (float x : c.input)
      want.push_back(c.expected(x));
    expectClose(get<float>(out), want);
  }
}

TEST_F(CudaKernels, UnaryFloatSpecialValues) {
  Tensor in = f32({4}, {-1.0f, 0.0f, -100.0f, kNaN}), out = alloc(DType::F32, {4});
  kc::sqrt(ctx, in, out);
  std::vector<float> got = get<float>(out);
  EXPECT_TRUE(std::isnan(got[0]));
  EXPECT_EQ(got[1], 0.0f);
  kc::sigmoid(ctx, in, out);
  got = get<float>(out);
  EXPECT_NEAR(got[2], 0.0f, 1e-30f); // no overflow for large negative inputs
  EXPECT_TRUE(std::isnan(got[3]));
  kc::relu(ctx, in, out);
  got = get<float>(out);
  EXPECT_TRUE(std::isnan(got[3])); // relu keeps NaN
}

TEST_F(CudaKernels, LeakyReluAndGelu) {
  std::vector<float> x = {-3.0f, -1.0f, 0.0f, 0.5f, 2.0f};
  Tensor in = f32({5}, x), out = alloc(DType::F32, {5});
  kc::leaky_relu(ctx, in, out, 0.1f);
  expectClose(get<float>(out), {-0.3f, -0.1f, 0.0f, 0.5f, 2.0f});
  kc::gelu(ctx, in, out, false);
  std::vector<float> want;
  for (float v : x)
    want.push_back(0.5f * v * (1.0f + std::erf(v / std::sqrt(2.0f))));
  expectClose(get<float>(out), want);
  kc::gelu(ctx, in, out, true);
  want.clear();
  for (float v : x)
    want.push_back(0.5f * v *
                   (1.0f + std::tanh(std::sqrt(2.0f / 3.14159265358979f) *
                                     (v + 0.044715f * v * v * v))));
  expectClose(get<float>(out), want);
}

TEST_F(CudaKernels, UnaryFloat64) {
  Tensor in = f64({3}, {0.0, 1.0, -2.0}), out = alloc(DType::F64, {3});
  kc::exp(ctx, in, out);
  std::vector<double> got = get<double>(out);
  EXPECT_DOUBLE_EQ(got[0], 1.0);
  EXPECT_NEAR(got[1], 2.718281828459045, 1e-14);
  EXPECT_NEAR(got[2], 0.1353352832366127, 1e-15);
}

TEST_F(CudaKernels, UnaryIntegers) {
  int64_t big = std::numeric_limits<int64_t>::min();
  Tensor in = i64({4}, {-5, 0, 7, big}), out = alloc(DType::I64, {4});
  kc::neg(ctx, in, out);
  EXPECT_EQ(get<int64_t>(out), (std::vector<int64_t>{5, 0, -7, big})); // wraps
  kc::abs(ctx, in, out);
  EXPECT_EQ(get<int64_t>(out), (std::vector<int64_t>{5, 0, 7, big}));
  kc::relu(ctx, in, out);
  EXPECT_EQ(get<int64_t>(out), (std::vector<int64_t>{0, 0, 7, 0}));
  Tensor in32 = i32({3}, {-4, 0, 9}), out32 = alloc(DType::I32, {3});
  kc::neg(ctx, in32, out32);
  EXPECT_EQ(get<int32_t>(out32), (std::vector<int32_t>{4, 0, -9}));
  kc::abs(ctx, in32, out32);
  EXPECT_EQ(get<int32_t>(out32), (std::vector<int32_t>{4, 0, 9}));
  kc::relu(ctx, in32, out32);
  EXPECT_EQ(get<int32_t>(out32), (std::vector<int32_t>{0, 0, 9}));
}

TEST_F(CudaKernels, LogicalNot) {
  Tensor in = boolean({3}, {1, 0, 1}), out = alloc(DType::Bool, {3});
  kc::logical_not(ctx, in, out);
  EXPECT_EQ(get<uint8_t>(out), (std::vector<uint8_t>{0, 1, 0}));
}

TEST_F(CudaKernels, Copy) {
  Tensor in = f32({2, 3}, iota(6)), out = alloc(DType::F32, {3, 2});
  kc::copy(ctx, in, out);
  expectClose(get<float>(out), iota(6));
}

TEST_F(CudaKernels, Cast) {
  Tensor f = f32({5}, {1.9f, -1.9f, 3e9f, -3e9f, kNaN});
  Tensor toI32 = alloc(DType::I32, {5});
  kc::cast(ctx, f, toI32);
  EXPECT_EQ(get<int32_t>(toI32), (std::vector<int32_t>{1, -1, std::numeric_limits<int32_t>::max(),
                                                       std::numeric_limits<int32_t>::min(), 0}));

  Tensor small = f32({3}, {200.0f, -200.0f, 5.7f}), toI8 = alloc(DType::I8, {3});
  kc::cast(ctx, small, toI8);
  EXPECT_EQ(get<int8_t>(toI8), (std::vector<int8_t>{127, -128, 5}));

  Tensor ints = i64({3}, {-3, 0, 5}), toF32 = alloc(DType::F32, {3});
  kc::cast(ctx, ints, toF32);
  expectClose(get<float>(toF32), {-3.0f, 0.0f, 5.0f});

  Tensor flags = f32({4}, {0.0f, -0.0f, 2.5f, kNaN}), toBool = alloc(DType::Bool, {4});
  kc::cast(ctx, flags, toBool);
  EXPECT_EQ(get<uint8_t>(toBool), (std::vector<uint8_t>{0, 0, 1, 1}));

  Tensor bools = boolean({2}, {1, 0}), toI64 = alloc(DType::I64, {2});
  kc::cast(ctx, bools, toI64);
  EXPECT_EQ(get<int64_t>(toI64), (std::vector<int64_t>{1, 0}));

  Tensor halves = f32({4}, {1.0f, 0.5f, -2.0f, 65504.0f}), toF16 = alloc(DType::F16, {4});
  kc::cast(ctx, halves, toF16);
  EXPECT_EQ(get<uint16_t>(toF16), (std::vector<uint16_t>{0x3c00, 0x3800, 0xc000, 0x7bff}));
  Tensor back = alloc(DType::F32, {4});
  kc::cast(ctx, toF16, back);
  expectClose(get<float>(back), {1.0f, 0.5f, -2.0f, 65504.0f});

  Tensor toBF16 = alloc(DType::BF16, {4});
  kc::cast(ctx, halves, toBF16);
  EXPECT_EQ(get<uint16_t>(toBF16)[0], 0x3f80);
  EXPECT_EQ(get<uint16_t>(toBF16)[2], 0xc000);

  Tensor bytes = put<uint8_t>(DType::U8, {2}, {0, 255}), fromU8 = alloc(DType::F32, {2});
  kc::cast(ctx, bytes, fromU8);
  expectClose(get<float>(fromU8), {0.0f, 255.0f});
}

TEST_F(CudaKernels, Fill) {
  Tensor f = alloc(DType::F32, {2, 2});
  kc::fill(ctx, f, 2.5);
  expectClose(get<float>(f), {2.5f, 2.5f, 2.5f, 2.5f});
  Tensor i = alloc(DType::I64, {3});
  kc::fill(ctx, i, -7.0);
  EXPECT_EQ(get<int64_t>(i), (std::vector<int64_t>{-7, -7, -7}));
  Tensor b = alloc(DType::Bool, {2});
  kc::fill(ctx, b, 1.0);
  EXPECT_EQ(get<uint8_t>(b), (std::vector<uint8_t>{1, 1}));
  Tensor h = alloc(DType::F16, {1});
  kc::fill(ctx, h, 1.0);
  EXPECT_EQ(get<uint16_t>(h), (std::vector<uint16_t>{0x3c00}));
}

TEST_F(CudaKernels, Range) {
  Tensor f = alloc(DType::F32, {4});
  kc::range(ctx, f, 1.0, 0.5);
  expectClose(get<float>(f), {1.0f, 1.5f, 2.0f, 2.5f});
  Tensor i = alloc(DType::I64, {4});
  kc::range(ctx, i, 10.0, -3.0);
  EXPECT_EQ(get<int64_t>(i), (std::vector<int64_t>{10, 7, 4, 1}));
  Tensor j = alloc(DType::I32, {3});
  kc::range(ctx, j, 0.0, 2.0);
  EXPECT_EQ(get<int32_t>(j), (std::vector<int32_t>{0, 2, 4}));
}

TEST_F(CudaKernels, BinaryBroadcast) {
  Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6}), b = f32({3}, {10, 20, 30});
  Tensor out = alloc(DType::F32, {2, 3});
  kc::add(ctx, a, b, out);
  expectClose(get<float>(out), {11, 22, 33, 14, 25, 36});

  Tensor col = f32({2, 1}, {1, 2}), row = f32({1, 3}, {10, 20, 30});
  kc::sub(ctx, col, row, out);
  expectClose(get<float>(out), {-9, -19, -29, -8, -18, -28});

  Tensor scalar = f32({}, {2.0f});
  kc::mul(ctx, a, scalar, out);
  expectClose(get<float>(out), {2, 4, 6, 8, 10, 12});
  kc::div(ctx, scalar, a, out);
  expectClose(get<float>(out), {2.0f, 1.0f, 2.0f / 3, 0.5f, 0.4f, 2.0f / 6});

  // Rank 3 with every operand broadcast somewhere: the general index path.
  Tensor x = f32({2, 1, 3}, {1, 2, 3, 4, 5, 6}), y = f32({1, 2, 1}, {100, 200});
  Tensor z = alloc(DType::F32, {2, 2, 3});
  kc::add(ctx, x, y, z);
  expectClose(get<float>(z), {101, 102, 103, 201, 202, 203, 104, 105, 106, 204, 205, 206});

  // max and min: NaN in either operand gives NaN.
  Tensor p = f32({2, 3}, {1, kNaN, -3, 2, 0.5f, 40}), q = f32({3}, {0, 1, kNaN});
  kc::max(ctx, p, q, out);
  expectClose(get<float>(out), {1, kNaN, kNaN, 2, 1, kNaN});
  kc::min(ctx, p, q, out);
  expectClose(get<float>(out), {0, kNaN, kNaN, 0, 0.5f, kNaN});
}

// The CPU kernels' cases (runtime/cpu/KernelsTest.cpp) on the GPU: every
// integer width wraps, unsigned values divide and compare as unsigned, and
// the maximum of bools is their or.
TEST_F(CudaKernels, NarrowAndUnsignedIntegers) {
  Tensor i8 = put<int8_t>(DType::I8, {3}, {127, -128, 100});
  Tensor i8b = put<int8_t>(DType::I8, {3}, {1, 1, 3});
  Tensor y8 = alloc(DType::I8, {3});
  kc::add(ctx, i8, i8b, y8);
  EXPECT_EQ(get<int8_t>(y8), (std::vector<int8_t>{-128, -127, 103}));
  kc::mul(ctx, i8, i8b, y8);
  EXPECT_EQ(get<int8_t>(y8), (std::vector<int8_t>{127, -128, 44}));
  Tensor u16 = put<uint16_t>(DType::U16, {2}, {65535, 300});
  Tensor y16 = alloc(DType::U16, {2});
  kc::mul(ctx, u16, u16, y16);
  EXPECT_EQ(get<uint16_t>(y16), (std::vector<uint16_t>{1, 24464}));
  Tensor n64 = put<uint64_t>(DType::U64, {2}, {5, UINT64_MAX});
  Tensor d64 = put<uint64_t>(DType::U64, {}, {UINT64_MAX});
  Tensor q64 = alloc(DType::U64, {2});
  kc::div(ctx, n64, d64, q64);
  EXPECT_EQ(get<uint64_t>(q64), (std::vector<uint64_t>{0, 1}));
  Tensor base = put<uint8_t>(DType::U8, {2}, {3, 2});
  Tensor exponent = put<uint32_t>(DType::U32, {2}, {5, 9});
  Tensor yu8 = alloc(DType::U8, {2});
  kc::pow(ctx, base, exponent, yu8);
  EXPECT_EQ(get<uint8_t>(yu8), (std::vector<uint8_t>{243, 0}));
  Tensor u32 = put<uint32_t>(DType::U32, {2}, {0, 4000000000u});
  Tensor u32b = put<uint32_t>(DType::U32, {2}, {1, 3});
  Tensor less = alloc(DType::Bool, {2});
  kc::less(ctx, u32, u32b, less);
  EXPECT_EQ(get<uint8_t>(less), (std::vector<uint8_t>{1, 0}));
  Tensor neg = put<int8_t>(DType::I8, {3}, {-128, -5, 4});
  kc::abs(ctx, neg, y8);
  EXPECT_EQ(get<int8_t>(y8), (std::vector<int8_t>{-128, 5, 4}));
  Tensor bools = boolean({2, 3}, {0, 1, 0, 0, 0, 0});
  Tensor any = alloc(DType::Bool, {2});
  kc::reduce_max(ctx, bools, any, Dims{1});
  EXPECT_EQ(get<uint8_t>(any), (std::vector<uint8_t>{1, 0}));
}

TEST_F(CudaKernels, BinaryIntegers) {
  Tensor a = i64({5}, {7, -7, 7, -7, 5}), b = i64({5}, {2, 2, -2, -2, 0});
  Tensor out = alloc(DType::I64, {5});
  kc::fmod(ctx, a, b, out);
  EXPECT_EQ(get<int64_t>(out), (std::vector<int64_t>{1, -1, 1, -1, 0})); // dividend's sign; x % 0 = 0
  Tensor fx = f32({3}, {5.5f, -5.5f, 1e30f}), fy = f32({3}, {2, 2, 3}), fr = alloc(DType::F32, {3});
  kc::fmod(ctx, fx, fy, fr);
  expectClose(get<float>(fr), {1.5f, -1.5f, std::fmod(1e30f, 3.0f)});
  kc::div(ctx, a, b, out);
  EXPECT_EQ(get<int64_t>(out), (std::vector<int64_t>{3, -3, -3, 3, 0})); // truncates; x/0 = 0
  kc::mul(ctx, a, b, out);
  EXPECT_EQ(get<int64_t>(out), (std::vector<int64_t>{14, -14, -14, 14, 0}));
  kc::sub(ctx, a, b, out);
  EXPECT_EQ(get<int64_t>(out), (std::vector<int64_t>{5, -9, 9, -5, 5}));

  int64_t max = std::numeric_limits<int64_t>::max();
  Tensor m = i64({1}, {max}), one = i64({1}, {1}), sum = alloc(DType::I64, {1});
  kc::add(ctx, m, one, sum);
  EXPECT_EQ(get<int64_t>(sum)[0], std::numeric_limits<int64_t>::min()); // wraps

  int32_t min32 = std::numeric_limits<int32_t>::min();
  Tensor p = i32({2}, {min32, 9}), q = i32({2}, {-1, 4}), r = alloc(DType::I32, {2});
  kc::div(ctx, p, q, r);
  EXPECT_EQ(get<int32_t>(r), (std::vector<int32_t>{min32, 2}));
  kc::add(ctx, p, q, r);
  EXPECT_EQ(get<int32_t>(r), (std::vector<int32_t>{std::numeric_limits<int32_t>::max(), 13}));
}

TEST_F(CudaKernels, Pow) {
  Tensor base = f32({3}, {2, 9, 4}), exponent = i64({3}, {3, 2, -1});
  Tensor out = alloc(DType::F32, {3});
  kc::pow(ctx, base, exponent, out);
  expectClose(get<float>(out), {8, 81, 0.25f});
  Tensor half = f32({}, {0.5f});
  kc::pow(ctx, base, half, out);
  expectClose(get<float>(out), {std::sqrt(2.0f), 3.0f, 2.0f});
  Tensor ib = i64({4}, {2, 3, -2, 2}), ie = i64({4}, {10, 3, 3, -1}), io = alloc(DType::I64, {4});
  kc::pow(ctx, ib, ie, io);
  EXPECT_EQ(get<int64_t>(io), (std::vector<int64_t>{1024, 27, -8, 0}));
}

TEST_F(CudaKernels, Comparisons) {
  Tensor a = f32({4}, {1, 2, 3, kNaN}), two = f32({}, {2.0f});
  Tensor out = alloc(DType::Bool, {4});
  kc::less(ctx, a, two, out);
  EXPECT_EQ(get<uint8_t>(out), (std::vector<uint8_t>{1, 0, 0, 0}));
  kc::greater(ctx, a, two, out);
  EXPECT_EQ(get<uint8_t>(out), (std::vector<uint8_t>{0, 0, 1, 0}));
  kc::equal(ctx, a, a, out);
  EXPECT_EQ(get<uint8_t>(out), (std::vector<uint8_t>{1, 1, 1, 0})); // NaN != NaN

  Tensor col = i64({2, 1}, {1, 2}), row = i64({2}, {2, 1}), grid = alloc(DType::Bool, {2, 2});
  kc::equal(ctx, col, row, grid);
  EXPECT_EQ(get<uint8_t>(grid), (std::vector<uint8_t>{0, 1, 1, 0}));
  Tensor c32 = i32({2, 1}, {1, 2}), r32 = i32({2}, {2, 1});
  kc::less(ctx, c32, r32, grid);
  EXPECT_EQ(get<uint8_t>(grid), (std::vector<uint8_t>{1, 0, 0, 0}));

  Tensor p = boolean({3}, {1, 0, 1}), q = boolean({3}, {1, 1, 1}), e = alloc(DType::Bool, {3});
  kc::equal(ctx, p, q, e);
  EXPECT_EQ(get<uint8_t>(e), (std::vector<uint8_t>{1, 0, 1}));
}

TEST_F(CudaKernels, Where) {
  Tensor cond = boolean({2, 1}, {1, 0});
  Tensor x = f32({3}, {1, 2, 3}), y = f32({}, {-1.0f}), out = alloc(DType::F32, {2, 3});
  kc::where(ctx, cond, x, y, out);
  expectClose(get<float>(out), {1, 2, 3, -1, -1, -1});
  Tensor xi = i64({3}, {1, 2, 3}), yi = i64({2, 3}, {4, 5, 6, 7, 8, 9});
  Tensor oi = alloc(DType::I64, {2, 3});
  kc::where(ctx, cond, xi, yi, oi);
  EXPECT_EQ(get<int64_t>(oi), (std::vector<int64_t>{1, 2, 3, 7, 8, 9}));
  Tensor xb = boolean({1}, {1}), yb = boolean({1}, {0}), ob = alloc(DType::Bool, {2, 1});
  kc::where(ctx, cond, xb, yb, ob);
  EXPECT_EQ(get<uint8_t>(ob), (std::vector<uint8_t>{1, 0}));
}

//===----------------------------------------------------------------------===//
// Normalisation and dropout
//===----------------------------------------------------------------------===//

std::vector<float> softmaxRows(const std::vector<float> &x, int64_t rows, int64_t len, bool log) {
  std::vector<float> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double max = -INFINITY, sum = 0;
    for (int64_t j = 0; j < len; ++j)
      max = std::max<double>(max, x[r * len + j]);
    for (int64_t j = 0; j < len; ++j)
      sum += std::exp(x[r * len + j] - max);
    for (int64_t j = 0; j < len; ++j)
      y[r * len + j] = static_cast<float>(log ? x[r * len + j] - max - std::log(sum)
                                              : std::exp(x[r * len + j] - max) / sum);
  }
  return y;
}

TEST_F(CudaKernels, Softmax) {
  Tensor in = f32({2, 3}, {1, 2, 3, 1, 1, 1}), out = alloc(DType::F32, {2, 3});
  kc::softmax(ctx, in, out, 1);
  expectClose(get<float>(out), {0.09003057f, 0.24472847f, 0.66524096f, 1.0f / 3, 1.0f / 3,
                                1.0f / 3});
  kc::softmax(ctx, in, out, -1);
  expectClose(get<float>(out), {0.09003057f, 0.24472847f, 0.66524096f, 1.0f / 3, 1.0f / 3,
                                1.0f / 3});
  kc::log_softmax(ctx, in, out, 1);
  expectClose(get<float>(out), softmaxRows({1, 2, 3, 1, 1, 1}, 2, 3, true));
  // Axis 0: columns {1,1}, {2,1}, {3,1}.
  kc::softmax(ctx, in, out, 0);
  float e1 = std::exp(1.0f), e2 = std::exp(2.0f);
  expectClose(get<float>(out), {0.5f, e1 / (e1 + 1), e2 / (e2 + 1), 0.5f, 1 / (e1 + 1),
                                1 / (e2 + 1)});
  // Large values: no overflow.
  Tensor big = f32({3}, {1000, 1001, 1002}), bigOut = alloc(DType::F32, {3});
  kc::softmax(ctx, big, bigOut, 0);
  expectClose(get<float>(bigOut), {0.09003057f, 0.24472847f, 0.66524096f});
  // A long row: several warps per block.
  std::vector<float> row = iota(1000, -5.0f, 0.01f);
  Tensor longIn = f32({1, 1000}, row), longOut = alloc(DType::F32, {1, 1000});
  kc::log_softmax(ctx, longIn, longOut, 1);
  expectClose(get<float>(longOut), softmaxRows(row, 1, 1000, true), 1e-4f);
}

// softmax_grad against y (g - sum(g y)) in double, over the last axis (rows
// of 1000: several warps) and a strided one, and in place over g.
TEST_F(CudaKernels, SoftmaxGrad) {
  auto reference = [](const std::vector<float> &y, const std::vector<float> &g, int64_t outer,
                      int64_t n, int64_t inner) {
    std::vector<float> want(y.size());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < inner; ++j) {
        double sum = 0;
        for (int64_t i = 0; i < n; ++i)
          sum += double(g[(o * n + i) * inner + j]) * y[(o * n + i) * inner + j];
        for (int64_t i = 0; i < n; ++i) {
          int64_t at = (o * n + i) * inner + j;
          want[at] = static_cast<float>(y[at] * (g[at] - sum));
        }
      }
    return want;
  };
  std::vector<float> y = iota(3000, 0.0f, 1e-4f), g(3000);
  for (std::size_t i = 0; i < g.size(); ++i)
    g[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
  Tensor yt = f32({3, 1000}, y), gt = f32({3, 1000}, g), out = alloc(DType::F32, {3, 1000});
  kc::softmax_grad(ctx, yt, gt, out, 1);
  expectClose(get<float>(out), reference(y, g, 3, 1000, 1), 1e-5f);
  Tensor ys = f32({3, 10, 100}, y), gs = f32({3, 10, 100}, g),
         outs = alloc(DType::F32, {3, 10, 100});
  kc::softmax_grad(ctx, ys, gs, outs, 1);
  expectClose(get<float>(outs), reference(y, g, 3, 10, 100), 1e-5f);
  kc::softmax_grad(ctx, yt, gt, gt, -1);
  expectClose(get<float>(gt), reference(y, g, 3, 1000, 1), 1e-5f);
}

// layer_normalization_grad against its formula in double, from the
// forward's own statistics: the scale broadcast per element of the rows
// (1000 of them, longer than a block) and per row of a 10 x 100 normalised
// block; in place over the gradient.
TEST_F(CudaKernels, LayerNormalizationGrad) {
  std::vector<float> x(3000), g(3000), s(1000);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(std::cos(0.11 * static_cast<double>(i)));
    g[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
  }
  for (std::size_t i = 0; i < s.size(); ++i)
    s[i] = 0.5f + static_cast<float>(i % 7) * 0.25f;
  auto reference = [&](const std::vector<float> &mean, const std::vector<float> &inv, int64_t cols,
                       auto scaleAt) {
    std::vector<float> want(x.size());
    for (std::size_t r = 0; r < mean.size(); ++r) {
      double meanG = 0, meanGXhat = 0;
      for (int64_t k = 0; k < cols; ++k) {
        double gk = double(g[r * cols + k]) * scaleAt(k),
               xhat = (x[r * cols + k] - mean[r]) * double(inv[r]);
        meanG += gk / double(cols);
        meanGXhat += gk * xhat / double(cols);
      }
      for (int64_t k = 0; k < cols; ++k) {
        double gk = double(g[r * cols + k]) * scaleAt(k),
               xhat = (x[r * cols + k] - mean[r]) * double(inv[r]);
        want[r * cols + k] = static_cast<float>(inv[r] * (gk - meanG - xhat * meanGXhat));
      }
    }
    return want;
  };
  Tensor xt = f32({3, 1000}, x), gt = f32({3, 1000}, g), st = f32({1000}, s);
  Tensor y = alloc(DType::F32, {3, 1000}), mean = alloc(DType::F32, {3, 1}),
         inv = alloc(DType::F32, {3, 1}), out = alloc(DType::F32, {3, 1000});
  kc::layer_normalization(ctx, xt, st, nullptr, y, mean, inv, 1, 1e-5f);
  kc::layer_normalization_grad(ctx, xt, st, mean, inv, gt, out, 1);
  auto want =
      reference(get<float>(mean), get<float>(inv), 1000, [&](int64_t k) { return double(s[k]); });
  expectClose(get<float>(out), want, 1e-5f);
  kc::layer_normalization_grad(ctx, xt, st, mean, inv, gt, gt, -1);
  expectClose(get<float>(gt), want, 1e-5f);

  Tensor xb = f32({3, 10, 100}, x), gb = f32({3, 10, 100}, g),
         sb = f32({10, 1}, std::vector<float>(s.begin(), s.begin() + 10));
  Tensor yb = alloc(DType::F32, {3, 10, 100}), mb = alloc(DType::F32, {3, 1, 1}),
         ib = alloc(DType::F32, {3, 1, 1}), outb = alloc(DType::F32, {3, 10, 100});
  kc::layer_normalization(ctx, xb, sb, nullptr, yb, mb, ib, 1, 1e-5f);
  kc::layer_normalization_grad(ctx, xb, sb, mb, ib, gb, outb, 1);
  expectClose(get<float>(outb),
              reference(get<float>(mb), get<float>(ib), 1000,
                        [&](int64_t k) { return double(s[k / 100]); }),
              1e-5f);
}

// scaled_masked_softmax and its gradient against the unfused chain's formula
// in double: 3 x 4 rows of 1000 (longer than a block) under a causal-style
// mask of 4 x 1000 broadcast over the first dim, of the positions kept (the
// scores multiplied), under a 3 x 1 x 1 mask hiding whole rows with a finite
// fill (the scores divided), and under none; with a bias of 3 x 1 x 1000
// (an additive mask broadcast over the heads) and one of 3 x 4 x 1 (one a
// row) added to the scaled scores; the gradient in place over g.
TEST_F(CudaKernels, ScaledMaskedSoftmax) {
  const int64_t rows = 12, n = 1000;
  std::vector<float> x(rows * n), g(rows * n);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(4 * std::cos(0.11 * static_cast<double>(i)));
    g[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
  }
  auto check = [&](Dims maskShape, const std::vector<uint8_t> &mask,
                   const std::function<bool(int64_t, int64_t)> &hides, bool keeps, float scale,
                   bool divide, float fill, Dims biasShape = {},
                   const std::vector<float> &bias = {},
                   const std::function<float(int64_t, int64_t)> &biasAt = nullptr) {
    std::vector<float> want(x.size()), wantGrad(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<double> score(n);
      double m = -INFINITY, sum = 0, dot = 0;
      for (int64_t k = 0; k < n; ++k) {
        float scaled = divide ? x[r * n + k] / scale : x[r * n + k] * scale;
        if (biasAt)
          scaled += biasAt(r, k);
        score[k] = hides(r, k) ? fill : double(scaled);
        m = std::max(m, score[k]);
      }
      for (int64_t k = 0; k < n; ++k)
        sum += std::exp(score[k] - m);
      for (int64_t k = 0; k < n; ++k)
        dot += double(g[r * n + k]) * (std::exp(score[k] - m) / sum);
      for (int64_t k = 0; k < n; ++k) {
        double y = std::exp(score[k] - m) / sum;
        want[r * n + k] = static_cast<float>(y);
        wantGrad[r * n + k] = hides(r, k)
                                  ? 0.0f
                                  : static_cast<float>(y * (g[r * n + k] - dot) *
                                                       (divide ? 1.0 / scale : double(scale)));
      }
    }
    Tensor xt = f32({3, 4, n}, x), gt = f32({3, 4, n}, g);
    Tensor mt = mask.empty() ? Tensor{} : boolean(maskShape, mask);
    const Tensor *maskOrNone = mask.empty() ? nullptr : &mt;
    Tensor bt = bias.empty() ? Tensor{} : f32(biasShape, bias);
    const Tensor *biasOrNone = bias.empty() ? nullptr : &bt;
    Tensor y = alloc(DType::F32, {3, 4, n}), dx = alloc(DType::F32, {3, 4, n});
    kc::scaled_masked_softmax(ctx, xt, maskOrNone, biasOrNone, y, scale, divide, fill, keeps);
    expectClose(get<float>(y), want, 1e-6f);
    kc::scaled_masked_softmax_grad(ctx, y, gt, maskOrNone, dx, scale, divide, keeps);
    expectClose(get<float>(dx), wantGrad, 1e-6f);
    kc::scaled_masked_softmax_grad(ctx, y, gt, maskOrNone, gt, scale, divide, keeps);
    expectClose(get<float>(gt), wantGrad, 1e-6f);
  };
  std::vector<uint8_t> causalKept(4 * n), rowsHidden{0, 1, 0};
  for (int64_t i = 0; i < 4 * n; ++i)
    causalKept[i] = i % n <= i / n + 600;
  auto causalAt = [](int64_t r, int64_t k) { return k > r % 4 + 600; };
  auto hiddenRow = [](int64_t r, int64_t) { return r / 4 == 1; };
  check({4, n}, causalKept, causalAt, true, 0.125f, false, -3.4e38f);
  check({3, 1, 1}, rowsHidden, hiddenRow, false, 8.0f, true, -1e9f);
  auto none = [](int64_t, int64_t) { return false; };
  check({}, {}, none, false, 0.5f, false, 0.0f);
  // Row r is (r / 4, r % 4) of 3 x 4.
  std::vector<float> headsBias(3 * n), rowBias(rows);
  for (int64_t i = 0; i < 3 * n; ++i)
    headsBias[i] = -2.0f * static_cast<float>((i / n + i % n) % 3);
  for (int64_t r = 0; r < rows; ++r)
    rowBias[r] = 0.25f * static_cast<float>(r);
  check({}, {}, none, false, 0.125f, true, 0.0f, {3, 1, n}, headsBias,
        [&](int64_t r, int64_t k) { return headsBias[r / 4 * n + k]; });
  check({4, n}, causalKept, causalAt, true, 0.125f, false, -3.4e38f, {3, 4, 1}, rowBias,
        [&](int64_t r, int64_t) { return rowBias[r]; });

  // Rows longer than a block's shared memory keeps (32 KiB: 8192 floats)
  // take the kernel that computes the scores again in each pass.
  const int64_t longRows = 2, longN = 9000;
  std::vector<float> lx(longRows * longN), want(lx.size());
  for (std::size_t i = 0; i < lx.size(); ++i)
    lx[i] = static_cast<float>(3 * std::sin(0.013 * static_cast<double>(i)));
  for (int64_t r = 0; r < longRows; ++r) {
    double m = -INFINITY, sum = 0;
    for (int64_t k = 0; k < longN; ++k)
      m = std::max(m, double(lx[r * longN + k] * 0.5f));
    for (int64_t k = 0; k < longN; ++k)
      sum += std::exp(double(lx[r * longN + k] * 0.5f) - m);
    for (int64_t k = 0; k < longN; ++k)
      want[r * longN + k] =
          static_cast<float>(std::exp(double(lx[r * longN + k] * 0.5f) - m) / sum);
  }
  Tensor lt = f32({longRows, longN}, lx), ly = alloc(DType::F32, {longRows, longN});
  kc::scaled_masked_softmax(ctx, lt, nullptr, nullptr, ly, 0.5f, false, 0.0f, false);
  expectClose(get<float>(ly), want, 1e-6f);
}

TEST_F(CudaKernels, LayerNormalization) {
  Tensor x = f32({2, 4}, {1, 2, 3, 4, 2, 2, 2, 2});
  Tensor scale = f32({4}, {1, 2, 1, 2}), bias = f32({4}, {0, 0, 1, 1});
  Tensor y = alloc(DType::F32, {2, 4}), mean = alloc(DType::F32, {2, 1});
  Tensor inv = alloc(DType::F32, {2, 1});
  float eps = 1e-5f;
  kc::layer_normalization(ctx, x, scale, &bias, y, mean, inv, 1, eps);
  float i0 = 1.0f / std::sqrt(1.25f + eps), i1 = 1.0f / std::sqrt(eps);
  expectClose(get<float>(y), {-1.5f * i0, -0.5f * i0 * 2, 0.5f * i0 + 1, 1.5f * i0 * 2 + 1, 0, 0,
                              1, 1},
              1e-4f);
  expectClose(get<float>(mean), {2.5f, 2.0f});
  expectClose(get<float>(inv), {i0, i1}, 1e-4f);

  // No bias, statistics over the last two dims, scale over the last one.
  Tensor x3 = f32({1, 2, 2}, {0, 2, 4, 6}), s3 = f32({2}, {1, -1});
  Tensor y3 = alloc(DType::F32, {1, 2, 2}), m3 = alloc(DType::F32, {1, 1, 1});
  Tensor v3 = alloc(DType::F32, {1, 1, 1});
  kc::layer_normalization(ctx, x3, s3, nullptr, y3, m3, v3, 1, 0.0f);
  float inv3 = 1.0f / std::sqrt(5.0f); // mean 3, variance (9 + 1 + 1 + 9) / 4
  expectClose(get<float>(y3), {-3 * inv3, 1 * inv3, 1 * inv3, -3 * inv3}, 1e-5f);
  expectClose(get<float>(m3), {3.0f});
}

TEST_F(CudaKernels, BatchNormalizationInference) {
  Tensor x = f32({1, 2, 2}, {1, 2, 3, 4});
  Tensor scale = f32({2}, {1, 2}), bias = f32({2}, {0, 1});
  Tensor mean = f32({2}, {1, 3}), var = f32({2}, {1, 4});
  Tensor y = alloc(DType::F32, {1, 2, 2}), rm = alloc(DType::F32, {2}), rv = alloc(DType::F32, {2});
  kc::batch_normalization(ctx, x, scale, bias, mean, var, y, rm, rv, 0.0f, 0.9f, false);
  expectClose(get<float>(y), {0, 1, 1, 2});
  expectClose(get<float>(rm), {1, 3});
  expectClose(get<float>(rv), {1, 4});
}

TEST_F(CudaKernels, BatchNormalizationTraining) {
  // N=2, C=2, one spatial element: channel 0 sees {1, 3}, channel 1 {2, 6}.
  Tensor x = f32({2, 2, 1}, {1, 2, 3, 6});
  Tensor scale = f32({2}, {1, 1}), bias = f32({2}, {0, 0});
  Tensor mean = f32({2}, {0, 0}), var = f32({2}, {1, 1});
  Tensor y = alloc(DType::F32, {2, 2, 1}), rm = alloc(DType::F32, {2}), rv = alloc(DType::F32, {2});
  kc::batch_normalization(ctx, x, scale, bias, mean, var, y, rm, rv, 0.0f, 0.9f, true);
  expectClose(get<float>(y), {-1, -1, 1, 1});
  expectClose(get<float>(rm), {0.2f, 0.4f});  // 0.9 * 0 + 0.1 * {2, 4}
  expectClose(get<float>(rv), {1.0f, 1.3f});  // 0.9 * 1 + 0.1 * {1, 4} (biased)
}

/// The dropout draw both backends share (runtime/cpu/Normalization.cpp).
bool keptByFormula(uint64_t seed, int64_t i, double ratio) {
  auto mix = [](uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  uint64_t z = mix(mix(seed) + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1));
  return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0) >= ratio;
}

TEST_F(CudaKernels, Dropout) {
  const int64_t n = 10000;
  Tensor in = f32({n}, std::vector<float>(n, 1.0f));
  Tensor out = alloc(DType::F32, {n}), mask = alloc(DType::Bool, {n});
  kc::dropout(ctx, in, nullptr, out, mask, 0.3f, true, 42, {});
  std::vector<float> got = get<float>(out);
  std::vector<uint8_t> keep = get<uint8_t>(mask);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(keep[i] != 0, keptByFormula(42, i, static_cast<double>(0.3f))) << "at " << i;
    EXPECT_FLOAT_EQ(got[i], keep[i] ? 1.0f / 0.7f : 0.0f);
    kept += keep[i];
  }
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.7, 0.02);

  kc::dropout(ctx, in, nullptr, out, mask, 0.3f, true, 43, {});
  EXPECT_NE(get<uint8_t>(mask), keep); // another seed, another mask

  kc::dropout(ctx, in, nullptr, out, mask, 0.3f, false, 42, {});
  EXPECT_EQ(get<float>(out), std::vector<float>(n, 1.0f));
  EXPECT_EQ(get<uint8_t>(mask), std::vector<uint8_t>(n, 1));

  kc::dropout(ctx, in, nullptr, out, mask, 1.0f, true, 42, {});
  EXPECT_EQ(get<float>(out), std::vector<float>(n, 0.0f));
  EXPECT_EQ(get<uint8_t>(mask), std::vector<uint8_t>(n, 0));
}

TEST_F(CudaKernels, DropoutOfASplitPartDrawsAsTheWhole) {
  // Rank 1 of 2 along dim 1 of a 3 x 4 x 5 tensor: its element (i, j, k) is
  // the whole's (i, 2 + j, k).
  const int64_t a = 3, b = 4, c = 5, local = 2;
  Tensor in = f32({a, local, c}, std::vector<float>(a * local * c, 1.0f));
  Tensor out = alloc(DType::F32, {a, local, c}), mask = alloc(DType::Bool, {a, local, c});
  const int64_t rank = 1;
  Tensor coordinate = i64({}, {rank});
  kc::dropout(ctx, in, &coordinate, out, mask, 0.5f, true, 77, {1, 2});
  std::vector<uint8_t> keep = get<uint8_t>(mask);
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < local; ++j)
      for (int64_t k = 0; k < c; ++k)
        EXPECT_EQ(keep[(i * local + j) * c + k] != 0,
                  keptByFormula(77, (i * b + rank * local + j) * c + k, 0.5))
            << "at " << i << "," << j << "," << k;
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

/// Row-major reference product of one M x K and one K x N matrix.
void matmulRef(const float *a, const float *b, float *c, int64_t m, int64_t k, int64_t n) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += static_cast<double>(a[i * k + p]) * b[p * n + j];
      c[i * n + j] = static_cast<float>(s);
    }
}

TEST_F(CudaKernels, MatmulMatrices) {
  Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6}), b = f32({3, 2}, {7, 8, 9, 10, 11, 12});
  Tensor c = alloc(DType::F32, {2, 2});
  kc::matmul(ctx, a, b, c, false, false, false);
  expectClose(get<float>(c), {58, 64, 139, 154});
}

TEST_F(CudaKernels, MatmulVectors) {
  Tensor v = f32({3}, {1, 2, 3}), b = f32({3, 2}, {7, 8, 9, 10, 11, 12});
  Tensor vb = alloc(DType::F32, {2});
  kc::matmul(ctx, v, b, vb, false, false, false);
  expectClose(get<float>(vb), {58, 64});
  Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6}), w = f32({3}, {1, 0, -1});
  Tensor aw = alloc(DType::F32, {2});
  kc::matmul(ctx, a, w, aw, false, false, false);
  expectClose(get<float>(aw), {-2, -2});
  Tensor dot = alloc(DType::F32, {});
  kc::matmul(ctx, v, w, dot, false, false, false);
  expectClose(get<float>(dot), {-2});
}

// Operands stored transposed (cleave-fold-transposes' flags): a batch of
// two 2 x 3 lhs matrices stored 3 x 2, times one 3 x 2 rhs stored 2 x 3,
// against the reference product of the untransposed matrices.
TEST_F(CudaKernels, MatmulTransposedOperands) {
  std::vector<float> lhs = iota(12, -3.0f, 0.5f), rhs = iota(6, 1.0f, 0.25f);
  std::vector<float> lhsT(12), rhsT(6);
  for (int m = 0; m < 2; ++m)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        lhsT[m * 6 + j * 2 + i] = lhs[m * 6 + i * 3 + j];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j)
      rhsT[j * 3 + i] = rhs[i * 2 + j];
  std::vector<float> want(8);
  for (int m = 0; m < 2; ++m)
    matmulRef(&lhs[m * 6], rhs.data(), &want[m * 4], 2, 3, 2);
  Tensor c = alloc(DType::F32, {2, 2, 2});
  kc::matmul(ctx, f32({2, 3, 2}, lhsT), f32({3, 2}, rhs), c, true, false, false);
  expectClose(get<float>(c), want);
  kc::matmul(ctx, f32({2, 2, 3}, lhs), f32({2, 3}, rhsT), c, false, true, false);
  expectClose(get<float>(c), want);
  kc::matmul(ctx, f32({2, 3, 2}, lhsT), f32({2, 3}, rhsT), c, true, true, false);
  expectClose(get<float>(c), want);
}

/// The reference of lhs [2,1,2,3] x rhs [3,3,2] -> [2,3,2,2]: lhs repeats
/// over rhs's batch and rhs over lhs's.
std::vector<float> broadcastBatchesRef(const std::vector<float> &lhs,
                                       const std::vector<float> &rhs) {
  std::vector<float> want(24);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      matmulRef(&lhs[i * 6], &rhs[j * 6], &want[(i * 3 + j) * 4], 2, 3, 2);
  return want;
}

TEST_F(CudaKernels, MatmulBroadcastBatches) {
  std::vector<float> lhs = iota(12, -3.0f, 0.5f), rhs = iota(18, 1.0f, 0.25f);
  Tensor a = f32({2, 1, 2, 3}, lhs), b = f32({3, 3, 2}, rhs);
  Tensor c = alloc(DType::F32, {2, 3, 2, 2});
  kc::matmul(ctx, a, b, c, false, false, false);
  expectClose(get<float>(c), broadcastBatchesRef(lhs, rhs));

  // Same batch on both sides, then rhs shared by every batch.
  Tensor a2 = f32({3, 2, 3}, std::vector<float>(rhs.begin(), rhs.begin() + 18));
  Tensor b2 = f32({3, 3, 2}, rhs), c2 = alloc(DType::F32, {3, 2, 2});
  kc::matmul(ctx, a2, b2, c2, false, false, false);
  std::vector<float> want2(12);
  for (int j = 0; j < 3; ++j)
    matmulRef(&rhs[j * 6], &rhs[j * 6], &want2[j * 4], 2, 3, 2);
  expectClose(get<float>(c2), want2);
  Tensor b3 = f32({3, 2}, {7, 8, 9, 10, 11, 12});
  kc::matmul(ctx, a2, b3, c2, false, false, false);
  std::vector<float> rhs3 = {7, 8, 9, 10, 11, 12};
  for (int j = 0; j < 3; ++j)
    matmulRef(&rhs[j * 6], rhs3.data(), &want2[j * 4], 2, 3, 2);
  expectClose(get<float>(c2), want2);
}

TEST_F(CudaKernels, Gemm) {
  Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6}), b = f32({3, 2}, {7, 8, 9, 10, 11, 12});
  Tensor aT = f32({3, 2}, {1, 4, 2, 5, 3, 6}), bT = f32({2, 3}, {7, 9, 11, 8, 10, 12});
  Tensor c = f32({2}, {1, -1}), out = alloc(DType::F32, {2, 2});
  // 2 * A B + 3 * C with C broadcast over rows.
  std::vector<float> want = {119, 125, 281, 305};
  kc::gemm(ctx, a, b, &c, out, 2.0f, 3.0f, false, false, Activation::None, false, false);
  expectClose(get<float>(out), want);
  kc::gemm(ctx, aT, b, &c, out, 2.0f, 3.0f, true, false, Activation::None, false, false);
  expectClose(get<float>(out), want);
  kc::gemm(ctx, a, bT, &c, out, 2.0f, 3.0f, false, true, Activation::None, false, false);
  expectClose(get<float>(out), want);
  kc::gemm(ctx, aT, bT, &c, out, 2.0f, 3.0f, true, true, Activation::None, false, false);
  expectClose(get<float>(out), want);
  kc::gemm(ctx, a, b, nullptr, out, 1.0f, 1.0f, false, false, Activation::None, false, false);
  expectClose(get<float>(out), {58, 64, 139, 154});
  Tensor column = f32({2, 1}, {1, 2});
  kc::gemm(ctx, a, b, &column, out, 1.0f, 1.0f, false, false, Activation::None, false, false);
  expectClose(get<float>(out), {59, 65, 141, 156});
  Tensor scalar = f32({}, {10.0f});
  kc::gemm(ctx, a, b, &scalar, out, 1.0f, 0.5f, false, false, Activation::None, false, false);
  expectClose(get<float>(out), {63, 69, 144, 159});
}

// bf16 and f16 factors give f32: the exact products of the rounded factors
// summed, as the reference sums them (factors exactly representable in
// both types, cast on the device).
TEST_F(CudaKernels, LowPrecisionProducts) {
  std::vector<float> lhs = iota(12, -3.0f, 0.5f), rhs = iota(18, 1.0f, 0.25f);
  for (DType type : {DType::BF16, DType::F16}) {
    Tensor a32 = f32({2, 1, 2, 3}, lhs), b32 = f32({3, 3, 2}, rhs);
    Tensor a = alloc(type, {2, 1, 2, 3}), b = alloc(type, {3, 3, 2});
    kc::cast(ctx, a32, a);
    kc::cast(ctx, b32, b);
    Tensor c = alloc(DType::F32, {2, 3, 2, 2});
    kc::matmul(ctx, a, b, c, false, false, false);
    expectClose(get<float>(c), broadcastBatchesRef(lhs, rhs));

    Tensor ga = alloc(type, {2, 3}), gb = alloc(type, {3, 2});
    kc::cast(ctx, f32({2, 3}, {1, 2, 3, 4, 5, 6}), ga);
    kc::cast(ctx, f32({3, 2}, {7, 8, 9, 10, 11, 12}), gb);
    Tensor bias = f32({2}, {1, -1}), out = alloc(DType::F32, {2, 2});
    kc::gemm(ctx, ga, gb, &bias, out, 2.0f, 3.0f, false, false, Activation::None, false, false);
    expectClose(get<float>(out), {119, 125, 281, 305});
  }
}

// bf16 factors with a bf16 c write bf16: the f32 sum plus c rounded once,
// here in place as a gradient accumulator kept in bf16 is added to. 139 +
// 256 = 395 (nine significant bits) rounds to even, 396; the rest are
// exact. Then alpha 2 and beta 0.5 from a broadcast row.
TEST_F(CudaKernels, LowPrecisionProductIntoBFloat16) {
  Tensor a = alloc(DType::BF16, {2, 3}), b = alloc(DType::BF16, {3, 2});
  Tensor slot = alloc(DType::BF16, {2, 2}), row = alloc(DType::BF16, {2});
  kc::cast(ctx, f32({2, 3}, {1, 2, 3, 4, 5, 6}), a);
  kc::cast(ctx, f32({3, 2}, {7, 8, 9, 10, 11, 12}), b);
  kc::cast(ctx, f32({2, 2}, {0.5f, 1, 256, -1}), slot);
  kc::cast(ctx, f32({2}, {2, -4}), row);
  auto bits = [](std::vector<float> values) {
    std::vector<uint16_t> out;
    for (float v : values)
      out.push_back(cleave::rt::toBFloat16(v).bits);
    return out;
  };
  kc::gemm(ctx, a, b, &slot, slot, 1.0f, 1.0f, false, false, Activation::None, false, false);
  EXPECT_EQ(get<uint16_t>(slot), bits({58.5f, 65, 396, 153}));
  Tensor out = alloc(DType::BF16, {2, 2});
  kc::gemm(ctx, a, b, &row, out, 2.0f, 0.5f, false, false, Activation::None, false, false);
  EXPECT_EQ(get<uint16_t>(out), bits({117, 126, 279, 306}));
}

// bf16 inputs and outputs of a fused chain (runtime/FusedBFloat16Case.h):
// in place, with a broadcast bf16 input, and an f32 output beside the bf16
// one.
TEST_F(CudaKernels, FusedElementwiseBFloat16) {
  const int64_t n = 1000;
  const cleave::rt::test::FusedBFloat16Case c(n);
  Tensor slot = put(DType::BF16, {n}, c.slot), g = f32({n}, c.grads);
  Tensor scale = put(DType::BF16, {}, std::vector<uint16_t>{c.scale});
  Tensor wide = alloc(DType::F32, {n});
  constexpr int BF = int(ChainInput::BF16), F = int(ChainInput::F32),
                BS = int(ChainInput::BF16Scalar), Add = int(ElementwiseOpcode::Add),
                Mul = int(ElementwiseOpcode::Mul), Out = int(ChainOutput::F32),
                OutBF = int(ChainOutput::BF16);
  kc::fused_elementwise<3, 2, 2, BF, F, BS, Add, 0, 1, 0, Mul, 3, 2, 0, 4, OutBF, 4, Out>(
      ctx, list(slot, g, scale), list(slot, wide), c.kProgram);
  std::vector<uint16_t> narrow = get<uint16_t>(slot);
  std::vector<float> widened = get<float>(wide);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(narrow[i], c.narrow[i]) << "at " << i;
    ASSERT_EQ(cleave::rt::test::floatBits(widened[i]), cleave::rt::test::floatBits(c.wide[i]))
        << "at " << i;
  }
}

// A chain of every opcode gives what the standalone kernels give run one
// after another, bit for bit (no multiply-add contracted, the same device
// math), on 1000 elements with a broadcast scalar: x * y + c, sqrt, / y,
// exp, tanh, erf, neg, - x, a ReLU's gradient gate(x, that), and
// select(mask, that, x), a where whose condition is read per element.
TEST_F(CudaKernels, FusedElementwiseIsTheStandaloneKernels) {
  const int64_t n = 1000;
  std::vector<float> xs(n), ys(n);
  std::vector<uint8_t> masks(n);
  for (int64_t i = 0; i < n; ++i) {
    xs[i] = 0.0137f * static_cast<float>(i % 211) - 1.3f;
    ys[i] = 0.5f + 0.0071f * static_cast<float>(i);
    masks[i] = i % 3 != 0;
  }
  Tensor x = f32({n}, xs), y = f32({n}, ys), c = f32({}, {2.25f}), zero = f32({}, {0.0f});
  Tensor mask = boolean({n}, masks);
  constexpr int F = int(ChainInput::F32), S = int(ChainInput::F32Scalar), B = int(ChainInput::Bool),
                Out = int(ChainOutput::F32);
  using Op = ElementwiseOpcode;
  constexpr int Add = int(Op::Add), Sub = int(Op::Sub), Mul = int(Op::Mul), Div = int(Op::Div),
                Gate = int(Op::Gate), Neg = int(Op::Neg), Sqrt = int(Op::Sqrt), Exp = int(Op::Exp),
                Tanh = int(Op::Tanh), Erf = int(Op::Erf), Select = int(Op::Select);
  Tensor fused = alloc(DType::F32, {n});
  kc::fused_elementwise<4, 11, 1, F, F, S, B, Mul, 0, 1, 0, Add, 4, 2, 0, Sqrt, 5, 0, 0, Div, 6, 1,
                        0, Exp, 7, 0, 0, Tanh, 8, 0, 0, Erf, 9, 0, 0, Neg, 10, 0, 0, Sub, 11, 0, 0,
                        Gate, 0, 12, 0, Select, 3, 13, 0, 14, Out>(
      ctx, list(x, y, c, mask), list(fused),
      "mul 0 1;add 4 2;sqrt 5;div 6 1;exp 7;tanh 8;erf 9;neg 10;"
      "sub 11 0;gate 0 12;select 3 13 0>14");
  std::vector<Tensor> steps;
  for (int k = 0; k < 11; ++k)
    steps.push_back(alloc(DType::F32, {n}));
  Tensor positive = alloc(DType::Bool, {n});
  kc::mul(ctx, x, y, steps[0]);
  kc::add(ctx, steps[0], c, steps[1]);
  kc::sqrt(ctx, steps[1], steps[2]);
  kc::div(ctx, steps[2], y, steps[3]);
  kc::exp(ctx, steps[3], steps[4]);
  kc::tanh(ctx, steps[4], steps[5]);
  kc::erf(ctx, steps[5], steps[6]);
  kc::neg(ctx, steps[6], steps[7]);
  kc::sub(ctx, steps[7], x, steps[8]);
  kc::greater(ctx, x, zero, positive);
  kc::where(ctx, positive, steps[8], zero, steps[9]);
  kc::where(ctx, mask, steps[9], x, steps[10]);
  std::vector<float> got = get<float>(fused), want = get<float>(steps[10]);
  ASSERT_EQ(std::memcmp(got.data(), want.data(), n * sizeof(float)), 0);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

TEST_F(CudaKernels, Transpose) {
  Tensor in = f32({2, 3, 4}, iota(24)), out = alloc(DType::F32, {4, 2, 3});
  kc::transpose(ctx, in, out, Dims{2, 0, 1});
  std::vector<float> want(24);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        want[(k * 2 + i) * 3 + j] = static_cast<float>(i * 12 + j * 4 + k);
  expectClose(get<float>(out), want);

  Tensor b = boolean({2, 2}, {1, 0, 0, 0}), bt = alloc(DType::Bool, {2, 2});
  kc::transpose(ctx, b, bt, Dims{1, 0});
  EXPECT_EQ(get<uint8_t>(bt), (std::vector<uint8_t>{1, 0, 0, 0}));
  Tensor i = i64({2, 3}, {1, 2, 3, 4, 5, 6}), it = alloc(DType::I64, {3, 2});
  kc::transpose(ctx, i, it, Dims{1, 0});
  EXPECT_EQ(get<int64_t>(it), (std::vector<int64_t>{1, 4, 2, 5, 3, 6}));

  // Batches of transposes over several tiles, with partial tiles at the
  // edges, in each element size.
  const int64_t batch = 3, rows = 37, cols = 45;
  std::vector<double> values(batch * rows * cols), swapped(values.size());
  for (std::size_t k = 0; k < values.size(); ++k)
    values[k] = static_cast<double>(k % 251);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        swapped[(b * cols + c) * rows + r] = values[(b * rows + r) * cols + c];
  for (DType type : {DType::F64, DType::F32, DType::BF16, DType::Bool}) {
    Tensor source = alloc(type, {batch, rows, cols}), result = alloc(type, {batch, cols, rows});
    kc::cast(ctx, f64({batch, rows, cols}, values), source);
    kc::transpose(ctx, source, result, Dims{0, 2, 1});
    Tensor wide = alloc(DType::F64, {batch, cols, rows});
    kc::cast(ctx, result, wide);
    std::vector<double> want = swapped;
    if (type == DType::Bool)
      for (double &v : want)
        v = v != 0.0;
    EXPECT_EQ(get<double>(wide), want) << dtypeName(type);
  }
}

TEST_F(CudaKernels, ConcatAndSplit) {
  Tensor a = f32({2, 1}, {1, 2}), b = f32({2, 2}, {3, 4, 5, 6}), out = alloc(DType::F32, {2, 3});
  kc::concat(ctx, list(a, b), out, 1);
  expectClose(get<float>(out), {1, 3, 4, 2, 5, 6});
  Tensor x = i64({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor p = alloc(DType::I64, {2, 1}), q = alloc(DType::I64, {2, 2});
  kc::split(ctx, x, list(p, q), -1);
  EXPECT_EQ(get<int64_t>(p), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(get<int64_t>(q), (std::vector<int64_t>{2, 3, 5, 6}));
  Tensor r = alloc(DType::I64, {1, 3}), s = alloc(DType::I64, {1, 3});
  kc::split(ctx, x, list(r, s), 0);
  EXPECT_EQ(get<int64_t>(s), (std::vector<int64_t>{4, 5, 6}));
  Tensor joined = alloc(DType::I64, {4, 3});
  kc::concat(ctx, list(x, x), joined, 0);
  EXPECT_EQ(get<int64_t>(joined), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}));
}

TEST_F(CudaKernels, Slice) {
  Tensor in = f32({3, 4}, iota(12)), out = alloc(DType::F32, {3, 2});
  kc::slice(ctx, in, out, Dims{2, 0}, Dims{-1, 2});
  expectClose(get<float>(out), {8, 10, 4, 6, 0, 2});
  Tensor sub = alloc(DType::F32, {1, 2});
  kc::slice(ctx, in, sub, Dims{1, 1}, Dims{1, 1});
  expectClose(get<float>(sub), {5, 6});
}

TEST_F(CudaKernels, Gather) {
  Tensor data = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor rows = i64({2}, {2, -3}), out = alloc(DType::F32, {2, 2});
  kc::gather(ctx, data, rows, out, 0);
  expectClose(get<float>(out), {5, 6, 1, 2});
  Tensor cols = i32({2, 2}, {1, 0, 0, 1}), out2 = alloc(DType::F32, {3, 2, 2});
  kc::gather(ctx, data, cols, out2, 1);
  expectClose(get<float>(out2), {2, 1, 1, 2, 4, 3, 3, 4, 6, 5, 5, 6});
  Tensor ids = i64({3}, {10, 20, 30}), one = i64({}, {1}), picked = alloc(DType::I64, {});
  kc::gather(ctx, ids, one, picked, 0);
  EXPECT_EQ(get<int64_t>(picked), (std::vector<int64_t>{20}));
}

TEST_F(CudaKernels, Expand) {
  Tensor in = f32({3, 1}, {1, 2, 3}), out = alloc(DType::F32, {2, 3, 2});
  kc::expand(ctx, in, out);
  expectClose(get<float>(out), {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  Tensor s = i32({}, {7}), o = alloc(DType::I32, {3});
  kc::expand(ctx, s, o);
  EXPECT_EQ(get<int32_t>(o), (std::vector<int32_t>{7, 7, 7}));
}

TEST_F(CudaKernels, Trilu) {
  Tensor in = f32({3, 3}, iota(9, 1.0f)), out = alloc(DType::F32, {3, 3});
  kc::trilu(ctx, in, out, false, 0);
  expectClose(get<float>(out), {1, 0, 0, 4, 5, 0, 7, 8, 9});
  kc::trilu(ctx, in, out, true, 1);
  expectClose(get<float>(out), {0, 2, 3, 0, 0, 6, 0, 0, 0});
  kc::trilu(ctx, in, out, false, -1);
  expectClose(get<float>(out), {0, 0, 0, 4, 0, 0, 7, 8, 0});
  Tensor b = boolean({2, 2, 2}, {1, 1, 1, 1, 1, 1, 1, 1}), bo = alloc(DType::Bool, {2, 2, 2});
  kc::trilu(ctx, b, bo, true, 0);
  EXPECT_EQ(get<uint8_t>(bo), (std::vector<uint8_t>{1, 1, 0, 1, 1, 1, 0, 1}));
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

TEST_F(CudaKernels, Reductions) {
  // x[i][j][k] = 12 i + 4 j + k; over i and k: sum 60 + 32 j, 8 elements.
  Tensor x = f32({2, 3, 4}, iota(24)), out = alloc(DType::F32, {1, 3, 1});
  kc::reduce_sum(ctx, x, out, Dims{0, 2});
  expectClose(get<float>(out), {60, 92, 124});
  kc::reduce_mean(ctx, x, out, Dims{0, 2});
  expectClose(get<float>(out), {7.5f, 11.5f, 15.5f});
  Tensor dropped = alloc(DType::F32, {3});
  kc::reduce_max(ctx, x, dropped, Dims{0, 2});
  expectClose(get<float>(dropped), {15, 19, 23});

  std::vector<int64_t> values(24);
  for (int i = 0; i < 24; ++i)
    values[i] = i;
  Tensor xi = i64({2, 3, 4}, values), oi = alloc(DType::I64, {3});
  kc::reduce_sum(ctx, xi, oi, Dims{0, 2});
  EXPECT_EQ(get<int64_t>(oi), (std::vector<int64_t>{60, 92, 124}));
  kc::reduce_mean(ctx, xi, oi, Dims{0, 2});
  EXPECT_EQ(get<int64_t>(oi), (std::vector<int64_t>{7, 11, 15})); // truncated

  Tensor negative = f32({2, 2}, {-5, -3, -8, -9}), rowMax = alloc(DType::F32, {2});
  kc::reduce_max(ctx, negative, rowMax, Dims{1});
  expectClose(get<float>(rowMax), {-3, -8});
}

TEST_F(CudaKernels, ProductsAndTopK) {
  Tensor x = f32({2, 3}, {1.5f, -2, 4, 0, 3, -1}), rows = alloc(DType::F32, {2});
  kc::reduce_prod(ctx, x, rows, Dims{1});
  expectClose(get<float>(rows), {-12, 0});
  Tensor wrapped = i32({3}, {65536, 65536, 3}), product = alloc(DType::I32, {});
  kc::reduce_prod(ctx, wrapped, product, Dims{0}); // 2^32 * 3 wraps to 0
  EXPECT_EQ(get<int32_t>(product), (std::vector<int32_t>{0}));

  // Ties by index, NaN above every number, along axis 1 of 2 x 5.
  Tensor t = f32({2, 5}, {3, 1, 3, kNaN, 2, -1, -1, 5, 0, 5});
  Tensor values = alloc(DType::F32, {2, 3}), indices = alloc(DType::I64, {2, 3});
  kc::top_k(ctx, t, values, indices, 1, true);
  EXPECT_EQ(get<int64_t>(indices), (std::vector<int64_t>{3, 0, 2, 2, 4, 3}));
  expectClose(get<float>(values), {kNaN, 3, 3, 5, 5, 0});
  kc::top_k(ctx, t, values, indices, 1, false);
  EXPECT_EQ(get<int64_t>(indices), (std::vector<int64_t>{1, 4, 0, 0, 1, 3}));
  expectClose(get<float>(values), {1, 2, 3, -1, -1, 0});
  Tensor columns = i64({3, 2}, {4, 9, 7, 1, 4, 5});
  Tensor top = alloc(DType::I64, {2, 2}), at = alloc(DType::I64, {2, 2});
  kc::top_k(ctx, columns, top, at, 0, true);
  EXPECT_EQ(get<int64_t>(top), (std::vector<int64_t>{7, 9, 4, 5}));
  EXPECT_EQ(get<int64_t>(at), (std::vector<int64_t>{1, 0, 0, 2}));
}

TEST_F(CudaKernels, ReductionShapes) {
  // Many outputs of three elements each (one thread per output).
  const int64_t rows = 2048;
  Tensor x = f32({rows, 3}, iota(rows * 3)), out = alloc(DType::F32, {rows});
  kc::reduce_sum(ctx, x, out, Dims{1});
  std::vector<float> want(rows);
  for (int64_t i = 0; i < rows; ++i)
    want[i] = static_cast<float>(9 * i + 3);
  expectClose(get<float>(out), want);
  // One output of many elements (one block).
  Tensor all = f32({1000}, iota(1000)), total = alloc(DType::F32, {});
  kc::reduce_sum(ctx, all, total, Dims{0});
  expectClose(get<float>(total), {499500});
  kc::reduce_max(ctx, all, total, Dims{0});
  expectClose(get<float>(total), {999});
  Tensor i32s = i32({2, 2}, {1, 2, 3, 4}), o32 = alloc(DType::I32, {2});
  kc::reduce_sum(ctx, i32s, o32, Dims{0});
  EXPECT_EQ(get<int32_t>(o32), (std::vector<int32_t>{4, 6}));
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

/// Visits every product a direct 2-D convolution (N x C x H x W) adds:
/// f(x index, w index, y index), each output element's in a fixed order.
template <typename F>
void forEachConvTerm(int64_t n, int64_t c, int64_t h, int64_t wd, int64_t m, int64_t kh, int64_t kw,
                     int64_t oh, int64_t ow, int64_t stride, int64_t pad, int64_t dilation,
                     int64_t group, F &&f) {
  int64_t cg = c / group, mg = m / group;
  for (int64_t img = 0; img < n; ++img)
    for (int64_t map = 0; map < m; ++map)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          int64_t g = map / mg;
          for (int64_t ch = 0; ch < cg; ++ch)
            for (int64_t p = 0; p < kh; ++p)
              for (int64_t q = 0; q < kw; ++q) {
                int64_t r = i * stride - pad + p * dilation, t = j * stride - pad + q * dilation;
                if (r < 0 || r >= h || t < 0 || t >= wd)
                  continue;
                f(((img * c + g * cg + ch) * h + r) * wd + t, ((map * cg + ch) * kh + p) * kw + q,
                  ((img * m + map) * oh + i) * ow + j);
              }
        }
}

/// Reference 2-D convolution (N x C x H x W).
std::vector<float> convRef(const std::vector<float> &x, const std::vector<float> &w,
                           const std::vector<float> *b, int64_t n, int64_t c, int64_t h, int64_t wd,
                           int64_t m, int64_t kh, int64_t kw, int64_t oh, int64_t ow,
                           int64_t stride, int64_t pad, int64_t dilation, int64_t group) {
  std::vector<double> sums(static_cast<std::size_t>(n * m * oh * ow));
  for (std::size_t yi = 0; yi < sums.size(); ++yi)
    sums[yi] = b ? (*b)[yi / static_cast<std::size_t>(oh * ow) % static_cast<std::size_t>(m)] : 0.0;
  forEachConvTerm(
      n, c, h, wd, m, kh, kw, oh, ow, stride, pad, dilation, group,
      [&](int64_t xi, int64_t wi, int64_t yi) { sums[yi] += static_cast<double>(x[xi]) * w[wi]; });
  return std::vector<float>(sums.begin(), sums.end());
}

TEST_F(CudaKernels, ConvPadded) {
  Tensor x = f32({1, 1, 3, 3}, iota(9, 1.0f)), w = f32({1, 1, 3, 3}, std::vector<float>(9, 1.0f));
  Tensor y = alloc(DType::F32, {1, 1, 3, 3});
  kc::conv(ctx, x, w, nullptr, y, Dims{1, 1}, Dims{1, 1, 1, 1}, Dims{1, 1}, 1, Activation::None,
           false);
  expectClose(get<float>(y), {12, 21, 16, 27, 45, 33, 24, 39, 28});
}

TEST_F(CudaKernels, ConvPointwiseWithBias) {
  std::vector<float> xs = iota(2 * 2 * 2 * 2, -1.0f, 0.25f), ws = {1, 2, -1, 0.5f, 0, 3};
  std::vector<float> bs = {0.5f, -1, 2};
  Tensor x = f32({2, 2, 2, 2}, xs), w = f32({3, 2, 1, 1}, ws), b = f32({3}, bs);
  Tensor y = alloc(DType::F32, {2, 3, 2, 2});
  kc::conv(ctx, x, w, &b, y, Dims{}, Dims{}, Dims{}, 1, Activation::None, false);
  expectClose(get<float>(y), convRef(xs, ws, &bs, 2, 2, 2, 2, 3, 1, 1, 2, 2, 1, 0, 1, 1));
}

TEST_F(CudaKernels, ConvStridedDilatedGrouped) {
  // N=2, C=4, 7x7, M=6, group 2, 3x3 kernel, stride 2, pad 1, dilation 2:
  // out = (7 + 2 - 2 * 2 - 1) / 2 + 1 = 3.
  std::vector<float> xs = iota(2 * 4 * 7 * 7, -2.0f, 0.01f);
  std::vector<float> ws = iota(6 * 2 * 3 * 3, 1.0f, -0.02f);
  std::vector<float> bs = {1, 2, 3, 4, 5, 6};
  Tensor x = f32({2, 4, 7, 7}, xs), w = f32({6, 2, 3, 3}, ws), b = f32({6}, bs);
  Tensor y = alloc(DType::F32, {2, 6, 3, 3});
  kc::conv(ctx, x, w, &b, y, Dims{2, 2}, Dims{1, 1, 1, 1}, Dims{2, 2}, 2, Activation::None, false);
  expectClose(get<float>(y), convRef(xs, ws, &bs, 2, 4, 7, 7, 6, 3, 3, 3, 3, 2, 1, 2, 2), 1e-4f);
  // Depthwise: group = channels = maps.
  std::vector<float> wd = iota(4 * 1 * 3 * 3, 0.5f, 0.1f);
  Tensor wDepth = f32({4, 1, 3, 3}, wd), yd = alloc(DType::F32, {2, 4, 3, 3});
  kc::conv(ctx, x, wDepth, nullptr, yd, Dims{2, 2}, Dims{1, 1, 1, 1}, Dims{2, 2}, 4,
           Activation::None, false);
  expectClose(get<float>(yd), convRef(xs, wd, nullptr, 2, 4, 7, 7, 4, 3, 3, 3, 3, 2, 1, 2, 4),
              1e-4f);
}

// bf16 factors (--precision bf16): the columns unfolded in bf16 and cuBLAS
// summing in f32. Values with few significant bits, exact in bf16, so the
// forward matches the f32 reference and each adjoint the f32 kernel's on
// the same values; strided, dilated, grouped and padded.
TEST_F(CudaKernels, BFloat16Convolutions) {
  auto exact = [](int64_t n, int seed) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      v[i] = static_cast<float>((i * 7 + seed) % 17 - 8) * 0.25f;
    return v;
  };
  auto narrow = [&](const Tensor &wide) {
    Tensor t = alloc(DType::BF16, wide.shape);
    kc::cast(ctx, wide, t);
    return t;
  };
  std::vector<float> xs = exact(2 * 4 * 7 * 7, 1), ws = exact(6 * 2 * 3 * 3, 2),
                     gs = exact(2 * 6 * 3 * 3, 3);
  Tensor x = f32({2, 4, 7, 7}, xs), w = f32({6, 2, 3, 3}, ws), g = f32({2, 6, 3, 3}, gs);
  Tensor xb = narrow(x), wb = narrow(w), gb = narrow(g);
  const Dims strides{2, 2}, pads{1, 1, 1, 1}, dilations{2, 2};
  Tensor y = alloc(DType::F32, {2, 6, 3, 3});
  kc::conv(ctx, xb, wb, nullptr, y, strides, pads, dilations, 2, Activation::None, false);
  expectClose(get<float>(y), convRef(xs, ws, nullptr, 2, 4, 7, 7, 6, 3, 3, 3, 3, 2, 1, 2, 2),
              1e-5f);
  Tensor dx = alloc(DType::F32, {2, 4, 7, 7}), dxWide = alloc(DType::F32, {2, 4, 7, 7});
  kc::conv_grad_input(ctx, gb, wb, dx, strides, pads, dilations, 2);
  kc::conv_grad_input(ctx, g, w, dxWide, strides, pads, dilations, 2);
  expectClose(get<float>(dx), get<float>(dxWide), 1e-5f);
  Tensor dw = alloc(DType::F32, {6, 2, 3, 3}), dwWide = alloc(DType::F32, {6, 2, 3, 3});
  kc::conv_grad_weight(ctx, gb, xb, dw, strides, pads, dilations, 2);
  kc::conv_grad_weight(ctx, g, x, dwWide, strides, pads, dilations, 2);
  expectClose(get<float>(dw), get<float>(dwWide), 1e-5f);
}

TEST_F(CudaKernels, Conv1d) {
  // x [1,1,5] = 1..5, w [1,1,2] = {1,-1}, stride 1, no pad: x[i] - x[i+1].
  Tensor x = f32({1, 1, 5}, iota(5, 1.0f)), w = f32({1, 1, 2}, {1, -1});
  Tensor y = alloc(DType::F32, {1, 1, 4});
  kc::conv(ctx, x, w, nullptr, y, Dims{1}, Dims{0, 0}, Dims{1}, 1, Activation::None, false);
  expectClose(get<float>(y), {-1, -1, -1, -1});
}

TEST_F(CudaKernels, MaxPool) {
  Tensor x = f32({1, 1, 4, 4}, iota(16, 1.0f)), y = alloc(DType::F32, {1, 1, 2, 2});
  kc::max_pool(ctx, x, y, Dims{2, 2}, Dims{2, 2}, Dims{0, 0, 0, 0}, Dims{1, 1});
  expectClose(get<float>(y), {6, 8, 14, 16});
  // 3x3 windows, stride 1, pad 1: padding never wins.
  Tensor x3 = f32({1, 1, 3, 3}, iota(9, 1.0f)), y3 = alloc(DType::F32, {1, 1, 3, 3});
  kc::max_pool(ctx, x3, y3, Dims{3, 3}, Dims{1, 1}, Dims{1, 1, 1, 1}, Dims{});
  expectClose(get<float>(y3), {5, 6, 6, 8, 9, 9, 8, 9, 9});
  // Ceil mode: a 2x2 output from 3x3 with 2x2 windows, stride 2.
  Tensor yc = alloc(DType::F32, {1, 1, 2, 2});
  kc::max_pool(ctx, x3, yc, Dims{2, 2}, Dims{2, 2}, Dims{}, Dims{});
  expectClose(get<float>(yc), {5, 6, 8, 9});
}

TEST_F(CudaKernels, AveragePool) {
  Tensor x = f32({1, 1, 4, 4}, iota(16, 1.0f)), y = alloc(DType::F32, {1, 1, 2, 2});
  kc::average_pool(ctx, x, y, Dims{2, 2}, Dims{2, 2}, Dims{}, Dims{}, false);
  expectClose(get<float>(y), {3.5f, 5.5f, 11.5f, 13.5f});
  Tensor x3 = f32({1, 1, 3, 3}, iota(9, 1.0f)), y3 = alloc(DType::F32, {1, 1, 3, 3});
  kc::average_pool(ctx, x3, y3, Dims{3, 3}, Dims{1, 1}, Dims{1, 1, 1, 1}, Dims{}, false);
  expectClose(get<float>(y3), {12.0f / 4, 21.0f / 6, 16.0f / 4, 27.0f / 6, 5, 33.0f / 6,
                               24.0f / 4, 39.0f / 6, 28.0f / 4});
  kc::average_pool(ctx, x3, y3, Dims{3, 3}, Dims{1, 1}, Dims{1, 1, 1, 1}, Dims{}, true);
  expectClose(get<float>(y3), {12.0f / 9, 21.0f / 9, 16.0f / 9, 27.0f / 9, 5, 33.0f / 9,
                               24.0f / 9, 39.0f / 9, 28.0f / 9});
  // Ceil mode: clipped windows average what they cover, with or without
  // count_include_pad (no pads: nothing beyond the input counts).
  Tensor yc = alloc(DType::F32, {1, 1, 2, 2});
  kc::average_pool(ctx, x3, yc, Dims{2, 2}, Dims{2, 2}, Dims{}, Dims{}, false);
  expectClose(get<float>(yc), {3, 4.5f, 7.5f, 9});
  kc::average_pool(ctx, x3, yc, Dims{2, 2}, Dims{2, 2}, Dims{}, Dims{}, true);
  expectClose(get<float>(yc), {3, 4.5f, 7.5f, 9});
}

/// The adjoints of convRef: dx += dy * w and dw += dy * x for every product
/// convRef adds.
void convGradRef(const std::vector<float> &x, const std::vector<float> &w,
                 const std::vector<float> &dy, std::vector<float> &dx, std::vector<float> &dw,
                 int64_t n, int64_t c, int64_t h, int64_t wd, int64_t m, int64_t kh, int64_t kw,
                 int64_t oh, int64_t ow, int64_t stride, int64_t pad, int64_t dilation,
                 int64_t group) {
  std::vector<double> gx(x.size()), gw(w.size());
  forEachConvTerm(n, c, h, wd, m, kh, kw, oh, ow, stride, pad, dilation, group,
                  [&](int64_t xi, int64_t wi, int64_t yi) {
                    double g = dy[yi];
                    gx[xi] += g * w[wi];
                    gw[wi] += g * x[xi];
                  });
  dx.assign(gx.begin(), gx.end());
  dw.assign(gw.begin(), gw.end());
}

TEST_F(CudaKernels, ConvGradHandWorked1d) {
  // x = [1, 2, 3, 4], w = [1, 10], pads 1, stride 2: the windows read
  // (pad, x0), (x1, x2), (x3, pad). dy = [1, 2, 3]:
  // dx = [10 dy0, dy1, 10 dy1, dy2], dw = [dy1 x1 + dy2 x3, dy0 x0 + dy1 x2].
  Tensor x = f32({1, 1, 4}, {1, 2, 3, 4}), w = f32({1, 1, 2}, {1, 10});
  Tensor dy = f32({1, 1, 3}, {1, 2, 3});
  Tensor dx = alloc(DType::F32, {1, 1, 4}), dw = alloc(DType::F32, {1, 1, 2});
  kc::conv_grad_input(ctx, dy, w, dx, Dims{2}, Dims{1, 1}, Dims{1}, 1);
  kc::conv_grad_weight(ctx, dy, x, dw, Dims{2}, Dims{1, 1}, Dims{1}, 1);
  expectClose(get<float>(dx), {10, 2, 20, 3});
  expectClose(get<float>(dw), {16, 7});
}

TEST_F(CudaKernels, ConvGradAgainstLoops) {
  struct Case {
    int64_t n, c, h, w, m, kh, kw, stride, pad, dilation, group;
  };
  // Padded; strided, dilated and grouped (the last input row unread);
  // depthwise; pointwise with several images and groups.
  const Case cases[] = {{1, 1, 3, 3, 1, 3, 3, 1, 1, 1, 1},
                        {2, 4, 7, 7, 6, 3, 3, 2, 1, 2, 2},
                        {2, 4, 6, 5, 4, 3, 3, 2, 1, 1, 4},
                        {3, 4, 2, 3, 6, 1, 1, 1, 0, 1, 2}};
  for (const Case &k : cases) {
    int64_t oh = (k.h + 2 * k.pad - k.dilation * (k.kh - 1) - 1) / k.stride + 1;
    int64_t ow = (k.w + 2 * k.pad - k.dilation * (k.kw - 1) - 1) / k.stride + 1;
    std::vector<float> xs = iota(k.n * k.c * k.h * k.w, -1.0f, 0.013f);
    std::vector<float> ws = iota(k.m * (k.c / k.group) * k.kh * k.kw, 0.7f, -0.031f);
    std::vector<float> gs = iota(k.n * k.m * oh * ow, 0.5f, -0.017f);
    std::vector<float> ex, ew;
    convGradRef(xs, ws, gs, ex, ew, k.n, k.c, k.h, k.w, k.m, k.kh, k.kw, oh, ow, k.stride, k.pad,
                k.dilation, k.group);
    Tensor x = f32({k.n, k.c, k.h, k.w}, xs), w = f32({k.m, k.c / k.group, k.kh, k.kw}, ws);
    Tensor dy = f32({k.n, k.m, oh, ow}, gs);
    Tensor dx = alloc(DType::F32, x.shape), dw = alloc(DType::F32, w.shape);
    Dims strides{k.stride, k.stride}, pads{k.pad, k.pad, k.pad, k.pad};
    Dims dilations{k.dilation, k.dilation};
    kc::conv_grad_input(ctx, dy, w, dx, strides, pads, dilations, k.group);
    kc::conv_grad_weight(ctx, dy, x, dw, strides, pads, dilations, k.group);
    expectClose(get<float>(dx), ex, 1e-4f);
    expectClose(get<float>(dw), ew, 1e-4f);
  }
}

TEST_F(CudaKernels, MaxPoolGrad) {
  // Windows of 2, stride 1, over [1, 3, 3, 2]: maxima at 1, 1 (a tie: the
  // first) and 2.
  Tensor x = f32({1, 1, 4}, {1, 3, 3, 2}), dy = f32({1, 1, 3}, {1, 10, 100});
  Tensor dx = alloc(DType::F32, {1, 1, 4});
  kc::max_pool_grad(ctx, dy, x, dx, Dims{2}, Dims{1}, Dims{}, Dims{});
  expectClose(get<float>(dx), {0, 11, 100, 0});
  // x = [[1, 5, 2], [5, 0, 5], [3, 5, 4]], dy = [1, 2, 3, 4].
  Tensor x2 = f32({1, 1, 3, 3}, {1, 5, 2, 5, 0, 5, 3, 5, 4}), dy2 = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor dx2 = alloc(DType::F32, {1, 1, 3, 3});
  // Kernel 2, stride 2, ceil mode: windows {1, 5, 5, 0} -> (0, 1), {2, 5} ->
  // (1, 2), {3, 5} -> (2, 1), {4} -> (2, 2).
  kc::max_pool_grad(ctx, dy2, x2, dx2, Dims{2, 2}, Dims{2, 2}, Dims{}, Dims{});
  expectClose(get<float>(dx2), {0, 1, 0, 0, 0, 2, 0, 3, 4});
  // Kernel 3, stride 2, pads 1 (overlapping): {1, 5, 5, 0} -> (0, 1),
  // {5, 2, 0, 5} -> (0, 1), {5, 0, 3, 5} -> (1, 0), {0, 5, 5, 4} -> (1, 2).
  kc::max_pool_grad(ctx, dy2, x2, dx2, Dims{3, 3}, Dims{2, 2}, Dims{1, 1, 1, 1}, Dims{});
  expectClose(get<float>(dx2), {0, 3, 0, 3, 0, 4, 0, 0, 0});
}

TEST_F(CudaKernels, AveragePoolGrad) {
  // ONNX averagepool_2d_ceil's windows over 4 x 4 (kernel 3, strides 2, ceil
  // mode) hold 9, 6, 6 and 4 elements; dy = [9, 6, 12, 8] sends 1, 1, 2, 2
  // to each of their elements.
  Tensor dy = f32({1, 1, 2, 2}, {9, 6, 12, 8}), dx = alloc(DType::F32, {1, 1, 4, 4});
  for (bool include : {false, true}) {
    kc::average_pool_grad(ctx, dy, dx, Dims{3, 3}, Dims{2, 2}, Dims{}, Dims{}, include);
    expectClose(get<float>(dx), {1, 1, 2, 1, 1, 1, 2, 1, 3, 3, 6, 3, 2, 2, 4, 2});
  }
  // 3 x 3 windows, stride 1, pads 1 over 3 x 3, dy all ones: 1/9 per window
  // holding an element with count_include_pad; without, corner windows divide
  // by 4, edge ones by 6: 25/36 at a corner, 10/9 at an edge, 16/9 in the centre.
  Tensor ones = f32({1, 1, 3, 3}, std::vector<float>(9, 1.0f));
  Tensor d3 = alloc(DType::F32, {1, 1, 3, 3});
  kc::average_pool_grad(ctx, ones, d3, Dims{3, 3}, Dims{1, 1}, Dims{1, 1, 1, 1}, Dims{}, true);
  expectClose(get<float>(d3), {4 / 9.0f, 6 / 9.0f, 4 / 9.0f, 6 / 9.0f, 1, 6 / 9.0f, 4 / 9.0f,
                               6 / 9.0f, 4 / 9.0f});
  kc::average_pool_grad(ctx, ones, d3, Dims{3, 3}, Dims{1, 1}, Dims{1, 1, 1, 1}, Dims{}, false);
  float c = 25 / 36.0f, e = 10 / 9.0f, m = 16 / 9.0f;
  expectClose(get<float>(d3), {c, e, c, e, m, e, c, e, c});
  // 1-D, 6 elements, kernel 3, stride 2, pads 1, ceil mode: the last window
  // (5, 6, 7) holds element 5 and, with count_include_pad, the end pad 6:
  // divisors 3, 3, 3, 2 (2, 3, 3, 1 without). dy = [6, 6, 6, 6].
  Tensor dy1 = f32({1, 1, 4}, {6, 6, 6, 6}), dx1 = alloc(DType::F32, {1, 1, 6});
  kc::average_pool_grad(ctx, dy1, dx1, Dims{3}, Dims{2}, Dims{1, 1}, Dims{}, true);
  expectClose(get<float>(dx1), {2, 4, 2, 4, 2, 5});
  kc::average_pool_grad(ctx, dy1, dx1, Dims{3}, Dims{2}, Dims{1, 1}, Dims{}, false);
  expectClose(get<float>(dx1), {3, 5, 2, 4, 2, 8});
}

TEST_F(CudaKernels, GlobalAveragePool) {
  Tensor x = f32({1, 2, 3}, {1, 2, 3, 4, 5, 6}), y = alloc(DType::F32, {1, 2, 1});
  kc::global_average_pool(ctx, x, y);
  expectClose(get<float>(y), {2, 5});
  Tensor x4 = f32({2, 1, 2, 2}, {1, 2, 3, 4, -1, -2, -3, -4}), y4 = alloc(DType::F32, {2, 1, 1, 1});
  kc::global_average_pool(ctx, x4, y4);
  expectClose(get<float>(y4), {2.5f, -2.5f});
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

TEST_F(CudaKernels, SoftmaxCrossEntropy) {
  // Row 0 {1,2,3} label 2, row 1 {1,1,1} label 0.
  Tensor scores = f32({2, 3}, {1, 2, 3, 1, 1, 1}), labels = i64({2}, {2, 0});
  Tensor logProb = alloc(DType::F32, {2, 3}), loss = alloc(DType::F32, {});
  double l0 = -(3 - (3 + std::log(std::exp(-2.0) + std::exp(-1.0) + 1.0)));
  double l1 = std::log(3.0);
  kc::softmax_cross_entropy_loss(ctx, scores, labels, nullptr, loss, logProb, Reduction::Mean,
                                 false, 0);
  expectClose(get<float>(loss), {static_cast<float>((l0 + l1) / 2)});
  expectClose(get<float>(logProb), softmaxRows({1, 2, 3, 1, 1, 1}, 2, 3, true));
  kc::softmax_cross_entropy_loss(ctx, scores, labels, nullptr, loss, logProb, Reduction::Sum,
                                 false, 0);
  expectClose(get<float>(loss), {static_cast<float>(l0 + l1)});
  Tensor perRow = alloc(DType::F32, {2});
  kc::softmax_cross_entropy_loss(ctx, scores, labels, nullptr, perRow, logProb, Reduction::None,
                                 false, 0);
  expectClose(get<float>(perRow), {static_cast<float>(l0), static_cast<float>(l1)});

  // Weights: the mean divides by the weights of the counted labels (3 + 1).
  Tensor weights = f32({3}, {1, 2, 3});
  kc::softmax_cross_entropy_loss(ctx, scores, labels, &weights, loss, logProb, Reduction::Mean,
                                 false, 0);
  expectClose(get<float>(loss), {static_cast<float>((3 * l0 + l1) / 4)});
  // Ignoring label 2 leaves row 1 alone.
  kc::softmax_cross_entropy_loss(ctx, scores, labels, &weights, loss, logProb, Reduction::Mean,
                                 true, 2);
  expectClose(get<float>(loss), {static_cast<float>(l1)});
  kc::softmax_cross_entropy_loss(ctx, scores, labels, nullptr, perRow, logProb, Reduction::None,
                                 true, 2);
  expectClose(get<float>(perRow), {0, static_cast<float>(l1)});
}

TEST_F(CudaKernels, SoftmaxCrossEntropySpatial) {
  // N=1, C=2, D=2: position 0 has scores {0, 2} and label 1, position 1
  // scores {1, 0} and label 0 (i32 labels).
  Tensor scores = f32({1, 2, 2}, {0, 1, 2, 0}), labels = i32({1, 2}, {1, 0});
  Tensor logProb = alloc(DType::F32, {1, 2, 2}), loss = alloc(DType::F32, {1, 2});
  kc::softmax_cross_entropy_loss(ctx, scores, labels, nullptr, loss, logProb, Reduction::None,
                                 false, 0);
  float p0 = static_cast<float>(std::log(1 + std::exp(-2.0)));
  float p1 = static_cast<float>(std::log(1 + std::exp(-1.0)));
  expectClose(get<float>(loss), {p0, p1});
  expectClose(get<float>(logProb), {-2 - p0, -p1, -p0, -1 - p1});
}

// The scores' gradient against PyTorch's autograd of cross_entropy
// (runtime/cpu/KernelsTestReference.py cross_entropy_grad, as the CPU test).
TEST_F(CudaKernels, SoftmaxCrossEntropyGrad) {
  Tensor scores = f32({3, 5}, {0, 1.92711627f, 1.031003f, -1.37553203f, -1.76690948f, 0.430239975f,
                               1.99708664f, 0.63819778f, -1.65565252f, -1.52396739f, 0.840334117f,
                               1.97354412f, 0.215508431f, -1.85824776f, -1.20966744f});
  Tensor labels = i64({3}, {1, 4, 2}), labels32 = i32({3}, {1, 4, 2});
  Tensor logProb = alloc(DType::F32, {3, 5}), loss = alloc(DType::F32, {});
  kc::softmax_cross_entropy_loss(ctx, scores, labels, nullptr, loss, logProb, Reduction::Sum, false,
                                 0);
  Tensor grad = alloc(DType::F32, {3, 5});
  kc::softmax_cross_entropy_grad(ctx, logProb, labels, f32({}, {1.5f}), grad, Reduction::Sum, true,
                                 2);
  expectClose(get<float>(grad),
              {0.135170286f, -0.57142455f, 0.379000817f, 0.0341582224f, 0.0230952249f, 0.205802272f,
               0.986104694f, 0.253375776f, 0.0255598654f, -1.47084261f, 0, 0, 0, 0, 0});
  kc::softmax_cross_entropy_grad(ctx, logProb, labels32, f32({}, {0.75f}), grad, Reduction::Mean,
                                 true, 1);
  expectClose(get<float>(grad), {0, 0, 0, 0, 0, 0.0514505679f, 0.246526174f, 0.0633439439f,
                                 0.00638996635f, -0.367710652f, 0.0775273952f, 0.240769818f,
                                 -0.333495341f, 0.0052176624f, 0.00998046616f});
  kc::softmax_cross_entropy_grad(ctx, logProb, labels, f32({3}, {0.5f, -1, 2}), grad,
                                 Reduction::None, false, 0);
  expectClose(get<float>(grad),
              {0.045056762f, -0.19047485f, 0.126333606f, 0.0113860741f, 0.0076984083f,
               -0.137201514f, -0.65740313f, -0.168917184f, -0.0170399103f, 0.980561738f,
               0.413479441f, 1.28410569f, -1.77864182f, 0.0278275328f, 0.0532291529f});
}

TEST_F(CudaKernels, NegativeLogLikelihood) {
  Tensor input = f32({2, 3}, {-1, -2, -3, -0.5f, -1.5f, -2.5f}), target = i64({2}, {1, 2});
  Tensor loss = alloc(DType::F32, {}), perRow = alloc(DType::F32, {2});
  kc::negative_log_likelihood_loss(ctx, input, target, nullptr, perRow, Reduction::None, false,
                                   0);
  expectClose(get<float>(perRow), {2, 2.5f});
  kc::negative_log_likelihood_loss(ctx, input, target, nullptr, loss, Reduction::Mean, false, 0);
  expectClose(get<float>(loss), {2.25f});
  kc::negative_log_likelihood_loss(ctx, input, target, nullptr, loss, Reduction::Sum, false, 0);
  expectClose(get<float>(loss), {4.5f});
  Tensor weight = f32({3}, {1, 2, 3});
  kc::negative_log_likelihood_loss(ctx, input, target, &weight, loss, Reduction::Mean, false, 0);
  expectClose(get<float>(loss), {11.5f / 5});
  kc::negative_log_likelihood_loss(ctx, input, target, nullptr, perRow, Reduction::None, true, 1);
  expectClose(get<float>(perRow), {0, 2.5f});
  kc::negative_log_likelihood_loss(ctx, input, target, &weight, loss, Reduction::Mean, true, 1);
  expectClose(get<float>(loss), {2.5f});
}

//===----------------------------------------------------------------------===//
// The adjoints of gather and slice
//===----------------------------------------------------------------------===//

TEST_F(CudaKernels, GatherGrad) {
  // data 3 x 2, indices {0, 2, -3, 1} along axis 0 (-3 is row 0): row 0
  // receives grad rows 0 and 2; the result starts as NaN (alloc), so the
  // zeroing shows.
  Tensor grad = f32({4, 2}, iota(8, 1.0f)), rows = i64({4}, {0, 2, -3, 1});
  Tensor out = alloc(DType::F32, {3, 2});
  kc::gather_grad(ctx, grad, rows, out, 0);
  expectClose(get<float>(out), {1 + 5, 2 + 6, 7, 8, 3, 4});
  // Axis 1 of a 2 x 3 result, indices {{2, 0}, {2, -1}}, f64 and i32.
  Tensor grad2 = f64({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor cols = i32({2, 2}, {2, 0, 2, -1}), out2 = alloc(DType::F64, {2, 3});
  kc::gather_grad(ctx, grad2, cols, out2, 1);
  EXPECT_EQ(get<double>(out2), (std::vector<double>{2, 0, 1 + 3 + 4, 6, 0, 5 + 7 + 8}));
  // Many threads adding at one index.
  std::vector<int64_t> same(1000, 1);
  Tensor ones = f32({1000}, std::vector<float>(1000, 1.0f)), at = i64({1000}, same);
  Tensor out3 = alloc(DType::F32, {3});
  kc::gather_grad(ctx, ones, at, out3, 0);
  expectClose(get<float>(out3), {0, 1000, 0});
  // Integers (ScatterND of integer data) add exactly, past 2^53.
  const int64_t big = (int64_t{1} << 60) + 1;
  Tensor grad4 = i64({3}, {big, 1, -7}), out4 = alloc(DType::I64, {2});
  kc::gather_grad(ctx, grad4, i64({3}, {1, 1, 0}), out4, 0);
  EXPECT_EQ(get<int64_t>(out4), (std::vector<int64_t>{-7, big + 1}));
}

TEST_F(CudaKernels, SliceGrad) {
  // ONNX Slice example 1 backwards: starts [1, 0], steps [1, 2] of 2 x 4.
  Tensor g = f32({1, 2}, {5, 7}), out = alloc(DType::F32, {2, 4});
  kc::slice_grad(ctx, g, out, Dims{1, 0}, Dims{1, 2});
  expectClose(get<float>(out), {0, 0, 0, 0, 5, 0, 7, 0});
  // Reversed columns.
  Tensor r = f32({2, 4}, iota(8, 1.0f)), rout = alloc(DType::F32, {2, 4});
  kc::slice_grad(ctx, r, rout, Dims{0, 3}, Dims{1, -1});
  expectClose(get<float>(rout), {4, 3, 2, 1, 8, 7, 6, 5});
  // f64, start 4 by step -3 of 5: positions 4 and 1.
  Tensor d = f64({2}, {1.5, 2.5}), dout = alloc(DType::F64, {5});
  kc::slice_grad(ctx, d, dout, Dims{4}, Dims{-3});
  EXPECT_EQ(get<double>(dout), (std::vector<double>{0, 2.5, 0, 0, 1.5}));
}

//===----------------------------------------------------------------------===//
// The broadcast layout every elementwise kernel indexes through (host-side
// index math: no device needed)
//===----------------------------------------------------------------------===//

/// in's offset for out's row-major index i, by numpy's rules spelled out.
int64_t naiveOffset(const Dims &in, const Dims &out, int64_t i) {
  int64_t coord[kMaxRank];
  for (int d = out.size - 1; d >= 0; --d) {
    coord[d] = i % out[d];
    i /= out[d];
  }
  int64_t offset = 0;
  int lead = out.size - in.size;
  for (int d = 0; d < in.size; ++d)
    offset = offset * in[d] + (in[d] == 1 ? 0 : coord[d + lead]);
  return offset;
}

TEST(CudaLayout, BroadcastOffsetsFollowNumpyRules) {
  namespace detail = cleave::rt::cuda::detail;
  Dims out{2, 3, 4, 5};
  std::vector<Dims> inputs = {Dims{2, 3, 4, 5}, Dims{5},       Dims{3, 1, 5}, Dims{},
                              Dims{2, 1, 4, 1}, Dims{1, 3, 1, 1}, Dims{4, 5}, Dims{1, 1, 1, 1}};
  std::vector<int> ranks = {1, 2, 4, 1, 4, 3, 2, 1}; // after merging dims
  for (std::size_t c = 0; c < inputs.size(); ++c) {
    Tensor in{nullptr, DType::F32, inputs[c]};
    Tensor result{nullptr, DType::F32, out};
    const Tensor *list[2] = {&in, &result};
    detail::Layout<2> layout = detail::broadcastLayout<2>("test", result, list);
    EXPECT_EQ(layout.rank, ranks[c]) << "input " << c;
    for (int64_t i = 0; i < out.product(); ++i) {
      int64_t off[2];
      layout.offsets(i, off);
      ASSERT_EQ(off[0], naiveOffset(inputs[c], out, i)) << "input " << c << " index " << i;
      ASSERT_EQ(off[1], i);
    }
  }
}

// Layouts over 2^30 elements or offsets split into parts that index in
// int32_t: consecutive, covering every element once, each element at the
// offsets the whole layout gives it in int64_t.
TEST(CudaLayout, Int32PartsMapEveryElementAsTheWholeLayout) {
  namespace detail = cleave::rt::cuda::detail;
  auto layoutOf = [](std::vector<int64_t> dims, std::vector<int64_t> strides0,
                     std::vector<int64_t> strides1) {
    detail::Layout<2> layout;
    layout.rank = static_cast<int32_t>(dims.size());
    for (std::size_t d = 0; d < dims.size(); ++d) {
      layout.dims[d] = dims[d];
      layout.strides[0][d] = strides0[d];
      layout.strides[1][d] = strides1[d];
    }
    return layout;
  };
  const int64_t big = int64_t(1) << 30;
  // Dense and past 2^31; a row broadcast over rows of 2^30; a transpose
  // whose source offsets pass 2^30 within one row; a negative stride.
  std::vector<detail::Layout<2>> layouts = {layoutOf({2 * big + 5}, {1}, {1}),
                                            layoutOf({3, big}, {big, 1}, {0, 1}),
                                            layoutOf({70000, 20000}, {20000, 1}, {1, 70000}),
                                            layoutOf({5, big / 2}, {big / 2, 1}, {-(big / 2), 1})};
  for (std::size_t c = 0; c < layouts.size(); ++c) {
    const detail::Layout<2> &whole = layouts[c];
    int64_t next = 0, parts = 0;
    detail::forEachInt32Part(
        whole, 0, {}, [&](const detail::Layout<2> &part, int64_t first, const auto &bases) {
          ++parts;
          int64_t n = part.numel();
          ASSERT_EQ(first, next) << "layout " << c;
          ASSERT_LT(n, big);
          ASSERT_LT(part.reach(0), big);
          ASSERT_LT(part.reach(1), big);
          for (int64_t i : {int64_t(0), n / 2, n - 1}) {
            int32_t local[2];
            part.offsets(static_cast<int32_t>(i), local);
            int64_t want[2];
            whole.offsets(first + i, want);
            ASSERT_EQ(bases[0] + local[0], want[0]) << "layout " << c << " element " << first + i;
            ASSERT_EQ(bases[1] + local[1], want[1]) << "layout " << c << " element " << first + i;
          }
          next = first + n;
        });
    EXPECT_EQ(next, whole.numel()) << "layout " << c;
    EXPECT_GT(parts, 1) << "layout " << c;
  }
}

//===----------------------------------------------------------------------===//
// Argument errors (checked on the host before any launch: no device needed)
//===----------------------------------------------------------------------===//

TEST(CudaKernelErrors, UnsupportedElementType) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  kc::Context ctx;
  Tensor ints{nullptr, DType::I64, Dims{4}};
  EXPECT_EXIT(kc::sqrt(ctx, ints, ints), ::testing::ExitedWithCode(3),
              "cleave: error: kernel sqrt: unsupported element type i64");
  Tensor halves{nullptr, DType::F16, Dims{2, 2}};
  EXPECT_EXIT(kc::matmul(ctx, halves, halves, halves, false, false, false),
              ::testing::ExitedWithCode(3),
              "cleave: error: kernel matmul: the result must be f32, not f16");
  Tensor longs{nullptr, DType::I64, Dims{2, 2}};
  EXPECT_EXIT(kc::matmul(ctx, longs, longs, longs, false, false, false),
              ::testing::ExitedWithCode(3),
              "cleave: error: kernel matmul: the factors must be f32, bf16 or f16, not i64");
}

TEST(CudaKernelErrors, GradientAdjoints) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  kc::Context ctx;
  Tensor g{nullptr, DType::F32, Dims{2}}, out{nullptr, DType::F32, Dims{3}};
  EXPECT_EXIT(kc::slice_grad(ctx, g, out, Dims{2}, Dims{1}), ::testing::ExitedWithCode(3),
              "cleave: error: kernel slice_grad: dim 0 writes outside the result");
  Tensor shorts{nullptr, DType::I16, Dims{2}}, shortOut{nullptr, DType::I16, Dims{3}};
  Tensor rows{nullptr, DType::I64, Dims{2}};
  EXPECT_EXIT(kc::gather_grad(ctx, shorts, rows, shortOut, 0), ::testing::ExitedWithCode(3),
              "cleave: error: kernel gather_grad: unsupported element type i16");
}

TEST(CudaKernelErrors, ConvAndPoolAdjoints) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  kc::Context ctx;
  Tensor dy{nullptr, DType::F32, Dims{1, 2, 3, 3}}, w{nullptr, DType::F64, Dims{2, 1, 3, 3}};
  Tensor dx{nullptr, DType::F32, Dims{1, 1, 5, 5}};
  EXPECT_EXIT(kc::conv_grad_input(ctx, dy, w, dx, Dims{}, Dims{}, Dims{}, 1),
              ::testing::ExitedWithCode(3),
              "cleave: error: kernel conv_grad_input: w must be f32 or bf16, not f64");
  // bf16 factors take bf16 on both sides, and give f32.
  Tensor dyNarrow{nullptr, DType::BF16, Dims{1, 2, 3, 3}},
      wWide{nullptr, DType::F32, Dims{2, 1, 3, 3}};
  EXPECT_EXIT(kc::conv_grad_input(ctx, dyNarrow, wWide, dx, Dims{}, Dims{}, Dims{}, 1),
              ::testing::ExitedWithCode(3),
              "cleave: error: kernel conv_grad_input: grad must be f32, not bf16");
  Tensor xNarrow{nullptr, DType::BF16, Dims{1, 1, 5, 5}},
      wNarrow{nullptr, DType::BF16, Dims{2, 1, 3, 3}};
  Tensor yNarrow{nullptr, DType::BF16, Dims{1, 2, 3, 3}};
  EXPECT_EXIT(kc::conv(ctx, xNarrow, wNarrow, nullptr, yNarrow, Dims{}, Dims{}, Dims{}, 1,
                       Activation::None, false),
              ::testing::ExitedWithCode(3), "cleave: error: kernel conv: y must be f32, not bf16");
  Tensor x{nullptr, DType::F32, Dims{1, 3, 5, 5}}, dw{nullptr, DType::F32, Dims{2, 1, 3, 3}};
  EXPECT_EXIT(kc::conv_grad_weight(ctx, dy, x, dw, Dims{}, Dims{}, Dims{}, 1),
              ::testing::ExitedWithCode(3),
              "cleave: error: kernel conv_grad_weight: w is not 2 x 3 x kernel");
  Tensor g{nullptr, DType::F32, Dims{1, 1, 2}}, x1{nullptr, DType::F32, Dims{1, 1, 4}};
  Tensor wrong{nullptr, DType::F32, Dims{1, 1, 5}};
  EXPECT_EXIT(kc::max_pool_grad(ctx, g, x1, wrong, Dims{2}, Dims{2}, Dims{}, Dims{}),
              ::testing::ExitedWithCode(3),
              "cleave: error: kernel max_pool_grad: the result must have x's shape");
  Tensor dg{nullptr, DType::F64, Dims{1, 1, 2}};
  EXPECT_EXIT(kc::average_pool_grad(ctx, dg, x1, Dims{2}, Dims{2}, Dims{}, Dims{}, false),
              ::testing::ExitedWithCode(3),
              "cleave: error: kernel average_pool_grad: y must be f32, not f64");
}

TEST(CudaKernelErrors, BadShapes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  kc::Context ctx;
  Tensor a{nullptr, DType::F32, Dims{2, 3}}, b{nullptr, DType::F32, Dims{4}};
  Tensor out{nullptr, DType::F32, Dims{2, 3}};
  EXPECT_EXIT(kc::add(ctx, a, b, out), ::testing::ExitedWithCode(3),
              "cleave: error: kernel add: .*does not broadcast");
  EXPECT_EXIT(kc::matmul(ctx, a, a, out, false, false, false), ::testing::ExitedWithCode(3),
              "cleave: error: kernel matmul: inner dims 3 and 2 differ");
}

} // namespace
