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

// The conversions are always inlined: a loop (a cast's, a fused chain's in
// runtime/cpu/FusedChain.h) is vectorised only without calls in it.

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

/// Round to nearest even; overflow gives infinity, NaN stays NaN (quiet).
/// Each case is computed and one chosen, not branched to: a loop of these
/// vectorises.
CLEAVE_ALWAYS_INLINE inline Half toHalf(float f) {
  const uint32_t x = floatBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t magnitude = x & 0x7fffffffu;
  // Infinity, or a NaN kept quiet; from 65520 up, infinity.
  const uint32_t special = magnitude > 0x7f800000u ? 0x7e00u : 0x7c00u;
  // A normal half: rebias the exponent by -112 and round half to even.
  const uint32_t normal = (magnitude + 0xc8000fffu + ((magnitude >> 13) & 1u)) >> 13;
  // Below 2^-14, a subnormal half (or zero): the value in units of 2^-24,
  // rounded to nearest even by adding 2^23, which leaves the integer in the
  // float's low bits (the value kept below 2^-14 so that it cannot carry).
  const float small = bitsFloat(magnitude < 0x38800000u ? magnitude : 0x38800000u);
  const uint32_t subnormal = floatBits(small * 16777216.0f + 8388608.0f) - 0x4b000000u;
  const uint32_t bits = magnitude >= 0x477ff000u  ? special
                        : magnitude < 0x38800000u ? subnormal
                                                  : normal;
  return {static_cast<uint16_t>(sign | bits)};
}

CLEAVE_ALWAYS_INLINE inline float fromHalf(Half h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t exponent = (h.bits >> 10) & 0x1fu;
  const uint32_t mantissa = h.bits & 0x3ffu;
  // A subnormal half is its mantissa in units of 2^-24, exact in a float.
  const uint32_t subnormal = floatBits(static_cast<float>(mantissa) * (1.0f / 16777216.0f));
  const uint32_t other = (exponent == 31 ? 0x7f800000u : (exponent + 112) << 23) | (mantissa << 13);
  // Chosen by a mask, not `?:`: GCC moves the float product above into the
  // branch a conditional becomes, where it cannot vectorise the loop.
  const uint32_t isSubnormal = 0u - static_cast<uint32_t>(exponent == 0);
  return bitsFloat(sign | (subnormal & isSubnormal) | (other & ~isSubnormal));
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
