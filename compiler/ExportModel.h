//===- ExportModel.h - trained weights back into the ONNX model -*- C++ -*-===//

#ifndef CLEAVE_COMPILER_EXPORTMODEL_H
#define CLEAVE_COMPILER_EXPORTMODEL_H

#include "compiler/Diagnostics.h"
#include "runtime/Files.h"

#include "mlir/Support/LLVM.h"

#include <string>

namespace onnx {
class TensorProto;
}

namespace cleave {

/// Makes `bytes` (little-endian, row-major) the value of `tensor`, in
/// raw_data, dropping its typed fields and external data.
void setTensorBytes(onnx::TensorProto &tensor, std::string bytes);

/// Stages in `files`, as `outputPath`, the model compiled into `programDir`
/// (plan.json names it) with every parameter initializer replaced by its
/// value in the trained weights blobs of `resultsDir` (as the program staged
/// them, rt::FileSet::stagedName, when `staged`). Other initializers, nodes
/// and metadata are kept as they were.
mlir::LogicalResult exportTrainedModel(const std::string &programDir, const std::string &resultsDir,
                                       bool staged, const std::string &outputPath,
                                       rt::FileSet &files, UserError &error);

} // namespace cleave

#endif
