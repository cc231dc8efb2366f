//===- Diagnostics.cpp - cleave's one-line user errors -------------------===//

#include "compiler/Diagnostics.h"

#include "llvm/Support/raw_ostream.h"

namespace {
/// Writes the lines in one write: stderr is unbuffered, and a line written
/// in pieces can be interleaved with a job's other output.
void print(llvm::StringRef severity, const std::string &where, const std::string &what,
           const std::string &note) {
  std::string text = "cleave: " + severity.str() + ": ";
  if (!where.empty())
    text += where + ": ";
  text += what + "\n";
  if (!note.empty())
    text += "note: " + note + "\n";
  llvm::errs() << text;
}
} // namespace

void cleave::printError(const UserError &error) {
  print("error", error.where, error.what, error.note);
}

void cleave::printWarning(const Warning &warning) {
  print("warning", warning.where, warning.what, warning.note);
}
