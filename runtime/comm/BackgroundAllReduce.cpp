//===- BackgroundAllReduce.cpp - all-reduces on a thread of their own -----===//

#include "runtime/comm/BackgroundAllReduce.h"

#include "runtime/KernelError.h"
#include "runtime/OwnThread.h"

namespace cleave::rt::comm {

BackgroundAllReduce::BackgroundAllReduce(std::unique_ptr<Communicator> group, int64_t meshAxis)
    : group_(std::move(group)), meshAxis_(meshAxis) {
  thread_ = startOwnThread("cleave-comm", [this] { run(); });
}

BackgroundAllReduce::~BackgroundAllReduce() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void BackgroundAllReduce::start(void *buffer, std::size_t count, DType type, DType wire,
                                int64_t step, std::string what) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queued_.push_back({buffer, count, type, wire, step, std::move(what)});
    ++unfinished_;
  }
  changed_.notify_all();
}

void BackgroundAllReduce::waitAll() {
  const auto begin = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return unfinished_ == 0; });
  report_.waits.push_back({begin, std::chrono::steady_clock::now()});
}

BackgroundAllReduce::Report BackgroundAllReduce::takeReport() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(report_, {});
}

void BackgroundAllReduce::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return stopping_ || !queued_.empty(); });
    // Stops only when nothing is left: every rank must finish what it
    // queued, or the other ranks' calls would wait for it.
    if (queued_.empty())
      return;
    Queued sum = std::move(queued_.front());
    queued_.pop_front();
    lock.unlock();
    const uint64_t bytes = sum.count * dtypeSize(sum.wire);
    Finished done{sum.step,
                  std::move(sum.what),
                  bytes,
                  ringBytesSent(CollectiveKind::AllReduce, bytes, group_->size()),
                  std::chrono::steady_clock::now(),
                  {}};
    group_->allReduceSumAs(sum.buffer, sum.count, sum.type, sum.wire, {sum.step, done.what});
    done.end = std::chrono::steady_clock::now();
    lock.lock();
    report_.sums.push_back(std::move(done));
    --unfinished_;
    changed_.notify_all();
  }
}

namespace {

/// `background`, which must sum over mesh axis `axis`: the driver makes one
/// for every program that starts sums.
BackgroundAllReduce &backgroundOf(BackgroundAllReduce *background, int64_t axis,
                                  const char *kernel) {
  if (!background || background->meshAxis() != axis)
    rt::fail(kernel, "no background all-reduce over mesh axis %lld: the program runs without one",
             static_cast<long long>(axis));
  return *background;
}

} // namespace

void startAllReduceOnAxis(BackgroundAllReduce *background, bool lastMicrobatch, int64_t axis,
                          const Tensor &buffer, DType wire, int64_t step) {
  BackgroundAllReduce &sums = backgroundOf(background, axis, "all_reduce_start");
  checkSumWire(sums.group(), "all_reduce_start", buffer.dtype, wire);
  if (lastMicrobatch)
    sums.start(buffer.data, static_cast<std::size_t>(buffer.numel()), buffer.dtype, wire, step,
               "gradients");
}

void waitForAllReduces(BackgroundAllReduce *background, int64_t axis) {
  backgroundOf(background, axis, "all_reduce_wait").waitAll();
}

} // namespace cleave::rt::comm
