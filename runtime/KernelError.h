//===- KernelError.h - how every kernel reports what it cannot do -*- C++ -*-===//

#ifndef CLEAVE_RUNTIME_KERNELERROR_H
#define CLEAVE_RUNTIME_KERNELERROR_H

namespace cleave::rt {

/// Prints `cleave: error: kernel KERNEL: MESSAGE` (MESSAGE from a printf
/// format) to stderr and exits with status 3: what the compiler should have
/// ruled out (a bug). Shared by every backend.
[[noreturn]] void fail(const char *kernel, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/// The same line, exit status 1: a value that came from the input data (an
/// index or a class target) is outside what the kernel takes.
[[noreturn]] void failOnData(const char *kernel, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

} // namespace cleave::rt

#endif
