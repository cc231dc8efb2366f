//===- KernelError.cpp - how every kernel reports what it cannot do ------===//

#include "runtime/KernelError.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

void cleave::rt::fail(const char *kernel, const char *format, ...) {
  std::fflush(stdout);
  std::fprintf(stderr, "cleave: error: kernel %s: ", kernel);
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
  std::fputc('\n', stderr);
  std::fflush(stderr);
  std::exit(3);
}
