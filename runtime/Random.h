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

#include <cstdint>

#ifdef __CUDACC__
#define CLEAVE_HOST_DEVICE __host__ __device__
#else
#define CLEAVE_HOST_DEVICE
#endif

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

/// The random stream of microbatch `microbatch` (0-based) of training step
/// `step` (1-based): never 0.
inline uint64_t trainingStream(int64_t step, int64_t microbatch) {
  return (static_cast<uint64_t>(step) << 32) + static_cast<uint64_t>(microbatch);
}

} // namespace cleave::rt

#endif
