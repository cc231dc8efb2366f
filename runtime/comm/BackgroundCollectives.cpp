//===- BackgroundCollectives.cpp - collectives on a thread of their own ---===//

#include "runtime/comm/BackgroundCollectives.h"

#include "runtime/KernelError.h"
#include "runtime/OwnThread.h"

#include <algorithm>

namespace cleave::rt::comm {

BackgroundCollectives::BackgroundCollectives(std::vector<Axis> axes) : axes_(std::move(axes)) {
  thread_ = startOwnThread("cleave-comm", [this] { run(); });
}

Communicator *BackgroundCollectives::groupOf(int64_t meshAxis) const {
  for (const Axis &axis : axes_)
    if (axis.meshAxis == meshAxis)
      return axis.group.get();
  return nullptr;
}

BackgroundCollectives::~BackgroundCollectives() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void BackgroundCollectives::queue(Queued collective) {
  Communicator &group = *groupOf(collective.meshAxis);
  collective.written =
      collective.count * dtypeSize(collective.type) *
      (collective.kind == CollectiveKind::AllGather ? static_cast<std::size_t>(group.size()) : 1);
  collective.ready = group.markQueuedWork(collective.kind, {collective.step, collective.what});
  {
    std::lock_guard<std::mutex> lock(mutex_);
    unfinished_.push_back(std::move(collective));
  }
  changed_.notify_all();
}

void BackgroundCollectives::start(int64_t meshAxis, void *buffer, std::size_t count, DType type,
                                  DType wire, int64_t step, std::string what) {
  queue({CollectiveKind::AllReduce, meshAxis, buffer, nullptr, count, std::nullopt, type, wire,
         step, std::move(what)});
}

void BackgroundCollectives::startGather(int64_t meshAxis, const void *sent, void *received,
                                        std::size_t countPerRank, DType type, int64_t step,
                                        std::string what) {
  queue({CollectiveKind::AllGather, meshAxis, received, sent, countPerRank, std::nullopt, type,
         type, step, std::move(what)});
}

void BackgroundCollectives::startReduceScatter(int64_t meshAxis, const void *sent, void *received,
                                               std::size_t countPerRank, DType type, DType wire,
                                               int64_t step, std::string what) {
  queue({CollectiveKind::ReduceScatter, meshAxis, received, sent, countPerRank, std::nullopt, type,
         wire, step, std::move(what)});
}

void BackgroundCollectives::startReduceScatterUneven(int64_t meshAxis, void *span,
                                                     RankChunks chunks, DType type, int64_t step,
                                                     std::string what) {
  const std::size_t count = chunks.end();
  queue({CollectiveKind::ReduceScatter, meshAxis, span, span, count, std::move(chunks), type, type,
         step, std::move(what)});
}

void BackgroundCollectives::waitFor(CollectiveKind kind, const void *buffer, std::size_t bytes) {
  const TimePoint begin = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] {
    return std::none_of(unfinished_.begin(), unfinished_.end(),
                        [&](const Queued &q) { return !buffer || q.writes(buffer, bytes); });
  });
  report_.waits.push_back({kind, begin, std::chrono::steady_clock::now()});
}

BackgroundCollectives::Report BackgroundCollectives::takeReport() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(report_, {});
}

void BackgroundCollectives::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return stopping_ || !unfinished_.empty(); });
    // Stops only when nothing is left: every rank must finish what it
    // queued, or the other ranks' calls would wait for it.
    if (unfinished_.empty())
      return;
    // Left at the front while it runs, so that waiting for it waits.
    Queued next = unfinished_.front();
    lock.unlock();
    Communicator &group = *groupOf(next.meshAxis);
    // On a device, the kernels that make the buffers may still be running.
    if (next.ready)
      group.awaitQueuedWork(*next.ready, next.kind, {next.step, next.what});
    // The whole buffer: a sum's, a gather's output, a reduce-scatter's input
    // (an uneven one's span).
    const uint64_t bytes = next.count * dtypeSize(next.wire) *
                           (next.sent && !next.chunks ? static_cast<uint64_t>(group.size()) : 1);
    Finished done{next.kind,
                  next.meshAxis,
                  next.step,
                  std::move(next.what),
                  bytes,
                  ringBytesSent(next.kind, bytes, group.size()),
                  std::chrono::steady_clock::now(),
                  {}};
    const CallSite site{next.step, done.what};
    if (next.chunks)
      group.reduceScatterSumUneven(next.sent, *next.chunks,
                                   static_cast<char *>(next.buffer) +
                                       next.chunks->offsets[group.rank()] * dtypeSize(next.type),
                                   next.type, site);
    else if (next.kind == CollectiveKind::AllGather)
      group.allGather(next.sent, next.buffer, next.count, next.type, site);
    else if (next.kind == CollectiveKind::ReduceScatter)
      group.reduceScatterSumAs(next.sent, next.buffer, next.count, next.type, next.wire, site);
    else
      group.allReduceSumAs(next.buffer, next.count, next.type, next.wire, site);
    done.end = std::chrono::steady_clock::now();
    lock.lock();
    report_.done.push_back(std::move(done));
    unfinished_.pop_front();
    changed_.notify_all();
  }
}

namespace {

/// `background`, which must run the collectives of mesh axis `axis`: the
/// driver makes one over every axis a program starts them on.
BackgroundCollectives &backgroundOf(BackgroundCollectives *background, int64_t axis,
                                    const char *kernel) {
  if (!background || !background->group(axis))
    rt::fail(kernel, "no background collectives over mesh axis %lld: the program runs without them",
             static_cast<long long>(axis));
  return *background;
}

} // namespace

void startAllReduceOnAxis(BackgroundCollectives *background, bool onlyOnLastMicrobatch,
                          bool lastMicrobatch, int64_t axis, const Tensor &buffer, DType wire,
                          int64_t step) {
  BackgroundCollectives &sums = backgroundOf(background, axis, "all_reduce_start");
  checkSumWire("all_reduce_start", buffer.dtype, wire);
  if (lastMicrobatch || !onlyOnLastMicrobatch)
    sums.start(axis, buffer.data, static_cast<std::size_t>(buffer.numel()), buffer.dtype, wire,
               step, onlyOnLastMicrobatch ? "gradients" : "partial sums");
}

void startAllGatherOnAxis(BackgroundCollectives *background, int64_t axis, const Tensor &in,
                          const Tensor &out, int64_t step) {
  BackgroundCollectives &gathers = backgroundOf(background, axis, "all_gather_start");
  checkGatherSizes(*gathers.group(axis), "all_gather_start", in, out);
  gathers.startGather(axis, in.data, out.data, static_cast<std::size_t>(in.numel()), in.dtype, step,
                      "parameters");
}

void startReduceScatterOnAxis(BackgroundCollectives *background, int64_t axis, const Tensor &in,
                              const Tensor &out, DType wire, int64_t step) {
  BackgroundCollectives &collectives = backgroundOf(background, axis, "reduce_scatter_start");
  checkReduceScatterSizes(*collectives.group(axis), "reduce_scatter_start", in, out, wire);
  collectives.startReduceScatter(axis, in.data, out.data, static_cast<std::size_t>(out.numel()),
                                 in.dtype, wire, step, "gradients");
}

void startOwnedReduceScatterOnAxis(BackgroundCollectives *background, bool onlyOnLastMicrobatch,
                                   bool lastMicrobatch, int64_t axis, const Tensor &span,
                                   DType wire, int64_t first, int64_t slice, int64_t step) {
  constexpr const char *kernel = "reduce_scatter_owned_start";
  BackgroundCollectives &collectives = backgroundOf(background, axis, kernel);
  if (wire != span.dtype)
    rt::fail(kernel, "sums %s through %s: only through its own type is built",
             dtypeName(span.dtype), dtypeName(wire));
  if (first < 0 || slice <= 0)
    rt::fail(kernel, "a span from element %lld of slices of %lld elements",
             static_cast<long long>(first), static_cast<long long>(slice));
  if (lastMicrobatch || !onlyOnLastMicrobatch)
    collectives.startReduceScatterUneven(
        axis, span.data,
        RankChunks::owned(static_cast<std::size_t>(first), static_cast<std::size_t>(span.numel()),
                          static_cast<std::size_t>(slice), collectives.group(axis)->size()),
        span.dtype, step, "gradients");
}

void waitForCollective(BackgroundCollectives *background, CollectiveKind kind, const char *kernel,
                       int64_t axis, const Tensor &out) {
  backgroundOf(background, axis, kernel)
      .waitFor(kind, out.data, static_cast<std::size_t>(out.numel()) * dtypeSize(out.dtype));
}

} // namespace cleave::rt::comm
