//===- PipelineSimulator.cpp - pipeline schedules and their timing --------===//
//
// One timeline serves both directions: buildSchedule lets each rank take the
// ready action its schedule prefers, simulateSchedule makes it take the next
// one of its list. Either way the rank whose action can start earliest goes
// next, so the time an action starts never depends on one chosen later.
//
//===----------------------------------------------------------------------===//

#include "passes/PipelineSimulator.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <functional>
#include <limits>

namespace cleave {

std::optional<ScheduleKind> parseScheduleKind(llvm::StringRef name) {
  if (name == "gpipe")
    return ScheduleKind::GPipe;
  if (name == "1f1b")
    return ScheduleKind::OneFOneB;
  if (name == "interleaved")
    return ScheduleKind::Interleaved;
  if (name == "zb-h1")
    return ScheduleKind::ZeroBubbleH1;
  return std::nullopt;
}

llvm::StringRef scheduleKindName(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::GPipe:
    return "gpipe";
  case ScheduleKind::OneFOneB:
    return "1f1b";
  case ScheduleKind::Interleaved:
    return "interleaved";
  case ScheduleKind::ZeroBubbleH1:
    return "zb-h1";
  }
  return "?";
}

static constexpr llvm::StringLiteral kKindLetters = "FBIW";

std::string PipelineAction::str() const {
  return std::string(1, kKindLetters[kind]) + std::to_string(microbatch) + "@" +
         std::to_string(stage);
}

std::optional<PipelineAction> PipelineAction::parse(llvm::StringRef text) {
  if (text.empty())
    return std::nullopt;
  size_t letter = kKindLetters.find(text.front());
  auto [microbatch, stage] = text.drop_front().split('@');
  PipelineAction action{PipelineAction::F, 0, 0};
  if (letter == llvm::StringRef::npos || microbatch.getAsInteger(10, action.microbatch) ||
      stage.getAsInteger(10, action.stage) || action.microbatch < 0 || action.stage < 0)
    return std::nullopt;
  action.kind = static_cast<Kind>(letter);
  return action;
}

std::vector<std::vector<int64_t>> PipelineShape::edges() const {
  if (!sendsTo.empty())
    return sendsTo;
  std::vector<std::vector<int64_t>> chain(stages());
  for (int64_t s = 0; s + 1 < stages(); ++s)
    chain[s] = {s + 1};
  return chain;
}

StageCosts StageCosts::uniform(int64_t stages, double f, double i, double w) {
  return {std::vector<double>(stages, f), std::vector<double>(stages, i),
          std::vector<double>(stages, w)};
}

double SimulatedStep::bubble() const {
  if (makespan <= 0 || busy.empty())
    return 0;
  double idle = 0;
  for (double b : busy)
    idle += makespan - b;
  return idle / (makespan * busy.size());
}

namespace {

constexpr double kEpsilon = 1e-9;

/// Every rank's progress through one step in time.
class Timeline {
public:
  Timeline(const PipelineShape &shape, const StageCosts &costs, bool splitBackward)
      : shape(shape), costs(costs), splitBackward(splitBackward), edges(shape.edges()),
        receivesFrom(shape.stages()), finish(4 * shape.microbatches * shape.stages(), -1),
        rankFree(shape.ranks, 0), busy(shape.ranks, 0) {
    for (int64_t s = 0; s < shape.stages(); ++s)
      for (int64_t t : edges[s])
        receivesFrom[t].push_back(s);
  }

  /// When `a` can start on its rank, or none while something it waits for
  /// has not run.
  std::optional<double> startTime(const PipelineAction &a) const {
    double ready = rankFree[shape.rankOf(a.stage)];
    auto after = [&](PipelineAction::Kind kind, int64_t stage) {
      double done = finish[index({kind, a.microbatch, stage})];
      if (done < 0)
        return false;
      ready = std::max(ready, done);
      return true;
    };
    const PipelineAction::Kind backward = splitBackward ? PipelineAction::I : PipelineAction::B;
    switch (a.kind) {
    case PipelineAction::F:
      for (int64_t from : receivesFrom[a.stage])
        if (!after(PipelineAction::F, from))
          return std::nullopt;
      break;
    case PipelineAction::B:
    case PipelineAction::I:
      if (!after(PipelineAction::F, a.stage))
        return std::nullopt;
      for (int64_t to : edges[a.stage])
        if (!after(backward, to))
          return std::nullopt;
      break;
    case PipelineAction::W:
      if (!after(PipelineAction::I, a.stage))
        return std::nullopt;
      break;
    }
    return ready;
  }

  void run(const PipelineAction &a, double start) {
    double cost = costOf(a);
    int64_t rank = shape.rankOf(a.stage);
    finish[index(a)] = start + cost;
    rankFree[rank] = start + cost;
    busy[rank] += cost;
  }

  SimulatedStep result() const {
    return {*std::max_element(rankFree.begin(), rankFree.end()), busy, rankFree};
  }

  /// Runs `actions` actions: each time, every rank offers the action it
  /// would take next (`next`: the action and its start time, or none), and
  /// the one that starts earliest runs. False when none can start before
  /// all have run (a deadlock). A rank's offer depends on its own progress
  /// and on what its next actions wait for, so after each action only the
  /// rank that took it and the ranks waiting on it offer anew (a 64-rank
  /// pipeline would otherwise ask every rank for every action).
  bool runAll(int64_t actions,
         const std::function<std::optional<std::pair<PipelineAction, double>>(int64_t)> &next,
         const std::function<void(int64_t, const PipelineAction &)> &taken) {
    std::vector<std::optional<std::pair<PipelineAction, double>>> offers(shape.ranks);
    std::vector<bool> stale(shape.ranks, true);
    for (int64_t left = actions; left > 0; --left) {
      std::optional<std::pair<PipelineAction, double>> best;
      int64_t bestRank = -1;
      for (int64_t rank = 0; rank < shape.ranks; ++rank) {
        if (stale[rank]) {
          offers[rank] = next(rank);
          stale[rank] = false;
        }
        const auto &offer = offers[rank];
        if (offer && (!best || offer->second < best->second - kEpsilon)) {
          best = offer;
          bestRank = rank;
        }
      }
      if (!best)
        return false;
      run(best->first, best->second);
      taken(bestRank, best->first);
      stale[bestRank] = true;
      for (int64_t stage : waitingStages(best->first))
        stale[shape.rankOf(stage)] = true;
    }
    return true;
  }

private:
  const PipelineShape &shape;
  const StageCosts &costs;
  bool splitBackward;
  std::vector<std::vector<int64_t>> edges, receivesFrom;
  std::vector<double> finish;
  std::vector<double> rankFree, busy;

  /// The stages with actions that wait for `a` on another stage (startTime):
  /// a forward's receivers, a backward's senders.
  llvm::ArrayRef<int64_t> waitingStages(const PipelineAction &a) const {
    switch (a.kind) {
    case PipelineAction::F:
      return edges[a.stage];
    case PipelineAction::B:
    case PipelineAction::I:
      return receivesFrom[a.stage];
    case PipelineAction::W:
      return {};
    }
    return {};
  }

  int64_t index(const PipelineAction &a) const {
    return (static_cast<int64_t>(a.kind) * shape.microbatches + a.microbatch) * shape.stages() +
           a.stage;
  }

  double costOf(const PipelineAction &a) const {
    switch (a.kind) {
    case PipelineAction::F:
      return costs.forward[a.stage];
    case PipelineAction::B:
      return costs.inputGrad[a.stage] + costs.weightGrad[a.stage];
    case PipelineAction::I:
      return costs.inputGrad[a.stage];
    case PipelineAction::W:
      return costs.weightGrad[a.stage];
    }
    return 0;
  }
};

/// The order in which rank `rank` takes its forwards and its backwards
/// (kind `backward`): microbatch by microbatch, and with several stages per
/// rank, Megatron's interleaving: P microbatches through one stage, then the
/// same P through the next, forwards through the stages in order and
/// backwards in reverse.
std::vector<PipelineAction> rankOrder(const PipelineShape &shape, int64_t rank,
                                      PipelineAction::Kind kind) {
  const int64_t P = shape.ranks, V = shape.virtualStages, M = shape.microbatches;
  std::vector<PipelineAction> order;
  for (int64_t k = 0; k < V * M; ++k) {
    int64_t chunk = (k / P) % V;
    int64_t microbatch = (k / (P * V)) * P + k % P;
    if (kind != PipelineAction::F)
      chunk = V - 1 - chunk;
    order.push_back({kind, microbatch, chunk * P + rank});
  }
  return order;
}

/// Megatron's interleaved 1F1B: rank r runs (P - r - 1) x 2 + (V - 1) x P
/// forwards, then a forward and a backward in turn, then the backwards left.
/// A fixed pattern rather than list scheduling: taking a ready backward
/// first, as 1f1b does, would hold back the forwards the later ranks wait
/// for.
PipelineSchedule interleavedSchedule(const PipelineShape &shape) {
  const int64_t P = shape.ranks, V = shape.virtualStages, M = shape.microbatches;
  PipelineSchedule schedule(P);
  for (int64_t rank = 0; rank < P; ++rank) {
    std::vector<PipelineAction> forwards = rankOrder(shape, rank, PipelineAction::F);
    std::vector<PipelineAction> backwards = rankOrder(shape, rank, PipelineAction::B);
    const int64_t total = V * M;
    const int64_t warmup = std::min((P - rank - 1) * 2 + (V - 1) * P, total);
    std::vector<PipelineAction> &list = schedule[rank];
    list.assign(forwards.begin(), forwards.begin() + warmup);
    for (int64_t k = 0; k < total - warmup; ++k) {
      list.push_back(forwards[warmup + k]);
      list.push_back(backwards[k]);
    }
    list.insert(list.end(), backwards.begin() + (total - warmup), backwards.end());
  }
  return schedule;
}

} // namespace

std::optional<PipelineSchedule> buildSchedule(ScheduleKind kind, const PipelineShape &shape,
                                              const StageCosts &costs, std::string &error) {
  const int64_t P = shape.ranks, V = shape.virtualStages, M = shape.microbatches;
  if (P < 1 || V < 1 || M < 1) {
    error = "a pipeline needs at least one rank, stage per rank and microbatch";
    return std::nullopt;
  }
  if (kind == ScheduleKind::Interleaved && M % P != 0) {
    error = "the interleaved schedule needs the microbatches (" + std::to_string(M) +
            ") to be a multiple of the pipeline ranks (" + std::to_string(P) + ")";
    return std::nullopt;
  }
  if (kind != ScheduleKind::Interleaved && V != 1) {
    error = "the " + scheduleKindName(kind).str() +
            " schedule runs one stage per rank; virtual stages need the interleaved one";
    return std::nullopt;
  }
  if ((kind == ScheduleKind::OneFOneB || kind == ScheduleKind::ZeroBubbleH1) && M < P) {
    error = "the " + scheduleKindName(kind).str() + " schedule needs at least as many " +
            "microbatches (" + std::to_string(M) + ") as pipeline ranks (" + std::to_string(P) +
            ")";
    return std::nullopt;
  }
  if (kind == ScheduleKind::Interleaved)
    return interleavedSchedule(shape);
  const bool split = kind == ScheduleKind::ZeroBubbleH1;
  const PipelineAction::Kind backward = split ? PipelineAction::I : PipelineAction::B;

  // Per rank: its forwards, backwards and (zb-h1) weight gradients in order,
  // how far it is through each, and how many microbatches it may hold.
  struct RankQueues {
    std::vector<PipelineAction> forwards, backwards, weights;
    size_t f = 0, b = 0, w = 0;
    int64_t limit;
    int64_t weightLag = 0;
    int64_t inFlight() const { return int64_t(f) - int64_t(b); }
    int64_t weightsPending() const { return int64_t(b) - int64_t(w); }
  };
  std::vector<RankQueues> queues(P);
  for (int64_t rank = 0; rank < P; ++rank) {
    RankQueues &q = queues[rank];
    q.forwards = rankOrder(shape, rank, PipelineAction::F);
    q.backwards = rankOrder(shape, rank, backward);
    if (split)
      q.weights = rankOrder(shape, rank, PipelineAction::W);
    switch (kind) {
    case ScheduleKind::GPipe:
      q.limit = std::numeric_limits<int64_t>::max();
      break;
    case ScheduleKind::OneFOneB:
      q.limit = P - rank;
      break;
    case ScheduleKind::ZeroBubbleH1:
      q.limit = P - rank;
      q.weightLag = P - 1;
      break;
    case ScheduleKind::Interleaved:
      break;
    }
  }

  Timeline timeline(shape, costs, split);
  PipelineSchedule schedule(P);
  // The rank's choice: of the heads of its queues, the one that can start
  // first; at the same time, backwards before forwards (gpipe: forwards
  // first), and weight gradients last.
  auto next = [&](int64_t rank) -> std::optional<std::pair<PipelineAction, double>> {
    RankQueues &q = queues[rank];
    std::optional<std::pair<PipelineAction, double>> best;
    int bestPriority = 0;
    auto consider = [&](const std::vector<PipelineAction> &queue, size_t at, int priority) {
      if (at >= queue.size())
        return;
      std::optional<double> start = timeline.startTime(queue[at]);
      if (!start)
        return;
      if (!best || *start < best->second - kEpsilon ||
          (*start < best->second + kEpsilon && priority > bestPriority)) {
        best = {queue[at], *start};
        bestPriority = priority;
      }
    };
    if (q.inFlight() < q.limit)
      consider(q.forwards, q.f, kind == ScheduleKind::GPipe ? 3 : 2);
    consider(q.backwards, q.b, kind == ScheduleKind::GPipe ? 2 : 3);
    consider(q.weights, q.w, q.weightsPending() > q.weightLag ? 4 : 1);
    return best;
  };
  auto taken = [&](int64_t rank, const PipelineAction &a) {
    RankQueues &q = queues[rank];
    (a.kind == PipelineAction::F ? q.f : a.kind == PipelineAction::W ? q.w : q.b)++;
    schedule[rank].push_back(a);
  };
  const int64_t actions = (split ? 3 : 2) * M * shape.stages();
  if (!timeline.runAll(actions, next, taken)) {
    error = "the " + scheduleKindName(kind).str() + " schedule cannot make progress on this pipeline";
    return std::nullopt;
  }
  return schedule;
}

std::optional<SimulatedStep> simulateSchedule(const PipelineSchedule &schedule,
                                              const PipelineShape &shape,
                                              const StageCosts &costs, std::string &error) {
  const int64_t P = shape.ranks, M = shape.microbatches, S = shape.stages();
  if (static_cast<int64_t>(schedule.size()) != P) {
    error = "the schedule has " + std::to_string(schedule.size()) + " ranks, the pipeline " +
            std::to_string(P);
    return std::nullopt;
  }
  // Which kinds of backward the lists use: B, or I and W.
  bool split = llvm::any_of(schedule, [](const std::vector<PipelineAction> &list) {
    return llvm::any_of(list, [](const PipelineAction &a) {
      return a.kind == PipelineAction::I || a.kind == PipelineAction::W;
    });
  });
  std::vector<int> seen(4 * M * S, 0);
  int64_t actions = 0;
  for (int64_t rank = 0; rank < P; ++rank)
    for (const PipelineAction &a : schedule[rank]) {
      auto where = "rank " + std::to_string(rank) + "'s " + a.str();
      if (a.microbatch >= M || a.stage >= S) {
        error = where + " names a microbatch or stage the pipeline does not have";
        return std::nullopt;
      }
      if (shape.rankOf(a.stage) != rank) {
        error = where + ": stage " + std::to_string(a.stage) + " runs on rank " +
                std::to_string(shape.rankOf(a.stage));
        return std::nullopt;
      }
      if (split && a.kind == PipelineAction::B) {
        error = where + ": a schedule uses either B or both I and W";
        return std::nullopt;
      }
      if (seen[(a.kind * M + a.microbatch) * S + a.stage]++) {
        error = where + " is in the schedule twice";
        return std::nullopt;
      }
      ++actions;
    }
  const std::vector<PipelineAction::Kind> kinds =
      split ? std::vector{PipelineAction::F, PipelineAction::I, PipelineAction::W}
            : std::vector{PipelineAction::F, PipelineAction::B};
  for (PipelineAction::Kind kind : kinds)
    for (int64_t mb = 0; mb < M; ++mb)
      for (int64_t stage = 0; stage < S; ++stage)
        if (!seen[(kind * M + mb) * S + stage]) {
          error = "rank " + std::to_string(shape.rankOf(stage)) + " never runs " +
                  PipelineAction{kind, mb, stage}.str();
          return std::nullopt;
        }

  Timeline timeline(shape, costs, split);
  std::vector<size_t> position(P, 0);
  auto next = [&](int64_t rank) -> std::optional<std::pair<PipelineAction, double>> {
    if (position[rank] >= schedule[rank].size())
      return std::nullopt;
    const PipelineAction &a = schedule[rank][position[rank]];
    std::optional<double> start = timeline.startTime(a);
    if (!start)
      return std::nullopt;
    return std::pair{a, *start};
  };
  auto taken = [&](int64_t rank, const PipelineAction &) { ++position[rank]; };
  if (!timeline.runAll(actions, next, taken)) {
    std::string waiting;
    for (int64_t rank = 0; rank < P; ++rank)
      if (position[rank] < schedule[rank].size())
        waiting += (waiting.empty() ? "" : ", ") + ("rank " + std::to_string(rank) + " at " +
                                                    schedule[rank][position[rank]].str());
    error = "the schedule deadlocks: " + waiting +
            " each wait for an action that their ranks' orders never let run first";
    return std::nullopt;
  }
  return timeline.result();
}

} // namespace cleave
