//===- Nccl.cpp - communicators over NCCL --------------------------------===//

#include "runtime/comm/Nccl.h"

#include "runtime/comm/Deadline.h"
#include "runtime/comm/DeviceSum.h"
#include "runtime/comm/Mpi.h"
#include "runtime/comm/StreamEvent.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace cleave::rt::comm {
namespace {

/// The NCCL type a sum of `type` takes (canSum types only).
ncclDataType_t ncclSumType(DType type) {
  switch (type) {
  case DType::F32: return ncclFloat32;
  case DType::F64: return ncclFloat64;
  case DType::I32: return ncclInt32;
  default: return ncclInt64;
  }
}

std::string ncclText(ncclResult_t result, ncclComm_t comm) {
  std::string text = ncclGetErrorString(result);
  if (const char *detail = ncclGetLastError(comm); detail && *detail)
    text += std::string(" (") + detail + ")";
  return text;
}

constexpr const char *kNoMessages =
    "NCCL's sends wait for their receive: a pipeline's messages go through the host "
    "(HostStagedCommunicator)";

/// "" once the communicator that a non-blocking `call` returned `result`
/// for is ready; else what went wrong, the communicator aborted.
std::string awaitReady(const char *call, ncclComm_t comm, ncclResult_t result,
                       double timeoutSeconds) {
  Deadline deadline(timeoutSeconds);
  if (result == ncclInProgress && !pollUntil(deadline, [&] {
        ncclCommGetAsyncError(comm, &result);
        return result != ncclInProgress;
      })) {
    ncclCommAbort(comm);
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", timeoutSeconds);
    return std::string(call) + " timed out after " + seconds + " s";
  }
  if (result == ncclSuccess)
    return "";
  std::string text = std::string(call) + ": " + ncclText(result, comm);
  if (comm)
    ncclCommAbort(comm);
  return text;
}

/// Non-blocking: no NCCL call waits on its own, so every wait can have a
/// deadline.
ncclConfig_t nonBlocking() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

} // namespace

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(Communicator &host,
                                                           cudaStream_t stream) {
  ncclUniqueId id{};
  if (host.rank() == 0)
    if (ncclResult_t result = ncclGetUniqueId(&id); result != ncclSuccess)
      host.fail("NCCL setup on axis '" + host.axis() +
                "': ncclGetUniqueId: " + ncclGetErrorString(result));
  host.broadcast(&id, sizeof id, DType::U8, 0, {-1, "the NCCL unique id"});

  ncclConfig_t config = nonBlocking();
  ncclComm_t comm = nullptr;
  ncclResult_t result = ncclCommInitRankConfig(&comm, host.size(), id, host.rank(), &config);
  std::string error =
      awaitReady("ncclCommInitRankConfig", comm, result, host.options().timeoutSeconds);
  if (!error.empty())
    host.fail("NCCL setup on axis '" + host.axis() + "': " + error);
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(host, comm, stream, nullptr));
}

std::unique_ptr<Communicator> NcclCommunicator::duplicate(std::string &error) {
  cudaStream_t stream = nullptr;
  if (cudaError_t status = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      status != cudaSuccess) {
    error = std::string("cudaStreamCreateWithFlags: ") + cudaGetErrorString(status);
    return nullptr;
  }
  ncclConfig_t config = nonBlocking();
  ncclComm_t comm = nullptr;
  ncclResult_t result = ncclCommSplit(comm_, 0, rank(), &comm, &config);
  error = awaitReady("ncclCommSplit", comm, result, options().timeoutSeconds);
  if (!error.empty()) {
    cudaStreamDestroy(stream);
    return nullptr;
  }
  return std::unique_ptr<Communicator>(new NcclCommunicator(*this, comm, stream, stream_));
}

std::shared_ptr<const QueuedWork> NcclCommunicator::markQueuedWork(CollectiveKind kind,
                                                                   const CallSite &site) {
  if (!producer_)
    return nullptr;
  cudaError_t status = cudaSuccess;
  std::shared_ptr<const StreamEvent> mark = StreamEvent::record(producer_, status);
  check(status, "recording an event on the compute stream", kind, site);
  return mark;
}

void NcclCommunicator::awaitQueuedWork(const QueuedWork &mark, CollectiveKind kind,
                                       const CallSite &site) {
  cudaError_t status =
      static_cast<const StreamEvent &>(mark).await(Deadline(options().timeoutSeconds));
  if (status == cudaErrorNotReady)
    timedOut(kind, site);
  check(status, "waiting for the compute stream", kind, site);
}

NcclCommunicator::NcclCommunicator(const Communicator &host, ncclComm_t comm, cudaStream_t stream,
                                   cudaStream_t producer)
    : Communicator(host.rank(), host.size(), host.worldRank(), host.axis(), host.options()),
      comm_(comm), stream_(stream), producer_(producer) {}

NcclCommunicator::~NcclCommunicator() {
  // Finalize flushes NCCL's outstanding work; bounded by the timeout, since
  // a peer may already be gone. Then free (or abort) the communicator.
  Deadline deadline(options().timeoutSeconds);
  ncclResult_t result = ncclCommFinalize(comm_);
  bool finished = result == ncclSuccess;
  if (result == ncclInProgress)
    finished = pollUntil(deadline, [&] {
      ncclCommGetAsyncError(comm_, &result);
      return result != ncclInProgress;
    }) && result == ncclSuccess;
  if (finished)
    ncclCommDestroy(comm_);
  else
    ncclCommAbort(comm_);
  for (void *scratch : scratch_)
    cudaFree(scratch);
  if (producer_)
    cudaStreamDestroy(stream_);
}

void NcclCommunicator::endJob(int exitCode) {
  // Kernels waiting for a peer that never comes would keep the device busy.
  ncclCommAbort(comm_);
  abortJob(exitCode);
}

void NcclCommunicator::check(cudaError_t status, const char *call, CollectiveKind kind,
                             const CallSite &site) {
  if (status != cudaSuccess)
    fail(kind, site, std::string(call) + ": " + cudaGetErrorString(status));
}

void NcclCommunicator::issued(ncclResult_t result, const char *call, CollectiveKind kind,
                              const CallSite &site, const Deadline &deadline) {
  if (result == ncclInProgress) {
    bool ready = pollUntil(deadline, [&] {
      ncclCommGetAsyncError(comm_, &result);
      return result != ncclInProgress;
    });
    if (!ready)
      timedOut(kind, site);
  }
  if (result != ncclSuccess)
    fail(kind, site, std::string(call) + ": " + ncclText(result, comm_));
}

void NcclCommunicator::grouped(ncclResult_t result, const char *call, CollectiveKind kind,
                               const CallSite &site) {
  if (result != ncclSuccess && result != ncclInProgress)
    fail(kind, site, std::string(call) + ": " + ncclText(result, comm_));
}

void NcclCommunicator::finish(CollectiveKind kind, const CallSite &site,
                              const Deadline &deadline) {
  bool done = pollUntil(deadline, [&] {
    cudaError_t status = cudaStreamQuery(stream_);
    if (status == cudaSuccess)
      return true;
    if (status != cudaErrorNotReady)
      check(status, "cudaStreamQuery", kind, site);
    // A peer's failure shows here while our kernels still wait for it.
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm_, &async);
    if (async != ncclSuccess && async != ncclInProgress)
      fail(kind, site, "NCCL: " + ncclText(async, comm_));
    return false;
  });
  if (!done)
    timedOut(kind, site);
}

void *NcclCommunicator::scratch(int which, std::size_t bytes, CollectiveKind kind,
                                const CallSite &site) {
  if (bytes > scratchBytes_[which]) {
    // cudaFree waits for the device, so the old scratch is no longer in use.
    check(cudaFree(scratch_[which]), "cudaFree", kind, site);
    scratch_[which] = nullptr;
    scratchBytes_[which] = 0;
    check(cudaMalloc(&scratch_[which], bytes), "cudaMalloc (scratch)", kind, site);
    scratchBytes_[which] = bytes;
  }
  return scratch_[which];
}

uint16_t *NcclCommunicator::wireCopy(int which, std::size_t count, CollectiveKind kind,
                                     const CallSite &site) {
  return static_cast<uint16_t *>(
      scratch(kWireCopies + which, count * sizeof(uint16_t) + 1, kind, site));
}

void NcclCommunicator::narrowToBFloat16(const float *values, std::size_t count, uint16_t *narrowed,
                                        CollectiveKind kind, const CallSite &site) {
  check(narrowToBFloat16OnDevice(values, count, narrowed, stream_), "the bf16 rounding kernel",
        kind, site);
}

void NcclCommunicator::widenFromBFloat16(const uint16_t *narrowed, std::size_t count, float *values,
                                         CollectiveKind kind, const CallSite &site) {
  check(widenFromBFloat16OnDevice(narrowed, count, values, stream_), "the bf16 widening kernel",
        kind, site);
  finish(kind, site, Deadline(options().timeoutSeconds));
}

void NcclCommunicator::doAllReduceSum(void *buffer, std::size_t count, DType type,
                                      const CallSite &site) {
  constexpr CollectiveKind kind = CollectiveKind::AllReduce;
  Deadline deadline(options().timeoutSeconds);
  issued(ncclAllReduce(buffer, buffer, count, ncclSumType(type), ncclSum, comm_, stream_),
         "ncclAllReduce", kind, site, deadline);
  finish(kind, site, deadline);
}

void NcclCommunicator::doAllGather(const void *sent, void *received, std::size_t countPerRank,
                                   DType type, const CallSite &site) {
  constexpr CollectiveKind kind = CollectiveKind::AllGather;
  Deadline deadline(options().timeoutSeconds);
  // Moved as bytes: any type, bit for bit.
  issued(ncclAllGather(sent, received, countPerRank * dtypeSize(type), ncclUint8, comm_, stream_),
         "ncclAllGather", kind, site, deadline);
  finish(kind, site, deadline);
}

void NcclCommunicator::doReduceScatterSum(const void *sent, void *received,
                                          std::size_t countPerRank, DType type,
                                          const CallSite &site) {
  constexpr CollectiveKind kind = CollectiveKind::ReduceScatter;
  Deadline deadline(options().timeoutSeconds);
  issued(ncclReduceScatter(sent, received, countPerRank, ncclSumType(type), ncclSum, comm_,
                           stream_),
         "ncclReduceScatter", kind, site, deadline);
  finish(kind, site, deadline);
}

void NcclCommunicator::doBroadcast(void *buffer, std::size_t count, DType type, int root,
                                   const CallSite &site) {
  constexpr CollectiveKind kind = CollectiveKind::Broadcast;
  Deadline deadline(options().timeoutSeconds);
  issued(ncclBroadcast(buffer, buffer, count * dtypeSize(type), ncclUint8, root, comm_, stream_),
         "ncclBroadcast", kind, site, deadline);
  finish(kind, site, deadline);
}

void NcclCommunicator::doBarrier(const CallSite &site) {
  constexpr CollectiveKind kind = CollectiveKind::Barrier;
  Deadline deadline(options().timeoutSeconds);
  void *value = scratch(kBarrierValue, sizeof(int32_t), kind, site);
  issued(ncclAllReduce(value, value, 1, ncclInt32, ncclSum, comm_, stream_), "ncclAllReduce", kind,
         site, deadline);
  finish(kind, site, deadline);
}

// Not pipelines' messages: an NCCL send waits until its peer receives it,
// and a pipeline schedule's proof that it cannot deadlock assumes sends that
// do not (1f1b's stages both send before they receive). On the GPU a
// pipeline's axis goes through the host (runtime/comm/HostStaged.h).
void NcclCommunicator::doSend(const void *, std::size_t, DType, int, int, const CallSite &site) {
  fail(CollectiveKind::Send, site, kNoMessages);
}

void NcclCommunicator::doRecv(void *, std::size_t, DType, int, int, const CallSite &site) {
  fail(CollectiveKind::Recv, site, kNoMessages);
}

void NcclCommunicator::sumOwnChunk(const void *sent, const RankChunks &chunks, DType type,
                                   void *sum, DType sumType, CollectiveKind kind,
                                   const CallSite &site, const Deadline &deadline) {
  int n = size(), me = rank();
  std::size_t elementBytes = dtypeSize(type);
  std::size_t mine = chunks.counts[me];
  const char *bytes = static_cast<const char *>(sent);
  char *pieces = static_cast<char *>(scratch(kPieces, n * mine * elementBytes + 1, kind, site));
  check(cudaMemcpyAsync(pieces + me * mine * elementBytes,
                        bytes + chunks.offsets[me] * elementBytes, mine * elementBytes,
                        cudaMemcpyDeviceToDevice, stream_),
        "cudaMemcpyAsync", kind, site);
  issued(ncclGroupStart(), "ncclGroupStart", kind, site, deadline);
  for (int peer = 0; peer < n; ++peer) {
    if (peer == me)
      continue;
    if (chunks.counts[peer] > 0)
      grouped(ncclSend(bytes + chunks.offsets[peer] * elementBytes,
                       chunks.counts[peer] * elementBytes, ncclUint8, peer, comm_, stream_),
              "ncclSend", kind, site);
    if (mine > 0)
      grouped(ncclRecv(pieces + peer * mine * elementBytes, mine * elementBytes, ncclUint8, peer,
                       comm_, stream_),
              "ncclRecv", kind, site);
  }
  issued(ncclGroupEnd(), "ncclGroupEnd (all-to-all)", kind, site, deadline);
  check(sumInRankOrderOnDevice(pieces, n, mine, type, sum, sumType, stream_), "the sum kernel",
        kind, site);
}

void NcclCommunicator::doAllReduceSumInRankOrder(void *buffer, std::size_t count, DType type,
                                                 const CallSite &site) {
  constexpr CollectiveKind kind = CollectiveKind::AllReduce;
  Deadline deadline(options().timeoutSeconds);
  RankChunks chunks(count, size());
  std::size_t elementBytes = dtypeSize(type);
  char *bytes = static_cast<char *>(buffer);
  sumOwnChunk(buffer, chunks, type, bytes + chunks.offsets[rank()] * elementBytes, type, kind, site,
              deadline);
  // Each rank broadcasts its summed chunk: an all-gather of unequal chunks.
  issued(ncclGroupStart(), "ncclGroupStart", kind, site, deadline);
  for (int root = 0; root < size(); ++root)
    if (chunks.counts[root] > 0) {
      char *chunk = bytes + chunks.offsets[root] * elementBytes;
      grouped(ncclBroadcast(chunk, chunk, chunks.counts[root] * elementBytes, ncclUint8, root,
                            comm_, stream_),
              "ncclBroadcast", kind, site);
    }
  issued(ncclGroupEnd(), "ncclGroupEnd (all-gather)", kind, site, deadline);
  finish(kind, site, deadline);
}

void NcclCommunicator::doReduceScatterSumInRankOrder(const void *sent, void *received,
                                                     std::size_t countPerRank, DType type,
                                                     DType sumType, const CallSite &site) {
  constexpr CollectiveKind kind = CollectiveKind::ReduceScatter;
  Deadline deadline(options().timeoutSeconds);
  // Every rank's chunk is countPerRank elements.
  sumOwnChunk(sent, RankChunks(size() * countPerRank, size()), type, received, sumType, kind, site,
              deadline);
  finish(kind, site, deadline);
}

void NcclCommunicator::doReduceScatterSumUneven(const void *sent, const RankChunks &chunks,
                                                void *received, DType type, const CallSite &site) {
  constexpr CollectiveKind kind = CollectiveKind::ReduceScatter;
  Deadline deadline(options().timeoutSeconds);
  sumOwnChunk(sent, chunks, type, received, type, kind, site, deadline);
  finish(kind, site, deadline);
}

} // namespace cleave::rt::comm
