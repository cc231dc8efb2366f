//===- ExportModel.h - trained weights back into the ONNX model -*- C++ -*-===//

#ifndef CLEAVE_COMPILER_EXPORTMODEL_H
#define CLEAVE_COMPILER_EXPORTMODEL_H

#include "compiler/Diagnostics.h"

#include "mlir/Support/LLVM.h"

#include <string>

namespace cleave {

/// Writes the model compiled into `programDir` (plan.json names it) to
/// `outputPath` with every parameter initializer replaced by its value in the
/// weights blob `weightsPath`, whole or not at all. Other initializers, nodes
/// and metadata are kept as they were.
mlir::LogicalResult exportTrainedModel(const std::string &programDir,
                                       const std::string &resultsDir,
                                       const std::string &outputPath, UserError &error);

} // namespace cleave

#endif
