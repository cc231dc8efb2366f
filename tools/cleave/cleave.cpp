//===- cleave.cpp - the cleave command line ------------------------------===//
//
// Subcommands (CLI11): `import` prints a model's cleave IR or a summary,
// `compile` builds a native program, `run` runs one, `ckpt` inspects,
// consolidates and exports a run's checkpoints, `conformance` checks
// numerics on ONNX backend node tests, `schedule` simulates a pipeline
// schedule, `plan` ranks the parallel layouts of a training step. Exit codes: 0 ok, 1 bad
// input, 2 bad usage, 3 internal error.
//
//===----------------------------------------------------------------------===//

#include "compiler/CheckpointCommand.h"
#include "compiler/Compile.h"
#include "compiler/Conformance.h"
#include "compiler/Diagnostics.h"
#include "compiler/ModelSummary.h"
#include "compiler/OnnxImporter.h"
#include "compiler/PlanCommand.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "compiler/RunCommand.h"
#include "compiler/ScheduleCommand.h"
#include "runtime/CliValidators.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <CLI/CLI.hpp>

#include <limits>

using namespace cleave;

namespace {

struct ImportCommand {
  std::string model;
  std::string output;
  std::vector<std::string> inputShapes;
  bool summary = false;
  bool allParameters = false;
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
  sub->add_flag("--all", cmd.allParameters,
                "With --summary, list every parameter (the first 12 otherwise)")
      ->needs("--summary");
  sub->add_flag("--debug-info", cmd.debugInfo, "Print source locations (ONNX node names)");
}

/// Parses every --input-shape flag into `options`.
bool parseInputShapes(const std::vector<std::string> &flags, ImportOptions &options,
                      UserError &error) {
  for (const std::string &flag : flags)
    if (mlir::failed(parseInputShape(flag, options, error)))
      return false;
  return true;
}

int runImport(const ImportCommand &cmd) {
  ImportOptions options;
  UserError error;
  if (!parseInputShapes(cmd.inputShapes, options, error)) {
    printError(error);
    return error.code;
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
    printModelSummary(*model, cmd.allParameters, llvm::outs());
  else if (cmd.output.empty())
    model->module->print(llvm::outs(), flags);
  return kExitOk;
}

struct CompileCommand {
  CompileOptions options;
  std::vector<std::string> inputShapes;
  /// The flags of cleave's own step builder (CompileOptions::stepFlags).
  std::vector<CLI::Option *> stepOptions;
  /// With --mesh auto: where to plan for.
  PlanOptions planner;
  /// The flags of a layout, which --mesh auto chooses (or plans with:
  /// --ranks, --device, --memory-per-rank).
  std::vector<CLI::Option *> layoutOptions;
  CLI::Option *ranksOption = nullptr;
};

/// The flags `compile` and `plan` share: the model's inputs and loss, and
/// the step's optimizer, batch and tensor-parallel plan.
void addStepOptions(CLI::App *sub, CompileOptions &options, std::vector<std::string> &inputShapes) {
  sub->add_option("model", options.model, "The ONNX model file (.onnx)")->required();
  sub->add_option("--input-shape", inputShapes,
                  "Bind an input's dims, e.g. --input-shape tokens=8x128 (repeatable)");
  sub->add_option("--loss", options.loss,
                  "What --gradients and --train differentiate: an output's NAME (default: "
                  "the only scalar output), or a loss to append: cross_entropy:LOGITS,LABELS "
                  "or mse:OUTPUT,TARGET (LABELS/TARGET become new inputs)");
  sub->add_option("--freeze", options.freeze,
                  "Parameters to keep fixed: a name glob, e.g. 'encoder.*' (repeatable)");
  TrainOptions &t = options.training;
  sub->add_option("--optimizer", t.optimizer, "sgd (default), momentum, adagrad, adam or adamw");
  sub->add_option("--lr", t.lr, "Learning rate (default 0.01)");
  sub->add_option("--lr-schedule", t.lrSchedule, "constant (default), linear or cosine");
  sub->add_option("--warmup", t.warmup, "Steps of linear warmup (default 0)");
  sub->add_option("--beta1", t.beta1, "Adam's first-moment decay (default 0.9)");
  sub->add_option("--beta2", t.beta2, "Adam's second-moment decay (default 0.999)");
  sub->add_option("--eps", t.epsilon, "Adam's and Adagrad's epsilon (default 1e-8)");
  sub->add_option("--weight-decay", t.weightDecay,
                  "Weight decay: L2 for sgd, momentum and adam; decoupled for adamw");
  sub->add_option("--momentum", t.momentum, "Velocity decay of momentum (default 0.9)");
  sub->add_flag("--nesterov", t.nesterov, "Nesterov momentum");
  sub->add_option("--clip-grad-norm", t.clipGradNorm,
                  "Clip the global gradient 2-norm to this value before the update (0: off)");
  sub->add_option("--batch-size", t.batchSize,
                  "Samples per step, over all microbatches and data-parallel ranks; each "
                  "input's dim 0 becomes batch-size / (grad-accum x dp) (default: the model's "
                  "input shapes)");
  sub->add_option("--plan", t.plan,
                  "A plan file: parameter-name globs and how each dim lies over the mesh, "
                  "e.g. {\"parameters\": {\"*.fc1.weight\": [\"tp\", \"-\"]}} "
                  "(plans/ has Megatron-style ones)");
  sub->add_option("--bucket-mb", t.bucketMb,
                  "MiB of gradients per bucket whose dp all-reduce (with --zero 1, "
                  "reduce-scatter; with --zero 2, every microbatch's) starts, on a thread of its "
                  "own, as soon as the last microbatch's backward has them: auto (default: a "
                  "quarter of the gradients, 4 KiB to 25 MiB; 0 with --target cuda or --zero 1 "
                  "or 2) or a number; 0 runs every sum after the backward");
  sub->add_option("--prefetch-gathers", t.prefetchGathers,
                  "With --zero 3: on starts each parameter's dp all-gather, on a thread of its "
                  "own, while the layers before it compute; off (default) gathers it where it "
                  "is read");
  sub->add_option("--overlap-reduce-scatters", t.overlapReduceScatters,
                  "With --zero 2 or 3: on reduce-scatters each gradient, on a thread of its "
                  "own, while the backward makes the next layer's; off (default) waits for "
                  "each where it is made");
  sub->add_option("--overlap-tp-sums", t.overlapTpSums,
                  "With a tp axis: on sums each input gradient's tp partial sums, on a thread "
                  "of its own, while the backward computes the weight's gradient; off "
                  "(default) sums them where they are made");
  sub->add_flag("--deterministic", t.deterministic,
                "Reduce over ranks in a fixed order: data-parallel, tensor-parallel and "
                "pipeline runs are bit-identical to one device accumulating the same "
                "microbatches (a weight tied across pipeline stages is sent from its first "
                "stage each microbatch; a product summing over a tp-split dim gathers its "
                "factors and is computed whole on every tp rank)");
  sub->add_flag("--sync-batchnorm", t.syncBatchNorm,
                "Training-mode BatchNorm normalizes with the statistics of every dp rank's "
                "microbatch together (SyncBatchNorm), not each rank's own");
  sub->add_option("--precision", t.precision,
                  "The matrix products' operands: fp32 (default), bf16 or fp16 (mixed "
                  "precision: products of bf16 or fp16 operands summed in f32; weights, "
                  "gradients, optimizer state and every other op in f32; fp16 with dynamic "
                  "loss scaling)");
  sub->add_option("--grad-reduce-dtype", t.gradReduceDtype,
                  "The type the gradients are summed over dp in: fp32 (default) or bf16 (each "
                  "rank's gradients rounded to bf16, added in f32 in rank order, the sum "
                  "rounded once: half the bytes, as Megatron's bf16 gradient reduction)");
  sub->add_option("--grad-accum-dtype", t.gradAccumDtype,
                  "The type the gradient accumulators are kept in: fp32 (default) or bf16 "
                  "(with --precision bf16: each microbatch's gradient added in f32 and the sum "
                  "rounded to bf16, 2 bytes a parameter, as DeepSpeed's grad_accum_dtype)");
  sub->add_option("--loss-scale", t.lossScale,
                  "With --precision fp16: the initial loss scale (default 65536), backed off "
                  "after a step whose gradients hold inf or NaN (which is skipped)");
  sub->add_option("--loss-scale-window", t.lossScaleWindow,
                  "With --precision fp16: steps without inf or NaN gradients after which the "
                  "loss scale grows (default 2000)");
  sub->add_option("--loss-scale-growth", t.lossScaleGrowth,
                  "With --precision fp16: what the loss scale is multiplied by when it grows "
                  "(above 1; default 2)");
  sub->add_option("--loss-scale-backoff", t.lossScaleBackoff,
                  "With --precision fp16: what the loss scale is multiplied by after a step "
                  "with inf or NaN gradients (between 0 and 1; default 0.5)");
  sub->add_flag("--ignore-training-info", options.ignoreTrainingInfo,
                "With --train: build the step with cleave's optimizers even when the model "
                "has a training_info (which otherwise defines the step)");
}

/// The flags that say where `plan` (and `compile --mesh auto`) plans for.
void addPlannerOptions(CLI::App *sub, PlanOptions &plan, bool forCompile) {
  sub->add_option("--ranks", plan.ranks,
                  forCompile ? "With --mesh auto: the ranks to lay the step over"
                             : "The ranks to lay the step over")
      ->check(CLI::Range(1, 4096));
  sub->add_option("--device", plan.device,
                  "cpu (default: this machine, measured by cleave-calibrate on --ranks local "
                  "ranks) or a device file (devices/ has an 8-GPU H100 node, a 64-GPU cluster "
                  "and a CPU cluster)");
  sub->add_option_function<std::string>(
      "--memory-per-rank",
      [&plan](const std::string &text) {
        std::optional<int64_t> bytes = parseByteCount(text);
        if (!bytes)
          throw CLI::ValidationError("--memory-per-rank",
                                     "'" + text + "' is not a byte count such as 2GiB or 512MiB");
        plan.memoryPerRank = *bytes;
      },
      "The memory a rank may use (bytes, or with KiB, MiB, GiB; default: the device's)");
}

void addCompileCommand(CLI::App &app, CompileCommand &cmd) {
  CLI::App *sub = app.add_subcommand(
      "compile", "Compile an ONNX model to a native program in an output directory");
  addStepOptions(sub, cmd.options, cmd.inputShapes);
  sub->add_option("-o,--output", cmd.options.outDir,
                  "Output directory: program, program.cpp, plan.json, weights.bin, IR dumps")
      ->required();
  sub->add_option("--target", cmd.options.target, "cpu (default) or cuda");
  sub->add_option("--emit", cmd.options.emit,
                  "Stop after: plan (plan.json alone, no weights), mlir (+ weights, IR dumps), cpp "
                  "(+ generated source), program (default)");
  sub->add_option("--threads", cmd.options.threads,
                  "The kernels' threads on each rank that plan.json's memory is predicted for "
                  "(oneDNN's scratchpads are sized for them; default: what cleave run uses "
                  "here, this machine's cores shared among the ranks)")
      ->check(rt::positiveNumber());
  sub->add_flag("--print-ir-after-all", cmd.options.printIrAfterAll,
                "Print the IR after import and after every pass to stderr");
  sub->add_flag("--gradients", cmd.options.gradients,
                "Also output the gradient of the loss for each parameter (grad:NAME)");
  TrainOptions &t = cmd.options.training;
  sub->add_flag("--train", cmd.options.train,
                "Compile one optimizer step (forward, gradients, update) instead of a forward");
  sub->add_option("--grad-accum", t.gradAccum,
                  "Microbatches per step whose gradients add up before one update (default 1)");
  sub->add_option("--mesh", t.mesh,
                  "The device mesh of a training step, e.g. dp=2,tp=2: the batch is split over "
                  "dp ranks and the gradients all-reduced; parameters split over tp as --plan "
                  "says; the layers cut into pp pipeline stages (run with cleave run -n 4); "
                  "auto: the layout cleave plan ranks first for --ranks");
  sub->add_option("--schedule", t.schedule,
                  "With a pp axis in --mesh: the pipeline schedule of the --grad-accum "
                  "microbatches: gpipe, 1f1b (default), interleaved (with --virtual-stages) "
                  "or zb-h1");
  sub->add_option("--virtual-stages", t.virtualStages,
                  "With --schedule interleaved: the stages each pp rank runs, V >= 2 (the "
                  "layers are cut into pp x V stages; stage s runs on rank s mod pp)");
  sub->add_option("--stages", t.stages,
                  "With a pp axis: auto (default: the model's pipeline_stage annotations, else "
                  "a cut balanced by estimated FLOPs) or a stages file, "
                  "{\"stages\": [[\"embed.*\", \"blocks.0.*\"], [\"blocks.1.*\", \"head.*\"]]}");
  sub->add_option("--zero", t.zero,
                  "ZeRO over the mesh's dp ranks: 1 shards the optimizer state, 2 the gradients "
                  "too, 3 the parameters as well (default 0)");
  sub->add_option("--recompute", t.recompute,
                  "Forward values the backward makes again instead of keeping them: none "
                  "(default), selective (elementwise ops, softmax, dropout and data movement) "
                  "or full (all but each block's inputs; blocks from the ONNX node names)");
  addPlannerOptions(sub, cmd.planner, /*forCompile=*/true);
  for (const char *name : {"--optimizer", "--lr", "--lr-schedule", "--warmup", "--beta1",
                           "--beta2", "--eps", "--weight-decay", "--momentum", "--nesterov",
                           "--clip-grad-norm", "--grad-accum", "--mesh", "--deterministic",
                           "--sync-batchnorm", "--freeze", "--loss"})
    cmd.stepOptions.push_back(sub->get_option(name));
  for (const char *name : {"--grad-accum", "--schedule", "--virtual-stages", "--zero",
                           "--recompute", "--stages", "--ranks", "--device", "--memory-per-rank"})
    cmd.layoutOptions.push_back(sub->get_option(name));
  cmd.ranksOption = sub->get_option("--ranks");
}

/// With --mesh auto, sets the layout flags to what `cleave plan` ranks
/// first (its table on stdout); without it, refuses the planner's flags.
mlir::LogicalResult chooseAutoLayout(CompileCommand &cmd, UserError &error) {
  TrainOptions &t = cmd.options.training;
  const bool planned = t.mesh == "auto";
  for (CLI::Option *option : cmd.layoutOptions) {
    const std::string name = option->get_name();
    const bool plannerFlag = name == "--ranks" || name == "--device" || name == "--memory-per-rank";
    if (option->count() == 0 || plannerFlag == planned)
      continue;
    error = {name, planned ? "is chosen by --mesh auto" : "plans a layout: only with --mesh auto",
             planned ? "leave it out, or give --mesh yourself" : "add --mesh auto --ranks N",
             kExitBadUsage};
    return mlir::failure();
  }
  if (!planned)
    return mlir::success();
  if (!cmd.options.train || cmd.ranksOption->count() == 0) {
    error = {"--mesh auto", "plans a training step over a number of ranks",
             "add --train and --ranks N", kExitBadUsage};
    return mlir::failure();
  }
  PlanOptions &planner = cmd.planner;
  planner.compile = cmd.options;
  planner.compile.training.mesh.clear();
  Layout best;
  if (mlir::failed(chooseLayout(planner, best, llvm::outs(), error)))
    return mlir::failure();
  llvm::outs() << "--mesh auto chose: " << (best.flags().empty() ? "one rank" : best.flags())
               << "\n";
  best.applyTo(t);
  return mlir::success();
}

int runCompile(CompileCommand &cmd) {
  // --grad-accum 1 and --loss NAME also fit a step the model defines.
  for (CLI::Option *option : cmd.stepOptions) {
    if (option->count() == 0)
      continue;
    if (option->get_name() == "--grad-accum" && cmd.options.training.gradAccum == 1)
      continue;
    if (option->get_name() == "--loss" && cmd.options.loss.find(':') == std::string::npos)
      continue;
    cmd.options.stepFlags.push_back(option->get_name());
  }
  UserError error;
  if (!parseInputShapes(cmd.inputShapes, cmd.options.import, error)) {
    printError(error);
    return error.code;
  }
  if (mlir::failed(chooseAutoLayout(cmd, error))) {
    printError(error);
    return error.code;
  }
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  if (mlir::failed(compileModel(context, cmd.options, error))) {
    printError(error);
    return error.code;
  }
  return kExitOk;
}

struct PlanCommand {
  PlanOptions options;
  std::vector<std::string> inputShapes;
};

void addPlanCommand(CLI::App &app, PlanCommand &cmd) {
  CLI::App *sub = app.add_subcommand(
      "plan", "Rank the parallel layouts of a training step over N ranks: each one's memory per "
              "rank (its memory plan) and predicted step time on a device");
  addStepOptions(sub, cmd.options.compile, cmd.inputShapes);
  addPlannerOptions(sub, cmd.options, /*forCompile=*/false);
  sub->get_option("--ranks")->required();
  sub->add_option("-o,--write-flags", cmd.options.writeFlags,
                  "Write the best layout's compile flags to this file (one line)");
  sub->add_option("--json", cmd.options.json,
                  "Write every layout's prediction to this file (JSON)");
  sub->add_option("--save-device", cmd.options.saveDevice,
                  "Write the device (as measured, or as read) to this device file");
}

int runPlanCommand(PlanCommand &cmd) {
  UserError error;
  if (!parseInputShapes(cmd.inputShapes, cmd.options.compile.import, error)) {
    printError(error);
    return error.code;
  }
  return runPlan(cmd.options, llvm::outs());
}

void addRunCommand(CLI::App &app, RunOptions &options) {
  CLI::App *sub = app.add_subcommand(
      "run", "Run a compiled program: one forward pass, or training for a program compiled "
             "with --train");
  sub->add_option("dir", options.dir, "The directory cleave compile wrote")->required();
  sub->add_option("--input", options.inputs,
                  "NAME=FILE for each model input: a .npy array or an ONNX TensorProto .pb");
  sub->add_option("--output-dir", options.outputDir,
                  "Write each output as NAME.npy here (training: the last step's outputs and "
                  "the trained weights.bin)");
  sub->add_option_function<int>(
         "--threads", [&options](const int &n) { options.threads = n; },
         "Threads for the kernels on each rank (default: the cores cleave may use, shared "
         "among the ranks)")
      ->check(rt::positiveNumber());
  sub->add_option("-n,--ranks", options.ranks,
                  "Run the program on N local ranks through mpirun (default 1: run it "
                  "directly)")
      ->check(rt::positiveNumber());
  sub->add_option_function<int>(
         "--repeat", [&options](const int &n) { options.repeat = n; },
         "Run the forward this many times (timing)")
      ->check(rt::positiveNumber());
  sub->add_flag("--stats", options.stats,
                "Print timing and the measured arena bytes as one JSON line");
  sub->add_flag("--flush-subnormals", options.flushSubnormals,
                "Flush subnormal numbers to zero in the CPU kernels' arithmetic: faster where "
                "values that small occur, no longer IEEE's results there");
  using rt::positiveNumber;
  sub->add_option("--data", options.data,
                  "Training: NAME=FILE for each data input, samples along dim 0 (repeatable, "
                  "or NAME=FILE,NAME=FILE)");
  auto *steps = sub->add_option_function<int64_t>(
                       "--steps", [&options](const int64_t &n) { options.steps = n; },
                       "Training: run this many steps")
                    ->check(rt::stepCount());
  auto *epochs = sub->add_option_function<double>(
                        "--epochs", [&options](const double &e) { options.epochs = e; },
                        "Training: run floor(E * samples / batch size) steps")
                     ->check(positiveNumber());
  steps->excludes(epochs);
  auto *shuffle = sub->add_flag("--shuffle", options.shuffle,
                                "Training: each epoch visits the samples in a seeded random "
                                "order (the default)");
  auto *noShuffle =
      sub->add_flag("--no-shuffle", options.noShuffle, "Training: visit the samples in file order");
  shuffle->excludes(noShuffle);
  sub->add_option_function<uint64_t>(
         "--seed", [&options](const uint64_t &s) { options.seed = s; },
         "Training: the shuffle's seed (default 0)")
      ->check(rt::seedValue());
  sub->add_option_function<int64_t>(
         "--total-steps", [&options](const int64_t &n) { options.totalSteps = n; },
         "Training: the length of the learning-rate schedule (default: this run's steps)")
      ->check(rt::stepCount());
  sub->add_option_function<double>(
         "--collective-timeout", [&options](const double &t) { options.collectiveTimeout = t; },
         "Training on a mesh: end the job when a collective takes longer than this many "
         "seconds (default 300)")
      ->check(positiveNumber());
  sub->add_option("--log-json", options.logJson,
                  "Training: write every step's loss and learning rate here (JSON)");
  sub->add_option("--trace", options.trace,
                  "Write a Chrome trace here (JSON, for ui.perfetto.dev): of a training run, "
                  "every rank's compute, communication, input and checkpoints; of a forward, "
                  "each run's");
  sub->add_flag("--trace-ops", options.traceOps, "With --trace, a span for every kernel call");
  sub->add_option("--trace-steps", options.traceSteps,
                  "With --trace, trace only steps FIRST to LAST (FIRST:LAST; of a forward, its "
                  "--repeat runs), which keeps the trace's memory and file small on a long run")
      ->check(rt::stepWindow());
  sub->add_flag("--quiet", options.quiet, "Training: print no progress lines");
  sub->add_option("--checkpoint-dir", options.checkpointDir,
                  "Training: write checkpoints into this directory (after the last step, and "
                  "every --checkpoint-every steps)");
  sub->add_option_function<int64_t>(
         "--checkpoint-every", [&options](const int64_t &n) { options.checkpointEvery = n; },
         "Training: write a checkpoint after every N steps")
      ->check(rt::stepCount());
  sub->add_option_function<int64_t>(
         "--keep", [&options](const int64_t &n) { options.keepCheckpoints = n; },
         "Training: keep the newest K complete checkpoints (default: all)")
      ->check(rt::stepCount());
  sub->add_flag("--checkpoint-async", options.checkpointAsync,
                "Training: write each rank's checkpoint file on a thread of its own while "
                "training goes on (the last one at once)");
  sub->add_option("--resume", options.resumeDir,
                  "Training: continue from the latest complete checkpoint in this directory");
  sub->add_option("--max-restarts", options.maxRestarts,
                  "Training: start the job again from its latest checkpoint, at most this many "
                  "times, when a rank dies or a collective times out (needs --checkpoint-dir)")
      ->check(CLI::Range(0, 1000));
  sub->add_option("--save-onnx", options.saveOnnx,
                  "Training: write the model with its trained parameters to this .onnx file");
  sub->add_option("--init-from", options.initFrom,
                  "Training: start from the parameters of this safetensors file (cleave ckpt "
                  "consolidate's, or a PyTorch state_dict's) instead of the model's");
}

struct CkptCommand {
  CLI::App *inspect = nullptr, *consolidate = nullptr, *exportModel = nullptr;
  std::string dir, output, model;
};

void addCkptCommand(CLI::App &app, CkptCommand &cmd) {
  CLI::App *sub = app.add_subcommand(
      "ckpt", "Read a training run's checkpoint (a --checkpoint-dir's latest, or a step-N "
              "directory of one), whatever layout wrote it");
  sub->require_subcommand(1);
  cmd.inspect = sub->add_subcommand(
      "inspect", "Print the step, mesh, tensors with their global shapes and shards, and the "
                 "files, every checksum verified");
  cmd.consolidate = sub->add_subcommand(
      "consolidate", "Write the whole parameters as one safetensors file under the ONNX "
                     "initializer names (a torch export's state_dict names)");
  cmd.exportModel = sub->add_subcommand(
      "export", "Write the ONNX model with its initializers replaced by the checkpoint's values");
  for (CLI::App *command : {cmd.inspect, cmd.consolidate, cmd.exportModel})
    command->add_option("dir", cmd.dir, "The checkpoint directory")->required();
  for (CLI::App *command : {cmd.consolidate, cmd.exportModel})
    command->add_option("-o,--output", cmd.output, "The file to write (whole or not at all)")
        ->required();
  cmd.exportModel->add_option("--model", cmd.model, "The ONNX model the run compiled")
      ->required();
}

int runCkpt(const CkptCommand &cmd) {
  if (cmd.inspect->parsed())
    return inspectCheckpoint(cmd.dir, llvm::outs());
  if (cmd.consolidate->parsed())
    return consolidateCheckpoint(cmd.dir, cmd.output);
  return exportCheckpoint(cmd.dir, cmd.model, cmd.output);
}

void addConformanceCommand(CLI::App &app, ConformanceOptions &options) {
  CLI::App *sub = app.add_subcommand(
      "conformance", "Run ONNX backend node tests (model.onnx + test_data_set_*) and compare");
  sub->add_option("dirs", options.roots, "Test case directories, or directories holding them")
      ->required();
  sub->add_option("--expected", options.expectedFile,
                  "A file of NAME pass / NAME skip: REASON lines: any case whose status "
                  "differs fails the run");
  sub->add_option("--record", options.recordFile,
                  "Write this run's statuses in the --expected form to this file");
}

void addScheduleCommand(CLI::App &app, ScheduleOptions &options) {
  CLI::App *sub = app.add_subcommand(
      "schedule", "Simulate a pipeline schedule on P ranks: its bubble and each rank's actions");
  sub->add_option("--schedule", options.schedule, "gpipe, 1f1b, interleaved or zb-h1")
      ->capture_default_str();
  sub->add_option("--pp", options.ranks, "Pipeline ranks")
      ->check(CLI::Range(int64_t(1), int64_t(4096)))
      ->capture_default_str();
  sub->add_option("--virtual-stages", options.virtualStages, "Stages per rank (interleaved)")
      ->check(CLI::Range(int64_t(1), int64_t(64)))
      ->capture_default_str();
  sub->add_option("--microbatches", options.microbatches, "Microbatches a step")
      ->check(CLI::Range(int64_t(1), int64_t(65536)))
      ->capture_default_str();
  sub->add_option("--costs", options.costs,
                  "F,I,W: the forward, input-gradient and weight-gradient time of every stage; "
                  "or F,I,W of stage 0, then of stage 1, ... (3 x P x V costs)")
      ->delimiter(',')
      ->expected(3, std::numeric_limits<int>::max())
      ->capture_default_str();
  sub->add_flag("--actions", options.actions, "Print every rank's list of actions");
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"cleave: a compiler for distributed training of ONNX models"};
  app.require_subcommand(1);
  ImportCommand importCmd;
  addImportCommand(app, importCmd);
  CompileCommand compileCmd;
  addCompileCommand(app, compileCmd);
  RunOptions runOptions;
  addRunCommand(app, runOptions);
  CkptCommand ckpt;
  addCkptCommand(app, ckpt);
  ConformanceOptions conformance;
  addConformanceCommand(app, conformance);
  ScheduleOptions scheduleOptions;
  addScheduleCommand(app, scheduleOptions);
  PlanCommand planCmd;
  addPlanCommand(app, planCmd);
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
  if (app.got_subcommand("compile"))
    return runCompile(compileCmd);
  if (app.got_subcommand("run"))
    return runProgram(runOptions);
  if (app.got_subcommand("ckpt"))
    return runCkpt(ckpt);
  if (app.got_subcommand("conformance"))
    return runConformance(conformance, llvm::outs());
  if (app.got_subcommand("plan"))
    return runPlanCommand(planCmd);
  if (app.got_subcommand("schedule"))
    return runSchedule(scheduleOptions, llvm::outs());
  return kExitBadUsage;
}
