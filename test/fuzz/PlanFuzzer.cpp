//===- PlanFuzzer.cpp - libFuzzer target: plan.json's reader -------------===//
//
// Any text given to rt::parsePlan is read or refused with an error; never a
// crash, a sanitizer report or an uncaught exception. Built by
// -DCLEAVE_FUZZ=ON (scripts/fuzz.sh).
//
//===----------------------------------------------------------------------===//

#include "runtime/Plan.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  cleave::rt::Plan plan;
  std::string error;
  bool read = cleave::rt::parsePlan(std::string(reinterpret_cast<const char *>(data), size), plan,
                                    error);
  // A refusal says why; a plan read is one its users can walk.
  if (!read && error.empty())
    std::abort();
  if (read) {
    (void)cleave::rt::programInterface(plan);
    (void)cleave::rt::planJson(plan);
  }
  return 0;
}
