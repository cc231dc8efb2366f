//===- KernelError.cpp - how every kernel reports what it cannot do ------===//

#include "runtime/KernelError.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace {

[[noreturn]] void report(int status, const char *kernel, const char *format, va_list args) {
  std::fflush(stdout);
  std::fprintf(stderr, "cleave: error: kernel %s: ", kernel);
  std::vfprintf(stderr, format, args);
  std::fputc('\n', stderr);
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
