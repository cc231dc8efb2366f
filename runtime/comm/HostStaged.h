//===- HostStaged.h - a device's collectives through the host ---*- C++ -*-===//
//
// A communicator over buffers in a device's memory whose calls go through a
// host communicator (MPI): each buffer is copied into host memory, the host
// communicator's call runs on the copy, and what it received is copied back.
//
// The CUDA backend runs a pipeline's axis on it, and every axis of ranks
// that share a GPU (NCCL refuses two ranks on one device). A pipeline
// schedule's proof that it cannot deadlock assumes that a send does not
// wait for its receive (Communicator::send): 1f1b's stages each send
// before they receive what the other sends. MPI sends a copy and returns; NCCL's send waits until
// the peer's receive takes the message. Through the host, the stages' messages keep MPI's
// semantics, at the cost of two copies over the host's bus a message, and stages may share one GPU
// (two processes on one device, which an NCCL communicator refuses).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_COMM_HOSTSTAGED_H
#define CLEAVE_RUNTIME_COMM_HOSTSTAGED_H

#include "runtime/comm/Communicator.h"

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace cleave::rt::comm {

/// How a host-staged communicator reaches its buffers: copies between the
/// device's memory and the host's, each done when it returns and ordered
/// after the device's work queued before it, and host memory those copies
/// are fastest from (pinned, on CUDA).
class DeviceCopies {
public:
  virtual ~DeviceCopies() = default;
  virtual void *allocateStaging(std::size_t bytes) = 0;
  virtual void releaseStaging(void *memory, std::size_t bytes) = 0;
  virtual void copyToHost(void *host, const void *device, std::size_t bytes) = 0;
  virtual void copyToDevice(void *device, const void *host, std::size_t bytes) = 0;
  /// For a duplicate on the background collectives' thread
  /// (Communicator::markQueuedWork): a mark of the device work queued so
  /// far (null, with `error` set, when it cannot be made); and, on that
  /// thread, the wait for it, with the device made current there: "" once
  /// done, else what failed or timed out.
  virtual std::shared_ptr<const QueuedWork> markQueuedWork(std::string &error) = 0;
  virtual std::string awaitQueuedWork(const QueuedWork &mark, double timeoutSeconds) = 0;
};

class HostStagedCommunicator final : public Communicator {
public:
  /// Over the ranks of `host` (the same rank numbers, axis name and
  /// options), which must outlive it, as must `copies`.
  HostStagedCommunicator(Communicator &host, DeviceCopies &copies);
  ~HostStagedCommunicator() override;

  /// A duplicate of the host communicator, staged through the same copies,
  /// whose calls wait for the device's queued work through its marks.
  std::unique_ptr<Communicator> duplicate(std::string &error) override;
  /// A duplicate's: `copies`' mark (null for an original, whose calls
  /// follow the device's work on its own thread).
  std::shared_ptr<const QueuedWork> markQueuedWork(CollectiveKind kind,
                                                   const CallSite &site) override;
  void awaitQueuedWork(const QueuedWork &mark, CollectiveKind kind, const CallSite &site) override;
  bool buffersOnHost() const override { return false; }

protected:
  void doAllReduceSum(void *buffer, std::size_t count, DType type, const CallSite &site) override;
  void doAllGather(const void *sent, void *received, std::size_t countPerRank, DType type,
                   const CallSite &site) override;
  void doReduceScatterSum(const void *sent, void *received, std::size_t countPerRank, DType type,
                          const CallSite &site) override;
  /// The host communicator's options are this one's, so its sums take rank
  /// order too.
  void doAllReduceSumInRankOrder(void *buffer, std::size_t count, DType type,
                                 const CallSite &site) override;
  void doReduceScatterSumInRankOrder(const void *sent, void *received, std::size_t countPerRank,
                                     DType type, DType sumType, const CallSite &site) override;
  void doReduceScatterSumUneven(const void *sent, const RankChunks &chunks, void *received,
                                DType type, const CallSite &site) override;
  void doBroadcast(void *buffer, std::size_t count, DType type, int root,
                   const CallSite &site) override;
  void doBarrier(const CallSite &site) override;
  /// The host communicator sends a copy of the staged message, so the
  /// staging is free again when this returns.
  void doSend(const void *buffer, std::size_t count, DType type, int peer, int tag,
              const CallSite &site) override;
  void doCompleteSends(const CallSite &site) override;
  void doRecv(void *buffer, std::size_t count, DType type, int peer, int tag,
              const CallSite &site) override;
  /// The host communicator expects it: the recv's staging copies it from
  /// there.
  void doExpect(std::size_t count, DType type, int peer, int tag, const CallSite &site) override;
  bool doAwaitMessage(int peer, int tag, const CallSite &site) override;
  [[noreturn]] void endJob(int exitCode) override;
  /// The host communicator's sums through bf16 on a copy of the f32
  /// buffers (rounding is elementwise, so the bits are the same).
  void doAllReduceSumThroughBFloat16(float *buffer, std::size_t count,
                                     const CallSite &site) override;
  void doReduceScatterSumThroughBFloat16(const float *sent, float *received,
                                         std::size_t countPerRank, const CallSite &site) override;

private:
  /// Host staging of at least `bytes`: `which` 0 for what is sent, 1 for
  /// what is received; kept and grown between calls.
  void *staging(int which, std::size_t bytes);
  /// A collective through the host: the `sentBytes` from `sent` copied into
  /// staging, `call(staged, result)` run on the host communicator, and the
  /// `resultBytes` of its result copied to `received`. In place (`received`
  /// is `sent`) the result is the staged copy itself.
  void throughHost(const void *sent, std::size_t sentBytes, void *received, std::size_t resultBytes,
                   const std::function<void(void *, void *)> &call);

  Communicator &host_;
  DeviceCopies &copies_;
  /// A duplicate's host communicator, which host_ names.
  std::unique_ptr<Communicator> ownedHost_;
  void *staging_[2] = {nullptr, nullptr};
  std::size_t stagingBytes_[2] = {0, 0};
};

} // namespace cleave::rt::comm

#endif
