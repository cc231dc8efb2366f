//===- ModelSummary.h - a one-screen account of an imported model -*- C++ -*-===//

#ifndef CLEAVE_COMPILER_MODELSUMMARY_H
#define CLEAVE_COMPILER_MODELSUMMARY_H

#include "compiler/OnnxImporter.h"

#include "llvm/Support/raw_ostream.h"

namespace cleave {

/// Prints inputs, outputs, parameters (count, elements, bytes), ops by type,
/// and the training and multi-device annotations the model carries; the
/// first 12 parameters by name, or with `allParameters` every one.
void printModelSummary(const ImportedModel &model, bool allParameters, llvm::raw_ostream &os);

} // namespace cleave

#endif
