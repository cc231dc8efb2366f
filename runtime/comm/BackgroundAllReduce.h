//===- BackgroundAllReduce.h - all-reduces on a thread of their own -*- C++ -*-===//
//
// A data-parallel step's gradients are summed over dp while the backward
// still computes: the program starts a bucket's all-reduce as soon as the
// last microbatch's backward has finished its gradients (all_reduce_start,
// placed by passes/OverlapGradients.cpp), and the optimizer waits for them
// all (all_reduce_wait). start() queues a sum; the thread "cleave-comm" runs
// the queued sums one after another on a communicator of its own (a
// duplicate of the axis's, so its calls never meet the main thread's); and
// waitAll() blocks until every one is done.
//
// Every rank runs the same program, so every rank queues the same sums in
// the same order and the thread's calls match across ranks. Each sum is the
// communicator's own (in rank order with --deterministic), so the results
// are those of the same calls made in place on the main thread, bit for bit.
//
// The thread is owned by the object: started by the constructor, joined by
// the destructor; it blocks every signal (the main thread handles them). A
// call that fails or passes its deadline ends the job from the thread, with
// the same one-line error as on the main thread.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_COMM_BACKGROUNDALLREDUCE_H
#define CLEAVE_RUNTIME_COMM_BACKGROUNDALLREDUCE_H

#include "runtime/comm/Communicator.h"

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace cleave::rt::comm {

class BackgroundAllReduce {
public:
  /// One sum as the thread ran it.
  struct Finished {
    int64_t step;
    std::string what;
    /// The buffer summed, and what this rank sent of it by the ring.
    uint64_t bufferBytes, bytesSent;
    std::chrono::steady_clock::time_point begin, end;
  };

  /// Sums over `group` (a duplicate made for this object alone), which
  /// carries the sums of mesh axis `meshAxis`.
  BackgroundAllReduce(std::unique_ptr<Communicator> group, int64_t meshAxis);
  ~BackgroundAllReduce();
  BackgroundAllReduce(const BackgroundAllReduce &) = delete;
  BackgroundAllReduce &operator=(const BackgroundAllReduce &) = delete;

  int64_t meshAxis() const { return meshAxis_; }
  /// The thread's communicator: its axis, size and bytes sent. Read its
  /// counts only after waitAll().
  const Communicator &group() const { return *group_; }

  /// Queues buffer[i] = the sum over the group of buffer[i], through `wire`
  /// (Communicator::allReduceSumAs for f32 through bf16). The buffer must
  /// not be touched until waitAll() returns.
  void start(void *buffer, std::size_t count, DType type, DType wire, int64_t step,
             std::string what);
  /// Blocks until every queued sum is done.
  void waitAll();

  /// What the thread did and the caller waited since the last call, for
  /// the run's figures: each sum in the order it was queued, and each wait
  /// of waitAll() (its begin and end).
  struct Report {
    std::vector<Finished> sums;
    std::vector<
        std::pair<std::chrono::steady_clock::time_point, std::chrono::steady_clock::time_point>>
        waits;
  };
  Report takeReport();

private:
  struct Queued {
    void *buffer;
    std::size_t count;
    DType type, wire;
    int64_t step;
    std::string what;
  };
  void run();

  std::unique_ptr<Communicator> group_;
  int64_t meshAxis_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Queued> queued_;
  /// Queued or running.
  std::size_t unfinished_ = 0;
  Report report_;
  bool stopping_ = false;
  std::thread thread_;
};

/// The kernels' side (runtime/comm/CollectiveKernels.inc): all_reduce_start
/// queues `buffer`'s sum over mesh axis `axis` on `background` on a step's
/// last microbatch (`lastMicrobatch`) and does nothing on the others, whose
/// backward only accumulates; all_reduce_wait waits for every queued sum.
/// A missing `background`, or one over another axis, is a failure of the
/// kernel: the driver makes one for every program that starts sums.
void startAllReduceOnAxis(BackgroundAllReduce *background, bool lastMicrobatch, int64_t axis,
                          const Tensor &buffer, DType wire, int64_t step);
void waitForAllReduces(BackgroundAllReduce *background, int64_t axis);

} // namespace cleave::rt::comm

#endif
