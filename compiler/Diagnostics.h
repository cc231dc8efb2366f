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
#include <vector>

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

/// Something that is not an error but changes what a run computes (a
/// parameter trained that the user may not expect to be), for the user to
/// read: the tensors it concerns, so that a flag that settles it (--freeze)
/// can silence it.
struct Warning {
  std::string where;
  std::string what;
  std::string note;
  std::vector<std::string> parameters;
};

/// Prints `warning` to stderr: `cleave: warning: WHERE: WHAT`, then its note.
void printWarning(const Warning &warning);

} // namespace cleave

#endif
