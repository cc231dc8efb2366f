//===- Timeline.cpp - a rank's timeline as Chrome trace events -----------===//

#include "runtime/Timeline.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>

namespace cleave::rt {
namespace {

int64_t sinceEpochNs(Timeline::Clock::time_point time) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(time.time_since_epoch()).count();
}

/// Nanoseconds as the trace's microseconds, to the nanosecond.
std::string micros(int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", static_cast<double>(ns) / 1000.0);
  return text;
}

/// A metadata event ("M") of `pid` (and `tid`, if not negative).
std::string metadata(int pid, int tid, const char *name, const nlohmann::json &args) {
  nlohmann::ordered_json event = {{"ph", "M"}, {"pid", pid}};
  if (tid >= 0)
    event["tid"] = tid;
  event["name"] = name;
  event["args"] = args;
  return event.dump();
}

} // namespace

const char *trackName(Track track) {
  switch (track) {
  case Track::Compute: return "compute";
  case Track::Ops: return "ops";
  case Track::Communication: return "communication";
  case Track::BackgroundCommunication:
    return "communication (background)";
  case Track::Input: return "input";
  case Track::Checkpoint: return "checkpoint";
  case Track::BackgroundCheckpoint:
    return "checkpoint (background)";
  }
  return "?";
}

void Timeline::add(Track track, std::string name, Clock::time_point begin, Clock::time_point end,
                   std::string args) {
  spans.push_back({track, std::move(name), sinceEpochNs(begin), sinceEpochNs(end),
                   std::move(args)});
}

std::string Timeline::events(int pid, const std::string &processName, const std::string &labels,
                             int64_t shiftNs) const {
  std::string text = metadata(pid, -1, "process_name", {{"name", processName}});
  if (!labels.empty())
    text += ",\n" + metadata(pid, -1, "process_labels", {{"labels", labels}});
  text += ",\n" + metadata(pid, -1, "process_sort_index", {{"sort_index", pid}});
  std::array<bool, kTracks> used{};
  for (const Span &span : spans)
    used[static_cast<int>(span.track)] = true;
  // A track is a thread: tid 1 + its index, named and shown in Track's order.
  for (int t = 0; t < kTracks; ++t) {
    if (!used[t])
      continue;
    text += ",\n" + metadata(pid, t + 1, "thread_name", {{"name", trackName(Track(t))}});
    text += ",\n" + metadata(pid, t + 1, "thread_sort_index", {{"sort_index", t + 1}});
  }
  for (const Span &span : spans) {
    // Written by hand, in a fixed key order, with times to the nanosecond.
    text += ",\n{\"ph\":\"X\",\"pid\":" + std::to_string(pid) +
            ",\"tid\":" + std::to_string(static_cast<int>(span.track) + 1) +
            ",\"cat\":" + nlohmann::json(trackName(span.track)).dump() +
            ",\"name\":" + nlohmann::json(span.name).dump() +
            ",\"ts\":" + micros(span.beginNs + shiftNs) +
            ",\"dur\":" + micros(span.endNs - span.beginNs);
    if (!span.args.empty())
      text += ",\"args\":" + span.args;
    text += "}";
  }
  return text;
}

std::string Timeline::document(const std::vector<std::string> &rankEvents,
                               const std::string &clockAlignment) {
  std::string text = "{\"traceEvents\":[\n";
  for (size_t r = 0; r < rankEvents.size(); ++r)
    text += (r ? ",\n" : "") + rankEvents[r];
  nlohmann::ordered_json other = {{"format_version", 1},
                                  {"producer", "cleave"},
                                  {"clock", "steady_clock, microseconds from rank 0's start"},
                                  {"clock_alignment", clockAlignment}};
  text += "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":" + other.dump() + "}\n";
  return text;
}

} // namespace cleave::rt
