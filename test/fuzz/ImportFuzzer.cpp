//===- ImportFuzzer.cpp - libFuzzer target for the ONNX importer ---------===//
//
// Feeds each input to importOnnxModel as a model file. Any bad input must
// come back as a UserError: a crash, a sanitizer report, an abort from MLIR
// or a leak is a finding. The input's first byte picks the import's options
// (--batch-size, --input-shape, the training_info step), so the fuzzer
// explores those too.
//
//===----------------------------------------------------------------------===//

#include "compiler/OnnxImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

namespace {

/// A folder of this process's own holding the model file, so that external
/// data locations resolve against a folder nothing else writes.
std::string modelPath() {
  llvm::SmallString<128> dir;
  if (llvm::sys::fs::createUniqueDirectory("cleave-fuzz-import", dir)) {
    llvm::errs() << "cleave-fuzz-import: cannot create a temporary folder\n";
    std::abort();
  }
  return (dir + "/model.onnx").str();
}

bool writeModel(const std::string &path, const uint8_t *data, size_t size) {
  std::error_code error;
  llvm::raw_fd_ostream out(path, error);
  if (error)
    return false;
  out.write(reinterpret_cast<const char *>(data), size);
  out.close();
  return !out.has_error();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string path = modelPath();
  if (size == 0 || !writeModel(path, data + 1, size - 1))
    return 0;
  cleave::ImportOptions options;
  uint8_t flags = data[0];
  if (flags & 1)
    options.batchSize = 1 + (flags >> 4);
  if (flags & 2)
    options.inputShapes["x"] = {2, flags >> 4};
  // One context serves many inputs (creating one costs more than most
  // imports); a fresh one every kRunsPerContext bounds what it keeps
  // (uniqued types and attributes).
  constexpr int kRunsPerContext = 1000;
  static std::unique_ptr<mlir::MLIRContext> context;
  static int runs = 0;
  if (!context || ++runs % kRunsPerContext == 0) {
    context = std::make_unique<mlir::MLIRContext>(mlir::MLIRContext::Threading::DISABLED);
    context->getDiagEngine().registerHandler([](mlir::Diagnostic &) { return mlir::success(); });
  }
  options.trainingInfo = flags & 4;
  cleave::UserError error;
  (void)cleave::importOnnxModel(*context, path, options, error);
  return 0;
}
