//===- Progress.cpp - the training progress line -------------------------===//

#include "runtime/driver/Progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace cleave::rt {
namespace {

/// "16s", "3m05s", "2h07m".
std::string durationText(double seconds) {
  const long long s = std::llround(std::max(0.0, seconds));
  char text[32];
  if (s < 60)
    std::snprintf(text, sizeof text, "%llds", s);
  else if (s < 3600)
    std::snprintf(text, sizeof text, "%lldm%02llds", s / 60, s % 60);
  else
    std::snprintf(text, sizeof text, "%lldh%02lldm", s / 3600, s / 60 % 60);
  return text;
}

} // namespace

Progress::Progress(bool shown, int64_t firstStep, int64_t steps, bool showCommunication)
    : shown(shown), terminal(isatty(fileno(stderr)) != 0), showCommunication(showCommunication),
      firstStep(firstStep), steps(steps), every(std::max<int64_t>(1, steps / 10)) {}

void Progress::step(int64_t step, double loss, std::optional<double> lr, int64_t batch,
                    std::chrono::steady_clock::time_point start, double communicationSeconds) {
  if (!shown || !(terminal || step % every == 0 || step == steps))
    return;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double done = static_cast<double>(step - firstStep + 1);
  const double rate = seconds > 0 ? done * static_cast<double>(batch) / seconds : 0;
  char text[256];
  int length = std::snprintf(text, sizeof text, "step %lld/%lld  loss %.6f",
                             static_cast<long long>(step), static_cast<long long>(steps), loss);
  std::string line(text, static_cast<size_t>(length));
  if (lr) {
    std::snprintf(text, sizeof text, "  lr %g", *lr);
    line += text;
  }
  std::snprintf(text, sizeof text, "  %.0f samples/s", rate);
  line += text;
  if (showCommunication) {
    std::snprintf(text, sizeof text, "  comm %.0f%%",
                  seconds > 0 ? 100 * communicationSeconds / seconds : 0.0);
    line += text;
  }
  line += "  ETA " + durationText(seconds / done * static_cast<double>(steps - step));
  // One write a line: under mpirun pieces of lines interleave.
  if (terminal) {
    line = "\r" + line + "\x1b[K";
    open = step != steps;
    if (!open)
      line += "\n";
  } else {
    line += "\n";
  }
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

void Progress::endLine() {
  if (open)
    std::fputs("\n", stderr);
  open = false;
}

} // namespace cleave::rt
