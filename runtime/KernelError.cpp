//===- KernelError.cpp - how every kernel reports what it cannot do ------===//

#include "runtime/KernelError.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace {

[[noreturn]] void report(int status, const char *kernel, const char *format, va_list args) {
  // One write, so that the ranks of a job that fail alike print whole lines.
  char message[512];
  std::vsnprintf(message, sizeof message, format, args);
  std::fflush(stdout);
  std::fprintf(stderr, "cleave: error: kernel %s: %s\n", kernel, message);
  std::fflush(stderr);
  std::exit(status);
}

} // namespace

void cleave::rt::fail(const char *kernel, const char *format, ...) {
  va_list args;
  va_start(args, format);
  report(3, kernel, format, args);
}

void cleave::rt::failOnData(const char *kernel, const char *format, ...) {
  va_list args;
  va_start(args, format);
  report(1, kernel, format, args);
}
