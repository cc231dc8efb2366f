//===- KernelError.h - how every kernel reports what it cannot do -*- C++ -*-===//

#ifndef CLEAVE_RUNTIME_KERNELERROR_H
#define CLEAVE_RUNTIME_KERNELERROR_H

#include <cstdint>

namespace cleave::rt {

/// Prints `cleave: error: kernel KERNEL: MESSAGE` (MESSAGE from a printf
/// format) to stderr and exits with status 3: what the compiler should have
/// ruled out (a bug). Shared by every backend.
[[noreturn]] void fail(const char *kernel, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/// `cleave: error: step STEP: kernel KERNEL: MESSAGE` (no step when it is
/// negative: outside training), exit status 1: a value that came from the
/// input data (an index or a class target) is outside what the kernel takes.
[[noreturn]] void failOnData(int64_t step, const char *kernel, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

} // namespace cleave::rt

#endif
