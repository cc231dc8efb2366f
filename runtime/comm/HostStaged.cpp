//===- HostStaged.cpp - a device's collectives through the host ----------===//

#include "runtime/comm/HostStaged.h"

#include "runtime/comm/Mpi.h"

namespace cleave::rt::comm {

HostStagedCommunicator::HostStagedCommunicator(Communicator &host, DeviceCopies &copies)
    : Communicator(host.rank(), host.size(), host.worldRank(), host.axis(), host.options()),
      host_(host), copies_(copies) {}

HostStagedCommunicator::~HostStagedCommunicator() {
  for (int which : {0, 1})
    if (staging_[which])
      copies_.releaseStaging(staging_[which], stagingBytes_[which]);
}

std::unique_ptr<Communicator> HostStagedCommunicator::duplicate(std::string &error) {
  std::unique_ptr<Communicator> host = host_.duplicate(error);
  if (!host)
    return nullptr;
  auto staged = std::make_unique<HostStagedCommunicator>(*host, copies_);
  staged->ownedHost_ = std::move(host);
  return staged;
}

std::shared_ptr<const QueuedWork> HostStagedCommunicator::markQueuedWork(CollectiveKind kind,
                                                                         const CallSite &site) {
  if (!ownedHost_)
    return nullptr;
  std::string error;
  std::shared_ptr<const QueuedWork> mark = copies_.markQueuedWork(error);
  if (!error.empty())
    fail(kind, site, error);
  return mark;
}

void HostStagedCommunicator::awaitQueuedWork(const QueuedWork &mark, CollectiveKind kind,
                                             const CallSite &site) {
  if (std::string error = copies_.awaitQueuedWork(mark, options().timeoutSeconds); !error.empty())
    fail(kind, site, error);
}

void *HostStagedCommunicator::staging(int which, std::size_t bytes) {
  if (bytes > stagingBytes_[which]) {
    if (staging_[which])
      copies_.releaseStaging(staging_[which], stagingBytes_[which]);
    staging_[which] = copies_.allocateStaging(bytes);
    stagingBytes_[which] = bytes;
  }
  return staging_[which];
}

void HostStagedCommunicator::throughHost(const void *sent, std::size_t sentBytes, void *received,
                                         std::size_t resultBytes,
                                         const std::function<void(void *, void *)> &call) {
  void *staged = staging(0, sentBytes);
  void *result = received == sent ? staged : staging(1, resultBytes);
  copies_.copyToHost(staged, sent, sentBytes);
  call(staged, result);
  copies_.copyToDevice(received, result, resultBytes);
}

void HostStagedCommunicator::doAllReduceSum(void *buffer, std::size_t count, DType type,
                                            const CallSite &site) {
  const std::size_t bytes = count * dtypeSize(type);
  throughHost(buffer, bytes, buffer, bytes,
              [&](void *staged, void *) { host_.allReduceSum(staged, count, type, site); });
}

void HostStagedCommunicator::doAllReduceSumInRankOrder(void *buffer, std::size_t count, DType type,
                                                       const CallSite &site) {
  doAllReduceSum(buffer, count, type, site);
}

void HostStagedCommunicator::doAllGather(const void *sent, void *received, std::size_t countPerRank,
                                         DType type, const CallSite &site) {
  const std::size_t part = countPerRank * dtypeSize(type);
  throughHost(sent, part, received, part * size(), [&](void *staged, void *gathered) {
    host_.allGather(staged, gathered, countPerRank, type, site);
  });
}

void HostStagedCommunicator::doReduceScatterSum(const void *sent, void *received,
                                                std::size_t countPerRank, DType type,
                                                const CallSite &site) {
  doReduceScatterSumInRankOrder(sent, received, countPerRank, type, type, site);
}

void HostStagedCommunicator::doReduceScatterSumInRankOrder(const void *sent, void *received,
                                                           std::size_t countPerRank, DType type,
                                                           DType sumType, const CallSite &site) {
  throughHost(sent, countPerRank * dtypeSize(type) * size(), received,
              countPerRank * dtypeSize(sumType), [&](void *staged, void *summed) {
                if (sumType == type)
                  host_.reduceScatterSum(staged, summed, countPerRank, type, site);
                else
                  host_.reduceScatterSumWidened(staged, static_cast<float *>(summed), countPerRank,
                                                site);
              });
}

void HostStagedCommunicator::doReduceScatterSumUneven(const void *sent, const RankChunks &chunks,
                                                      void *received, DType type,
                                                      const CallSite &site) {
  throughHost(sent, chunks.end() * dtypeSize(type), received,
              chunks.counts[rank()] * dtypeSize(type), [&](void *staged, void *summed) {
                host_.reduceScatterSumUneven(staged, chunks, summed, type, site);
              });
}

void HostStagedCommunicator::doBroadcast(void *buffer, std::size_t count, DType type, int root,
                                         const CallSite &site) {
  const std::size_t bytes = count * dtypeSize(type);
  void *staged = staging(0, bytes);
  if (rank() == root)
    copies_.copyToHost(staged, buffer, bytes);
  host_.broadcast(staged, count, type, root, site);
  if (rank() != root)
    copies_.copyToDevice(buffer, staged, bytes);
}

void HostStagedCommunicator::doBarrier(const CallSite &site) { host_.barrier(site); }

void HostStagedCommunicator::doSend(const void *buffer, std::size_t count, DType type, int peer,
                                    int tag, const CallSite &site) {
  const std::size_t bytes = count * dtypeSize(type);
  void *staged = staging(0, bytes);
  copies_.copyToHost(staged, buffer, bytes);
  host_.send(staged, count, type, peer, tag, site);
}

void HostStagedCommunicator::doCompleteSends(const CallSite &site) { host_.completeSends(site); }

void HostStagedCommunicator::doRecv(void *buffer, std::size_t count, DType type, int peer, int tag,
                                    const CallSite &site) {
  const std::size_t bytes = count * dtypeSize(type);
  void *staged = staging(1, bytes);
  host_.recv(staged, count, type, peer, tag, site);
  copies_.copyToDevice(buffer, staged, bytes);
}

void HostStagedCommunicator::doExpect(std::size_t count, DType type, int peer, int tag,
                                      const CallSite &site) {
  host_.expect(count, type, peer, tag, site);
}

bool HostStagedCommunicator::doAwaitMessage(int peer, int tag, const CallSite &site) {
  return host_.awaitMessage(peer, tag, site);
}

void HostStagedCommunicator::endJob(int exitCode) { abortJob(exitCode); }

void HostStagedCommunicator::doAllReduceSumThroughBFloat16(float *buffer, std::size_t count,
                                                           const CallSite &site) {
  const std::size_t bytes = count * sizeof(float);
  throughHost(buffer, bytes, buffer, bytes, [&](void *staged, void *) {
    host_.allReduceSumAs(staged, count, DType::F32, DType::BF16, site);
  });
}

void HostStagedCommunicator::doReduceScatterSumThroughBFloat16(const float *sent, float *received,
                                                               std::size_t countPerRank,
                                                               const CallSite &site) {
  const std::size_t part = countPerRank * sizeof(float);
  throughHost(sent, part * size(), received, part, [&](void *staged, void *summed) {
    host_.reduceScatterSumAs(staged, summed, countPerRank, DType::F32, DType::BF16, site);
  });
}

} // namespace cleave::rt::comm
