//===- LowPrecision.h - binary16 and bfloat16 as bits -----------*- C++ -*-===//
//
// The two 16-bit float types the runtime stores (--precision, the bf16 sums
// of runtime/comm) and their exact conversions from and to float, for code
// that cannot use a compiler's own types: the CPU kernels and the
// communicators (bf16's on the host and, for NCCL's sums, on the device).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_LOWPRECISION_H
#define CLEAVE_RUNTIME_LOWPRECISION_H

#include "runtime/Tensor.h" // CLEAVE_HOST_DEVICE, CLEAVE_ALWAYS_INLINE

#include <cmath>
#include <cstdint>
#include <cstring>

namespace cleave::rt {

// The bf16 conversions are always inlined: a fused chain's loop
// (runtime/cpu/FusedChain.h) is vectorised only without calls in it.

/// IEEE binary16 and bfloat16, stored as their bits.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

CLEAVE_HOST_DEVICE CLEAVE_ALWAYS_INLINE inline uint32_t floatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
CLEAVE_HOST_DEVICE CLEAVE_ALWAYS_INLINE inline float bitsFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

/// Round to nearest even; overflow gives infinity, NaN stays NaN.
inline Half toHalf(float f) {
  uint32_t x = floatBits(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) // infinity or NaN (kept quiet)
    return {static_cast<uint16_t>(sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u))};
  if (x >= 0x477ff000u) // at least 65520: rounds to infinity
    return {static_cast<uint16_t>(sign | 0x7c00u)};
  if (x < 0x38800000u) { // below 2^-14: a subnormal half (or zero); exact scaling
    float scaled = bitsFloat(x) * 16777216.0f; // 2^24, the subnormal unit
    return {static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled)))};
  }
  uint32_t odd = (x >> 13) & 1u;
  x += 0xc8000fffu + odd; // rebias the exponent by -112 and round half to even
  return {static_cast<uint16_t>(sign | (x >> 13))};
}

inline float fromHalf(Half h) {
  uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  uint32_t exponent = (h.bits >> 10) & 0x1fu;
  uint32_t mantissa = h.bits & 0x3ffu;
  if (exponent == 0) {
    float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31)
    return bitsFloat(sign | 0x7f800000u | (mantissa << 13));
  return bitsFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

CLEAVE_HOST_DEVICE CLEAVE_ALWAYS_INLINE inline BFloat16 toBFloat16(float f) {
  const uint32_t x = floatBits(f);
  // Both computed and one chosen, not a branch: a loop of these vectorises.
  const uint32_t quietNaN = (x >> 16) | 0x40u;
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return {static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? quietNaN : rounded)};
}

CLEAVE_HOST_DEVICE CLEAVE_ALWAYS_INLINE inline float fromBFloat16(BFloat16 b) {
  return bitsFloat(static_cast<uint32_t>(b.bits) << 16);
}

} // namespace cleave::rt

#endif
