//===- PipelineSimulator.h - pipeline schedules and their timing -*- C++ -*-===//
//
// The schedules a pipeline's ranks follow, built and checked by one
// simulator: cleave-pipeline-schedule builds each rank's action list with it,
// cleave-verify-pipeline-schedule proves a list cannot deadlock with it, and
// `cleave schedule` prints its predicted bubble for any P and M.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PASSES_PIPELINESIMULATOR_H
#define CLEAVE_PASSES_PIPELINESIMULATOR_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cleave {

enum class ScheduleKind { GPipe, OneFOneB, Interleaved, ZeroBubbleH1 };

/// "gpipe", "1f1b", "interleaved" or "zb-h1".
std::optional<ScheduleKind> parseScheduleKind(llvm::StringRef name);
llvm::StringRef scheduleKindName(ScheduleKind kind);

/// One step of a rank's list. F runs a microbatch's forward through a stage
/// (receiving what the stage reads from earlier ones, sending what later
/// ones read); B its whole backward (receiving the gradients of what it
/// sent, sending those of what it received); zb-h1 splits B into I, the
/// gradients of the stage's inputs (what the earlier stages wait for), and
/// W, those of its parameters (which no other stage waits for).
struct PipelineAction {
  enum Kind { F, B, I, W } kind;
  int64_t microbatch;
  int64_t stage;

  /// "F3@1": kind, microbatch, stage.
  std::string str() const;
  static std::optional<PipelineAction> parse(llvm::StringRef text);
  bool operator==(const PipelineAction &other) const {
    return kind == other.kind && microbatch == other.microbatch && stage == other.stage;
  }
};

/// The shape of a pipeline: P ranks, V stages per rank (stage k on rank
/// k mod P), M microbatches a step, and which stages each stage sends to
/// (each stage's forward waits for the forwards of those that send to it;
/// its backward for the backwards of those it sends to).
struct PipelineShape {
  int64_t ranks = 1;
  int64_t virtualStages = 1;
  int64_t microbatches = 1;
  /// For each stage, the later stages it sends to; empty: a chain.
  std::vector<std::vector<int64_t>> sendsTo;

  int64_t stages() const { return ranks * virtualStages; }
  int64_t rankOf(int64_t stage) const { return stage % ranks; }
  /// sendsTo, or the chain 0 -> 1 -> ... when it is empty.
  std::vector<std::vector<int64_t>> edges() const;
};

/// What one action costs on each stage, in any unit (the bubble is a ratio).
/// B is I + W when a schedule does not split it.
struct StageCosts {
  std::vector<double> forward, inputGrad, weightGrad;

  /// The same F, I and W on every stage.
  static StageCosts uniform(int64_t stages, double f, double i, double w);
};

/// Every rank's list, in the order it runs them.
using PipelineSchedule = std::vector<std::vector<PipelineAction>>;

/// The list each rank follows under `kind`: list scheduling of every
/// microbatch's actions in time (simulated with `costs`), each rank taking
/// the ready action its schedule prefers, with as many microbatches in flight
/// as the schedule allows (gpipe: all; 1f1b: P - r on rank r; interleaved:
/// Megatron's warmup plus one, M a multiple of P; zb-h1: as 1f1b, counted
/// until W). Fails, with `error` set, when the shape does not admit the kind.
std::optional<PipelineSchedule> buildSchedule(ScheduleKind kind, const PipelineShape &shape,
                                              const StageCosts &costs, std::string &error);

/// A schedule run in time: when each rank is busy and the whole step ends.
struct SimulatedStep {
  double makespan = 0;
  std::vector<double> busy; // per rank
  std::vector<double> ends; // per rank: when its last action ends
  /// Idle time over step time, averaged over the ranks.
  double bubble() const;
};

/// Runs `schedule` (each rank strictly in its order; a send never waits, a
/// receive waits for its send) with `costs`. Fails, with `error` naming the
/// ranks and actions, when an action is missing, repeated, on the wrong rank,
/// or waits for something its rank's order or another's never lets happen
/// (a deadlock).
std::optional<SimulatedStep> simulateSchedule(const PipelineSchedule &schedule,
                                              const PipelineShape &shape,
                                              const StageCosts &costs, std::string &error);

} // namespace cleave

#endif
