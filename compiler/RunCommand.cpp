//===- RunCommand.cpp - cleave run ---------------------------------------===//

#include "compiler/RunCommand.h"

#include "compiler/Diagnostics.h"
#include "compiler/ExportModel.h"
#include "compiler/OnnxTensor.h"
#include "onnx/onnx.pb.h"
#include "runtime/Npy.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <cstdio>
#include <sstream>
#include <unistd.h>

namespace cleave {
namespace {

std::optional<rt::DType> runtimeType(mlir::Type type) {
  using rt::DType;
  if (type.isF32()) return DType::F32;
  if (type.isF64()) return DType::F64;
  if (type.isF16()) return DType::F16;
  if (type.isInteger(1)) return DType::Bool;
  if (auto integer = llvm::dyn_cast<mlir::IntegerType>(type)) {
    bool u = integer.isUnsigned();
    switch (integer.getWidth()) {
    case 8: return u ? DType::U8 : DType::I8;
    case 16: return u ? DType::U16 : DType::I16;
    case 32: return u ? DType::U32 : DType::I32;
    case 64: return u ? DType::U64 : DType::I64;
    default: break;
    }
  }
  return std::nullopt;
}

/// Writes the TensorProto at `pbPath` as `npyPath`.
bool convertTensorProto(const std::string &pbPath, const std::string &npyPath,
                        std::string &message) {
  auto buffer = llvm::MemoryBuffer::getFile(pbPath, false, false);
  if (!buffer) {
    message = "cannot open: " + buffer.getError().message();
    return false;
  }
  onnx::TensorProto tensor;
  if (!tensor.ParseFromArray((*buffer)->getBufferStart(),
                             static_cast<int>((*buffer)->getBufferSize()))) {
    message = "not an ONNX TensorProto";
    return false;
  }
  mlir::MLIRContext context;
  TensorData data;
  if (!readTensor(&context, tensor, llvm::sys::path::parent_path(pbPath), data, message))
    return false;
  auto dtype = runtimeType(data.type.getElementType());
  if (!dtype) {
    message = "element type is not supported by the runtime";
    return false;
  }
  std::vector<int64_t> shape(data.type.getShape().begin(), data.type.getShape().end());
  return rt::writeNpy(npyPath, *dtype, shape, data.bytes.data(), message);
}

/// Splits --data's comma form (x=x.npy,labels=y.npy) into one NAME=FILE each;
/// a piece without '=' belongs to the file name before it (as the program
/// splits it).
std::vector<std::string> splitDataFlags(const std::vector<std::string> &flags) {
  std::vector<std::string> entries;
  for (const std::string &flag : flags) {
    llvm::SmallVector<llvm::StringRef> pieces;
    llvm::StringRef(flag).split(pieces, ',', -1, /*KeepEmpty=*/false);
    if (pieces.empty()) {
      entries.push_back(flag);
      continue;
    }
    for (auto [index, piece] : llvm::enumerate(pieces)) {
      if (index == 0 || piece.contains('='))
        entries.push_back(piece.str());
      else
        entries.back() += "," + piece.str();
    }
  }
  return entries;
}

/// The command that starts `program` on `ranks` local ranks: mpirun, allowed
/// to run as root (containers), to start more ranks than cores, and to leave
/// each rank's threads unpinned (its default binds a rank to one core, which
/// would starve --threads).
std::vector<std::string> mpirunCommand(const std::string &mpirun, int ranks) {
  std::vector<std::string> command{mpirun, "-n", std::to_string(ranks), "--oversubscribe",
                                   "--bind-to", "none"};
  if (geteuid() == 0)
    command.push_back("--allow-run-as-root");
  return command;
}

/// `value` as text that reads back as the same double.
std::string doubleText(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

} // namespace

int runProgram(const RunOptions &options) {
  std::string program = options.dir + "/program";
  if (!llvm::sys::fs::can_execute(program)) {
    printError({options.dir, "not a compiled program (no executable 'program' in it)",
                "build one with: cleave compile MODEL.onnx -o " + options.dir});
    return kExitBadInput;
  }
  std::string launcher = program;
  std::vector<std::string> args;
  if (options.ranks > 1) {
    llvm::ErrorOr<std::string> mpirun = llvm::sys::findProgramByName("mpirun");
    if (!mpirun) {
      printError({"-n " + std::to_string(options.ranks), "mpirun is not on PATH",
                  "install OpenMPI (Debian: openmpi-bin), or run one rank without -n",
                  kExitBadUsage});
      return kExitBadUsage;
    }
    launcher = *mpirun;
    args = mpirunCommand(*mpirun, options.ranks);
  }
  llvm::SmallString<128> scratch;
  if (llvm::sys::fs::createUniqueDirectory("cleave-run", scratch)) {
    printError({"cleave run", "cannot create a temporary directory", "", kExitInternal});
    return kExitInternal;
  }
  llvm::scope_exit cleanup([&] { llvm::sys::fs::remove_directories(scratch); });

  args.insert(args.end(),
              {program, "--dir", options.dir, "--threads", std::to_string(options.threads)});
  if (options.repeat)
    args.insert(args.end(), {"--repeat", std::to_string(*options.repeat)});
  // NAME=FILE flags, with ONNX TensorProto .pb files converted to .npy.
  int converted = 0;
  auto addFiles = [&](const char *flagName, const std::vector<std::string> &flags) {
    for (const std::string &flag : flags) {
      auto [name, file] = llvm::StringRef(flag).split('=');
      std::string path = file.str();
      if (file.ends_with(".pb")) {
        std::string npy = (scratch + "/" + std::to_string(converted++) + ".npy").str();
        std::string message;
        if (!convertTensorProto(path, npy, message)) {
          const char *what = llvm::StringRef(flagName) == "--data" ? "data" : "input";
          printError({std::string(what) + " '" + name.str() + "' (" + path + ")", message});
          return false;
        }
        path = npy;
      }
      args.push_back(flagName);
      args.push_back(name.str() + "=" + path);
    }
    return true;
  };
  if (!addFiles("--input", options.inputs) || !addFiles("--data", splitDataFlags(options.data)))
    return kExitBadInput;
  if (options.steps)
    args.insert(args.end(), {"--steps", std::to_string(*options.steps)});
  if (options.epochs)
    args.insert(args.end(), {"--epochs", doubleText(*options.epochs)});
  if (options.shuffle)
    args.push_back("--shuffle");
  if (options.noShuffle)
    args.push_back("--no-shuffle");
  if (options.seed)
    args.insert(args.end(), {"--seed", std::to_string(*options.seed)});
  if (options.totalSteps)
    args.insert(args.end(), {"--total-steps", std::to_string(*options.totalSteps)});
  if (!options.logJson.empty())
    args.insert(args.end(), {"--log-json", options.logJson});
  if (options.collectiveTimeout) {
    std::ostringstream seconds; // the shortest spelling: 2, 0.5
    seconds << *options.collectiveTimeout;
    args.insert(args.end(), {"--collective-timeout", seconds.str()});
  }
  // --save-onnx reads the trained weights the program writes to its output
  // directory (a scratch one if the user gave none).
  std::string outputDir = options.outputDir;
  if (!options.saveOnnx.empty() && outputDir.empty())
    outputDir = (scratch + "/outputs").str();
  if (!outputDir.empty()) {
    if (std::error_code ec = llvm::sys::fs::create_directories(outputDir)) {
      printError({outputDir, "cannot create: " + ec.message(), "", kExitBadUsage});
      return kExitBadUsage;
    }
    args.insert(args.end(), {"--output-dir", outputDir});
  }
  if (options.stats)
    args.push_back("--stats");
  llvm::SmallVector<llvm::StringRef> argRefs(args.begin(), args.end());
  std::string message;
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, std::nullopt,
                                                 llvm::StringRef(options.stderrFile)};
  int status = llvm::sys::ExecuteAndWait(
      launcher, argRefs, std::nullopt,
      options.stderrFile.empty() ? llvm::ArrayRef<std::optional<llvm::StringRef>>{}
                                 : llvm::ArrayRef<std::optional<llvm::StringRef>>(redirects),
      0, 0, &message);
  if (status < 0) {
    printError({launcher, "crashed: " + message, "a cleave bug: please report it",
                kExitInternal});
    return kExitInternal;
  }
  if (status == 0 && !options.saveOnnx.empty()) {
    UserError error;
    if (failed(exportTrainedModel(options.dir, outputDir, options.saveOnnx,
                                  error))) {
      printError(error);
      return error.code;
    }
  }
  return status;
}

} // namespace cleave
