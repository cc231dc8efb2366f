//===- MedianTime.h - how long a call takes, robustly -------------*- C++ -*-===//
//
// Header only, for the tools that time kernels outside a program (cleave
// plan's products and its reference run, the benches, the collectives'
// timing job): the median over rounds of a call's mean time, so that one
// round slowed by another process does not count.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_MEDIANTIME_H
#define CLEAVE_RUNTIME_MEDIANTIME_H

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

namespace cleave::rt {

/// The median of `values` (not empty; of an even count, the upper of the
/// middle two).
inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

/// The median over `rounds` rounds of the mean seconds of a call of `run`,
/// each round calling it for at least `roundSeconds`.
template <typename Run> double medianSecondsPerCall(Run &&run, int rounds, double roundSeconds) {
  std::vector<double> means;
  for (int round = 0; round < rounds; ++round) {
    auto begin = std::chrono::steady_clock::now();
    int calls = 0;
    double elapsed = 0;
    while (calls == 0 || elapsed < roundSeconds) {
      run();
      ++calls;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    }
    means.push_back(elapsed / calls);
  }
  return median(std::move(means));
}

} // namespace cleave::rt

#endif
