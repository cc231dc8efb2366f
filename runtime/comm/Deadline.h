//===- Deadline.h - polling a non-blocking call until a deadline -*- C++ -*-===//

#ifndef CLEAVE_RUNTIME_COMM_DEADLINE_H
#define CLEAVE_RUNTIME_COMM_DEADLINE_H

#include <chrono>
#include <thread>

namespace cleave::rt::comm {

/// A point in time `seconds` from its creation.
class Deadline {
public:
  explicit Deadline(double seconds)
      : end_(std::chrono::steady_clock::now() +
             std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                 std::chrono::duration<double>(seconds))) {}
  bool passed() const { return std::chrono::steady_clock::now() >= end_; }

private:
  std::chrono::steady_clock::time_point end_;
};

/// Calls `done()` until it returns true (then returns true) or `deadline`
/// passes (then false). Polls without sleeping, as blocking MPI and CUDA
/// calls do: MPI progresses a transfer only inside its calls, and a sleeping
/// rank would slow every large one. It yields between polls, so that ranks
/// outnumbering cores still take turns.
template <typename Poll> bool pollUntil(const Deadline &deadline, Poll done) {
  while (!done()) {
    if (deadline.passed())
      return false;
    std::this_thread::yield();
  }
  return true;
}

} // namespace cleave::rt::comm

#endif
