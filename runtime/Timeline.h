//===- Timeline.h - a rank's timeline as Chrome trace events ----*- C++ -*-===//
//
// What a rank did when, on named tracks: the steps and their compute phases,
// each kernel (--trace-ops), each collective (its wait for the slowest rank
// apart from its transfer), reading input, writing checkpoints. Spans are
// kept in memory as they end and rendered at the end of the run as Chrome
// trace-event JSON ("X" complete events, microseconds; docs/formats.md), one
// process per rank, one thread per track, so ui.perfetto.dev and
// chrome://tracing open the file that document() makes of every rank's part.
//
// The driver records into it (runtime/driver/Profile.h); the pipeline
// schedules' bubble figures read the same tracks.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_TIMELINE_H
#define CLEAVE_RUNTIME_TIMELINE_H

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace cleave::rt {

/// The tracks of a rank, in the order they are shown.
enum class Track : int {
  /// "step N", and inside it forward, backward and optimizer.
  Compute,
  /// One span per kernel call (--trace-ops).
  Ops,
  /// One span per collective, and inside it "wait" and "transfer"; the
  /// waits for the background collectives.
  Communication,
  /// The background collectives' thread's sums and gathers
  /// (runtime/comm/BackgroundCollectives.h).
  BackgroundCommunication,
  /// Gathering each microbatch and copying it to the device.
  Input,
  /// Writing each checkpoint (what training stands still for).
  Checkpoint,
  /// The thread "cleave-ckpt"'s writes of a checkpoint file behind training
  /// (runtime/driver/ShardWriter.h).
  BackgroundCheckpoint,
};
inline constexpr int kTracks = 7;

/// "compute", "ops", "communication", "communication (background)", "input",
/// "checkpoint", "checkpoint (background)".
const char *trackName(Track track);

class Timeline {
public:
  using Clock = std::chrono::steady_clock;

  /// A span of `track` named `name`; `args` is a JSON object's text, or
  /// empty for none.
  void add(Track track, std::string name, Clock::time_point begin, Clock::time_point end,
           std::string args = {});

  /// This rank's spans and its process and track names as trace events,
  /// comma-separated (no brackets): process `pid` named `processName` with
  /// `labels` (none if empty), each time shifted by `shiftNs` (nanoseconds
  /// to add to this process's steady_clock to get the trace's time, which
  /// starts at 0).
  std::string events(int pid, const std::string &processName, const std::string &labels,
                     int64_t shiftNs) const;

  /// The trace file of every rank's events(): a JSON object with
  /// `traceEvents` and, in `otherData`, the format version and how the clocks
  /// were aligned.
  static std::string document(const std::vector<std::string> &rankEvents,
                              const std::string &clockAlignment);

private:
  struct Span {
    Track track;
    std::string name;
    int64_t beginNs, endNs;
    std::string args;
  };
  std::vector<Span> spans;
};

} // namespace cleave::rt

#endif
