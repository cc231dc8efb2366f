//===- Communicator.cpp - argument checks, byte counts, error lines ------===//

#include "runtime/comm/Communicator.h"

#include "runtime/KernelError.h"
#include "runtime/LowPrecision.h"
#include "runtime/StepContext.h"
#include "runtime/comm/RankOrderSum.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace cleave::rt::comm {

const char *collectiveName(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduce: return "all_reduce";
  case CollectiveKind::AllGather: return "all_gather";
  case CollectiveKind::ReduceScatter: return "reduce_scatter";
  case CollectiveKind::Broadcast: return "broadcast";
  case CollectiveKind::Barrier: return "barrier";
  case CollectiveKind::Send: return "send";
  case CollectiveKind::Recv: return "recv";
  }
  return "?";
}

uint64_t BytesSent::total() const {
  uint64_t sum = 0;
  for (uint64_t bytes : bytes_)
    sum += bytes;
  return sum;
}

uint64_t ringBytesSent(CollectiveKind kind, uint64_t bytes, int groupSize) {
  uint64_t n = groupSize < 1 ? 1 : static_cast<uint64_t>(groupSize);
  switch (kind) {
  case CollectiveKind::AllReduce:
    // Reduce-scatter then all-gather, each passing n-1 chunks of bytes/n on.
    return 2 * (n - 1) * bytes / n;
  case CollectiveKind::AllGather:
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::Broadcast:
    return (n - 1) * bytes / n;
  case CollectiveKind::Send:
    return bytes;
  case CollectiveKind::Barrier:
  case CollectiveKind::Recv:
    return 0;
  }
  return 0;
}

Communicator &axisCommunicator(const std::vector<Communicator *> &axes, int64_t axis,
                               const char *kernel) {
  if (axis < 0 || static_cast<size_t>(axis) >= axes.size() || !axes[axis])
    rt::fail(kernel, "no communicator for mesh axis %lld: the program runs without its mesh",
             static_cast<long long>(axis));
  return *axes[axis];
}

void checkSumWire(const char *kernel, DType type, DType wire) {
  if (wire == type)
    return;
  if (type != DType::F32 || wire != DType::BF16)
    rt::fail(kernel, "cannot sum %s through %s (f32 through bf16 only)", dtypeName(type),
             dtypeName(wire));
}

void allReduceOnAxis(const std::vector<Communicator *> &axes, int64_t axis, const Tensor &buffer,
                     DType wire, int64_t step) {
  Communicator &group = axisCommunicator(axes, axis, "all_reduce");
  checkSumWire("all_reduce", buffer.dtype, wire);
  group.allReduceSumAs(buffer.data, static_cast<std::size_t>(buffer.numel()), buffer.dtype, wire,
                       {step, "gradients"});
}

void sendOnAxis(const std::vector<Communicator *> &axes, int64_t axis, const Tensor &value,
                int64_t peer, int64_t tag, int64_t step) {
  axisCommunicator(axes, axis, "pipeline_send")
      .send(value.data, static_cast<std::size_t>(value.numel()), value.dtype,
            static_cast<int>(peer), static_cast<int>(tag), {step, "a pipeline stage's value"});
}

void recvOnAxis(const std::vector<Communicator *> &axes, int64_t axis, const Tensor &out,
                int64_t peer, int64_t tag, int64_t step) {
  axisCommunicator(axes, axis, "pipeline_recv")
      .recv(out.data, static_cast<std::size_t>(out.numel()), out.dtype, static_cast<int>(peer),
            static_cast<int>(tag), {step, "a pipeline stage's value"});
}

void reduceScatterOnAxis(const std::vector<Communicator *> &axes, int64_t axis, const Tensor &in,
                         const Tensor &out, DType wire, int64_t step) {
  Communicator &group = axisCommunicator(axes, axis, "reduce_scatter");
  checkReduceScatterSizes(group, "reduce_scatter", in, out, wire);
  const auto countPerRank = static_cast<std::size_t>(out.numel());
  if (in.dtype != out.dtype)
    group.reduceScatterSumWidened(in.data, out.as<float>(), countPerRank, {step, "gradients"});
  else
    group.reduceScatterSumAs(in.data, out.data, countPerRank, in.dtype, wire, {step, "gradients"});
}

void allGatherOnAxis(const std::vector<Communicator *> &axes, int64_t axis, const Tensor &in,
                     const Tensor &out, int64_t step) {
  Communicator &group = axisCommunicator(axes, axis, "all_gather");
  checkGatherSizes(group, "all_gather", in, out);
  group.allGather(in.data, out.data, static_cast<std::size_t>(in.numel()), in.dtype,
                  {step, "parameters"});
}

void checkReduceScatterSizes(const Communicator &group, const char *kernel, const Tensor &in,
                             const Tensor &out, DType wire) {
  if (in.dtype != out.dtype && !(in.dtype == DType::BF16 && out.dtype == DType::F32))
    rt::fail(kernel, "sums %s into %s (its own type, or bf16 into f32)", dtypeName(in.dtype),
             dtypeName(out.dtype));
  if (in.numel() != out.numel() * group.size())
    rt::fail(kernel, "%lld elements do not split into %d parts of %lld",
             static_cast<long long>(in.numel()), group.size(), static_cast<long long>(out.numel()));
  checkSumWire(kernel, in.dtype, wire);
}

void checkGatherSizes(const Communicator &group, const char *kernel, const Tensor &in,
                      const Tensor &out) {
  if (in.dtype != out.dtype || in.numel() * group.size() != out.numel())
    rt::fail(kernel, "%d parts of %lld elements do not make %lld", group.size(),
             static_cast<long long>(in.numel()), static_cast<long long>(out.numel()));
}

bool canSum(DType type) {
  return type == DType::F32 || type == DType::F64 || type == DType::I32 || type == DType::I64 ||
         type == DType::BF16;
}

Communicator::Communicator(int rank, int size, int worldRank, std::string axis,
                           CommOptions options)
    : rank_(rank), size_(size), worldRank_(worldRank), axis_(std::move(axis)),
      options_(options) {}

std::string Communicator::describe(CollectiveKind kind, const CallSite &site) const {
  std::string text = std::string("collective ") + collectiveName(kind);
  if (!site.what.empty())
    text += " of '" + std::string(site.what) + "'";
  text += " on axis '" + axis_ + "'";
  if (site.step >= 0)
    text += " at step " + std::to_string(site.step);
  return text;
}

void Communicator::fail(const std::string &message) {
  // One write, so that lines of ranks failing together do not interleave.
  std::string line = "cleave: error: rank " + std::to_string(worldRank_) + ": " + message + "\n";
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  endJob(3);
  // endJob does not return; a call through the vtable does not tell the
  // compiler so.
  std::_Exit(3);
}

void Communicator::fail(CollectiveKind kind, const CallSite &site, const std::string &problem) {
  fail(describe(kind, site) + ": " + problem);
}

void Communicator::timedOut(CollectiveKind kind, const CallSite &site) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", options_.timeoutSeconds);
  fail(describe(kind, site) + " timed out after " + seconds + " s");
}

void Communicator::checkSum(DType type, const CallSite &site, CollectiveKind kind) {
  if (!canSum(type))
    fail(kind, site,
         std::string("cannot sum ") + dtypeName(type) + " (f32, f64, i32, i64, bf16 only)");
}

void Communicator::checkPeer(int peer, const char *role, CollectiveKind kind,
                             const CallSite &site) {
  if (peer < 0 || peer >= size_)
    fail(kind, site,
         std::string(role) + " " + std::to_string(peer) + " is not a rank of this group of " +
             std::to_string(size_));
}

void Communicator::checkMessageEnds(int peer, int tag, CollectiveKind kind, const CallSite &site) {
  checkPeer(peer, "peer", kind, site);
  if (tag < 0)
    fail(kind, site, "tag " + std::to_string(tag) + " is negative");
}

template <typename Call>
void Communicator::run(CollectiveKind kind, uint64_t bufferBytes, const CallSite &site, Call &&call,
                       const std::function<bool()> &awaitMessage) {
  const uint64_t sent = ringBytesSent(kind, bufferBytes, size_);
  bytesSent_.add(kind, sent);
  if (!observer_) {
    call();
    return;
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point begin = Clock::now();
  // A collective's wait is a barrier over its group, a recv's the wait for
  // its message (where the backend can tell); a send has none, and a
  // barrier is all waiting.
  const bool collective =
      kind != CollectiveKind::Send && kind != CollectiveKind::Recv && kind != CollectiveKind::Barrier;
  Clock::time_point arrived = begin;
  if (observer_->separatesWait()) {
    if (collective && size_ > 1) {
      doBarrier(site);
      arrived = Clock::now();
    } else if (awaitMessage && awaitMessage()) {
      arrived = Clock::now();
    }
  }
  call();
  observer_->collective(*this, {kind, site, bufferBytes, sent, begin, arrived, Clock::now()});
}

void Communicator::allReduceSum(void *buffer, std::size_t count, DType type,
                                const CallSite &site) {
  checkSum(type, site, CollectiveKind::AllReduce);
  run(CollectiveKind::AllReduce, count * dtypeSize(type), site, [&] {
    if (options_.deterministic || type == DType::BF16)
      doAllReduceSumInRankOrder(buffer, count, type, site);
    else
      doAllReduceSum(buffer, count, type, site);
  });
}

void Communicator::allGather(const void *sent, void *received, std::size_t countPerRank,
                             DType type, const CallSite &site) {
  uint64_t full = static_cast<uint64_t>(size_) * countPerRank * dtypeSize(type);
  run(CollectiveKind::AllGather, full, site,
      [&] { doAllGather(sent, received, countPerRank, type, site); });
}

void Communicator::reduceScatterSum(const void *sent, void *received, std::size_t countPerRank,
                                    DType type, const CallSite &site) {
  checkSum(type, site, CollectiveKind::ReduceScatter);
  uint64_t full = static_cast<uint64_t>(size_) * countPerRank * dtypeSize(type);
  run(CollectiveKind::ReduceScatter, full, site, [&] {
    if (options_.deterministic || type == DType::BF16)
      doReduceScatterSumInRankOrder(sent, received, countPerRank, type, type, site);
    else
      doReduceScatterSum(sent, received, countPerRank, type, site);
  });
}

void Communicator::reduceScatterSumWidened(const void *sent, float *received,
                                           std::size_t countPerRank, const CallSite &site) {
  uint64_t full = static_cast<uint64_t>(size_) * countPerRank * dtypeSize(DType::BF16);
  run(CollectiveKind::ReduceScatter, full, site, [&] {
    doReduceScatterSumInRankOrder(sent, received, countPerRank, DType::BF16, DType::F32, site);
  });
}

void Communicator::reduceScatterSumUneven(const void *sent, const RankChunks &chunks,
                                          void *received, DType type, const CallSite &site) {
  checkSum(type, site, CollectiveKind::ReduceScatter);
  if (chunks.counts.size() != static_cast<std::size_t>(size_))
    fail(CollectiveKind::ReduceScatter, site,
         std::to_string(chunks.counts.size()) + " chunks for a group of " + std::to_string(size_) +
             " ranks");
  run(CollectiveKind::ReduceScatter, chunks.end() * dtypeSize(type), site,
      [&] { doReduceScatterSumUneven(sent, chunks, received, type, site); });
}

uint16_t *Communicator::wireCopy(int which, std::size_t count, CollectiveKind, const CallSite &) {
  wireCopies_[which].resize(count);
  return wireCopies_[which].data();
}

void Communicator::narrowToBFloat16(const float *values, std::size_t count, uint16_t *narrowed,
                                    CollectiveKind, const CallSite &) {
  for (std::size_t i = 0; i < count; ++i)
    narrowed[i] = toBFloat16(values[i]).bits;
}

void Communicator::widenFromBFloat16(const uint16_t *narrowed, std::size_t count, float *values,
                                     CollectiveKind, const CallSite &) {
  for (std::size_t i = 0; i < count; ++i)
    values[i] = fromBFloat16({narrowed[i]});
}

void Communicator::checkNarrowing(DType type, DType wire, CollectiveKind kind,
                                  const CallSite &site) {
  if (type != DType::F32 || wire != DType::BF16)
    fail(kind, site,
         std::string("cannot sum ") + dtypeName(type) + " through " + dtypeName(wire) +
             " (its own type, or f32 through bf16)");
}

void Communicator::allReduceSumAs(void *buffer, std::size_t count, DType type, DType wire,
                                  const CallSite &site) {
  if (wire == type)
    return allReduceSum(buffer, count, type, site);
  constexpr CollectiveKind kind = CollectiveKind::AllReduce;
  checkNarrowing(type, wire, kind, site);
  run(kind, count * dtypeSize(wire), site,
      [&] { doAllReduceSumThroughBFloat16(static_cast<float *>(buffer), count, site); });
}

void Communicator::doAllReduceSumThroughBFloat16(float *buffer, std::size_t count,
                                                 const CallSite &site) {
  constexpr CollectiveKind kind = CollectiveKind::AllReduce;
  uint16_t *narrowed = wireCopy(0, count, kind, site);
  narrowToBFloat16(buffer, count, narrowed, kind, site);
  doAllReduceSumInRankOrder(narrowed, count, DType::BF16, site);
  widenFromBFloat16(narrowed, count, buffer, kind, site);
}

void Communicator::reduceScatterSumAs(const void *sent, void *received, std::size_t countPerRank,
                                      DType type, DType wire, const CallSite &site) {
  if (wire == type)
    return reduceScatterSum(sent, received, countPerRank, type, site);
  constexpr CollectiveKind kind = CollectiveKind::ReduceScatter;
  checkNarrowing(type, wire, kind, site);
  run(kind, static_cast<uint64_t>(size_) * countPerRank * dtypeSize(wire), site, [&] {
    doReduceScatterSumThroughBFloat16(static_cast<const float *>(sent),
                                      static_cast<float *>(received), countPerRank, site);
  });
}

void Communicator::doReduceScatterSumThroughBFloat16(const float *sent, float *received,
                                                     std::size_t countPerRank,
                                                     const CallSite &site) {
  constexpr CollectiveKind kind = CollectiveKind::ReduceScatter;
  const std::size_t count = static_cast<std::size_t>(size_) * countPerRank;
  uint16_t *narrowed = wireCopy(0, count, kind, site);
  uint16_t *narrowedSum = wireCopy(1, countPerRank, kind, site);
  narrowToBFloat16(sent, count, narrowed, kind, site);
  doReduceScatterSumInRankOrder(narrowed, narrowedSum, countPerRank, DType::BF16, DType::BF16,
                                site);
  widenFromBFloat16(narrowedSum, countPerRank, received, kind, site);
}

void Communicator::broadcast(void *buffer, std::size_t count, DType type, int root,
                             const CallSite &site) {
  checkPeer(root, "root", CollectiveKind::Broadcast, site);
  run(CollectiveKind::Broadcast, count * dtypeSize(type), site,
      [&] { doBroadcast(buffer, count, type, root, site); });
}

void Communicator::barrier(const CallSite &site) {
  run(CollectiveKind::Barrier, 0, site, [&] { doBarrier(site); });
}

void Communicator::send(const void *buffer, std::size_t count, DType type, int peer, int tag,
                        const CallSite &site) {
  checkMessageEnds(peer, tag, CollectiveKind::Send, site);
  run(CollectiveKind::Send, count * dtypeSize(type), site,
      [&] { doSend(buffer, count, type, peer, tag, site); });
}

void Communicator::completeSends(const CallSite &site) { doCompleteSends(site); }

void Communicator::recv(void *buffer, std::size_t count, DType type, int peer, int tag,
                        const CallSite &site) {
  checkMessageEnds(peer, tag, CollectiveKind::Recv, site);
  run(
      CollectiveKind::Recv, count * dtypeSize(type), site,
      [&] { doRecv(buffer, count, type, peer, tag, site); },
      [&] { return doAwaitMessage(peer, tag, site); });
}

void Communicator::expect(std::size_t count, DType type, int peer, int tag, const CallSite &site) {
  checkMessageEnds(peer, tag, CollectiveKind::Recv, site);
  doExpect(count, type, peer, tag, site);
}

bool Communicator::doAwaitMessage(int, int, const CallSite &) { return false; }

LocalCommunicator::LocalCommunicator(std::string axis, CommOptions options)
    : Communicator(0, 1, 0, std::move(axis), options) {}

std::unique_ptr<Communicator> LocalCommunicator::duplicate(std::string &) {
  return std::make_unique<LocalCommunicator>(axis(), options());
}

void LocalCommunicator::doAllGather(const void *sent, void *received, std::size_t countPerRank,
                                    DType type, const CallSite &) {
  std::memmove(received, sent, countPerRank * dtypeSize(type));
}

void LocalCommunicator::doReduceScatterSum(const void *sent, void *received,
                                           std::size_t countPerRank, DType type,
                                           const CallSite &) {
  std::memmove(received, sent, countPerRank * dtypeSize(type));
}

// One rank: its own part is the sum, so any order is rank order.
void LocalCommunicator::doReduceScatterSumInRankOrder(const void *sent, void *received,
                                                      std::size_t countPerRank, DType type,
                                                      DType sumType, const CallSite &) {
  sumInRankOrder(sent, 1, countPerRank, type, received, sumType);
}

void LocalCommunicator::doReduceScatterSumUneven(const void *sent, const RankChunks &chunks,
                                                 void *received, DType type, const CallSite &) {
  std::memmove(received, static_cast<const char *>(sent) + chunks.offsets[0] * dtypeSize(type),
               chunks.counts[0] * dtypeSize(type));
}

void LocalCommunicator::doSend(const void *, std::size_t, DType, int, int,
                               const CallSite &site) {
  fail(CollectiveKind::Send, site, "a rank alone cannot send to itself (it would wait forever)");
}

void LocalCommunicator::doRecv(void *, std::size_t, DType, int, int, const CallSite &site) {
  fail(CollectiveKind::Recv, site,
       "a rank alone cannot receive from itself (it would wait forever)");
}

void LocalCommunicator::endJob(int exitCode) { std::exit(exitCode); }

RankChunks::RankChunks(std::size_t count, int n) : counts(n), offsets(n) {
  std::size_t offset = 0;
  for (int c = 0; c < n; ++c) {
    counts[c] = count / n + (static_cast<std::size_t>(c) < count % n ? 1 : 0);
    offsets[c] = offset;
    offset += counts[c];
  }
}

RankChunks RankChunks::owned(std::size_t first, std::size_t count, std::size_t slice, int n) {
  RankChunks chunks;
  chunks.counts.resize(n);
  chunks.offsets.resize(n);
  const std::size_t end = first + count;
  for (int r = 0; r < n; ++r) {
    const std::size_t low = std::clamp(r * slice, first, end),
                      high = std::clamp((r + 1) * slice, first, end);
    chunks.offsets[r] = low - first;
    chunks.counts[r] = high - low;
  }
  return chunks;
}

std::size_t RankChunks::end() const {
  std::size_t end = 0;
  for (std::size_t r = 0; r < counts.size(); ++r)
    end = std::max(end, offsets[r] + counts[r]);
  return end;
}

namespace {

template <typename T> void sumParts(const T *parts, int n, std::size_t count, T *sum) {
  for (std::size_t i = 0; i < count; ++i) {
    // Start from the first part itself, not from zero: 0 + -0.0 is +0.0.
    T total = parts[i];
    for (int r = 1; r < n; ++r)
      total = total + parts[r * count + i];
    sum[i] = total;
  }
}

template <typename Sum>
void sumBFloat16Parts(const uint16_t *parts, int n, std::size_t count, Sum *sum) {
  for (std::size_t i = 0; i < count; ++i)
    sum[i] = bfloat16PartsSum<Sum>(parts, n, count, i);
}

/// Integers add as unsigned: wrapping, not undefined, on overflow.
template <typename S, typename U>
void sumIntegerParts(const void *parts, int n, std::size_t count, void *sum) {
  static_assert(sizeof(S) == sizeof(U));
  sumParts(static_cast<const U *>(parts), n, count, static_cast<U *>(sum));
}

} // namespace

void sumInRankOrder(const void *parts, int n, std::size_t count, DType type, void *sum,
                    DType sumType) {
  if (type == DType::BF16 && sumType == DType::F32)
    return sumBFloat16Parts(static_cast<const uint16_t *>(parts), n, count,
                            static_cast<float *>(sum));
  switch (type) {
  case DType::F32:
    sumParts(static_cast<const float *>(parts), n, count, static_cast<float *>(sum));
    break;
  case DType::F64:
    sumParts(static_cast<const double *>(parts), n, count, static_cast<double *>(sum));
    break;
  case DType::I32: sumIntegerParts<int32_t, uint32_t>(parts, n, count, sum); break;
  case DType::I64: sumIntegerParts<int64_t, uint64_t>(parts, n, count, sum); break;
  case DType::BF16:
    sumBFloat16Parts(static_cast<const uint16_t *>(parts), n, count, static_cast<uint16_t *>(sum));
    break;
  default: break; // callers check canSum first
  }
}

} // namespace cleave::rt::comm

namespace cleave::rt {

Tensor rankPart(const StepContext &ctx, const Tensor &in, Dims part, int64_t axis) {
  comm::Communicator &group = comm::axisCommunicator(ctx.axes, axis, "all_slice");
  Tensor view{in.data, in.dtype, part};
  if (view.numel() * group.size() != in.numel())
    fail("all_slice", "%lld elements do not split into %d parts of %lld",
         static_cast<long long>(in.numel()), group.size(), static_cast<long long>(view.numel()));
  view.data = static_cast<char *>(in.data) + static_cast<std::size_t>(group.rank()) * view.bytes();
  return view;
}

} // namespace cleave::rt
