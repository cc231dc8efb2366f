//===- Nccl.h - communicators over NCCL (device memory) ---------*- C++ -*-===//
//
// The same collectives as MpiCommunicator, on device buffers, run on one CUDA
// stream. NCCL runs in its non-blocking mode, and each call waits for its
// stream by polling cudaStreamQuery and ncclCommGetAsyncError until the
// call's deadline; on a timeout or an asynchronous error the communicator is
// aborted (ncclCommAbort) and the job ended (MPI_Abort). Waiting for the
// stream also waits for the work queued on it before the call.
//
// A duplicate (for the background collectives' thread) is an
// ncclCommSplit of its original on a stream of its own. Its calls run
// beside the compute stream's, so they assume what NCCL asks of
// communicators used concurrently: that their kernels can be resident on
// the device together (NCCL's kernels take a few blocks each).
//
// NCCL has no barrier: a barrier is an all-reduce of one integer. Its sends
// wait for their receive, which a pipeline's schedule does not allow: send
// and recv fail here, and a pipeline's axis on the GPU goes through the
// host instead (runtime/comm/HostStaged.h).
//
// Built when CMake finds CUDA and NCCL (target cleave_runtime_comm_nccl).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_COMM_NCCL_H
#define CLEAVE_RUNTIME_COMM_NCCL_H

#include "runtime/comm/Communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>

namespace cleave::rt::comm {

class Deadline;

class NcclCommunicator final : public Communicator {
public:
  /// An NCCL communicator over the ranks of `host` (the same rank numbers
  /// and axis name), on the current CUDA device, running on `stream`. Rank 0
  /// of `host` makes the NCCL unique id and broadcasts it through `host`, so
  /// every rank of `host` must call this. Ends the job (through `host`'s
  /// error line) if NCCL does not start within the timeout.
  static std::unique_ptr<NcclCommunicator> create(Communicator &host, cudaStream_t stream);
  ~NcclCommunicator() override;

  /// ncclCommSplit of this one's ranks, on a stream of its own that runs
  /// beside this one's: its calls wait for the work queued on this one's
  /// stream only through markQueuedWork and awaitQueuedWork.
  std::unique_ptr<Communicator> duplicate(std::string &error) override;
  /// A duplicate's: an event recorded on the stream its original runs on
  /// (the program's compute stream); null for an original, whose calls
  /// are queued on that stream after the work anyway.
  std::shared_ptr<const QueuedWork> markQueuedWork(CollectiveKind kind,
                                                   const CallSite &site) override;
  void awaitQueuedWork(const QueuedWork &mark, CollectiveKind kind, const CallSite &site) override;
  bool buffersOnHost() const override { return false; }

  ncclComm_t handle() const { return comm_; }
  cudaStream_t stream() const { return stream_; }

protected:
  void doAllReduceSum(void *buffer, std::size_t count, DType type,
                      const CallSite &site) override;
  void doAllGather(const void *sent, void *received, std::size_t countPerRank, DType type,
                   const CallSite &site) override;
  void doReduceScatterSum(const void *sent, void *received, std::size_t countPerRank,
                          DType type, const CallSite &site) override;
  void doAllReduceSumInRankOrder(void *buffer, std::size_t count, DType type,
                                 const CallSite &site) override;
  void doReduceScatterSumInRankOrder(const void *sent, void *received, std::size_t countPerRank,
                                     DType type, DType sumType, const CallSite &site) override;
  void doReduceScatterSumUneven(const void *sent, const RankChunks &chunks, void *received,
                                DType type, const CallSite &site) override;
  void doBroadcast(void *buffer, std::size_t count, DType type, int root,
                   const CallSite &site) override;
  void doBarrier(const CallSite &site) override;
  void doSend(const void *buffer, std::size_t count, DType type, int peer, int tag,
              const CallSite &site) override;
  void doCompleteSends(const CallSite &) override {}
  void doRecv(void *buffer, std::size_t count, DType type, int peer, int tag,
              const CallSite &site) override;
  [[noreturn]] void endJob(int exitCode) override;
  /// A sum through bf16 on the device: the copies in device scratch, the
  /// roundings as kernels on the stream (runtime/comm/DeviceSum.h).
  uint16_t *wireCopy(int which, std::size_t count, CollectiveKind kind,
                     const CallSite &site) override;
  void narrowToBFloat16(const float *values, std::size_t count, uint16_t *narrowed,
                        CollectiveKind kind, const CallSite &site) override;
  void widenFromBFloat16(const uint16_t *narrowed, std::size_t count, float *values,
                         CollectiveKind kind, const CallSite &site) override;

private:
  /// Over `comm`, running on `stream`; a duplicate's stream is its own and
  /// `producer` the stream its buffers are made on (else null).
  NcclCommunicator(const Communicator &host, ncclComm_t comm, cudaStream_t stream,
                   cudaStream_t producer);

  /// Finishes issuing an NCCL call or group that returned `result` (in
  /// non-blocking mode, ncclInProgress while NCCL connects); fails on error.
  void issued(ncclResult_t result, const char *call, CollectiveKind kind, const CallSite &site,
              const Deadline &deadline);
  /// Checks a call inside a group; its errors may also surface at ncclGroupEnd.
  void grouped(ncclResult_t result, const char *call, CollectiveKind kind, const CallSite &site);
  /// Waits until the stream has done everything queued on it.
  void finish(CollectiveKind kind, const CallSite &site, const Deadline &deadline);
  /// Fails unless `status` is cudaSuccess.
  void check(cudaError_t status, const char *call, CollectiveKind kind, const CallSite &site);
  /// What both rank-order sums start with: this rank sends chunk r of `sent`
  /// to rank r, receives every rank's piece of its own chunk into the
  /// scratch, and queues their sum in rank order into `sum` (of `sumType`).
  void sumOwnChunk(const void *sent, const RankChunks &chunks, DType type, void *sum, DType sumType,
                   CollectiveKind kind, const CallSite &site, const Deadline &deadline);
  /// Device scratch `which` (kPieces, kWireCopies + wireCopy's `which`, or kBarrierValue)
  /// of at least `bytes`, reused between calls.
  void *scratch(int which, std::size_t bytes, CollectiveKind kind, const CallSite &site);
  /// kBarrierValue: a barrier's integer (its value is never read).
  static constexpr int kPieces = 0, kWireCopies = 1, kBarrierValue = 3, kScratches = 4;

  ncclComm_t comm_;
  cudaStream_t stream_;
  /// A duplicate's: its original's stream (it owns stream_ then).
  cudaStream_t producer_;
  void *scratch_[kScratches] = {};
  std::size_t scratchBytes_[kScratches] = {};
};

} // namespace cleave::rt::comm

#endif
