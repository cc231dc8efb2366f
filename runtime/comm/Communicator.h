//===- Communicator.h - collectives over a group of ranks -------*- C++ -*-===//
//
// One interface for the collectives of every backend (MPI on the host, NCCL
// on the GPU), one communicator per mesh axis. Every call blocks until this
// rank's part is done and has a deadline. A call that fails or passes its
// deadline prints one line naming the rank, the collective, the axis and the
// step, and ends the whole job: the other ranks are inside the same
// collective, so there is nothing to recover, and a clear error beats a hang.
//
// Each communicator counts the bytes this rank sends, per kind of call, as
// the ring algorithm moves them (ringBytesSent), whatever algorithm the
// library picks; the driver reports them next to the analytic minimum.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_COMM_COMMUNICATOR_H
#define CLEAVE_RUNTIME_COMM_COMMUNICATOR_H

#include "runtime/Tensor.h"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cleave::rt::comm {

/// The calls a communicator makes, named as the upstream `shard` dialect
/// names its collectives.
enum class CollectiveKind : int {
  AllReduce,
  AllGather,
  ReduceScatter,
  Broadcast,
  Barrier,
  Send,
  Recv,
};
inline constexpr int kCollectiveKinds = 7;

/// "all_reduce", "all_gather", "reduce_scatter", "broadcast", "barrier",
/// "send", "recv".
const char *collectiveName(CollectiveKind kind);

/// Where a call comes from, for its error message. The axis and the kind of
/// call need no saying: the communicator spans one axis, and the call is the
/// method called.
struct CallSite {
  /// The training step; negative outside the training loop (setup, the
  /// final gather of the weights).
  int64_t step = -1;
  /// What the call moves, e.g. "grad:fc1.weight"; may be empty.
  std::string_view what;
};

struct CommOptions {
  /// How long any one call may take before the job is ended. Generous by
  /// default: a rank may legitimately wait for a slower peer's whole step.
  double timeoutSeconds = 300;
  /// All-reduce and reduce-scatter add the ranks' contributions in rank order,
  /// ((x0 + x1) + x2) + x3, the same on every rank and in every run, so a
  /// floating-point sum is bit-identical to a sequential one. Costs the same
  /// bytes as a ring all-reduce (an all-to-all of 1/n chunks, then an
  /// all-gather of the summed chunks), n-1 messages per rank and phase instead
  /// of a ring's pipelined ones (latency), and a buffer's worth of scratch.
  bool deterministic = false;
};

/// Bytes one rank sent, per kind of call.
class BytesSent {
public:
  uint64_t operator[](CollectiveKind kind) const { return bytes_[static_cast<int>(kind)]; }
  uint64_t total() const;
  void add(CollectiveKind kind, uint64_t bytes) { bytes_[static_cast<int>(kind)] += bytes; }

private:
  std::array<uint64_t, kCollectiveKinds> bytes_{};
};

/// The bytes one rank of a group of `groupSize` sends for one call in the
/// ring algorithm, rounded down to a byte. `bytes` is the buffer for an
/// all-reduce (2(n-1)/n of it) and a broadcast ((n-1)/n: the n-1 ranks that
/// lack the buffer each receive it once, the sending spread over the ring);
/// the full, gathered buffer for an all-gather and the full input of a
/// reduce-scatter ((n-1)/n of it); the message for a send (all of it); a
/// barrier and a recv send nothing.
uint64_t ringBytesSent(CollectiveKind kind, uint64_t bytes, int groupSize);

/// Whether a sum of `type` is supported: f32, f64, i32, i64, and bf16,
/// which every backend sums in rank order in f32 (sumInRankOrder).
bool canSum(DType type);

class Communicator;
struct RankChunks;

/// A point in the work a backend queued on a device stream
/// (Communicator::markQueuedWork): the backend's own.
class QueuedWork {
public:
  virtual ~QueuedWork() = default;
};

/// One call as it ran, for the run's timeline and step figures.
struct CollectiveTiming {
  CollectiveKind kind;
  const CallSite &site;
  /// The buffer the call moves (as plan.json's `buffer_bytes` counts it: the
  /// all-reduced buffer, the gathered or the reduce-scattered whole, the
  /// message), and what this rank sends of it by the ring (ringBytesSent).
  uint64_t bufferBytes, bytesSent;
  /// When the call began; when the barrier before it ended, that is when
  /// every rank of the group had arrived, or for a recv when its message
  /// had (= begin when the observer does not separate the wait, for a send
  /// and a barrier itself, and for a recv of a backend that cannot tell);
  /// when it returned.
  std::chrono::steady_clock::time_point begin, arrived, end;
};

/// Told of every call of the communicators it observes (observeWith).
class CollectiveObserver {
public:
  virtual ~CollectiveObserver() = default;
  /// Whether each collective is preceded by a barrier over its group, timed
  /// apart, so that waiting for the slowest rank is not counted as moving
  /// data (docs/training.md, "Profiling": what it costs).
  virtual bool separatesWait() const = 0;
  virtual void collective(const Communicator &group, const CollectiveTiming &timing) = 0;
};

/// The communicator of mesh axis `axis`; a missing one is an error of
/// `kernel` (a program compiled for a mesh, run without one).
Communicator &axisCommunicator(const std::vector<Communicator *> &axes, int64_t axis,
                               const char *kernel);

/// The collective kernels of either backend (runtime/Kernels.def), over the
/// communicator of mesh axis `axis`: `buffer` summed in place; `out` this
/// rank's part of the sum of `in` (dim 0 split n ways); `out` the ranks'
/// `in` concatenated. A sum's `wire` type is the buffers' own, or bf16 for
/// f32 buffers (--grad-reduce-dtype bf16): Communicator::allReduceSumAs. A
/// reduce-scatter of a bf16 `in` into an f32 `out` sums in f32
/// (Communicator::reduceScatterSumWidened).
void allReduceOnAxis(const std::vector<Communicator *> &axes, int64_t axis, const Tensor &buffer,
                     DType wire, int64_t step);
/// A failure of `kernel` unless `type` buffers sum through `wire`: the type
/// itself, or bf16 for f32.
void checkSumWire(const char *kernel, DType type, DType wire);
void reduceScatterOnAxis(const std::vector<Communicator *> &axes, int64_t axis, const Tensor &in,
                         const Tensor &out, DType wire, int64_t step);
void allGatherOnAxis(const std::vector<Communicator *> &axes, int64_t axis, const Tensor &in,
                     const Tensor &out, int64_t step);
/// A failure of `kernel` unless `out` is one of `group`'s parts of `in`,
/// summed through `wire` (`in`'s type, or bf16 into f32).
void checkReduceScatterSizes(const Communicator &group, const char *kernel, const Tensor &in,
                             const Tensor &out, DType wire);
/// A failure of `kernel` unless `out` holds `group`'s parts of `in`'s size
/// and type.
void checkGatherSizes(const Communicator &group, const char *kernel, const Tensor &in,
                      const Tensor &out);
/// The pipeline kernels: `value` to, `out` from rank `peer` of the axis.
void sendOnAxis(const std::vector<Communicator *> &axes, int64_t axis, const Tensor &value,
                int64_t peer, int64_t tag, int64_t step);
void recvOnAxis(const std::vector<Communicator *> &axes, int64_t axis, const Tensor &out,
                int64_t peer, int64_t tag, int64_t step);

/// A group of ranks (one mesh axis, several, or the whole job) and the
/// collectives over it. Buffers are where the backend computes: host memory
/// for MPI, device memory for NCCL. Buffers of one call must not overlap,
/// except the in-place all-reduce and broadcast. Every rank of the group
/// must make the same calls in the same order.
///
/// Not thread-safe: one thread calls a communicator.
class Communicator {
public:
  Communicator(const Communicator &) = delete;
  Communicator &operator=(const Communicator &) = delete;
  virtual ~Communicator() = default;

  /// This rank's place in the group, 0 <= rank() < size().
  int rank() const { return rank_; }
  int size() const { return size_; }
  /// This rank in the whole job (what error messages name).
  int worldRank() const { return worldRank_; }
  /// The mesh axis the group spans: "dp", "dp,tp" for several, "world".
  const std::string &axis() const { return axis_; }
  const CommOptions &options() const { return options_; }
  const BytesSent &bytesSent() const { return bytesSent_; }
  /// Tells `observer` (null: nobody) of every call from now on.
  void observeWith(CollectiveObserver *observer) { observer_ = observer; }

  /// A new communicator over the same ranks, with the same axis name and
  /// options, whose calls never match this one's: for another thread
  /// (runtime/comm/BackgroundCollectives.h). Collective: every rank of the
  /// group calls it. Null, with `error`, where the backend cannot.
  virtual std::unique_ptr<Communicator> duplicate(std::string &error) = 0;
  /// For a duplicate that another thread calls while the first goes on
  /// queuing compute on a device stream (a GPU's): a mark of the work queued
  /// so far on the stream that computes the buffers, taken on the queuing
  /// thread; null where that work is done when its kernel returns (host
  /// memory). Any thread may take one; a failure is the call's, `kind` at
  /// `site`.
  virtual std::shared_ptr<const QueuedWork> markQueuedWork(CollectiveKind /*kind*/,
                                                           const CallSite & /*site*/) {
    return nullptr;
  }
  /// On the calling thread, before a call whose buffers the work before
  /// `mark` writes or reads: blocks until that work is done (failing the
  /// call `kind` at `site` on an error or past the deadline), with this
  /// communicator's device current for the thread.
  virtual void awaitQueuedWork(const QueuedWork & /*mark*/, CollectiveKind /*kind*/,
                               const CallSite & /*site*/) {}

  /// buffer[i] = the sum over the group's ranks of their buffer[i], on every
  /// rank (f32, f64, i32, i64).
  void allReduceSum(void *buffer, std::size_t count, DType type, const CallSite &site);
  /// received[r * countPerRank + i] = rank r's sent[i], on every rank.
  void allGather(const void *sent, void *received, std::size_t countPerRank, DType type,
                 const CallSite &site);
  /// received[i] = the sum over ranks of their sent[rank() * countPerRank + i]:
  /// each rank gets its chunk of the all-reduced buffer (f32, f64, i32, i64).
  void reduceScatterSum(const void *sent, void *received, std::size_t countPerRank,
                        DType type, const CallSite &site);
  /// received[i] = the sum over ranks of their bf16 sent[rank() *
  /// countPerRank + i], added in f32 in rank order and not rounded: what
  /// the rank-order sum of their f32 widenings gives, from half the bytes
  /// (ZeRO's reduce-scatters of gradient accumulators kept in bf16 and
  /// summed in f32).
  void reduceScatterSumWidened(const void *sent, float *received, std::size_t countPerRank,
                               const CallSite &site);
  /// A reduce-scatter of uneven chunks: received[i] = the sum over ranks of
  /// their sent[chunks.offsets[rank()] + i], i < chunks.counts[rank()]
  /// (chunks may be empty), added in rank order in every mode (NCCL has no
  /// uneven reduce-scatter; the all-to-all and the sum of the deterministic
  /// sums serve both). `received` may be this rank's chunk of `sent` (in
  /// place). ZeRO 1's gradient buckets: a bucket of the flat gradient buffer
  /// summed into the parts of it each rank's slice holds.
  void reduceScatterSumUneven(const void *sent, const RankChunks &chunks, void *received,
                              DType type, const CallSite &site);
  /// allReduceSum and reduceScatterSum of `type` buffers through `wire`:
  /// the type itself (the plain sums), or bf16 for f32, which halves the
  /// bytes moved: each rank's values
  /// rounded to bf16 (to nearest even), the ranks' parts added in f32 in
  /// rank order, the sum rounded to bf16 once and widened back. The same
  /// on every rank and in every run, deterministic mode or not. The bf16
  /// copies are this communicator's scratch in its buffers' memory
  /// (wireCopy), reused between calls.
  void allReduceSumAs(void *buffer, std::size_t count, DType type, DType wire,
                      const CallSite &site);
  void reduceScatterSumAs(const void *sent, void *received, std::size_t countPerRank, DType type,
                          DType wire, const CallSite &site);
  /// Whether the buffers of its calls are host memory (MPI, one rank) or
  /// device memory (NCCL).
  virtual bool buffersOnHost() const { return true; }
  /// Every rank's buffer = rank `root`'s.
  void broadcast(void *buffer, std::size_t count, DType type, int root, const CallSite &site);
  void barrier(const CallSite &site);
  /// Point to point, for pipeline stages: a recv matches the send of the same
  /// peer and tag, and must expect the count and type sent. A send does not
  /// wait for its receive (a pipeline schedule's proof that it cannot
  /// deadlock assumes so): the communicator sends a copy, which
  /// completeSends waits for.
  void send(const void *buffer, std::size_t count, DType type, int peer, int tag,
            const CallSite &site);
  /// Waits until every message this rank sent has been taken.
  void completeSends(const CallSite &site);
  void recv(void *buffer, std::size_t count, DType type, int peer, int tag,
            const CallSite &site);
  /// Takes the message of `peer` with `tag` (`count` elements of `type`)
  /// as soon as it arrives, into this communicator's own memory, for the
  /// next recv of that peer and tag, which then copies it: a pipeline's
  /// driver expects an action's messages while the action before it
  /// computes. Expected and unexpected recvs of one peer and tag match
  /// messages in the order they were made, so every recv after an expected
  /// one must be expected too. A backend that cannot does nothing: the
  /// recv receives the message then.
  void expect(std::size_t count, DType type, int peer, int tag, const CallSite &site);
  /// Returns true once the message of `peer` with `tag` has arrived, before
  /// it is received; false at once where the backend cannot tell.
  bool awaitMessage(int peer, int tag, const CallSite &site) {
    return doAwaitMessage(peer, tag, site);
  }

  /// Prints `cleave: error: rank R: MESSAGE` and ends every rank of the job
  /// with exit status 3.
  [[noreturn]] void fail(const std::string &message);
  /// Prints `cleave: error: rank R: collective KIND on axis 'A' at step S:
  /// PROBLEM` and ends the job.
  [[noreturn]] void fail(CollectiveKind kind, const CallSite &site, const std::string &problem);
  /// Prints `cleave: error: rank R: collective KIND on axis 'A' at step S
  /// timed out after T s` and ends the job.
  [[noreturn]] void timedOut(CollectiveKind kind, const CallSite &site);

protected:
  Communicator(int rank, int size, int worldRank, std::string axis, CommOptions options);

  // What each backend implements. Arguments are checked (types, peers,
  // roots) and bytes counted before these are called.
  virtual void doAllReduceSum(void *buffer, std::size_t count, DType type,
                              const CallSite &site) = 0;
  virtual void doAllGather(const void *sent, void *received, std::size_t countPerRank,
                           DType type, const CallSite &site) = 0;
  virtual void doReduceScatterSum(const void *sent, void *received, std::size_t countPerRank,
                                  DType type, const CallSite &site) = 0;
  /// The sums of the deterministic mode (CommOptions::deterministic): every
  /// element added in rank order, the same on every rank and every run.
  virtual void doAllReduceSumInRankOrder(void *buffer, std::size_t count, DType type,
                                         const CallSite &site) = 0;
  /// `received` is of `sumType`: `type`, or f32 for bf16 parts, added in
  /// f32 and kept (reduceScatterSumWidened).
  virtual void doReduceScatterSumInRankOrder(const void *sent, void *received,
                                             std::size_t countPerRank, DType type, DType sumType,
                                             const CallSite &site) = 0;
  virtual void doReduceScatterSumUneven(const void *sent, const RankChunks &chunks, void *received,
                                        DType type, const CallSite &site) = 0;
  virtual void doBroadcast(void *buffer, std::size_t count, DType type, int root,
                           const CallSite &site) = 0;
  virtual void doBarrier(const CallSite &site) = 0;
  virtual void doSend(const void *buffer, std::size_t count, DType type, int peer, int tag,
                      const CallSite &site) = 0;
  virtual void doCompleteSends(const CallSite &site) = 0;
  virtual void doRecv(void *buffer, std::size_t count, DType type, int peer, int tag,
                      const CallSite &site) = 0;
  virtual void doExpect(std::size_t /*count*/, DType /*type*/, int /*peer*/, int /*tag*/,
                        const CallSite & /*site*/) {}
  /// Returns true once the message of `peer` with `tag` has arrived, before
  /// it is received, so that a recv's wait is timed apart from its
  /// transfer; a backend that cannot tell returns false at once.
  virtual bool doAwaitMessage(int peer, int tag, const CallSite &site);
  /// Ends every rank of the job with `exitCode`; called after the error line
  /// is printed. A backend abandons its in-flight work first.
  [[noreturn]] virtual void endJob(int exitCode) = 0;

  /// allReduceSumAs and reduceScatterSumAs of f32 through bf16 (checked and
  /// counted already): each rank's values rounded into wireCopy, the bf16
  /// parts summed in rank order and rounded once, the sum widened back where
  /// the buffers are. A backend whose buffers cannot be rounded where they
  /// lie (through the host) runs the host's sum on a copy.
  virtual void doAllReduceSumThroughBFloat16(float *buffer, std::size_t count,
                                             const CallSite &site);
  virtual void doReduceScatterSumThroughBFloat16(const float *sent, float *received,
                                                 std::size_t countPerRank, const CallSite &site);

  // The default sums through bf16 in the memory the backend's buffers are
  // in: host vectors and loops here.
  /// Room for `count` bf16 values: copy `which` (0: what this rank sends,
  /// 1: the part of the sum it receives), reused between calls.
  virtual uint16_t *wireCopy(int which, std::size_t count, CollectiveKind kind,
                             const CallSite &site);
  /// narrowed[i] = values[i] rounded to bf16 (nearest even).
  virtual void narrowToBFloat16(const float *values, std::size_t count, uint16_t *narrowed,
                                CollectiveKind kind, const CallSite &site);
  /// values[i] = narrowed[i], exactly; done when it returns.
  virtual void widenFromBFloat16(const uint16_t *narrowed, std::size_t count, float *values,
                                 CollectiveKind kind, const CallSite &site);

private:
  /// "collective KIND on axis 'A' at step S".
  std::string describe(CollectiveKind kind, const CallSite &site) const;
  void checkSum(DType type, const CallSite &site, CollectiveKind kind);
  /// Fails unless `type` sums through `wire` by narrowing: f32 through bf16.
  void checkNarrowing(DType type, DType wire, CollectiveKind kind, const CallSite &site);
  void checkPeer(int peer, const char *role, CollectiveKind kind, const CallSite &site);
  /// A send's or recv's: fails unless `peer` is a rank of the group and
  /// `tag` is not negative.
  void checkMessageEnds(int peer, int tag, CollectiveKind kind, const CallSite &site);
  /// Counts the bytes and runs `call` (the backend's), timed for the
  /// observer when there is one; a recv's `awaitMessage` then runs first.
  template <typename Call>
  void run(CollectiveKind kind, uint64_t bufferBytes, const CallSite &site, Call &&call,
           const std::function<bool()> &awaitMessage = nullptr);

  int rank_;
  int size_;
  int worldRank_;
  std::string axis_;
  CommOptions options_;
  BytesSent bytesSent_;
  CollectiveObserver *observer_ = nullptr;
  /// The host's wire copies (wireCopy).
  std::vector<uint16_t> wireCopies_[2];
};

/// The one-rank group of a process that runs alone: collectives are copies,
/// a send or recv (to itself) is an error. Host memory. Used when a program
/// is not launched by mpirun, so it neither needs nor starts MPI.
class LocalCommunicator final : public Communicator {
public:
  explicit LocalCommunicator(std::string axis, CommOptions options = {});
  std::unique_ptr<Communicator> duplicate(std::string &error) override;

protected:
  void doAllReduceSum(void *, std::size_t, DType, const CallSite &) override {}
  void doAllGather(const void *sent, void *received, std::size_t countPerRank, DType type,
                   const CallSite &site) override;
  void doReduceScatterSum(const void *sent, void *received, std::size_t countPerRank,
                          DType type, const CallSite &site) override;
  // One rank: its own part is the sum, so any order is rank order.
  void doAllReduceSumInRankOrder(void *, std::size_t, DType, const CallSite &) override {}
  void doReduceScatterSumInRankOrder(const void *sent, void *received, std::size_t countPerRank,
                                     DType type, DType sumType, const CallSite &site) override;
  void doReduceScatterSumUneven(const void *sent, const RankChunks &chunks, void *received,
                                DType type, const CallSite &site) override;
  void doBroadcast(void *, std::size_t, DType, int, const CallSite &) override {}
  void doBarrier(const CallSite &) override {}
  void doSend(const void *, std::size_t, DType, int, int, const CallSite &site) override;
  void doCompleteSends(const CallSite &) override {}
  void doRecv(void *, std::size_t, DType, int, int, const CallSite &site) override;
  [[noreturn]] void endJob(int exitCode) override;
};

/// How the rank-order sums cut a buffer of `count` elements into one chunk
/// per rank of a group of `n`: chunk r is counts[r] elements from
/// offsets[r], count/n each and the first count%n one more.
struct RankChunks {
  RankChunks(std::size_t count, int n);
  /// Of a span of `count` elements from element `first` of a buffer whose
  /// slices of `slice` elements the `n` ranks own in order: chunk r is the
  /// part of the span in rank r's slice (empty where none is), its offset
  /// from the span's start.
  static RankChunks owned(std::size_t first, std::size_t count, std::size_t slice, int n);
  /// The furthest end of a chunk: the elements of the span they cut.
  std::size_t end() const;
  std::vector<std::size_t> counts, offsets;

private:
  RankChunks() = default;
};

/// `sum[i] = ((parts[0][i] + parts[1][i]) + ...) + parts[n-1][i]` for `n`
/// parts of `count` elements laid out one after another: the order the
/// deterministic mode promises. Host memory; f32, f64, i32, i64 (integers
/// wrap around), and bf16, added in f32 and rounded to bf16 once; `sum` is
/// of `sumType`: `type`, or f32 for bf16 parts (the f32 total, not rounded).
void sumInRankOrder(const void *parts, int n, std::size_t count, DType type, void *sum,
                    DType sumType);

} // namespace cleave::rt::comm

#endif
