//===- BackgroundCollectives.h - collectives on a thread of their own -*- C++ -*-===//
//
// Communication that overlaps the program's compute, on one thread:
// - a data-parallel step's gradients are summed over dp while the backward
//   still computes: the program starts a bucket's all-reduce as soon as the
//   last microbatch's backward has finished its gradients (all_reduce_start,
//   placed by passes/OverlapGradients.cpp), and the optimizer waits for each
//   bucket where it first reads a gradient the bucket holds (all_reduce_wait);
// - ZeRO 3 gathers a parameter while the layers before it compute: the
//   program starts its all-gather a compute segment early
//   (all_gather_start, placed by passes/PrefetchGathers.cpp) and waits for
//   that one gather where the parameter is read (all_gather_wait);
// - ZeRO 1 reduce-scatters its flat gradient buffer in buckets, each as
//   soon as the last microbatch's backward has finished its gradients
//   (reduce_scatter_owned_start, placed by passes/OverlapGradients.cpp: the
//   parts of the bucket each rank's slice holds, an uneven reduce-scatter),
//   and the optimizer waits for every bucket before it reads its slice
//   (reduce_scatter_wait); ZeRO 2 the same with each microbatch's packed
//   gradients, waited for before it adds its slice into its accumulator;
// - ZeRO 2 with mixed precision and ZeRO 3 reduce-scatter each gradient
//   while the backward computes the next one: the program starts the
//   reduce-scatter as soon as the gradient is made (reduce_scatter_start)
//   and waits for it where the next gradient's starts (reduce_scatter_wait,
//   passes/OverlapReduceScatters.cpp);
// - tensor parallelism sums an input's gradient over tp while the backward
//   computes the weight's: the program starts the sum as soon as its
//   partial sums are made (all_reduce_start on every call) and waits for it
//   where it is first read (all_reduce_wait, passes/OverlapTpSums.cpp).
// start(), startGather() and startReduceScatter() queue a collective over
// one of its mesh axes; the thread "cleave-comm" runs the queued ones in
// order, each on a communicator of its own for the axis (a duplicate of
// the axis's, so its calls never meet the main thread's); waitFor() blocks
// until the ones into a buffer are done, waitAll() until everything queued
// is.
//
// On a GPU the program's kernels run on the compute stream after the
// kernel functions return: each collective carries a mark of the work
// queued before it (an event on that stream, runtime/comm/StreamEvent.h),
// and the thread waits for the mark before its call (on NCCL's duplicate's
// own stream, or through the host), so the call reads finished buffers; a
// wait returns once the call is done.
//
// Every rank runs the same program, so every rank queues the same
// collectives in the same order and the thread's calls match across ranks;
// one thread for every axis runs them in that one order, so a rank's sum
// over tp never waits for a peer's thread busy with a sum over dp that
// this rank has yet to reach.
// Each is the communicator's own (a sum in rank order with
// --deterministic), so the results are those of the same calls made on the
// main thread, bit for bit.
//
// The thread is owned by the object: started by the constructor, joined by
// the destructor; it blocks every signal (the main thread handles them). A
// call that fails or passes its deadline ends the job from the thread, with
// the same one-line error as on the main thread.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_COMM_BACKGROUNDCOLLECTIVES_H
#define CLEAVE_RUNTIME_COMM_BACKGROUNDCOLLECTIVES_H

#include "runtime/comm/Communicator.h"

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace cleave::rt::comm {

class BackgroundCollectives {
public:
  using TimePoint = std::chrono::steady_clock::time_point;

  /// One collective as the thread ran it.
  struct Finished {
    CollectiveKind kind;
    int64_t meshAxis;
    int64_t step;
    std::string what;
    /// The buffer summed or gathered into, and what this rank sent of it
    /// by the ring.
    uint64_t bufferBytes, bytesSent;
    TimePoint begin, end;
  };

  /// The communicator of one mesh axis's collectives: a duplicate of the
  /// axis's, made for this object alone.
  struct Axis {
    int64_t meshAxis;
    std::unique_ptr<Communicator> group;
  };
  /// Runs its collectives over `axes` (each mesh axis once).
  explicit BackgroundCollectives(std::vector<Axis> axes);
  ~BackgroundCollectives();
  BackgroundCollectives(const BackgroundCollectives &) = delete;
  BackgroundCollectives &operator=(const BackgroundCollectives &) = delete;

  /// The thread's communicator over `meshAxis`: its axis name, size and
  /// bytes sent (read its counts only after waitAll()); null when it runs
  /// none over that axis.
  const Communicator *group(int64_t meshAxis) const { return groupOf(meshAxis); }

  /// Queues buffer[i] = the sum over mesh axis `meshAxis` of buffer[i],
  /// through `wire` (Communicator::allReduceSumAs for f32 through bf16).
  /// The buffer must not be touched until waitFor(buffer) returns.
  void start(int64_t meshAxis, void *buffer, std::size_t count, DType type, DType wire,
             int64_t step, std::string what);
  /// Queues the all-gather over `meshAxis` of every rank's `countPerRank`
  /// elements at `sent` into `received`, in rank order. Neither may be
  /// touched until waitFor(received) or waitAll() returns.
  void startGather(int64_t meshAxis, const void *sent, void *received, std::size_t countPerRank,
                   DType type, int64_t step, std::string what);
  /// Queues `received` (`countPerRank` elements) = this rank's part of the
  /// sum over `meshAxis` of `sent`, through `wire` as start()'s sums.
  /// Neither may be touched until waitFor(received) or waitAll() returns.
  void startReduceScatter(int64_t meshAxis, const void *sent, void *received,
                          std::size_t countPerRank, DType type, DType wire, int64_t step,
                          std::string what);
  /// Queues the reduce-scatter of uneven `chunks` of `span` over `meshAxis`
  /// in place: this rank's chunk of `span` = its sum over the ranks
  /// (Communicator::reduceScatterSumUneven); the rest of `span` is left as
  /// it was. `span` must not be touched until waitFor returns for it.
  void startReduceScatterUneven(int64_t meshAxis, void *span, RankChunks chunks, DType type,
                                int64_t step, std::string what);
  /// Blocks until every queued collective that writes a byte of the
  /// `bytes` from `buffer` (a gather's or reduce-scatter's destination, a
  /// sum's buffer; every one when null) is done; the report lists the wait
  /// as a `kind`'s.
  void waitFor(CollectiveKind kind, const void *buffer, std::size_t bytes = 1);
  /// Blocks until every queued collective is done (all_reduce_wait's).
  void waitAll() { waitFor(CollectiveKind::AllReduce, nullptr); }

  /// What the thread did and the caller waited since the last call, for
  /// the run's figures: each collective in the order it was queued, and
  /// each wait of waitFor() and waitAll() (its kind, begin and end).
  struct Wait {
    CollectiveKind kind;
    TimePoint begin, end;
  };
  struct Report {
    std::vector<Finished> done;
    std::vector<Wait> waits;
  };
  Report takeReport();

private:
  struct Queued {
    CollectiveKind kind;
    int64_t meshAxis;
    /// The sum's buffer, or the gather's destination.
    void *buffer;
    /// What a gather or reduce-scatter sends (null for a sum in place).
    const void *sent;
    /// A sum's elements, or a gather's or reduce-scatter's per rank.
    std::size_t count;
    /// An uneven reduce-scatter's chunks of `buffer` (in place; `count` the
    /// whole span).
    std::optional<RankChunks> chunks;
    DType type, wire;
    int64_t step;
    std::string what;
    /// The work queued before it on the device stream that makes its
    /// buffers (Communicator::markQueuedWork; null on the host).
    std::shared_ptr<const QueuedWork> ready = nullptr;
    /// The bytes from `buffer` it writes (a gather's: every rank's part;
    /// set by queue()).
    std::size_t written = 0;
    /// Whether it writes a byte of the `bytes` from `into`.
    bool writes(const void *into, std::size_t bytes) const {
      const auto *first = static_cast<const char *>(buffer), *low = static_cast<const char *>(into);
      return low < first + written && first < low + bytes;
    }
  };
  void queue(Queued collective);
  void run();
  /// The communicator of `meshAxis` (null: none); the kernels check that
  /// it exists before they queue a collective over it.
  Communicator *groupOf(int64_t meshAxis) const;

  std::vector<Axis> axes_;
  std::mutex mutex_;
  std::condition_variable changed_;
  /// Queued or running (the front), in order.
  std::deque<Queued> unfinished_;
  Report report_;
  bool stopping_ = false;
  std::thread thread_;
};

/// The kernels' side (runtime/comm/CollectiveKernels.inc): all_reduce_start
/// queues `buffer`'s sum over mesh axis `axis` on `background`; a bucket's
/// (`onlyOnLastMicrobatch`) only on a step's last microbatch
/// (`lastMicrobatch`), the others' backward only accumulating into it;
/// all_gather_start and reduce_scatter_start
/// queue the gather or the reduce-scatter of `in` into `out` on every call.
/// waitForCollective is each wait kernel's: all_reduce_wait's for the sums
/// over any byte of `out` (a bucket's accumulator), all_gather_wait's and
/// reduce_scatter_wait's for the one into `out`. A missing
/// `background`, or one without the axis, is a failure of the kernel: the
/// driver makes one over every axis a program starts collectives on.
void startAllReduceOnAxis(BackgroundCollectives *background, bool onlyOnLastMicrobatch,
                          bool lastMicrobatch, int64_t axis, const Tensor &buffer, DType wire,
                          int64_t step);
void startAllGatherOnAxis(BackgroundCollectives *background, int64_t axis, const Tensor &in,
                          const Tensor &out, int64_t step);
void startReduceScatterOnAxis(BackgroundCollectives *background, int64_t axis, const Tensor &in,
                              const Tensor &out, DType wire, int64_t step);
/// reduce_scatter_owned_start's, on every call or (`onlyOnLastMicrobatch`:
/// ZeRO 1's accumulators) on a step's last microbatch alone: `span` is
/// elements [first, first + its count) of a buffer whose slices of `slice`
/// elements the ranks of mesh axis `axis` own in order; each rank's part of
/// the span becomes its sum (RankChunks::owned), in the span's own type
/// (`wire`: no other is built).
void startOwnedReduceScatterOnAxis(BackgroundCollectives *background, bool onlyOnLastMicrobatch,
                                   bool lastMicrobatch, int64_t axis, const Tensor &span,
                                   DType wire, int64_t first, int64_t slice, int64_t step);
/// Waits for the `kind` (`kernel`'s) into any byte of `out`
/// (BackgroundCollectives::waitFor).
void waitForCollective(BackgroundCollectives *background, CollectiveKind kind, const char *kernel,
                       int64_t axis, const Tensor &out);

} // namespace cleave::rt::comm

#endif
