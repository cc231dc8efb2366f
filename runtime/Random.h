//===- Random.h - the dropout generator both backends share -----*- C++ -*-===//
//
// Counter-based: element i's draw depends only on the dropout's key and i,
// so it is the same on either backend, in any thread order. The key mixes
// the op's seed with the random stream of the call (which microbatch of which
// training step runs; 0 outside training), so masks change from step to step
// and microbatch to microbatch and repeat exactly across runs.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_RANDOM_H
#define CLEAVE_RUNTIME_RANDOM_H

#include "runtime/Tensor.h" // Dims, CLEAVE_HOST_DEVICE

#include <cstdint>

namespace cleave::rt {

/// splitmix64's output function (mix64(0) == 0).
CLEAVE_HOST_DEVICE inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// The key of a dropout's masks: mix64(seed ^ mix64(stream)), which is
/// mix64(seed) in stream 0.
inline uint64_t dropoutKey(uint64_t seed, uint64_t stream) { return mix64(seed ^ mix64(stream)); }

/// Element i's draw in [0, 1): the top 53 bits of
/// mix64(key + 0x9e3779b97f4a7c15 * (i + 1)) times 2^-53. A dropout keeps the
/// element when the draw is at least its ratio.
CLEAVE_HOST_DEVICE inline double uniformDraw(uint64_t key, int64_t i) {
  uint64_t z = mix64(key + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1));
  return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
}

/// Where a rank's part of a tensor split along one dim over `parts` ranks
/// lies in the whole tensor, so that a dropout draws for each element what
/// one device draws for it: the part holds `local` of the dim's
/// local x parts indices, each with `inner` elements (the dims after it).
/// parts == 1: the whole tensor.
struct SplitIndex {
  int64_t local = 1, inner = 1, parts = 1;
  /// Element i of the part of rank `coordinate` (its place along the
  /// split) as an index of the whole tensor.
  CLEAVE_HOST_DEVICE int64_t global(int64_t i, int64_t coordinate) const {
    if (parts == 1)
      return i;
    int64_t span = local * inner;
    return (i / span * parts + coordinate) * span + i % span;
  }
};

/// The SplitIndex of a part of shape `shape` split as `split` ({dim, parts},
/// a dropout kernel's attribute; empty: whole); false when it does not fit.
inline bool splitIndexOf(const Dims &shape, const Dims &split, SplitIndex &index) {
  index = SplitIndex{};
  if (split.size == 0)
    return true;
  if (split.size != 2 || split[0] < 0 || split[0] >= shape.size || split[1] < 1)
    return false;
  index.parts = split[1];
  index.local = shape[static_cast<int>(split[0])];
  for (int d = static_cast<int>(split[0]) + 1; d < shape.size; ++d)
    index.inner *= shape[d];
  return true;
}

/// The random stream of microbatch `microbatch` (0-based, its place among
/// the step's global batch: dp rank r's k-th of K is r K + k) of training
/// step `step` (1-based): never 0.
inline uint64_t trainingStream(int64_t step, int64_t microbatch) {
  return (static_cast<uint64_t>(step) << 32) + static_cast<uint64_t>(microbatch);
}

} // namespace cleave::rt

#endif
