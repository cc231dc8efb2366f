//===- CliValidators.h - command-line checks shared by cleave and programs -===//

#ifndef CLEAVE_RUNTIME_CLIVALIDATORS_H
#define CLEAVE_RUNTIME_CLIVALIDATORS_H

#include "runtime/StepWindow.h"

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>

namespace cleave::rt {

/// A finite number above 0, with a readable error (CLI::PositiveNumber's
/// names a range up to the largest double).
inline CLI::Validator positiveNumber() {
  return CLI::Validator(
      [](std::string &text) -> std::string {
        try {
          double value = std::stod(text);
          if (value > 0 && std::isfinite(value))
            return "";
        } catch (const std::exception &) {
        }
        return "is '" + text + "', not a positive number";
      },
      "POSITIVE");
}

/// A decimal integer in [min, max], digits only: "-1" or "18446744073709551616"
/// is refused instead of wrapping around in the conversion to the flag's type.
/// `range` says what is expected ("a positive integer below 2^63").
inline CLI::Validator integerIn(uint64_t min, uint64_t max, const std::string &range) {
  return CLI::Validator(
      [min, max, range](std::string &text) -> std::string {
        uint64_t value = 0;
        const char *end = text.data() + text.size();
        auto [stop, problem] = std::from_chars(text.data(), end, value);
        if (text.empty() || text[0] == '+' || problem != std::errc() || stop != end ||
            value < min || value > max)
          return "is '" + text + "', not " + range;
        return "";
      },
      "INTEGER");
}

/// A step count: an integer in [1, 2^63 - 1].
inline CLI::Validator stepCount() {
  return integerIn(1, INT64_MAX, "a positive integer below 2^63");
}

/// A window of steps, FIRST:LAST.
inline CLI::Validator stepWindow() {
  return CLI::Validator(
      [](std::string &text) {
        StepWindow window;
        return parseStepWindow(text, window);
      },
      "FIRST:LAST");
}

/// A seed: an integer in [0, 2^64 - 1].
inline CLI::Validator seedValue() {
  return integerIn(0, UINT64_MAX, "an integer in [0, 2^64)");
}

} // namespace cleave::rt

#endif
