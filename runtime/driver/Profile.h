//===- Profile.h - where a training run's time goes -------------*- C++ -*-===//
//
// Internal to the driver. Each step is cut into input (gathering and copying
// the microbatches), compute (the program's forward, backward and optimizer
// calls) and communication (the collectives those calls make, timed by the
// communicators: runtime/comm/Communicator.h), per rank; --log-json reports
// the figures and the progress line the communication share. With --trace
// the same moments go into a Timeline (runtime/Timeline.h) too, and the
// program's marks split each microbatch into forward and backward
// (runtime/StepContext.h) and, with --trace-ops, into kernels; at the end
// every rank's timeline is gathered to rank 0 on one clock.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_DRIVER_PROFILE_H
#define CLEAVE_RUNTIME_DRIVER_PROFILE_H

#include "runtime/ProgramEntry.h"
#include "runtime/StepContext.h"
#include "runtime/StepWindow.h"
#include "runtime/Timeline.h"
#include "runtime/comm/BackgroundCollectives.h"
#include "runtime/comm/Communicator.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cleave::rt {

class Backend;

/// One step of one rank, in seconds.
struct StepTimes {
  /// From the step's start to its loss read back.
  double seconds = 0;
  /// In the program's calls, less the collectives they made and their
  /// waits for the background collectives.
  double compute = 0;
  /// In collectives (waiting for the other ranks and moving data): the
  /// main thread's, and the background collectives'.
  double communication = 0;
  /// The part of it that compute did not hide: the main thread's
  /// collectives and its waits for the background sums.
  double exposedCommunication = 0;
  /// Waiting for the input thread's microbatches and copying them to the
  /// device (runtime/driver/InputPrefetch.h).
  double input = 0;
  /// The input thread's gathering of them, beside the step.
  double inputRead = 0;
};

class RunProfile final : public comm::CollectiveObserver, public ProgramMarks {
public:
  /// With `steps` (--log-json) each step's figures are measured; with
  /// `trace` they are and a timeline is kept too, of the steps in `traced`
  /// (and with `ops` a span per kernel). Without either only the
  /// collectives' total is kept, for the progress line: a step then reads
  /// no clock.
  RunProfile(bool steps, bool trace, StepWindow traced, bool ops, bool trainingInfo);
  RunProfile(const RunProfile &) = delete;
  RunProfile &operator=(const RunProfile &) = delete;
  ~RunProfile() override;

  /// Observes the collectives of the backend's communicators and, when
  /// tracing, takes the program's marks; detached again by finish() or the
  /// end of the profile.
  void attach(Backend &backend);
  /// Aligns this rank's clock with rank 0's over `world` (a collective);
  /// when tracing. A rank on rank 0's machine shares its clock; one on
  /// another estimates the offset from round trips of a send and a recv.
  void alignClocks(comm::Communicator &world);

  /// The time for input() and checkpoint() to start from: none (the
  /// clock's epoch, unread) when not measuring.
  Timeline::Clock::time_point now() const {
    return measuring ? Timeline::Clock::now() : Timeline::Clock::time_point();
  }

  void beginStep(int64_t step);
  /// A microbatch waited for and copied from `begin` to now, which the
  /// input thread gathered in `readSeconds`.
  void input(int64_t microbatch, Timeline::Clock::time_point begin, uint64_t bytes,
             double readSeconds);
  /// The program's `entry` begins / ends: the forward or (a pipeline
  /// stage's) backward of microbatch `microbatch`, or the optimizer's apply
  /// (microbatch -1); `stage`, a pipeline stage's, names it in the trace.
  void beginCall(int64_t microbatch, ProgramEntryPoint entry, std::optional<int64_t> stage);
  void endCall();
  /// Ends the step and returns its figures (zero when not measuring).
  StepTimes endStep();
  /// Training stood still from `begin` to now for checkpoint `step`: to
  /// write it ("checkpoint"), or, written behind training, to copy the
  /// weights for it ("checkpoint") and later to publish it ("publish
  /// checkpoint"); of `bytes` on all ranks (known to rank 0 alone).
  void checkpoint(std::string_view what, int64_t step, Timeline::Clock::time_point begin,
                  std::optional<uint64_t> bytes);
  /// This rank's file of checkpoint `step`, written behind training from
  /// `begin` to `end` (--checkpoint-async).
  void checkpointWrite(int64_t step, Timeline::Clock::time_point begin,
                       Timeline::Clock::time_point end);

  /// The background collectives and the waits for them since the last
  /// report of `collectives` (runtime/comm/BackgroundCollectives.h).
  void background(const comm::BackgroundCollectives &collectives,
                  const comm::BackgroundCollectives::Report &report);

  /// Seconds the main thread spent in collectives, or waiting for them,
  /// since the run began.
  double communicationSeconds() const { return totalCommunication; }

  /// Stops observing, and gathers every rank's step figures and timeline to
  /// rank 0 of `world` (a collective: every rank calls it). On rank 0,
  /// `ranks[r]` are rank r's steps and `trace` the trace file's text (when
  /// tracing); `processNames[r]` names rank r's process.
  void finish(comm::Communicator &world, const std::vector<StepTimes> &mine,
              const std::vector<std::string> &processNames,
              std::vector<std::vector<StepTimes>> &ranks, std::string &trace);

  // comm::CollectiveObserver
  bool separatesWait() const override { return timeline.has_value(); }
  void collective(const comm::Communicator &group, const comm::CollectiveTiming &timing) override;
  // ProgramMarks
  void backward() override;
  void op(const char *label) override;

private:
  using Clock = Timeline::Clock;
  /// The timeline while the step is one it keeps; else null.
  Timeline *recording() { return timeline && traced.contains(step) ? &*timeline : nullptr; }
  void endPhase(Clock::time_point now);
  void endOp(Clock::time_point now);
  void detach();

  std::optional<Timeline> timeline;
  StepWindow traced;
  bool measuring;
  bool ops;
  bool trainingInfo;
  std::vector<comm::Communicator *> observed;
  Backend *marked = nullptr;
  /// rank 0's clock minus this rank's, estimated by alignClocks.
  int64_t offsetNs = 0;
  /// rank 0's clock when the clocks were aligned: the trace's 0.
  int64_t zeroNs = 0;
  std::string alignment = "one rank";
  /// How this rank's clock was aligned, for its process in the trace.
  std::string clockLabel;

  int64_t step = 0;
  bool inStep = false;
  /// Between beginCall and endCall: the collectives then are the program's.
  bool inCall = false;
  /// The step's collectives and waits made inside the program's calls
  /// (those outside, such as a pipeline's loss sum, were never compute).
  double callCommunication = 0;
  Clock::time_point stepBegin, callBegin, phaseBegin, opBegin;
  int64_t microbatch = 0;
  std::optional<int64_t> callStage;
  std::string phase, opLabel;
  bool opOpen = false;
  StepTimes current;
  double totalCommunication = 0;
};

} // namespace cleave::rt

#endif
