//===- RankOrderSum.h - one element of a bf16 sum in rank order -*- C++ -*-===//
//
// The deterministic sum of bf16 parts (Communicator.h's sumInRankOrder), one
// element, for the host's loop and the device's kernel alike
// (runtime/comm/DeviceSum.cu).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_COMM_RANKORDERSUM_H
#define CLEAVE_RUNTIME_COMM_RANKORDERSUM_H

#include "runtime/LowPrecision.h"

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace cleave::rt::comm {

/// Element i of the sum of `n` bf16 parts of `count` elements laid out one
/// after another, added in f32 in rank order from the first part itself
/// (not from zero: 0 + -0.0 is +0.0): the f32 total (Sum float), or rounded
/// to bf16 once (Sum uint16_t, its bits).
template <typename Sum>
CLEAVE_HOST_DEVICE inline Sum bfloat16PartsSum(const uint16_t *parts, int n, std::size_t count,
                                               std::size_t i) {
  float total = fromBFloat16({parts[i]});
  for (int r = 1; r < n; ++r)
    total = total + fromBFloat16({parts[r * count + i]});
  if constexpr (std::is_same_v<Sum, float>)
    return total;
  else
    return toBFloat16(total).bits;
}

} // namespace cleave::rt::comm

#endif
