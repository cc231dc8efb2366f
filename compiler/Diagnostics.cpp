//===- Diagnostics.cpp - cleave's one-line user errors -------------------===//

#include "compiler/Diagnostics.h"

#include "llvm/Support/raw_ostream.h"

void cleave::printError(const UserError &error) {
  llvm::errs() << "cleave: error: ";
  if (!error.where.empty())
    llvm::errs() << error.where << ": ";
  llvm::errs() << error.what << "\n";
  if (!error.note.empty())
    llvm::errs() << "note: " << error.note << "\n";
}
