//===- bf16_rate.cpp - products of bf16 factors against f32 ones here ----===//
//
//   build/bin/cleave-bench-bf16-rate [--threads T] [--size N]
//
// Whether this CPU multiplies bf16 faster than f32, which decides how
// `--precision bf16` runs its products and convolutions here
// (runtime/cpu/ProductPrimitives.h: oneDNN's bf16 primitives, or the f32
// ones on the factors widened). Measured in the same run:
//   - one core's rate of the f32 FMA and of the bf16 dot product
//     (VDPBF16PS: 32 multiply-adds an instruction, AVX512_BF16), each on 24
//     independent 512-bit accumulators, in multiply-adds a second;
//   - cleave's matmul kernel on an N x N x N product on T threads: of f32
//     factors, and of bf16 factors as oneDNN's bf16 primitives (where the
//     CPU has bf16 instructions) and widened, in FLOP/s;
// each with its ratio to the f32 rate, and the way bf16PrimitivesByDefault
// chooses here.
//
//===----------------------------------------------------------------------===//

#include "runtime/LowPrecision.h"
#include "runtime/MedianTime.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/ProductPrimitives.h"

#include <immintrin.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace cleave::rt;

namespace {

constexpr int kAccumulators = 24;
constexpr long kRounds = 200'000;

/// Accumulators of distinct values, so that no two chains of
/// multiply-adds are one computation to the compiler.
__attribute__((target("avx512f"))) void start(__m512 (&acc)[kAccumulators]) {
  for (int i = 0; i < kAccumulators; ++i)
    acc[i] = _mm512_set1_ps(static_cast<float>(i));
}

/// The accumulators' sum, returned so that the loops that made them stay.
__attribute__((target("avx512f"))) float sumOf(const __m512 (&acc)[kAccumulators]) {
  float sum = 0;
  for (const __m512 &a : acc)
    sum += _mm512_reduce_add_ps(a);
  return sum;
}

/// kRounds x kAccumulators f32 FMAs (16 multiply-adds each).
__attribute__((target("avx512f"))) float fmaLoop() {
  __m512 acc[kAccumulators];
  start(acc);
  const __m512 x = _mm512_set1_ps(1e-8f);
  for (long r = 0; r < kRounds; ++r)
#pragma GCC unroll 24
    for (__m512 &a : acc)
      a = _mm512_fmadd_ps(x, x, a);
  return sumOf(acc);
}

/// kRounds x kAccumulators bf16 dot products (32 multiply-adds each).
__attribute__((target("avx512f,avx512bf16"))) float dotLoop() {
  __m512 acc[kAccumulators];
  start(acc);
  const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3300); // bf16 2^-25
  for (long r = 0; r < kRounds; ++r)
#pragma GCC unroll 24
    for (__m512 &a : acc)
      a = _mm512_dpbf16_ps(a, x, x);
  return sumOf(acc);
}

/// Multiply-adds a second of `loop`, which makes `perInstruction` a
/// vector instruction, on one core.
double multiplyAddRate(float (*loop)(), int perInstruction) {
  volatile float sink = 0;
  const double seconds = medianSecondsPerCall([&] { sink = sink + loop(); }, 5, 0.05);
  return static_cast<double>(perInstruction) * kAccumulators * kRounds / seconds;
}

/// FLOP/s of the matmul kernel on an n x n x n product of `type` factors.
double matmulRate(int threads, int64_t n, DType type, bool bf16Primitives) {
  cpu::ProductPrimitives products;
  cpu::Context context;
  context.threads = threads;
  context.products = &products;
  context.bf16Primitives = bf16Primitives;
  const auto elements = static_cast<std::size_t>(n * n);
  std::vector<float> a(elements, 0.5f), b(elements, 0.25f), c(elements);
  std::vector<BFloat16> a16(elements, toBFloat16(0.5f)), b16(elements, toBFloat16(0.25f));
  const bool f32 = type == DType::F32;
  Tensor lhs{f32 ? static_cast<void *>(a.data()) : a16.data(), type, Dims{n, n}};
  Tensor rhs{f32 ? static_cast<void *>(b.data()) : b16.data(), type, Dims{n, n}};
  Tensor out{c.data(), DType::F32, Dims{n, n}};
  const double seconds = medianSecondsPerCall(
      [&] { cpu::matmul(context, lhs, rhs, out, false, false, false); }, 5, 0.2);
  return 2.0 * static_cast<double>(n) * n * n / seconds;
}

} // namespace

int main(int argc, char **argv) {
  int threads = 1;
  int64_t n = 1024;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads"))
      threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--size"))
      n = std::atoll(argv[i + 1]);
  }
  if ((argc - 1) % 2 != 0 || threads < 1 || n < 1) {
    std::fprintf(stderr, "usage: cleave-bench-bf16-rate [--threads T] [--size N]\n");
    return 2;
  }
  const bool dot = __builtin_cpu_supports("avx512bf16");
  if (__builtin_cpu_supports("avx512f")) {
    const double fma = multiplyAddRate(fmaLoop, 16);
    std::printf("one core, f32 FMA:       %8.2f G multiply-adds/s\n", fma / 1e9);
    if (dot) {
      const double bf16 = multiplyAddRate(dotLoop, 32);
      std::printf("one core, bf16 dot:      %8.2f G multiply-adds/s  (%.2f of f32)\n", bf16 / 1e9,
                  bf16 / fma);
    }
  }
  const double f32 = matmulRate(threads, n, DType::F32, false);
  std::printf("matmul %lld^3, %d thread(s), f32:         %8.1f GFLOP/s\n",
              static_cast<long long>(n), threads, f32 / 1e9);
  if (cpu::bf16Instructions()) {
    const double primitives = matmulRate(threads, n, DType::BF16, true);
    std::printf("  bf16 as bf16 primitives:            %8.1f GFLOP/s  (%.2f of f32)\n",
                primitives / 1e9, primitives / f32);
  }
  const double widened = matmulRate(threads, n, DType::BF16, false);
  std::printf("  bf16 widened to f32:                %8.1f GFLOP/s  (%.2f of f32)\n", widened / 1e9,
              widened / f32);
  std::printf("bf16 products here by default: %s\n",
              cpu::bf16PrimitivesByDefault() ? "bf16 primitives" : "widened");
  return 0;
}
