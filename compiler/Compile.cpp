//===- Compile.cpp - ONNX model to a native program ----------------------===//

#include "compiler/Compile.h"

#include "compiler/BuildConfig.h"
#include "compiler/PlanWriter.h"
#include "dialects/Cleave/CleaveOps.h"
#include "passes/Passes.h"
#include "passes/Pipelines.h"
#include "runtime/JsonSyntax.h"
#include "runtime/Mesh.h"
#include "runtime/ProgramEntry.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/Cpp/CppEmitter.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <random>
#include <sstream>

using namespace mlir;

namespace cleave {
namespace {

/// A compile's build id: 128 random bits in hex, written into plan.json and
/// compiled into the program, which refuses another compile's plan.json.
std::string newBuildId() {
  std::random_device random;
  std::string id;
  for (int i = 0; i < 4; ++i)
    id += llvm::utohexstr(random(), /*LowerCase=*/true, /*Width=*/8);
  return id;
}

/// `text` as a C++ string literal: every byte but letters and digits as an
/// octal escape (names may hold any character).
std::string cppStringLiteral(llvm::StringRef text) {
  std::string literal = "\"";
  for (unsigned char c : text) {
    if (llvm::isAlnum(c) || c == ' ') {
      literal += static_cast<char>(c);
    } else {
      char escape[5];
      std::snprintf(escape, sizeof escape, "\\%03o", c);
      literal += escape;
    }
  }
  return literal + "\"";
}

/// Remembers which pass runs, so a failure can name it, and whether a
/// failure is the pass's own refusal or a bug: a failing upstream pass (it
/// runs on what cleave's passes checked) or IR that no longer verifies.
class CurrentPass : public PassInstrumentation {
public:
  CurrentPass(std::string &running, bool &internal) : running(running), internal(internal) {}
  void runBeforePass(Pass *pass, Operation *) override { running = pass->getArgument().str(); }
  void runAfterPassFailed(Pass *pass, Operation *op) override {
    // The innermost pass fails first; the adaptors that ran it follow.
    if (decided)
      return;
    decided = true;
    internal = !pass->getArgument().starts_with("cleave-") || failed(verify(op));
  }

private:
  std::string &running;
  bool &internal;
  bool decided = false;
};

/// "node 'fc1'" for an op imported from a named ONNX node, else empty.
std::string describe(Location loc) {
  if (auto named = dyn_cast<NameLoc>(loc))
    return "node '" + named.getName().str() + "'";
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (isa<NameLoc>(inner))
        return describe(inner);
  return "";
}

/// The element types the op's CUDA kernel takes where it takes fewer than
/// the CPU's (every type the dialect admits): cuBLAS's products f32, bf16
/// and f16 factors, the convolutions f32 and bf16 factors, the pools,
/// normalizations and losses f32; empty for the others.
StringRef cudaElementTypes(Operation *op) {
  if (isa<MatMulOp, GemmOp>(op))
    return "f32, bf16 or f16";
  if (isa<ConvOp, ConvGradInputOp, ConvGradWeightOp>(op))
    return "f32 or bf16";
  if (isa<MaxPoolOp, AveragePoolOp, GlobalAveragePoolOp, MaxPoolGradOp, AveragePoolGradOp,
          LayerNormalizationOp, LayerNormalizationGradOp, BatchNormalizationOp,
          SoftmaxCrossEntropyLossOp, SoftmaxCrossEntropyGradOp, NegativeLogLikelihoodLossOp>(op))
    return "f32";
  return "";
}

/// Whether the op's CUDA kernel takes its first operand's element type.
bool cudaTakes(Operation *op) {
  StringRef types = cudaElementTypes(op);
  if (types.empty() || op->getNumOperands() == 0)
    return true;
  Type element = getElementTypeOrSelf(op->getOperand(0).getType());
  return element.isF32() || (isa<MatMulOp, GemmOp>(op) && (element.isBF16() || element.isF16())) ||
         (isa<ConvOp, ConvGradInputOp, ConvGradWeightOp>(op) && element.isBF16());
}

/// What the driver calls of one compiled program: the prefix of its entry
/// points' names and its identity (runtime/ProgramEntry.h).
struct CompiledEntries {
  std::string entryPrefix, buildId, planInterface;
};

/// The C++ that defines the executable's `cleave_programs` of `programs`
/// (runtime/ProgramEntry.h), declaring their entry points first when they
/// are defined elsewhere (another stage's source).
std::string programTable(ArrayRef<CompiledEntries> programs, StringRef target, bool declare) {
  const std::string entry = ("cleave::rt::ProgramEntry<cleave::rt::" + target + "::Context>").str();
  std::string text;
  llvm::raw_string_ostream os(text);
  if (declare) {
    os << "#include \"runtime/" << target << "/Program.h\"\n\n";
    for (const CompiledEntries &program : programs)
      for (rt::ProgramEntryPoint point : rt::kProgramEntryPoints)
        os << entry << " " << program.entryPrefix << rt::entryPointName(point) << ";\n";
  }
  os << "\n// What the driver runs, and checks each plan.json against.\n"
     << "const cleave::rt::CompiledProgram<cleave::rt::" << target
     << "::Context> cleave_programs[] = {\n";
  for (const CompiledEntries &program : programs) {
    os << "    {{" << cppStringLiteral(program.buildId) << ",\n      "
       << cppStringLiteral(program.planInterface) << "}";
    for (rt::ProgramEntryPoint point : rt::kProgramEntryPoints)
      os << ",\n     " << program.entryPrefix << rt::entryPointName(point);
    os << "},\n";
  }
  os << "};\nconst std::size_t cleave_program_count = " << programs.size() << ";\n";
  return text;
}

class Compiler {
public:
  Compiler(MLIRContext &context, const CompileOptions &options, UserError &error)
      : context(context), options(options), error(error),
        partial(options.outDir + ".partial"), outputDir(partial) {}

  LogicalResult run();

private:
  LogicalResult fail(const Twine &where, const Twine &what, const Twine &note = "",
                     ExitCode code = kExitBadInput) {
    error = UserError{where.str(), what.str(), note.str(), code};
    return failure();
  }
  /// Runs the passes `populate` adds. A failure is reported with `code`:
  /// internal for passes that must not fail, bad input for those that refuse
  /// what the model asks (an op with no gradient rule). Whatever the code, a
  /// failure of an upstream pass (cleave's checks ran before it) or of the
  /// verifier after a pass is internal.
  LogicalResult runPasses(ModuleOp module, function_ref<void(PassManager &)> populate,
                          ExitCode code = kExitInternal);
  LogicalResult write(StringRef name, function_ref<void(llvm::raw_ostream &)> body);
  /// The generated source's name: program.cpp, or program.cu for CUDA.
  std::string sourceName() const { return options.target == "cuda" ? "program.cu" : "program.cpp"; }
  /// Builds `outputDir`/program from the generated `sources` (paths).
  LogicalResult buildProgram(ArrayRef<std::string> sources);
  LogicalResult checkTrainOptions(const TrainOptions &training);
  /// Refuses an input or output the program cannot read or write: bf16 has
  /// no .npy form.
  LogicalResult checkInputsAndOutputs(func::FuncOp forward);
  /// Refuses, for --target cuda, what a CUDA kernel does not implement.
  LogicalResult checkCudaKernels(ModuleOp module);
  /// Refuses what pipelines do not do yet.
  LogicalResult checkPipelineOptions(const TrainOptions &training);
  /// Reads --mesh into `mesh`.
  LogicalResult parseMesh(StringRef text);
  /// Reads --bucket-mb into `bucketBytes`.
  LogicalResult parseBucketMb(StringRef text);
  /// Reads `flag` (on or off: --prefetch-gathers, --overlap-reduce-scatters,
  /// --overlap-tp-sums) into `on`.
  LogicalResult parseBackgroundFlag(StringRef flag, StringRef text, bool &on);
  /// Reads the JSON object in `path`, the `what` that docs/formats.md
  /// describes under `format`.
  LogicalResult readJsonFile(StringRef path, StringRef what, StringRef format,
                             nlohmann::ordered_json &json);
  /// Reads --plan into `planEntries`.
  LogicalResult readPlan(StringRef path);
  /// Reads --stages into `stageEntries`.
  LogicalResult readStages(StringRef path);
  /// The number of ranks of mesh axis `name` (1 without one).
  int64_t axisRanks(StringRef name) const;
  /// The cleave-train-pipeline options `cleave compile`'s flags stand for,
  /// as cleave-opt takes them (written to pipeline.txt).
  std::string pipelineText() const;
  /// The training step (or forward) of `module` as one program in
  /// `outputDir`: the passes, the memory plan, plan.json and the weights,
  /// the C++ or CUDA source and the executable.
  LogicalResult compileProgram(ModuleOp module, const ImportedModel &imported, bool stepFromModel);
  /// With an interleaved pipeline, each pp rank's executable from the
  /// programs of its stages.
  LogicalResult linkRankPrograms(int64_t ranks);
  LogicalResult finish();

  MLIRContext &context;
  const CompileOptions &options;
  UserError &error;
  std::string partial;
  /// Where this program's files go: `partial`, or for a pipeline its
  /// stage's directory in it (stage<S>/).
  std::string outputDir;
  /// With a pp axis, the stage being compiled.
  std::optional<int64_t> stage;
  /// The mesh (no axes: one device).
  rt::Mesh mesh;
  /// cleave-overlap-gradients' bucket-bytes: -1 auto, 0 none.
  int64_t bucketBytes = 0;
  /// Whether cleave-prefetch-gathers and cleave-overlap-reduce-scatters run.
  bool prefetchGathers = false, overlapReduceScatters = false;
  /// Whether cleave-overlap-tp-sums runs.
  bool overlapTpSums = false;
  /// --loss KIND:OUTPUT,TARGET, once checked: the loss to append.
  std::optional<AppendLossOptions> appendedLoss;
  /// The plan's entries as cleave-annotate-sharding takes them.
  SmallVector<std::string> planEntries;
  /// The stages file's entries as cleave-pipeline-split takes them.
  SmallVector<std::string> stageEntries;
  /// With an interleaved pipeline, each stage's program, in stage order:
  /// the executable of each pp rank links those of the stages it runs.
  SmallVector<CompiledEntries> stagePrograms;
  /// Set when the host compiler ran and failed: the partial directory stays
  /// so the user can read the source and log the error points to.
  bool keepPartial = false;
};

LogicalResult Compiler::runPasses(ModuleOp module,
                                  function_ref<void(PassManager &)> populate, ExitCode code) {
  PassManager pm(&context);
  std::string passName;
  bool internal = false;
  pm.addInstrumentation(std::make_unique<CurrentPass>(passName, internal));
  if (options.printIrAfterAll) {
    context.disableMultithreading();
    pm.enableIRPrinting(/*shouldPrintBeforePass=*/nullptr,
                        /*shouldPrintAfterPass=*/[](Pass *, Operation *) { return true; },
                        /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false);
  }
  populate(pm);
  std::string message, where;
  ScopedDiagnosticHandler capture(&context, [&](Diagnostic &diagnostic) {
    if (message.empty() && diagnostic.getSeverity() == DiagnosticSeverity::Error) {
      message = diagnostic.str();
      where = describe(diagnostic.getLocation());
    }
    // A pass's warning (--deterministic's sums that stay partial) is the
    // user's to see, with the node it is about.
    if (diagnostic.getSeverity() == DiagnosticSeverity::Warning && options.warnings)
      printWarning(
          {options.model + ": " + describe(diagnostic.getLocation()), diagnostic.str(), "", {}});
    return success();
  });
  if (succeeded(pm.run(module)))
    return success();
  if (internal)
    code = kExitInternal;
  std::string location = options.model + (where.empty() ? "" : ": " + where);
  if (code != kExitInternal)
    return fail(location, message, "", code);
  return fail(location, "pass " + passName + " failed: " + message,
              "rerun with --print-ir-after-all to see the IR", code);
}

LogicalResult Compiler::checkInputsAndOutputs(func::FuncOp forward) {
  auto noNpyForm = [](Type type) { return getElementTypeOrSelf(type).isBF16(); };
  for (auto [i, arg] : llvm::enumerate(forward.getArguments())) {
    auto kind = forward.getArgAttrOfType<StringAttr>(i, kKindAttr);
    auto name = forward.getArgAttrOfType<StringAttr>(i, kNameAttr);
    if (kind && kind.getValue() == "input" && noNpyForm(arg.getType()))
      return fail(options.model + ": input '" + (name ? name.getValue() : "") + "'",
                  "unsupported element type bf16: it has no .npy form to read it from");
  }
  for (auto [i, type] : llvm::enumerate(forward.getResultTypes())) {
    auto name = forward.getResultAttrOfType<StringAttr>(i, kNameAttr);
    if (noNpyForm(type))
      return fail(options.model + ": output '" + (name ? name.getValue() : "") + "'",
                  "unsupported element type bf16: it has no .npy form to write it to");
  }
  return success();
}

LogicalResult Compiler::checkCudaKernels(ModuleOp module) {
  Operation *refused = nullptr;
  module.walk([&](Operation *op) {
    if (!cudaTakes(op)) {
      refused = op;
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (!refused)
    return success();
  std::string where = describe(refused->getLoc());
  std::string type;
  llvm::raw_string_ostream(type) << getElementTypeOrSelf(refused->getOperand(0).getType());
  return fail(options.model + (where.empty() ? "" : ": " + where),
              "unsupported with --target cuda: " + refused->getName().getStringRef() + " on " +
                  type + " (its CUDA kernel takes " + cudaElementTypes(refused) + " only)",
              "compile for --target cpu, or cast the data to f32");
}

LogicalResult Compiler::write(StringRef name, function_ref<void(llvm::raw_ostream &)> body) {
  std::string path = (outputDir + "/" + name).str();
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    return fail(path, "cannot write: " + ec.message(), "", kExitBadUsage);
  body(os);
  os.close();
  if (os.has_error())
    return fail(path, "cannot write: " + os.error().message(), "", kExitBadUsage);
  return success();
}

LogicalResult Compiler::buildProgram(ArrayRef<std::string> sources) {
  bool cuda = options.target == "cuda";
  // CLEAVE_CXX / CLEAVE_NVCC choose another host or CUDA compiler than the one
  // cleave was built with.
  const char *override = std::getenv(cuda ? "CLEAVE_NVCC" : "CLEAVE_CXX");
  std::string compiler = override && *override ? override
                         : cuda                 ? CLEAVE_CUDA_COMPILER
                                                : CLEAVE_CXX_COMPILER;
  StringRef libraries = cuda ? CLEAVE_CUDA_LINK_LIBRARIES : CLEAVE_CPU_LINK_LIBRARIES;
  if (compiler.empty())
    return fail("--target cuda", "this cleave was built without nvcc, so it cannot build CUDA programs",
                "use --emit cpp to write program.cu only", kExitBadUsage);
  if (!llvm::sys::fs::can_execute(compiler))
    return fail(compiler, "the host compiler is missing",
                "install g++ (scripts/setup.sh does), or point CLEAVE_CXX at one");
  std::vector<std::string> args{compiler};
  SmallVector<StringRef> flags;
  if (cuda) {
    // -O1: a program is one straight-line call of a prebuilt kernel per op,
    // and -O2's time grows faster than its functions: a GPT-2-small training
    // step (a 1 MB program.cu) takes nvcc 39 s at -O1 and 415 s at -O2, and
    // the steps run as fast (docs/gpu-check.md).
    flags = {"-std=c++17", "-O1"};
    StringRef(CLEAVE_CUDA_PROGRAM_FLAGS).split(flags, ';', -1, false);
  } else {
    // The build's flags, which its precompiled headers were made with (the
    // top-level CMakeLists.txt); their directory comes first.
    StringRef(CLEAVE_PROGRAM_FLAGS).split(flags, ';', -1, false);
    if (*CLEAVE_PROGRAM_HEADERS_DIR)
      args.push_back("-I" CLEAVE_PROGRAM_HEADERS_DIR);
  }
  args.push_back("-I" CLEAVE_SOURCE_DIR);
  for (StringRef flag : flags)
    args.push_back(flag.str());
  args.insert(args.end(), sources.begin(), sources.end());
  args.insert(args.end(), {"-o", outputDir + "/program"});
  SmallVector<StringRef> libraryList;
  StringRef(libraries).split(libraryList, ';', -1, false);
  for (StringRef library : libraryList)
    args.push_back(library.str());
  if (cuda) {
    args.insert(args.end(), {"-cudart", "shared", "-lcublas"});
  } else {
    args.insert(args.end(), {"-ldnnl", "-lgomp", "-lopenblas", "-lmvec", "-lpthread"});
  }
  SmallVector<StringRef> argRefs(args.begin(), args.end());
  std::string log = outputDir + "/build.log";
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(log), StringRef(log)};
  std::string message;
  int status = llvm::sys::ExecuteAndWait(compiler, argRefs, std::nullopt, redirects, 0, 0,
                                         &message);
  if (status == 0)
    return success();
  keepPartial = true;
  std::string firstErrors;
  if (auto text = llvm::MemoryBuffer::getFile(log)) {
    SmallVector<StringRef> lines;
    (*text)->getBuffer().split(lines, '\n');
    for (StringRef line : lines) {
      if (line.contains("error")) {
        firstErrors += (firstErrors.empty() ? "" : " | ") + line.trim().str();
        if (firstErrors.size() > 400)
          break;
      }
    }
  }
  return fail(sources.front(),
              "the host compiler failed (exit " + Twine(status) +
                  "): " + (firstErrors.empty() ? message : firstErrors),
              "the full log is " + log + " (a cleave bug: please report it)", kExitInternal);
}

LogicalResult Compiler::checkTrainOptions(const TrainOptions &t) {
  auto bad = [&](StringRef flag, double value, StringRef expected) {
    std::ostringstream text; // the shortest spelling: 1.5, 1e-08, -1
    text << value;
    return fail("--" + flag + " " + text.str(), "must be " + expected, "", kExitBadUsage);
  };
  static const char *const optimizers[] = {"sgd", "momentum", "adagrad", "adam", "adamw"};
  if (!llvm::is_contained(optimizers, t.optimizer))
    return fail("--optimizer '" + t.optimizer + "'", "unknown optimizer",
                "use sgd, momentum, adagrad, adam or adamw", kExitBadUsage);
  static const char *const schedules[] = {"constant", "linear", "cosine"};
  if (!llvm::is_contained(schedules, t.lrSchedule))
    return fail("--lr-schedule '" + t.lrSchedule + "'", "unknown schedule",
                "use constant, linear or cosine", kExitBadUsage);
  if (!(t.lr > 0))
    return bad("lr", t.lr, "positive");
  if (!(t.beta1 >= 0 && t.beta1 < 1))
    return bad("beta1", t.beta1, "in [0, 1)");
  if (!(t.beta2 >= 0 && t.beta2 < 1))
    return bad("beta2", t.beta2, "in [0, 1)");
  if (!(t.epsilon > 0))
    return bad("eps", t.epsilon, "positive");
  if (!(t.weightDecay >= 0))
    return bad("weight-decay", t.weightDecay, "zero or positive");
  if (!(t.momentum >= 0 && t.momentum < 1))
    return bad("momentum", t.momentum, "in [0, 1)");
  if (t.warmup < 0)
    return bad("warmup", t.warmup, "zero or positive");
  if (!(t.clipGradNorm >= 0))
    return bad("clip-grad-norm", t.clipGradNorm, "zero (off) or positive");
  if (t.gradAccum < 1)
    return bad("grad-accum", t.gradAccum, "positive");
  if (t.batchSize && *t.batchSize < 1)
    return bad("batch-size", *t.batchSize, "positive");
  if (failed(parseMesh(t.mesh)))
    return failure();
  if (t.zero < 0 || t.zero > 3)
    return bad("zero", t.zero, "0, 1, 2 or 3");
  if (failed(checkPipelineOptions(t)))
    return failure();
  if (failed(parseBucketMb(t.bucketMb)) ||
      failed(parseBackgroundFlag("--prefetch-gathers", t.prefetchGathers, prefetchGathers)) ||
      failed(parseBackgroundFlag("--overlap-reduce-scatters", t.overlapReduceScatters,
                                 overlapReduceScatters)) ||
      failed(parseBackgroundFlag("--overlap-tp-sums", t.overlapTpSums, overlapTpSums)))
    return failure();
  if (t.recompute != "none" && t.recompute != "selective" && t.recompute != "full")
    return fail("--recompute '" + t.recompute + "'", "unknown mode", "use none, selective or full",
                kExitBadUsage);
  if (t.precision != "fp32" && t.precision != "bf16" && t.precision != "fp16")
    return fail("--precision '" + t.precision + "'", "unknown precision", "use fp32, bf16 or fp16",
                kExitBadUsage);
  if (t.gradReduceDtype != "fp32" && t.gradReduceDtype != "bf16")
    return fail("--grad-reduce-dtype '" + t.gradReduceDtype + "'", "unknown type",
                "use fp32 or bf16", kExitBadUsage);
  if (t.gradReduceDtype == "bf16" && axisRanks("dp") < 2)
    return fail("--grad-reduce-dtype bf16", "sums gradients over the mesh's dp axis",
                "add --mesh dp=N with N > 1", kExitBadUsage);
  if (t.gradAccumDtype != "fp32" && t.gradAccumDtype != "bf16")
    return fail("--grad-accum-dtype '" + t.gradAccumDtype + "'", "unknown type", "use fp32 or bf16",
                kExitBadUsage);
  if (t.gradAccumDtype == "bf16" && t.precision != "bf16")
    return fail("--grad-accum-dtype bf16", "keeps the gradients of bf16 training",
                "add --precision bf16", kExitBadUsage);
  if (t.precision != "fp16")
    for (auto [flag, given] : {std::pair("--loss-scale", t.lossScale.has_value()),
                               std::pair("--loss-scale-window", t.lossScaleWindow.has_value()),
                               std::pair("--loss-scale-growth", t.lossScaleGrowth.has_value()),
                               std::pair("--loss-scale-backoff", t.lossScaleBackoff.has_value())})
      if (given)
        return fail(flag, "scales fp16 training's loss", "add --precision fp16", kExitBadUsage);
  if (t.lossScale && !(*t.lossScale > 0 && std::isfinite(*t.lossScale)))
    return bad("loss-scale", *t.lossScale, "positive");
  if (t.lossScaleWindow && *t.lossScaleWindow < 1)
    return bad("loss-scale-window", *t.lossScaleWindow, "positive");
  if (t.lossScaleGrowth && !(*t.lossScaleGrowth > 1 && std::isfinite(*t.lossScaleGrowth)))
    return bad("loss-scale-growth", *t.lossScaleGrowth, "a finite number above 1");
  if (t.lossScaleBackoff && !(*t.lossScaleBackoff > 0 && *t.lossScaleBackoff < 1))
    return bad("loss-scale-backoff", *t.lossScaleBackoff, "between 0 and 1");
  if (failed(readPlan(t.plan)))
    return failure();
  if (!t.plan.empty() && mesh.axisNames.empty())
    return fail("--plan", "lays parameters out over a mesh", "add --mesh dp=N,tp=M",
                kExitBadUsage);
  if (t.zero > 0 && axisRanks("dp") < 2)
    return fail("--zero " + std::to_string(t.zero),
                mesh.axisNames.empty() ? "shards over a mesh's dp axis"
                             : "shards over the mesh's dp axis, which has one rank here",
                "add --mesh dp=N with N > 1", kExitBadUsage);
  int64_t slices = t.gradAccum * axisRanks("dp");
  if (t.batchSize && *t.batchSize % slices != 0)
    return fail("--batch-size " + std::to_string(*t.batchSize),
                "does not split into " + std::to_string(slices) +
                    " equal microbatches (--grad-accum x the mesh's dp)",
                "choose a multiple of " + std::to_string(slices), kExitBadUsage);
  return success();
}

/// Prints the model's training warnings but those whose parameters --freeze
/// already keeps as they are.
static void printTrainingWarnings(const ImportedModel &model,
                                  ArrayRef<std::string> frozenGlobs) {
  SmallVector<llvm::GlobPattern> frozen;
  for (const std::string &text : frozenGlobs)
    if (auto glob = llvm::GlobPattern::create(text))
      frozen.push_back(std::move(*glob));
  auto isFrozen = [&](const std::string &name) {
    return llvm::any_of(frozen, [&](const llvm::GlobPattern &g) { return g.match(name); });
  };
  for (const Warning &warning : model.trainingWarnings)
    if (!llvm::all_of(warning.parameters, isFrozen))
      printWarning(warning);
}

LogicalResult Compiler::readJsonFile(StringRef path, StringRef what, StringRef format,
                                     nlohmann::ordered_json &json) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return fail(path, "cannot read the " + what + ": " + buffer.getError().message(), "",
                kExitBadInput);
  StringRef text = (*buffer)->getBuffer();
  std::string syntax = rt::jsonSyntaxError(std::string_view(text.data(), text.size()));
  const std::string see = ("see docs/formats.md, " + format).str();
  if (!syntax.empty())
    return fail(path, "is not JSON: " + syntax, see, kExitBadInput);
  json = nlohmann::ordered_json::parse(text, nullptr, false);
  if (json.is_discarded() || !json.is_object())
    return fail(path, "is not a JSON object", see, kExitBadInput);
  return success();
}

LogicalResult Compiler::readPlan(StringRef path) {
  if (path.empty())
    return success();
  nlohmann::ordered_json json;
  if (failed(readJsonFile(path, "plan", "plan files", json)))
    return failure();
  if (!json.contains("parameters") || !json["parameters"].is_object())
    return fail(path, "has no \"parameters\" object of GLOB: [DIM, ...]",
                "see docs/formats.md, plan files", kExitBadInput);
  for (const auto &[glob, dims] : json["parameters"].items()) {
    std::string spec;
    bool valid = dims.is_array() && !dims.empty();
    for (const auto &dim : dims) {
      valid = valid && dim.is_string() && dim.get<std::string>().find('/') == std::string::npos;
      if (valid)
        spec += (spec.empty() ? "" : "/") + dim.get<std::string>();
    }
    if (!valid || glob.find_first_of(",=") != std::string::npos)
      return fail(path, "parameters: '" + glob + "' is not GLOB: [\"-\" | \"tp\" | \"tp:BLOCKS\", ...]",
                  "one entry per dim of the parameters it matches", kExitBadInput);
    planEntries.push_back(glob + "=" + spec);
  }
  return success();
}

LogicalResult Compiler::readStages(StringRef path) {
  if (path.empty() || path == "auto")
    return success();
  nlohmann::ordered_json json;
  if (failed(readJsonFile(path, "stages file", "stages files", json)))
    return failure();
  const auto *stages = json.contains("stages") ? &json["stages"] : nullptr;
  if (!stages || !stages->is_array() || stages->empty())
    return fail(path, "has no \"stages\" list of lists of parameter-name globs",
                "see docs/formats.md, stages files", kExitBadInput);
  const int64_t wanted = axisRanks("pp") * options.training.virtualStages;
  if (static_cast<int64_t>(stages->size()) != wanted)
    return fail(path,
                "has " + std::to_string(stages->size()) +
                    " stages, but --mesh has pp=" + std::to_string(axisRanks("pp")) +
                    (options.training.virtualStages > 1
                         ? " with " + std::to_string(options.training.virtualStages) +
                               " virtual stages each (" + std::to_string(wanted) + ")"
                         : ""),
                "one list of globs per stage", kExitBadUsage);
  for (size_t stage = 0; stage < stages->size(); ++stage) {
    const auto &globs = (*stages)[stage];
    bool valid = globs.is_array() && !globs.empty();
    for (const auto &glob : globs) {
      valid = valid && glob.is_string() &&
              glob.get<std::string>().find_first_of(",=") == std::string::npos;
      if (valid)
        stageEntries.push_back(glob.get<std::string>() + "=" + std::to_string(stage));
    }
    if (!valid)
      return fail(path, "stages[" + std::to_string(stage) + "] is not a non-empty list of globs",
                  "a glob has no ',' or '='", kExitBadInput);
  }
  return success();
}

LogicalResult Compiler::checkPipelineOptions(const TrainOptions &t) {
  const int64_t ranks = axisRanks("pp");
  if (ranks == 1 && t.virtualStages != 1)
    return fail("--virtual-stages " + std::to_string(t.virtualStages),
                "is the stages each rank of a pipeline runs",
                "add a pp axis to --mesh and --schedule interleaved", kExitBadUsage);
  if (ranks == 1)
    return t.stages.empty() || t.stages == "auto"
               ? success()
               : fail("--stages " + t.stages, "cuts a pipeline into stages",
                      "add a pp axis to --mesh, e.g. --mesh pp=2", kExitBadUsage);
  if (t.virtualStages < 1 || t.virtualStages > 64)
    return fail("--virtual-stages " + std::to_string(t.virtualStages), "is not from 1 to 64", "",
                kExitBadUsage);
  if (failed(readStages(t.stages)))
    return failure();
  if (t.schedule != "gpipe" && t.schedule != "1f1b" && t.schedule != "interleaved" &&
      t.schedule != "zb-h1")
    return fail("--schedule '" + t.schedule + "'", "unknown pipeline schedule",
                "use gpipe, 1f1b, interleaved or zb-h1", kExitBadUsage);
  const bool interleaved = t.schedule == "interleaved";
  if (interleaved && t.virtualStages == 1)
    return fail("--schedule interleaved", "runs two or more stages on each pp rank",
                "add --virtual-stages 2", kExitBadUsage);
  if (!interleaved && t.virtualStages > 1)
    return fail("--virtual-stages " + std::to_string(t.virtualStages),
                "the " + t.schedule + " schedule runs one stage on each pp rank",
                "add --schedule interleaved", kExitBadUsage);
  if (t.schedule != "gpipe" && t.gradAccum < ranks)
    return fail("--grad-accum " + std::to_string(t.gradAccum),
                "the " + t.schedule +
                    " schedule needs at least as many microbatches as pp has ranks (" +
                    std::to_string(ranks) + ")",
                "raise --grad-accum, or use --schedule gpipe", kExitBadUsage);
  if (interleaved && t.gradAccum % ranks != 0)
    return fail("--grad-accum " + std::to_string(t.gradAccum),
                "the interleaved schedule runs a multiple of pp's ranks (" + std::to_string(ranks) +
                    ") microbatches",
                "choose a multiple of " + std::to_string(ranks), kExitBadUsage);
  return success();
}

LogicalResult Compiler::parseBucketMb(StringRef text) {
  double mb = 0;
  if (text == "auto") {
    // Off on CUDA until the background collectives have run on a GPU
    // (docs/training.md, "Overlap").
    bucketBytes = options.target == "cuda" ? 0 : -1;
    return success();
  }
  if (text.getAsDouble(mb) || !(mb >= 0) || mb > 1024)
    return fail("--bucket-mb '" + text + "'", "is not auto or a number of MiB from 0 to 1024", "",
                kExitBadUsage);
  bucketBytes = static_cast<int64_t>(mb * 1024 * 1024);
  if (mb > 0 && bucketBytes == 0)
    bucketBytes = 1;
  return success();
}

LogicalResult Compiler::parseBackgroundFlag(StringRef flag, StringRef text, bool &on) {
  if (text != "on" && text != "off")
    return fail(flag + " '" + text + "'", "is not on or off", "", kExitBadUsage);
  on = text == "on";
  return success();
}

LogicalResult Compiler::parseMesh(StringRef text) {
  if (text.empty())
    return success();
  std::string message;
  if (!rt::Mesh::parse(text.str(), mesh, message))
    return fail("--mesh '" + text + "'", message, "e.g. --mesh dp=2", kExitBadUsage);
  for (const std::string &name : mesh.axisNames)
    if (name != "dp" && name != "tp" && name != "pp")
      return fail("--mesh '" + text + "'", "unknown axis '" + name + "'",
                  "the axes are dp (data parallel), tp (tensor parallel) and pp (pipeline "
                  "parallel)",
                  kExitBadUsage);
  // Every mesh has a data-parallel axis, of one rank if not named.
  if (mesh.axisIndex("dp") < 0) {
    mesh.axisNames.insert(mesh.axisNames.begin(), "dp");
    mesh.shape.insert(mesh.shape.begin(), 1);
  }
  return success();
}

int64_t Compiler::axisRanks(StringRef name) const {
  int axis = mesh.axisIndex(name);
  return axis < 0 ? 1 : mesh.shape[axis];
}

std::string Compiler::pipelineText() const {
  std::string text;
  // A value is quoted unless it is plain; list items are quoted one by one.
  auto quoted = [](StringRef value) {
    bool plain = !value.empty() && llvm::all_of(value, [](char c) {
      return llvm::isAlnum(c) || StringRef("._-:/*=[]").contains(c);
    });
    return plain ? value.str() : "\"" + value.str() + "\"";
  };
  auto add = [&](StringRef key, const std::string &value) {
    text += (text.empty() ? "" : " ") + key.str() + "=" + value;
  };
  auto addList = [&](StringRef key, ArrayRef<std::string> items) {
    if (!items.empty())
      add(key, llvm::join(llvm::map_range(items, quoted), ","));
  };
  auto number = [](double value) {
    std::ostringstream os; // the shortest spelling that reads back exactly
    os << std::setprecision(17) << value;
    return os.str();
  };
  if (!options.train)
    add("gradients-only", "true");
  if (appendedLoss) {
    add("append-loss-kind", quoted(appendedLoss->kind));
    add("append-loss-output", quoted(appendedLoss->output));
    add("append-loss-target", quoted(appendedLoss->target));
  } else if (!options.loss.empty()) {
    add("loss", quoted(options.loss));
  }
  addList("freeze", options.freeze);
  if (!options.train)
    return text;
  SmallVector<std::string> meshEntries;
  for (size_t a = 0; a < mesh.shape.size(); ++a)
    meshEntries.push_back(mesh.axisNames[a] + "=" + std::to_string(mesh.shape[a]));
  addList("mesh", meshEntries);
  addList("plan", planEntries);
  const TrainOptions &t = options.training;
  add("optimizer", quoted(t.optimizer));
  add("beta1", number(t.beta1));
  add("beta2", number(t.beta2));
  add("eps", number(t.epsilon));
  add("weight-decay", number(t.weightDecay));
  add("momentum", number(t.momentum));
  add("nesterov", t.nesterov ? "true" : "false");
  add("clip-grad-norm", number(t.clipGradNorm));
  add("zero", std::to_string(t.zero));
  add("sync-batchnorm", t.syncBatchNorm ? "true" : "false");
  add("bucket-bytes", std::to_string(bucketBytes));
  add("prefetch-gathers", prefetchGathers ? "true" : "false");
  add("overlap-reduce-scatters", overlapReduceScatters ? "true" : "false");
  add("overlap-tp-sums", overlapTpSums ? "true" : "false");
  add("recompute", quoted(t.recompute));
  add("precision", quoted(t.precision));
  add("grad-reduce-dtype", quoted(t.gradReduceDtype));
  add("grad-accum-dtype", quoted(t.gradAccumDtype));
  add("deterministic", t.deterministic ? "true" : "false");
  if (t.precision == "fp16") {
    add("loss-scale", number(t.initialLossScale()));
    add("loss-scale-window", std::to_string(t.lossScaleGrowthInterval()));
    add("loss-scale-growth", number(t.lossScaleGrowthFactor()));
    add("loss-scale-backoff", number(t.lossScaleBackoffFactor()));
  }
  if (stage) {
    addList("stage-params", stageEntries);
    add("schedule", quoted(t.schedule));
    add("virtual-stages", std::to_string(t.virtualStages));
    add("microbatches", std::to_string(t.gradAccum));
    add("stage", std::to_string(*stage));
  }
  return text;
}

LogicalResult Compiler::finish() {
  if (llvm::sys::fs::exists(options.outDir)) {
    if (!llvm::sys::fs::is_directory(options.outDir))
      return fail(options.outDir, "exists and is not a directory", "", kExitBadUsage);
    if (std::error_code ec = llvm::sys::fs::remove_directories(options.outDir))
      return fail(options.outDir, "cannot replace: " + ec.message(), "", kExitBadUsage);
  }
  if (std::error_code ec = llvm::sys::fs::rename(partial, options.outDir))
    return fail(options.outDir, "cannot write: " + ec.message(), "", kExitBadUsage);
  return success();
}

LogicalResult Compiler::run() {
  if (options.target != "cpu" && options.target != "cuda")
    return fail("--target '" + options.target + "'", "unknown target", "use cpu or cuda",
                kExitBadUsage);
  if (options.emit != "plan" && options.emit != "mlir" && options.emit != "cpp" &&
      options.emit != "program")
    return fail("--emit '" + options.emit + "'", "unknown stage", "use plan, mlir, cpp or program",
                kExitBadUsage);
  if (!options.train && !options.training.mesh.empty())
    return fail("--mesh", "partitions a training step", "add --train", kExitBadUsage);
  if (!options.train && options.training.precision != "fp32")
    return fail("--precision", "chooses a training step's products", "add --train", kExitBadUsage);
  if (!options.train && options.training.gradReduceDtype != "fp32")
    return fail("--grad-reduce-dtype", "chooses how a training step's gradients are summed",
                "add --train", kExitBadUsage);
  if (!options.train && options.training.gradAccumDtype != "fp32")
    return fail("--grad-accum-dtype", "chooses how a training step's gradients are kept",
                "add --train", kExitBadUsage);
  if (!options.train && options.ignoreTrainingInfo)
    return fail("--ignore-training-info", "chooses how a training step is built", "add --train",
                kExitBadUsage);
  if (options.train && failed(checkTrainOptions(options.training)))
    return failure();
  ImportOptions import = options.import;
  // plan.json alone needs the parameters' shapes, not their values.
  import.parameterValues = options.emit != "plan";
  if (options.train && options.training.batchSize)
    import.batchSize =
        *options.training.batchSize / (options.training.gradAccum * axisRanks("dp"));
  // A model's training_info defines the step, unless told otherwise.
  if (options.train && !options.ignoreTrainingInfo) {
    import.trainingInfo = true;
    import.stepFlags = options.stepFlags;
    if (!StringRef(options.loss).contains(':'))
      import.trainingLoss = options.loss;
  }
  auto imported = importOnnxModel(context, options.model, import, error);
  if (failed(imported))
    return failure();
  if (options.train && options.warnings)
    printTrainingWarnings(*imported, options.freeze);
  ModuleOp module = *imported->module;
  if (failed(checkInputsAndOutputs(module.lookupSymbol<func::FuncOp>("forward"))))
    return failure();
  // Then @forward is the whole step already: no autodiff, no @apply.
  const bool stepFromModel = imported->trainingAlgorithm.has_value();
  if (stepFromModel && options.training.precision != "fp32")
    return fail(options.model + ": training_info",
                "defines the step, so --precision cannot change its products",
                "add --ignore-training-info to build the step with cleave's optimizers",
                kExitBadUsage);
  if (options.printIrAfterAll) {
    llvm::errs() << "// -----// IR after import //----- //\n";
    module.print(llvm::errs());
  }

  llvm::sys::fs::remove_directories(partial);
  if (std::error_code ec = llvm::sys::fs::create_directories(partial))
    return fail(partial, "cannot create: " + ec.message(), "", kExitBadUsage);
  // Until the end, any failure removes the partial directory, except a host
  // compiler failure, whose source the error points to.
  llvm::scope_exit cleanup([&] {
    if (!keepPartial && llvm::sys::fs::exists(partial))
      llvm::sys::fs::remove_directories(partial);
  });

  // --loss KIND:OUTPUT,TARGET appends a loss; a plain name picks an output.
  if (StringRef(options.loss).contains(':')) {
    auto [kind, rest] = StringRef(options.loss).split(':');
    auto [output, target] = rest.split(',');
    if (output.empty() || target.empty() || (kind != "cross_entropy" && kind != "mse"))
      return fail("--loss '" + options.loss + "'",
                  "expected NAME, cross_entropy:LOGITS,LABELS or mse:OUTPUT,TARGET", "",
                  kExitBadUsage);
    appendedLoss = AppendLossOptions{kind.str(), output.str(), target.str()};
  }
  // A pipeline compiles one program per stage, each in its own directory.
  const int64_t ranks = axisRanks("pp");
  if (ranks == 1)
    return failure(failed(compileProgram(module, *imported, stepFromModel)) || failed(finish()));
  for (stage = 0; *stage < ranks * options.training.virtualStages; ++*stage) {
    outputDir = partial + "/stage" + std::to_string(*stage);
    if (std::error_code ec = llvm::sys::fs::create_directories(outputDir))
      return fail(outputDir, "cannot create: " + ec.message(), "", kExitBadUsage);
    OwningOpRef<ModuleOp> copy = module.clone();
    if (failed(compileProgram(*copy, *imported, stepFromModel)))
      return failure();
  }
  return failure(failed(linkRankPrograms(ranks)) || failed(finish()));
}

LogicalResult Compiler::linkRankPrograms(int64_t ranks) {
  // Rank r runs stages r, r + P, ...: its executable, in stage<r>/, links
  // their programs and the table of them (programs.cpp).
  if (stagePrograms.empty())
    return success();
  const std::string source = sourceName();
  for (int64_t rank = 0; rank < ranks; ++rank) {
    outputDir = partial + "/stage" + std::to_string(rank);
    SmallVector<CompiledEntries> programs;
    std::vector<std::string> sources;
    for (int64_t s = rank; s < static_cast<int64_t>(stagePrograms.size()); s += ranks) {
      programs.push_back(stagePrograms[s]);
      sources.push_back(partial + "/stage" + std::to_string(s) + "/" + source);
    }
    sources.push_back(outputDir + "/programs.cpp");
    if (failed(write("programs.cpp",
                     [&](llvm::raw_ostream &os) {
                       os << programTable(programs, options.target, /*declare=*/true);
                     })) ||
        (options.emit == "program" && failed(buildProgram(sources))))
      return failure();
  }
  return success();
}

LogicalResult Compiler::compileProgram(ModuleOp module, const ImportedModel &imported,
                                       bool stepFromModel) {
  if ((options.gradients || options.train) && !stepFromModel) {
    std::string text = pipelineText();
    std::unique_ptr<TrainPipelineOptions> pipeline = TrainPipelineOptions::createFromString(text);
    if (!pipeline)
      return fail(options.model, "the flags make no pipeline: " + text,
                  "a name or glob with a quote in it cannot be passed", kExitBadUsage);
    if (failed(write("pipeline.txt", [&](llvm::raw_ostream &os) { os << text << "\n"; })) ||
        failed(runPasses(
            module, [&](PassManager &pm) { buildTrainPipeline(pm, *pipeline); },
            kExitBadInput)))
      return failure();
  }
  if (failed(runPasses(module, [&](PassManager &pm) {
        buildProgramTail(pm, {bucketBytes, prefetchGathers, overlapReduceScatters, overlapTpSums});
      })))
    return failure();
  if (options.emit != "plan" &&
      failed(write("forward.mlir", [&](llvm::raw_ostream &os) { os << module << "\n"; })))
    return failure();
  const std::string buildId = newBuildId();
  std::string planInterface;
  if (failed(writePlan(module, imported, options, outputDir, buildId, planInterface, error)))
    return failure();
  if (options.emit == "plan")
    return success();
  if (options.target == "cuda" && failed(checkCudaKernels(module)))
    return failure();
  // A rank of an interleaved pipeline runs several stages' programs: each
  // stage's entry points are named apart, and the rank's executable is
  // built once they all are (run()).
  const bool sharesExecutable = stage && options.training.virtualStages > 1;
  const CompiledEntries entries{sharesExecutable ? "cleave_stage" + std::to_string(*stage) + "_"
                                                 : "cleave_",
                                buildId, planInterface};
  if (failed(runPasses(module, [&](PassManager &pm) {
        pm.addPass(createLowerToEmitC(
            LowerToEmitCOptions{options.target, entries.entryPrefix, sharesExecutable}));
      })))
    return failure();
  if (failed(write("program.mlir", [&](llvm::raw_ostream &os) { os << module << "\n"; })))
    return failure();
  if (options.emit != "mlir") {
    const std::string source = sourceName();
    LogicalResult translated = success();
    if (failed(write(source, [&](llvm::raw_ostream &os) {
          translated = emitc::translateToCpp(module, os);
          if (!sharesExecutable)
            os << programTable(entries, options.target, /*declare=*/false);
        })))
      return failure();
    if (failed(translated))
      return fail(options.model, "translating to C++ failed (a cleave bug)",
                  "the EmitC IR is in " + outputDir + "/program.mlir", kExitInternal);
    if (sharesExecutable)
      stagePrograms.push_back(entries);
    else if (options.emit == "program" && failed(buildProgram({outputDir + "/" + source})))
      return failure();
  }
  return success();
}

} // namespace

LogicalResult compileModel(MLIRContext &context, const CompileOptions &options,
                           UserError &error) {
  DialectRegistry registry;
  registerExternalModels(registry);
  context.appendDialectRegistry(registry);
  context.loadDialect<emitc::EmitCDialect, shard::ShardDialect>();
  return Compiler(context, options, error).run();
}

} // namespace cleave
