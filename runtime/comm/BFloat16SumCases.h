//===- BFloat16SumCases.h - sums through bf16 with closed forms -*- C++ -*-===//
//
// Two cases of a sum through bf16 (Communicator::allReduceSumAs,
// reduceScatterSumAs) whose results have closed forms on any number of
// ranks n, for the communicators' tests on the host and on the device.
// (a) Every rank gives 1 + 2^-9, a quarter of bf16's spacing 2^-7 above 1:
// each part is rounded to 1 first, so the sum is n exactly (in f32 it would
// be n (1 + 2^-9)). (b) Rank 0 gives 256, the others 1: the parts are exact
// in bf16, and added in f32 they make 255 + n, rounded once to bf16's
// spacing of 2 there, half to even: 2 nearbyint((255 + n) / 2) (adding
// them in bf16 one by one would stay at 256: 256 + 1 is a tie).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_COMM_BFLOAT16SUMCASES_H
#define CLEAVE_RUNTIME_COMM_BFLOAT16SUMCASES_H

#include <cmath>
#include <cstddef>

namespace cleave::rt::comm::test {

struct BFloat16SumCase {
  /// What rank `rank` gives at element `i`.
  float (*part)(int rank, std::size_t i);
  /// Every element of the sum over `n` ranks.
  float (*expected)(int n);
};

inline const BFloat16SumCase kBFloat16SumCases[] = {
    {[](int, std::size_t) { return 1.0f + std::ldexp(1.0f, -9); },
     [](int n) { return static_cast<float>(n); }},
    {[](int rank, std::size_t) { return rank == 0 ? 256.0f : 1.0f; },
     [](int n) { return 2.0f * std::nearbyint((255.0f + n) / 2.0f); }},
};

} // namespace cleave::rt::comm::test

#endif
