//===- KernelError.cpp - how every kernel reports what it cannot do ------===//

#include "runtime/KernelError.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace {

[[noreturn]] void report(int status, int64_t step, const char *kernel, const char *format,
                         va_list args) {
  // One write, so that the ranks of a job that fail alike print whole lines.
  char message[512], at[32] = "";
  std::vsnprintf(message, sizeof message, format, args);
  if (step >= 0)
    std::snprintf(at, sizeof at, "step %lld: ", static_cast<long long>(step));
  std::fflush(stdout);
  std::fprintf(stderr, "cleave: error: %skernel %s: %s\n", at, kernel, message);
  std::fflush(stderr);
  std::exit(status);
}

} // namespace

void cleave::rt::fail(const char *kernel, const char *format, ...) {
  va_list args;
  va_start(args, format);
  report(3, -1, kernel, format, args);
}

void cleave::rt::failOnData(int64_t step, const char *kernel, const char *format, ...) {
  va_list args;
  va_start(args, format);
  report(1, step, kernel, format, args);
}
