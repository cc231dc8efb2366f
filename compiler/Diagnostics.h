//===- Diagnostics.h - cleave's one-line user errors ------------*- C++ -*-===//
//
// Every user-facing failure is one line, `cleave: error: WHERE: WHAT`, with at
// most one `note:` line after it, and a documented exit code.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COMPILER_DIAGNOSTICS_H
#define CLEAVE_COMPILER_DIAGNOSTICS_H

#include "llvm/ADT/StringRef.h"

#include <string>

namespace cleave {

enum ExitCode : int { kExitOk = 0, kExitBadInput = 1, kExitBadUsage = 2, kExitInternal = 3 };

/// A user error: where (file, node, tensor or flag), what went wrong, and an
/// optional hint on how to fix it.
struct UserError {
  std::string where;
  std::string what;
  std::string note;
  ExitCode code = kExitBadInput;
};

/// Prints `error` to stderr in cleave's format.
void printError(const UserError &error);

} // namespace cleave

#endif
