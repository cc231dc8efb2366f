//===- RunCommand.cpp - cleave run ---------------------------------------===//

#include "compiler/RunCommand.h"

#include "compiler/Diagnostics.h"
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

} // namespace

int runProgram(const RunOptions &options) {
  std::string program = options.dir + "/program";
  if (!llvm::sys::fs::can_execute(program)) {
    printError({options.dir, "not a compiled program (no executable 'program' in it)",
                "build one with: cleave compile MODEL.onnx -o " + options.dir});
    return kExitBadInput;
  }
  llvm::SmallString<128> scratch;
  if (llvm::sys::fs::createUniqueDirectory("cleave-run", scratch)) {
    printError({"cleave run", "cannot create a temporary directory", "", kExitInternal});
    return kExitInternal;
  }
  auto cleanup = llvm::make_scope_exit([&] { llvm::sys::fs::remove_directories(scratch); });

  std::vector<std::string> args{program, "--dir", options.dir, "--threads",
                                std::to_string(options.threads), "--repeat",
                                std::to_string(options.repeat)};
  for (auto [index, flag] : llvm::enumerate(options.inputs)) {
    auto [name, file] = llvm::StringRef(flag).split('=');
    std::string path = file.str();
    if (file.ends_with(".pb")) {
      std::string converted = (scratch + "/" + std::to_string(index) + ".npy").str();
      std::string message;
      if (!convertTensorProto(path, converted, message)) {
        printError({"input '" + name.str() + "' (" + path + ")", message});
        return kExitBadInput;
      }
      path = converted;
    }
    args.push_back("--input");
    args.push_back(name.str() + "=" + path);
  }
  if (!options.outputDir.empty()) {
    if (std::error_code ec = llvm::sys::fs::create_directories(options.outputDir)) {
      printError({options.outputDir, "cannot create: " + ec.message(), "", kExitBadUsage});
      return kExitBadUsage;
    }
    args.insert(args.end(), {"--output-dir", options.outputDir});
  }
  if (options.stats)
    args.push_back("--stats");
  llvm::SmallVector<llvm::StringRef> argRefs(args.begin(), args.end());
  std::string message;
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, std::nullopt,
                                                 llvm::StringRef(options.stderrFile)};
  int status = llvm::sys::ExecuteAndWait(
      program, argRefs, std::nullopt,
      options.stderrFile.empty() ? llvm::ArrayRef<std::optional<llvm::StringRef>>{}
                                 : llvm::ArrayRef<std::optional<llvm::StringRef>>(redirects),
      0, 0, &message);
  if (status < 0) {
    printError({program, "crashed: " + message, "a cleave bug: please report it",
                kExitInternal});
    return kExitInternal;
  }
  return status;
}

} // namespace cleave
