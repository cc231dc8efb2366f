//===- MedianTime.h - how long a call takes, robustly -------------*- C++ -*-===//
//
// Header only, for the tools that time kernels outside a program (cleave
// plan's products, the benches): the median over rounds of a call's mean
// time, so that one round slowed by another process does not count.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_MEDIANTIME_H
#define CLEAVE_RUNTIME_MEDIANTIME_H

#include <algorithm>
#include <chrono>
#include <vector>

namespace cleave::rt {

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
  std::sort(means.begin(), means.end());
  return means[means.size() / 2];
}

} // namespace cleave::rt

#endif
