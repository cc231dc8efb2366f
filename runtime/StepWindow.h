//===- StepWindow.h - a run's steps FIRST to LAST ---------------*- C++ -*-===//

#ifndef CLEAVE_RUNTIME_STEPWINDOW_H
#define CLEAVE_RUNTIME_STEPWINDOW_H

#include <charconv>
#include <cstdint>
#include <string>

namespace cleave::rt {

/// Steps FIRST to LAST, both included, counted as a run counts them (from 1,
/// and on from the checkpoint's step when resuming).
struct StepWindow {
  int64_t first = 1;
  int64_t last = INT64_MAX;
  bool contains(int64_t step) const { return first <= step && step <= last; }
};

/// Reads "FIRST:LAST" (1 <= FIRST <= LAST < 2^63, decimal digits) into
/// `window`: "" when it is one, else what is wrong.
inline std::string parseStepWindow(const std::string &text, StepWindow &window) {
  auto step = [](const char *begin, const char *end, int64_t &value) {
    auto [stop, problem] = std::from_chars(begin, end, value);
    return begin != end && *begin != '-' && *begin != '+' && problem == std::errc() &&
           stop == end && value >= 1;
  };
  const size_t colon = text.find(':');
  const char *begin = text.data(), *end = begin + text.size();
  StepWindow parsed;
  if (colon == std::string::npos || !step(begin, begin + colon, parsed.first) ||
      !step(begin + colon + 1, end, parsed.last) || parsed.first > parsed.last)
    return "is '" + text + "', not FIRST:LAST with 1 <= FIRST <= LAST < 2^63";
  window = parsed;
  return "";
}

} // namespace cleave::rt

#endif
