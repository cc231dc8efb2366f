//===- Diagnostics.cpp - cleave's one-line user errors -------------------===//

#include "compiler/Diagnostics.h"

#include "llvm/Support/raw_ostream.h"

namespace {
void print(llvm::StringRef severity, const std::string &where, const std::string &what,
           const std::string &note) {
  llvm::errs() << "cleave: " << severity << ": ";
  if (!where.empty())
    llvm::errs() << where << ": ";
  llvm::errs() << what << "\n";
  if (!note.empty())
    llvm::errs() << "note: " << note << "\n";
}
} // namespace

void cleave::printError(const UserError &error) {
  print("error", error.where, error.what, error.note);
}

void cleave::printWarning(const Warning &warning) {
  print("warning", warning.where, warning.what, warning.note);
}
