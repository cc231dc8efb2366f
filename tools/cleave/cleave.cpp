//===- cleave.cpp - the cleave command line ------------------------------===//
//
// Subcommands (CLI11). `import` reads an ONNX model and prints its cleave IR
// or a summary. Exit codes: 0 ok, 1 bad input, 2 bad usage, 3 internal error.
//
//===----------------------------------------------------------------------===//

#include "compiler/Diagnostics.h"
#include "compiler/ModelSummary.h"
#include "compiler/OnnxImporter.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <CLI/CLI.hpp>

using namespace cleave;

namespace {

struct ImportCommand {
  std::string model;
  std::string output;
  std::vector<std::string> inputShapes;
  bool summary = false;
  bool debugInfo = false;
};

void addImportCommand(CLI::App &app, ImportCommand &cmd) {
  CLI::App *sub = app.add_subcommand(
      "import", "Import an ONNX model and print its cleave IR (or a summary with --summary)");
  sub->add_option("model", cmd.model, "The ONNX model file (.onnx)")->required();
  sub->add_option("-o,--output", cmd.output,
                  "Write the IR to this file (written whole or not at all) instead of stdout");
  sub->add_option("--input-shape", cmd.inputShapes,
                  "Bind an input's dims, e.g. --input-shape tokens=8x128 (repeatable)");
  sub->add_flag("--summary", cmd.summary,
                "Print a one-screen summary (inputs, outputs, parameters, ops by type) "
                "instead of the IR");
  sub->add_flag("--debug-info", cmd.debugInfo, "Print source locations (ONNX node names)");
}

int runImport(const ImportCommand &cmd) {
  ImportOptions options;
  UserError error;
  for (const std::string &flag : cmd.inputShapes) {
    if (mlir::failed(parseInputShape(flag, options, error))) {
      printError(error);
      return error.code;
    }
  }
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  auto model = importOnnxModel(context, cmd.model, options, error);
  if (mlir::failed(model)) {
    printError(error);
    return error.code;
  }
  mlir::OpPrintingFlags flags;
  if (cmd.debugInfo)
    flags.enableDebugInfo();
  if (!cmd.output.empty()) {
    llvm::Error written = llvm::writeToOutput(cmd.output, [&](llvm::raw_ostream &os) {
      model->module->print(os, flags);
      return llvm::Error::success();
    });
    if (written) {
      printError({cmd.output,
                  "cannot write: " + llvm::errorToErrorCode(std::move(written)).message(), "",
                  kExitBadUsage});
      return kExitBadUsage;
    }
  }
  if (cmd.summary)
    printModelSummary(*model, llvm::outs());
  else if (cmd.output.empty())
    model->module->print(llvm::outs(), flags);
  return kExitOk;
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"cleave: a compiler for distributed training of ONNX models"};
  app.require_subcommand(1);
  ImportCommand importCmd;
  addImportCommand(app, importCmd);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    printError({"usage", e.what(), "see cleave --help", kExitBadUsage});
    return kExitBadUsage;
  }
  if (app.got_subcommand("import"))
    return runImport(importCmd);
  return kExitBadUsage;
}
