//===- Conformance.cpp - cleave conformance: ONNX backend node tests -----===//
//
// Each case directory holds model.onnx and test_data_set_N/{input,output}_K.pb.
// A case is compiled like any model, run on every data set, and its outputs
// compared with the expected ones at the ONNX backend tests' tolerances
// (|got - expected| <= atol + rtol * |expected|, rtol 1e-3, atol 1e-7; exact
// for integers and bools). What cleave cannot import or run is a skip that
// names the reason; a wrong value, a wrong shape or a crash is a failure.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conformance.h"

#include "compiler/Compile.h"
#include "compiler/OnnxTensor.h"
#include "compiler/RunCommand.h"
#include "dialects/Cleave/CleaveOps.h"
#include "onnx/onnx.pb.h"
#include "runtime/Npy.h"
#include "runtime/Plan.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <map>

#include <cstring>

using llvm::StringRef;

namespace cleave {
namespace {

constexpr double kRelativeTolerance = 1e-3;
constexpr double kAbsoluteTolerance = 1e-7;

enum class Outcome { Pass, Fail, Skip };

struct Result {
  Outcome outcome;
  std::string detail;
};

bool isCase(const std::string &dir) { return llvm::sys::fs::exists(dir + "/model.onnx"); }

/// The case directories under each argument (the argument itself if it is one).
std::vector<std::string> collectCases(const std::vector<std::string> &roots) {
  std::vector<std::string> cases;
  for (const std::string &root : roots) {
    if (isCase(root)) {
      cases.push_back(root);
      continue;
    }
    std::error_code ec;
    std::vector<std::string> found;
    for (llvm::sys::fs::directory_iterator it(root, ec), end; it != end && !ec;
         it.increment(ec))
      if (isCase(it->path()))
        found.push_back(it->path());
    llvm::sort(found);
    llvm::append_range(cases, found);
  }
  return cases;
}

std::vector<std::string> dataSets(const std::string &dir) {
  std::vector<std::string> sets;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec))
    if (llvm::sys::path::filename(it->path()).starts_with("test_data_set_"))
      sets.push_back(it->path());
  llvm::sort(sets);
  return sets;
}

bool readTensorFile(mlir::MLIRContext &context, const std::string &path, TensorData &data,
                    std::string &message) {
  auto buffer = llvm::MemoryBuffer::getFile(path, false, false);
  onnx::TensorProto tensor;
  if (!buffer || !tensor.ParseFromArray((*buffer)->getBufferStart(),
                                        static_cast<int>((*buffer)->getBufferSize()))) {
    message = path + " is not a readable TensorProto";
    return false;
  }
  return readTensor(&context, tensor, llvm::sys::path::parent_path(path), data, message);
}

double elementAsDouble(const char *p, rt::DType type) {
  switch (type) {
  case rt::DType::F32: { float v; std::memcpy(&v, p, 4); return v; }
  case rt::DType::F64: { double v; std::memcpy(&v, p, 8); return v; }
  case rt::DType::I64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
  case rt::DType::I32: { int32_t v; std::memcpy(&v, p, 4); return v; }
  case rt::DType::I16: { int16_t v; std::memcpy(&v, p, 2); return v; }
  case rt::DType::I8: return static_cast<int8_t>(*p);
  case rt::DType::U8: case rt::DType::Bool: return static_cast<uint8_t>(*p);
  case rt::DType::U16: { uint16_t v; std::memcpy(&v, p, 2); return v; }
  case rt::DType::U32: { uint32_t v; std::memcpy(&v, p, 4); return v; }
  case rt::DType::U64: { uint64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
  default: return std::nan("");
  }
}

/// Compares one output with its expected tensor; empty when they agree.
std::string compare(const std::string &name, const rt::NpyArray &got, const TensorData &want) {
  std::vector<int64_t> shape(want.type.getShape().begin(), want.type.getShape().end());
  if (got.shape != shape)
    return "output '" + name + "' has shape " + shapeString(got.shape) + ", expected " +
           shapeString(shape);
  if (got.data.size() != want.bytes.size())
    return "output '" + name + "' has another element type than expected";
  bool exact = got.dtype != rt::DType::F32 && got.dtype != rt::DType::F64;
  if (got.dtype == rt::DType::F16 || got.dtype == rt::DType::BF16)
    return got.data == want.bytes ? "" : "output '" + name + "' differs (16-bit floats compared bitwise)";
  size_t size = rt::dtypeSize(got.dtype);
  for (size_t i = 0; i * size < got.data.size(); ++i) {
    double g = elementAsDouble(got.data.data() + i * size, got.dtype);
    double w = elementAsDouble(want.bytes.data() + i * size, got.dtype);
    bool ok = exact ? g == w
                    : (std::isnan(g) && std::isnan(w)) || g == w ||
                          std::fabs(g - w) <= kAbsoluteTolerance + kRelativeTolerance * std::fabs(w);
    if (!ok)
      return "output '" + name + "' element " + std::to_string(i) + ": got " +
             std::to_string(g) + ", expected " + std::to_string(w);
  }
  return "";
}

/// Whether a Dropout node runs in training mode with a non-zero ratio, given
/// the data set's values for the graph inputs.
bool drawsRandomMask(const onnx::ModelProto &model,
                     const std::map<std::string, TensorData> &values) {
  auto firstByteSet = [&](const std::string &name) {
    auto value = values.find(name);
    return value != values.end() && !value->second.bytes.empty() &&
           llvm::any_of(value->second.bytes, [](char c) { return c != 0; });
  };
  for (const auto &node : model.graph().node()) {
    if (node.op_type() != "Dropout" || node.input_size() < 3)
      continue;
    bool ratioIsZero = node.input(1).empty() ? false : !firstByteSet(node.input(1));
    if (firstByteSet(node.input(2)) && !ratioIsZero)
      return true;
  }
  return false;
}

/// Why a case's expected outputs disagree with its own model, for the ONNX
/// test data known to be wrong; empty for every other case.
std::string knownBadData(StringRef name, const onnx::ModelProto &model) {
  // test_adam_multiple's outputs were computed with epsilon 1e-2, but its
  // Adam node does not carry the attribute, so the default 1e-6 applies
  // (onnx/onnx#7749, fixed by onnx/onnx#7763 after onnx 1.19).
  if (name == "test_adam_multiple" && model.graph().node_size() == 1 &&
      llvm::none_of(model.graph().node(0).attribute(),
                    [](const onnx::AttributeProto &a) { return a.name() == "epsilon"; }))
    return "ONNX's expected outputs use epsilon 1e-2, which the model's Adam node lacks "
           "(onnx/onnx#7749)";
  return "";
}

/// The names of the inputs a compiled program takes, from its plan.json.
std::vector<std::string> programInputs(const std::string &dir) {
  std::vector<std::string> names;
  rt::Plan plan;
  std::string error;
  if (rt::readPlan(dir + "/plan.json", plan, error))
    for (const rt::TensorSpec &input : plan.inputs)
      names.push_back(input.name);
  return names;
}

/// Compiles the case for one data set. Inputs that ops read as constants
/// (node tests feed Reshape's shape, Slice's starts... as inputs) are bound
/// to that data set's values, the way a user would fold them.
Result compileCase(mlir::MLIRContext &context, const std::string &dir,
                   std::map<std::string, TensorData> inputValues, const std::string &out) {
  CompileOptions options;
  options.model = dir + "/model.onnx";
  options.outDir = out;
  options.import.inputValues = std::move(inputValues);
  UserError error;
  if (succeeded(compileModel(context, options, error)))
    return {Outcome::Pass, ""};
  // Refusals at import (an operator, type or input cleave does not handle)
  // are skips; anything later is a failure of cleave.
  if (error.code == kExitBadInput)
    return {Outcome::Skip, error.what};
  return {Outcome::Fail, error.where + ": " + error.what};
}

Result runCase(const std::string &dir, const std::string &scratch) {
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  onnx::ModelProto model;
  {
    auto buffer = llvm::MemoryBuffer::getFile(dir + "/model.onnx", false, false);
    if (!buffer || !model.ParseFromArray((*buffer)->getBufferStart(),
                                         static_cast<int>((*buffer)->getBufferSize())))
      return {Outcome::Skip, "model.onnx is not a readable model"};
  }
  std::vector<std::string> graphInputs, outputNames;
  llvm::StringSet<> initializers;
  for (const auto &init : model.graph().initializer())
    initializers.insert(init.name());
  for (const auto &input : model.graph().input())
    if (!initializers.contains(input.name()))
      graphInputs.push_back(input.name());
  for (const auto &output : model.graph().output())
    outputNames.push_back(output.name());

  std::string bad = knownBadData(llvm::sys::path::filename(dir), model);
  if (!bad.empty())
    return {Outcome::Skip, bad};
  std::vector<std::string> sets = dataSets(dir);
  if (sets.empty())
    return {Outcome::Skip, "no test_data_set_* directory"};
  std::string program = scratch + "/program";
  for (const std::string &set : sets) {
    std::map<std::string, TensorData> values;
    for (auto [i, name] : llvm::enumerate(graphInputs)) {
      TensorData data;
      std::string message;
      if (readTensorFile(context, set + "/input_" + std::to_string(i) + ".pb", data, message))
        values[name] = std::move(data);
    }
    if (drawsRandomMask(model, values))
      return {Outcome::Skip, "Dropout in training mode draws a random mask; the expected "
                             "outputs come from numpy's generator"};
    Result compiled = compileCase(context, dir, std::move(values), program);
    if (compiled.outcome != Outcome::Pass)
      return compiled;
    RunOptions run;
    run.dir = program;
    run.outputDir = scratch + "/outputs";
    run.stderrFile = scratch + "/stderr.txt";
    std::vector<std::string> taken = programInputs(program);
    for (auto [i, name] : llvm::enumerate(graphInputs))
      if (llvm::is_contained(taken, name))
        run.inputs.push_back(name + "=" + set + "/input_" + std::to_string(i) + ".pb");
    llvm::sys::fs::remove_directories(run.outputDir);
    int status = runProgram(run);
    if (status != 0) {
      std::string message;
      if (auto text = llvm::MemoryBuffer::getFile(run.stderrFile))
        message = (*text)->getBuffer().trim().split('\n').first.str();
      // What the runtime cannot represent is a limit, not a wrong answer.
      for (const char *limit : {"unsupported element type", "has no .npy form"})
        if (message.find(limit) != std::string::npos)
          return {Outcome::Skip, message.substr(message.find("error: ") + 7)};
      return {Outcome::Fail, "the program exited with " + std::to_string(status) + ": " + message};
    }
    for (auto [i, name] : llvm::enumerate(outputNames)) {
      TensorData want;
      std::string message;
      if (!readTensorFile(context, set + "/output_" + std::to_string(i) + ".pb", want, message))
        return {Outcome::Skip, message};
      rt::NpyArray got;
      std::string file = run.outputDir + "/" + rt::npyFileName(name);
      if (!rt::readNpy(file, got, message))
        return {Outcome::Fail, "output '" + name + "': " + message};
      std::string difference = compare(name, got, want);
      if (!difference.empty())
        return {Outcome::Fail, llvm::sys::path::filename(set).str() + ": " + difference};
    }
  }
  return {Outcome::Pass, ""};
}

} // namespace

int runConformance(const std::vector<std::string> &roots, llvm::raw_ostream &os) {
  std::vector<std::string> cases = collectCases(roots);
  if (cases.empty()) {
    printError({roots.empty() ? std::string("conformance") : roots.front(),
                "no test case (a directory with model.onnx) found", "", kExitBadUsage});
    return kExitBadUsage;
  }
  llvm::SmallString<128> scratch;
  if (llvm::sys::fs::createUniqueDirectory("cleave-conformance", scratch)) {
    printError({"cleave conformance", "cannot create a temporary directory", "", kExitInternal});
    return kExitInternal;
  }
  llvm::scope_exit cleanup([&] { llvm::sys::fs::remove_directories(scratch); });
  int passed = 0, failedCount = 0, skipped = 0;
  for (const std::string &dir : cases) {
    Result result = runCase(dir, scratch.str().str());
    StringRef name = llvm::sys::path::filename(dir);
    switch (result.outcome) {
    case Outcome::Pass: ++passed; os << "PASS " << name << "\n"; break;
    case Outcome::Fail: ++failedCount; os << "FAIL " << name << ": " << result.detail << "\n"; break;
    case Outcome::Skip: ++skipped; os << "SKIP " << name << ": " << result.detail << "\n"; break;
    }
    os.flush();
  }
  os << passed << " passed, " << failedCount << " failed, " << skipped << " skipped\n";
  return failedCount == 0 ? kExitOk : kExitBadInput;
}

} // namespace cleave
