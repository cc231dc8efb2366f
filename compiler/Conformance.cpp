//===- Conformance.cpp - cleave conformance: ONNX backend node tests -----===//
//
// Each case directory holds model.onnx and test_data_set_N/{input,output}_K.pb.
// A case is compiled like any model, run on every data set, and its outputs
// compared with the expected ones at the ONNX backend tests' tolerances
// (|got - expected| <= atol + rtol * |expected|, rtol 1e-3, atol 1e-7; exact
// for integers and bools). A skip is only an explicit refusal at import or
// compile (an operator, element type or input cleave does not support) or a
// case whose data cannot be checked, each with its reason; a wrong value, a
// wrong shape, a program that exits non-zero or any other compile error is a
// failure. With an expected-status file, any case whose status or skip
// reason differs from the file's is a failure too.
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
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"
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
  std::string category; // of a skip: its reason without what varies by case
};

/// How a refusal is named in the counts and the expected-status file: what
/// varies between cases (node index, opset, tensor names) left out.
struct Refusal {
  const char *pattern; // an llvm::Regex over the error's WHAT
  const char *category; // with \1, \2 from the pattern's groups
};

/// The refusals cleave makes at import or compile. A compile error that is
/// none of these is a failure, not a skip.
constexpr Refusal kRefusals[] = {
    {"^IR version [0-9]+ is older than ([0-9]+)", "IR version older than \\1"},
    {"^opset [0-9]+ of domain '([^']*)' is older than ([0-9]+)",
     "opset of domain \\1 older than \\2"},
    {"^the model imports no opset of domain '([^']*)'", "no opset of domain \\1"},
    {"^input '[^']*' has unsupported element type (.*)$", "element type \\1"},
    {"^input '[^']*' is not a tensor", "input is not a tensor"},
    {"^unsupported element type ([^:]*): it has no .npy form", "element type \\1 (no .npy form)"},
    {"^node [^(]*\\(([^,]*), domain 'ai.onnx', opset [0-9]+\\): unsupported operator$",
     "unsupported operator \\1"},
    {"^node [^(]*\\(([^,]*), domain '([^']*)', opset [0-9]+\\): unsupported operator$",
     "unsupported operator \\2.\\1"},
    {"^node [^(]*\\(([^,]*), [^)]*\\): cast to ([A-Z0-9]+) is not supported", "cast to \\2"},
    {"^node [^(]*\\(([^,]*), [^)]*\\): the ([A-Za-z]+) output is not supported",
     "\\1 output \\2"},
    {"^node [^(]*\\(([^,]*), [^)]*\\): input '[^']*' \\(([a-z_]+)\\) must be a constant",
     "\\1 \\2 not a constant"},
    // An element type a decomposed operator's formula does not admit
    // (NodeContext::requireElementType).
    {"^node [^(]*\\(([^,]*), [^)]*\\): input '[^']*' is 'tensor<([0-9]+x)*([a-z0-9]+)>': "
     "cleave computes",
     "\\1 element type \\3"},
    // A form of an operator cleave does not import (a mode, an equation).
    {"^node [^(]*\\(([^,]*), [^)]*\\): attribute '([a-z_]+)' .*is not supported$",
     "\\1 attribute \\2"},
    // An element type the op's constraint in CleaveOps.td does not admit.
    {"^node [^(]*\\(([^,]*), [^)]*\\): 'cleave\\.[a-z_]+' op (operand|result) #[0-9]+ must be "
     "statically shaped tensor of .* values, but got 'tensor<([0-9]+x)*([a-z0-9]+)>'$",
     "\\1 element type \\4"},
};

/// The category of a refusal, or empty when `what` is not one.
std::string refusalCategory(StringRef what) {
  for (const Refusal &refusal : kRefusals) {
    llvm::SmallVector<StringRef> groups;
    if (!llvm::Regex(refusal.pattern).match(what, &groups))
      continue;
    std::string category;
    for (const char *c = refusal.category; *c; ++c) {
      if (c[0] == '\\' && c[1] >= '1' && c[1] <= '9')
        category += groups[*++c - '0'].str();
      else
        category += *c;
    }
    return category;
  }
  return "";
}

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
  // Refusals (an operator, type or input cleave does not support) are
  // skips; any other error is a failure of cleave.
  std::string category = error.code == kExitBadInput ? refusalCategory(error.what) : "";
  if (!category.empty())
    return {Outcome::Skip, error.what, category};
  return {Outcome::Fail, "compile exited with " + std::to_string(error.code) + ": " +
                             error.where + ": " + error.what};
}

Result runCase(const std::string &dir, const std::string &scratch) {
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  onnx::ModelProto model;
  {
    auto buffer = llvm::MemoryBuffer::getFile(dir + "/model.onnx", false, false);
    if (!buffer || !model.ParseFromArray((*buffer)->getBufferStart(),
                                         static_cast<int>((*buffer)->getBufferSize())))
      return {Outcome::Fail, "model.onnx is not a readable model"};
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
    return {Outcome::Skip, bad, "onnx/onnx#7749"};
  std::vector<std::string> sets = dataSets(dir);
  if (sets.empty())
    return {Outcome::Fail, "no test_data_set_* directory"};
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
      return {Outcome::Skip,
              "Dropout in training mode draws a random mask; the expected outputs come from "
              "numpy's generator",
              "Dropout draws a random mask"};
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
    // A stale file would give this run another case's message.
    llvm::sys::fs::remove(run.stderrFile);
    int status = runProgram(run);
    if (status != 0) {
      // cleave run's own errors (before the program starts) go to stderr.
      std::string message = "(see stderr)";
      if (auto text = llvm::MemoryBuffer::getFile(run.stderrFile))
        message = (*text)->getBuffer().trim().split('\n').first.str();
      return {Outcome::Fail, "the program exited with " + std::to_string(status) + ": " + message};
    }
    for (auto [i, name] : llvm::enumerate(outputNames)) {
      TensorData want;
      std::string message;
      if (!readTensorFile(context, set + "/output_" + std::to_string(i) + ".pb", want, message))
        return {Outcome::Fail, message};
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

/// The status line of a case in an expected-status file: "pass",
/// "skip: CATEGORY" or "fail".
std::string statusOf(const Result &result) {
  switch (result.outcome) {
  case Outcome::Pass: return "pass";
  case Outcome::Skip: return "skip: " + result.category;
  case Outcome::Fail: return "fail";
  }
  return "";
}

/// Reads NAME STATUS lines (# starts a comment) into `statuses`.
bool readExpected(const std::string &path, std::map<std::string, std::string> &statuses) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer) {
    printError({path, "cannot read the expected statuses: " + buffer.getError().message(), "",
                kExitBadUsage});
    return false;
  }
  llvm::SmallVector<StringRef> lines;
  (*buffer)->getBuffer().split(lines, '\n', -1, /*KeepEmpty=*/false);
  for (StringRef line : lines) {
    line = line.trim();
    if (line.empty() || line.starts_with("#"))
      continue;
    auto [name, status] = line.split(' ');
    statuses[name.str()] = status.trim().str();
  }
  return true;
}

} // namespace

int runConformance(const ConformanceOptions &options, llvm::raw_ostream &os) {
  std::vector<std::string> cases = collectCases(options.roots);
  if (cases.empty()) {
    printError({options.roots.empty() ? std::string("conformance") : options.roots.front(),
                "no test case (a directory with model.onnx) found", "", kExitBadUsage});
    return kExitBadUsage;
  }
  std::map<std::string, std::string> expected;
  if (!options.expectedFile.empty() && !readExpected(options.expectedFile, expected))
    return kExitBadUsage;
  llvm::SmallString<128> scratch;
  if (llvm::sys::fs::createUniqueDirectory("cleave-conformance", scratch)) {
    printError({"cleave conformance", "cannot create a temporary directory", "", kExitInternal});
    return kExitInternal;
  }
  llvm::scope_exit cleanup([&] { llvm::sys::fs::remove_directories(scratch); });
  int passed = 0, failedCount = 0, skipped = 0;
  std::map<std::string, int> skipsByCategory;
  std::vector<std::pair<std::string, std::string>> statuses;
  std::vector<std::string> differences;
  for (const std::string &dir : cases) {
    Result result = runCase(dir, scratch.str().str());
    std::string name = llvm::sys::path::filename(dir).str();
    switch (result.outcome) {
    case Outcome::Pass: ++passed; os << "PASS " << name << "\n"; break;
    case Outcome::Fail: ++failedCount; os << "FAIL " << name << ": " << result.detail << "\n"; break;
    case Outcome::Skip:
      ++skipped;
      ++skipsByCategory[result.category];
      os << "SKIP " << name << ": " << result.category << ": " << result.detail << "\n";
      break;
    }
    os.flush();
    std::string status = statusOf(result);
    statuses.emplace_back(name, status);
    if (!options.expectedFile.empty()) {
      auto want = expected.find(name);
      if (want == expected.end())
        differences.push_back(name + ": not in the expected statuses, got '" + status + "'");
      else if (want->second != status)
        differences.push_back(name + ": expected '" + want->second + "', got '" + status + "'");
      if (want != expected.end())
        expected.erase(want);
    }
  }
  for (const auto &[name, status] : expected)
    differences.push_back(name + ": expected '" + status + "', but there is no such case");

  os << passed << " passed, " << failedCount << " failed, " << skipped << " skipped\n";
  if (!skipsByCategory.empty()) {
    std::vector<std::pair<std::string, int>> byCount(skipsByCategory.begin(),
                                                     skipsByCategory.end());
    llvm::stable_sort(byCount, [](const auto &a, const auto &b) { return a.second > b.second; });
    os << "skipped by reason:\n";
    for (const auto &[category, count] : byCount)
      os << llvm::format("%6d ", count) << category << "\n";
  }
  if (!options.expectedFile.empty()) {
    for (const std::string &difference : differences)
      os << "DIFFERS " << difference << "\n";
    os << differences.size() << " differ from " << options.expectedFile << "\n";
  }
  if (!options.recordFile.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream file(options.recordFile, ec, llvm::sys::fs::OF_Text);
    if (ec) {
      printError({options.recordFile, "cannot write: " + ec.message(), "", kExitBadUsage});
      return kExitBadUsage;
    }
    file << "# The status of every ONNX backend node test under cleave conformance:\n"
            "# NAME pass, or NAME skip: REASON. Written by cleave conformance --record.\n";
    for (const auto &[name, status] : statuses)
      file << name << " " << status << "\n";
  }
  return failedCount == 0 && differences.empty() ? kExitOk : kExitBadInput;
}

} // namespace cleave
