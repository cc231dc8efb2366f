//===- CliValidators.h - command-line checks shared by cleave and programs -===//

#ifndef CLEAVE_RUNTIME_CLIVALIDATORS_H
#define CLEAVE_RUNTIME_CLIVALIDATORS_H

#include <CLI/CLI.hpp>

#include <string>

namespace cleave::rt {

/// A number above 0, with a readable error (CLI::PositiveNumber's names a
/// range up to the largest double).
inline CLI::Validator positiveNumber() {
  return CLI::Validator(
      [](std::string &text) -> std::string {
        try {
          if (std::stod(text) > 0)
            return "";
        } catch (const std::exception &) {
        }
        return "is '" + text + "', not a positive number";
      },
      "POSITIVE");
}

} // namespace cleave::rt

#endif
