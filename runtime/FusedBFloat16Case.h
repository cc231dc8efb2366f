//===- FusedBFloat16Case.h - the fused kernels' bf16 test case -*- C++ -*-===//
//
// One case both backends' kernel tests run: a fused chain with a bf16
// input it widens, a broadcast bf16 scalar, and a bf16 output written in
// place of that input beside an f32 output, as a bf16 gradient
// accumulator's widen, add and round: "add 0 1;mul 3 2>4,4" over
// (slot, grads, scale). The expected values come from the bf16 rule
// written out here on an f32's bits (round to nearest even), not from
// runtime/LowPrecision.h, which the CPU kernels use.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_FUSEDBFLOAT16CASE_H
#define CLEAVE_RUNTIME_FUSEDBFLOAT16CASE_H

#include <cstdint>
#include <cstring>
#include <vector>

namespace cleave::rt::test {

inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

/// A bf16's value: its bits as the high half of an f32's.
inline float widenBFloat16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// `f` rounded to bf16, to nearest even (finite values).
inline uint16_t roundToBFloat16(float f) {
  const uint32_t u = floatBits(f);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

struct FusedBFloat16Case {
  static constexpr const char *kProgram = "add 0 1;mul 3 2>4,4";
  std::vector<uint16_t> slot; // input 0 and output 0 (in place)
  std::vector<float> grads;   // input 1
  uint16_t scale;             // input 2, one element
  std::vector<uint16_t> narrow;
  std::vector<float> wide; // the expected outputs

  /// n elements: past one CPU tile of 256 with n = 1000.
  explicit FusedBFloat16Case(int64_t n) : scale(roundToBFloat16(1.5f)) {
    for (int64_t i = 0; i < n; ++i) {
      slot.push_back(roundToBFloat16(static_cast<float>(i % 37) * 0.3f - 5.0f));
      grads.push_back(-2.0f + 0.00731f * static_cast<float>(i));
      // Each op rounded to f32 on its own, as the kernels compute it.
      volatile float sum = widenBFloat16(slot.back()) + grads.back();
      const float product = sum * widenBFloat16(scale);
      narrow.push_back(roundToBFloat16(product));
      wide.push_back(product);
    }
  }
};

} // namespace cleave::rt::test

#endif
