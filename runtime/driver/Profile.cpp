//===- Profile.cpp - where a training run's time goes --------------------===//

#include "runtime/driver/Profile.h"

#include "runtime/driver/Driver.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <limits>

namespace cleave::rt {
namespace {

using Clock = Timeline::Clock;

double secondsBetween(Clock::time_point begin, Clock::time_point end) {
  return std::chrono::duration<double>(end - begin).count();
}

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             Clock::now().time_since_epoch())
      .count();
}

/// Tags of the profile's own messages to rank 0 (no pipeline runs then).
constexpr int kClockTag = 7001, kStepsTag = 7002, kTraceSizeTag = 7003, kTraceTag = 7004;
/// Round trips per rank when aligning clocks; the quickest one counts.
constexpr int kClockRounds = 8;

/// /proc/sys/kernel/random/boot_id: the same for every process of one boot
/// of one machine; all zero bytes when it cannot be read.
constexpr size_t kBootIdBytes = 37;
std::array<char, kBootIdBytes> bootId() {
  std::array<char, kBootIdBytes> id{};
  if (std::FILE *file = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    if (std::fread(id.data(), 1, id.size() - 1, file) != id.size() - 1)
      id.fill('\0');
    std::fclose(file);
  }
  return id;
}

std::string formatMicros(int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", static_cast<double>(ns) / 1000);
  return text;
}

} // namespace

RunProfile::RunProfile(bool steps, bool trace, StepWindow traced, bool ops, bool trainingInfo)
    : traced(traced), measuring(steps || trace), ops(ops), trainingInfo(trainingInfo) {
  if (trace)
    timeline.emplace();
}

RunProfile::~RunProfile() { detach(); }

void RunProfile::attach(Backend &backend) {
  observed = backend.communicators();
  for (comm::Communicator *axis : observed)
    axis->observeWith(this);
  if (timeline) {
    marked = &backend;
    backend.setMarks(this, ops);
  }
}

void RunProfile::detach() {
  for (comm::Communicator *axis : observed)
    axis->observeWith(nullptr);
  observed.clear();
  if (marked)
    marked->setMarks(nullptr, false);
  marked = nullptr;
}

void RunProfile::alignClocks(comm::Communicator &world) {
  zeroNs = nowNs();
  if (!timeline || world.size() == 1)
    return;
  const comm::CallSite site{-1, "trace clock"};
  // Processes of one Linux boot share its CLOCK_MONOTONIC (steady_clock):
  // ranks on rank 0's machine take its clock as it is.
  std::array<char, kBootIdBytes> boot = bootId(), rootBoot = boot;
  world.broadcast(rootBoot.data(), rootBoot.size(), DType::U8, 0, site);
  const int32_t shared = boot == rootBoot && boot[0] != '\0';
  std::vector<int32_t> sharing(static_cast<size_t>(world.size()));
  world.allGather(&shared, sharing.data(), 1, DType::I32, site);
  // The others: Cristian's (NTP's) estimate, rank 0's time taken halfway
  // through the quickest round trip, so off by at most half that trip.
  int64_t quickest = std::numeric_limits<int64_t>::max();
  for (int peer = 1; peer < world.size(); ++peer) {
    if (sharing[peer] || (world.rank() != 0 && world.rank() != peer))
      continue;
    for (int round = 0; round < kClockRounds; ++round) {
      int64_t value = 0;
      if (world.rank() == 0) {
        world.recv(&value, 1, DType::I64, peer, kClockTag, site);
        value = nowNs();
        world.send(&value, 1, DType::I64, peer, kClockTag, site);
      } else {
        const int64_t sent = nowNs();
        world.send(&value, 1, DType::I64, 0, kClockTag, site);
        world.recv(&value, 1, DType::I64, 0, kClockTag, site);
        const int64_t back = nowNs();
        if (back - sent < quickest) {
          quickest = back - sent;
          offsetNs = value - (sent + back) / 2;
        }
      }
    }
  }
  world.broadcast(&zeroNs, 1, DType::I64, 0, site);
  alignment = "ranks on rank 0's machine (the same Linux boot_id) read its steady_clock "
              "(CLOCK_MONOTONIC) as it is; a rank on another machine adds its offset to rank "
              "0's clock, estimated from the quickest of " +
              std::to_string(kClockRounds) +
              " send/recv round trips with rank 0 (rank 0's time taken as the trip's midpoint: "
              "off by at most half the trip); each process's labels say which";
  if (world.rank() != 0)
    clockLabel = shared ? "clock: rank 0's (the same machine)"
                        : "clock offset " + formatMicros(offsetNs) + " us, round trip " +
                              formatMicros(quickest) + " us";
}

void RunProfile::beginStep(int64_t number) {
  if (!measuring)
    return;
  step = number;
  current = {};
  callCommunication = 0;
  inStep = true;
  stepBegin = Clock::now();
}

void RunProfile::input(int64_t k, Clock::time_point begin, uint64_t bytes, double readSeconds) {
  if (!measuring)
    return;
  const Clock::time_point end = Clock::now();
  current.input += secondsBetween(begin, end);
  current.inputRead += readSeconds;
  if (Timeline *kept = recording())
    kept->add(
        Track::Input, "read microbatch " + std::to_string(k), begin, end,
        nlohmann::ordered_json{
            {"step", step}, {"microbatch", k}, {"bytes", bytes}, {"gathered_seconds", readSeconds}}
            .dump());
}

void RunProfile::beginCall(int64_t k, ProgramEntryPoint entry, std::optional<int64_t> stage) {
  if (!measuring)
    return;
  microbatch = k;
  callStage = stage;
  phase = entry == ProgramEntryPoint::Apply            ? "optimizer"
          : entry == ProgramEntryPoint::NarrowWeights  ? "narrow_weights"
          : entry == ProgramEntryPoint::Backward       ? "backward"
          : entry == ProgramEntryPoint::BackwardWeight ? "backward_weight"
          : trainingInfo                               ? "training_info step"
                                                       : "forward";
  inCall = true;
  callBegin = phaseBegin = Clock::now();
}

void RunProfile::endCall() {
  if (!measuring)
    return;
  const Clock::time_point end = Clock::now();
  endOp(end);
  endPhase(end);
  inCall = false;
  current.compute += secondsBetween(callBegin, end);
}

void RunProfile::backward() {
  const Clock::time_point now = Clock::now();
  endOp(now);
  endPhase(now);
  phase = "backward";
  phaseBegin = now;
}

void RunProfile::op(const char *label) {
  const Clock::time_point now = Clock::now();
  endOp(now);
  opLabel = label;
  opBegin = now;
  opOpen = true;
}

void RunProfile::endPhase(Clock::time_point now) {
  // A training_info step updates in its forward; its apply is empty.
  Timeline *kept = recording();
  if (!kept || (trainingInfo && microbatch < 0))
    return;
  nlohmann::ordered_json args = {{"step", step}};
  if (microbatch >= 0)
    args["microbatch"] = microbatch;
  if (callStage)
    args["stage"] = *callStage;
  kept->add(Track::Compute, phase, phaseBegin, now, args.dump());
}

void RunProfile::endOp(Clock::time_point now) {
  if (Timeline *kept = opOpen ? recording() : nullptr)
    kept->add(Track::Ops, opLabel, opBegin, now);
  opOpen = false;
}

StepTimes RunProfile::endStep() {
  if (!measuring)
    return {};
  const Clock::time_point end = Clock::now();
  inStep = false;
  current.seconds = secondsBetween(stepBegin, end);
  current.compute -= callCommunication;
  if (Timeline *kept = recording())
    kept->add(Track::Compute, "step " + std::to_string(step), stepBegin, end,
              nlohmann::ordered_json{{"step", step}}.dump());
  return current;
}

void RunProfile::checkpoint(std::string_view what, int64_t number, Clock::time_point begin,
                            std::optional<uint64_t> bytes) {
  Timeline *kept = recording();
  if (!kept)
    return;
  nlohmann::ordered_json args = {{"step", number}};
  if (bytes)
    args["bytes"] = *bytes;
  kept->add(Track::Checkpoint, std::string(what) + " step " + std::to_string(number), begin,
            Clock::now(), args.dump());
}

void RunProfile::checkpointWrite(int64_t number, Clock::time_point begin, Clock::time_point end) {
  if (Timeline *kept = recording())
    kept->add(Track::BackgroundCheckpoint, "write checkpoint step " + std::to_string(number), begin,
              end, nlohmann::ordered_json{{"step", number}}.dump());
}

namespace {

/// A collective's arguments in the trace.
nlohmann::ordered_json collectiveArgs(const comm::Communicator &group, comm::CollectiveKind kind,
                                      uint64_t bufferBytes, uint64_t bytesSent, int64_t step,
                                      std::string_view what) {
  nlohmann::ordered_json args = {
      {"kind", comm::collectiveName(kind)}, {"axis", group.axis()},    {"group_size", group.size()},
      {"buffer_bytes", bufferBytes},        {"bytes_sent", bytesSent}, {"step", step}};
  if (!what.empty())
    args["what"] = std::string(what);
  return args;
}

} // namespace

void RunProfile::collective(const comm::Communicator &group, const comm::CollectiveTiming &timing) {
  const double seconds = secondsBetween(timing.begin, timing.end);
  totalCommunication += seconds;
  if (inStep) {
    current.communication += seconds;
    current.exposedCommunication += seconds;
    if (inCall)
      callCommunication += seconds;
  }
  Timeline *kept = recording();
  if (!kept)
    return;
  const char *kind = comm::collectiveName(timing.kind);
  // The whole call first, so a viewer nests the parts that share its ends.
  kept->add(Track::Communication, std::string(kind) + " " + group.axis(), timing.begin, timing.end,
            collectiveArgs(group, timing.kind, timing.bufferBytes, timing.bytesSent,
                           timing.site.step, timing.site.what)
                .dump());
  if (timing.arrived > timing.begin) {
    kept->add(Track::Communication, "wait", timing.begin, timing.arrived);
    kept->add(Track::Communication, "transfer", timing.arrived, timing.end);
  }
}

void RunProfile::background(const comm::BackgroundCollectives &collectives,
                            const comm::BackgroundCollectives::Report &report) {
  for (const comm::BackgroundCollectives::Finished &done : report.done) {
    const comm::Communicator &group = *collectives.group(done.meshAxis);
    if (inStep)
      current.communication += secondsBetween(done.begin, done.end);
    if (Timeline *kept = recording())
      kept->add(
          Track::BackgroundCommunication,
          std::string(comm::collectiveName(done.kind)) + " " + group.axis(), done.begin, done.end,
          collectiveArgs(group, done.kind, done.bufferBytes, done.bytesSent, done.step, done.what)
              .dump());
  }
  for (const comm::BackgroundCollectives::Wait &wait : report.waits) {
    const double seconds = secondsBetween(wait.begin, wait.end);
    totalCommunication += seconds;
    // The program waits for the collectives in its calls, and the driver
    // reports them after the step's last call.
    if (inStep) {
      current.exposedCommunication += seconds;
      callCommunication += seconds;
    }
    if (Timeline *kept = recording())
      kept->add(Track::Communication,
                std::string("wait for background ") + comm::collectiveName(wait.kind), wait.begin,
                wait.end);
  }
}

void RunProfile::finish(comm::Communicator &world, const std::vector<StepTimes> &mine,
                        const std::vector<std::string> &processNames,
                        std::vector<std::vector<StepTimes>> &ranks, std::string &trace) {
  detach();
  const comm::CallSite site{-1, "profile"};
  const int rank = world.rank();
  auto flatten = [](const std::vector<StepTimes> &steps) {
    std::vector<double> values;
    for (const StepTimes &s : steps)
      values.insert(values.end(), {s.seconds, s.compute, s.communication, s.exposedCommunication,
                                   s.input, s.inputRead});
    return values;
  };
  std::string part;
  if (timeline) {
    part = timeline->events(rank, processNames[rank], clockLabel, offsetNs - zeroNs);
  }
  if (rank != 0) {
    std::vector<double> values = flatten(mine);
    world.send(values.data(), values.size(), DType::F64, 0, kStepsTag, site);
    if (timeline) {
      int64_t size = static_cast<int64_t>(part.size());
      world.send(&size, 1, DType::I64, 0, kTraceSizeTag, site);
      world.send(part.data(), part.size(), DType::U8, 0, kTraceTag, site);
    }
    return;
  }
  ranks.assign(static_cast<size_t>(world.size()), {});
  ranks[0] = mine;
  std::vector<std::string> parts{part};
  for (int peer = 1; peer < world.size(); ++peer) {
    constexpr size_t kFields = 6; // flatten's
    std::vector<double> values(kFields * mine.size());
    world.recv(values.data(), values.size(), DType::F64, peer, kStepsTag, site);
    for (size_t i = 0; i < mine.size(); ++i) {
      const double *v = &values[kFields * i];
      ranks[peer].push_back({v[0], v[1], v[2], v[3], v[4], v[5]});
    }
    if (timeline) {
      int64_t size = 0;
      world.recv(&size, 1, DType::I64, peer, kTraceSizeTag, site);
      std::string text(static_cast<size_t>(size), '\0');
      world.recv(text.data(), text.size(), DType::U8, peer, kTraceTag, site);
      parts.push_back(std::move(text));
    }
  }
  if (timeline)
    trace = Timeline::document(parts, alignment);
}

} // namespace cleave::rt
