//===- Driver.cpp - the main of every generated program ------------------===//

#include "runtime/driver/Driver.h"

#include "runtime/CliValidators.h"

#include "runtime/Npy.h"
#include "runtime/comm/Start.h"
#include "runtime/driver/DriverSupport.h"
#include "runtime/driver/Profile.h"
#include "runtime/driver/Training.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <initializer_list>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <unistd.h>

namespace cleave::rt {
namespace {

/// The byte pattern the arena holds before a run; what differs afterwards was
/// written by a kernel, which measures the arena actually used.
constexpr unsigned char kSentinel = 0xA5;

/// The first of `options` given on the command line, if any.
const CLI::Option *firstGiven(std::initializer_list<const CLI::Option *> options) {
  for (const CLI::Option *option : options)
    if (option->count() > 0)
      return option;
  return nullptr;
}

/// What a forward run is asked for on the command line.
struct ForwardOptions {
  std::vector<std::string> inputFlags;
  std::string outputDir;
  int repeat = 1;
  bool stats = false;
  int threads = 1;
  /// --trace: where the timeline goes (each run a "step", its forward and,
  /// with `traceOps`, its kernels), or empty for none.
  std::string trace;
  bool traceOps = false;
  /// --trace-steps: the runs the timeline keeps.
  StepWindow tracedRuns;
};

/// One forward (or `repeat` of them) on the --input files: the outputs
/// written as .npy, with --stats the timing and arena bytes touched, and
/// with --trace the runs' timeline, written with the outputs.
int runForward(const std::string &dir, const Plan &plan, const ForwardOptions &options,
               Backend &backend) {
  std::string error;
  std::vector<std::string> inputNames;
  for (const TensorSpec &input : plan.inputs)
    inputNames.push_back(input.name);
  std::map<std::string, std::string> inputFiles;
  if (int code = parseNamedFiles(options.inputFlags, "--input", "input", inputNames, inputFiles))
    return code;

  // Launched on several ranks, each runs the whole forward; rank 0 alone
  // checks and writes the results (the others' would race it to the same
  // files, the staged ones included).
  const bool writes = comm::launchedRank() == 0;
  const bool tracing = !options.trace.empty();
  if (writes && tracing && !canCreate(options.trace, error))
    return fail("--trace " + options.trace, error, 2);

  std::vector<NpyArray> hostInputs(plan.inputs.size());
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    const TensorSpec &spec = plan.inputs[i];
    auto file = inputFiles.find(spec.name);
    if (file == inputFiles.end())
      return fail("input '" + spec.name + "'", "is missing", 1,
                  "pass --input " + spec.name + "=FILE.npy (" + dtypeName(spec.dtype) + ", " +
                      shapeText(spec.shape) + ")");
    NpyArray &array = hostInputs[i];
    if (!readNpy(file->second, array, error))
      return fail("input '" + spec.name + "' (" + file->second + ")", error, 1);
    if (array.dtype != spec.dtype || array.shape != spec.shape)
      return fail("input '" + spec.name + "' (" + file->second + ")",
                  std::string("is ") + dtypeName(array.dtype) + " " + shapeText(array.shape) +
                      ", the model takes " + dtypeName(spec.dtype) + " " + shapeText(spec.shape),
                  1);
  }

  std::vector<char> hostWeights;
  if (int code = loadWeights(dir, weightsBlobName(plan, {}), plan, hostWeights))
    return code;

  Buffer weights(backend, hostWeights.size());
  backend.copyToDevice(weights.get(), hostWeights.data(), hostWeights.size());
  std::vector<std::unique_ptr<Buffer>> inputBuffers;
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    inputBuffers.push_back(std::make_unique<Buffer>(backend, hostInputs[i].data.size()));
    backend.copyToDevice(inputBuffers.back()->get(), hostInputs[i].data.data(),
                         hostInputs[i].data.size());
    Tensor t = tensorAt(inputBuffers.back()->get(), plan.inputs[i]);
    inputs.push_back(t);
  }

  std::size_t arenaBytes = static_cast<std::size_t>(plan.arenaBytes);
  Buffer arena(backend, arenaBytes);
  std::vector<char> pattern(arenaBytes, static_cast<char>(kSentinel));
  backend.copyToDevice(arena.get(), pattern.data(), arenaBytes);

  std::vector<Tensor> outputs(plan.outputs.size());
  std::vector<double> seconds;
  RunProfile profile(/*steps=*/false, tracing, options.tracedRuns, options.traceOps,
                     /*trainingInfo=*/false);
  comm::LocalCommunicator world("world");
  profile.attach(backend);
  profile.alignClocks(world);
  for (int r = 0; r < options.repeat; ++r) {
    profile.beginStep(r + 1);
    profile.beginCall(0, ProgramEntryPoint::Forward, std::nullopt);
    auto start = std::chrono::steady_clock::now();
    backend.run(0, ProgramEntryPoint::Forward, arena.get(), weights.get(), inputs.data(),
                outputs.data());
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    profile.endCall();
    profile.endStep();
  }
  std::vector<std::vector<StepTimes>> ranks;
  std::string trace;
  profile.finish(world, {}, {"rank 0"}, ranks, trace);

  // The highest arena byte any kernel changed.
  std::vector<char> after(arenaBytes);
  backend.copyToHost(after.data(), arena.get(), arenaBytes);
  std::size_t touched = arenaBytes;
  while (touched > 0 && static_cast<unsigned char>(after[touched - 1]) == kSentinel)
    --touched;

  FileSet files;
  std::string failed;
  if (writes && !options.outputDir.empty())
    if (int code = stageOutputs(plan.outputs, outputs, options.outputDir, backend, files))
      return code;
  if (writes && tracing && !files.stage(options.trace, {{trace.data(), trace.size()}}, error))
    return fail(options.trace, error, 1);
  if (!files.commit(failed, error))
    return fail(failed, error, 1);
  if (options.stats) {
    nlohmann::json report = {{"format_version", 1},
                             {"backend", backend.name()},
                             {"threads", options.threads},
                             {"arena_bytes_planned", plan.arenaBytes},
                             {"arena_bytes_touched", touched},
                             {"peak_bytes_allocated", backend.allocations().peakBytes()},
                             {"process_peak_rss_bytes", processPeakRssBytes()},
                             {"runs", options.repeat},
                             {"seconds_min", *std::min_element(seconds.begin(), seconds.end())},
                             {"seconds_mean", [&] {
                                double total = 0;
                                for (double s : seconds)
                                  total += s;
                                return total / seconds.size();
                              }()}};
    std::cout << report.dump() << std::endl;
  }
  return 0;
}

/// Ends the program on a stop signal with one line and exit 128 + N. Files
/// are replaced as whole sets (FileSet) with the stop signals held off, so
/// the earlier results stay as they were.
extern "C" void stopOnSignal(int sig) {
  const char *line =
      sig == SIGTERM  ? "cleave: error: program: stopped by SIGTERM; nothing was written\n"
      : sig == SIGINT ? "cleave: error: program: stopped by SIGINT; nothing was written\n"
                      : "cleave: error: program: stopped by SIGHUP; nothing was written\n";
  ssize_t ignored = ::write(STDERR_FILENO, line, std::strlen(line));
  (void)ignored;
  ::_exit(128 + sig);
}

/// The same without the line, for a rank of a job: mpirun stops the other
/// ranks with SIGTERM when one fails, and what failed is reported instead
/// (by the rank, or by cleave run).
extern "C" void stopQuietlyOnSignal(int sig) { ::_exit(128 + sig); }

/// Refuses a plan.json of another compile, or one changed where the
/// generated code depends on it, naming the first field that differs.
int checkIdentity(const std::string &planPath, const Plan &plan, const ProgramIdentity &identity) {
  if (plan.buildId != identity.buildId)
    return fail(planPath + ": build_id",
                "is '" + plan.buildId + "', but the program was built by compile '" +
                    identity.buildId + "' (plan.json is another compile's)",
                1, "recompile the model with cleave compile");
  std::istringstream planLines(programInterface(plan)), programLines(identity.planInterface);
  std::string planLine, programLine;
  while (std::getline(programLines, programLine)) {
    std::getline(planLines, planLine);
    if (planLine == programLine)
      continue;
    const std::string field = programLine.substr(0, programLine.find(' '));
    auto value = [](const std::string &line) {
      size_t space = line.find(' ');
      return space == std::string::npos ? std::string("(absent)") : line.substr(space + 1);
    };
    return fail(planPath + ": " + field,
                "is " + value(planLine) + ", but the program was compiled for " +
                    value(programLine) + " (plan.json was changed after the compile)",
                1, "recompile the model with cleave compile");
  }
  return 0;
}

/// The plans of the programs this rank runs and their directories, from
/// the first (read from DIR): on a rank of an interleaved pipeline, those of
/// its other stages too (DIR/../stage<S>/), each checked against its
/// program.
int readRankPlans(const std::vector<ProgramIdentity> &programs, std::vector<Plan> &plans,
                  std::vector<std::string> &dirs) {
  const std::string &dir = dirs.front();
  const Plan &first = plans.front();
  const std::vector<int64_t> stages = first.training && first.training->pipeline
                                          ? first.training->pipeline->rankStages()
                                          : std::vector<int64_t>{0};
  if (stages.size() != programs.size())
    return fail(dir + "/plan.json",
                "runs " + std::to_string(stages.size()) +
                    " stage(s) on this rank, but the program " + std::to_string(programs.size()) +
                    " (plan.json was changed after the compile)",
                1, "recompile the model with cleave compile");
  std::string error;
  for (size_t c = 1; c < stages.size(); ++c) {
    dirs.push_back(dir + "/../stage" + std::to_string(stages[c]));
    const std::string path = dirs.back() + "/plan.json";
    Plan &plan = plans.emplace_back();
    if (!readPlan(path, plan, error))
      return fail(path, error, 1);
    if (int code = checkIdentity(path, plan, programs[c]))
      return code;
  }
  return 0;
}

int runDriverChecked(int argc, char **argv, const std::vector<ProgramIdentity> &programs,
                     Backend &backend) {
  CLI::App app{"Runs a model compiled by cleave: one forward pass, or, for a program "
               "compiled with --train, a training run"};
  std::string dir = ".", outputDir;
  std::vector<std::string> inputFlags;
  int threads = defaultThreads(), repeat = 1;
  bool stats = false;
  TrainingOptions training;
  int64_t steps = 0, totalSteps = 0;
  double epochs = 0;
  uint64_t seed = 0;
  bool shuffle = false, noShuffle = false;
  app.add_option("--dir", dir, "The compiled model directory (plan.json, weights.bin)");
  auto *inputOpt = app.add_option("--input", inputFlags, "NAME=FILE.npy for each model input");
  app.add_option("--output-dir", outputDir,
                 "Write each output as NAME.npy here (training: the last step's, and the "
                 "trained weights blob as weights.bin)");
  app.add_option("--threads", threads,
                 "Threads for the kernels (default: the cores this process may use, shared "
                 "among the job's ranks on this machine)")
      ->check(positiveNumber());
  auto *repeatOpt = app.add_option("--repeat", repeat, "Run the forward this many times (timing)")
                        ->check(positiveNumber());
  auto *statsOpt = app.add_flag("--stats", stats, "Print measurements as one JSON line on stdout");
  bool flushSubnormals = false;
  app.add_flag("--flush-subnormals", flushSubnormals,
               "Flush subnormal numbers to zero in the CPU kernels' arithmetic: faster where "
               "values that small occur, no longer IEEE's results there");
  auto *dataOpt = app.add_option("--data", training.data,
                                 "Training: NAME=FILE.npy for each data input, samples along "
                                 "dim 0 (repeatable, or comma-separated)");
  auto *stepsOpt =
      app.add_option("--steps", steps, "Training: run this many steps")->check(stepCount());
  auto *epochsOpt =
      app.add_option("--epochs", epochs, "Training: run floor(E * samples / batch) steps")
          ->check(positiveNumber());
  auto *shuffleOpt = app.add_flag("--shuffle", shuffle,
                                  "Training: visit each epoch's samples in a seeded random order "
                                  "(the default)");
  auto *noShuffleOpt =
      app.add_flag("--no-shuffle", noShuffle, "Training: visit the samples in file order");
  auto *seedOpt = app.add_option("--seed", seed, "Training: the shuffle's seed (default 0)")
                      ->check(seedValue());
  auto *totalStepsOpt =
      app.add_option("--total-steps", totalSteps,
                     "Training: the length of the learning-rate schedule (default: this run's "
                     "steps)")
          ->check(stepCount());
  auto *logJsonOpt = app.add_option("--log-json", training.logJson,
                                    "Training: write the loss and learning rate of every step "
                                    "here (JSON)");
  app.add_option("--trace", training.trace,
                 "Write a Chrome trace here (JSON): of a training run, every rank's compute, "
                 "communication, input and checkpoints; of a forward, each run's");
  auto *traceOpsOpt =
      app.add_flag("--trace-ops", training.traceOps, "With --trace, a span for every kernel call");
  auto *traceStepsOpt =
      app.add_option_function<std::string>(
             "--trace-steps",
             [&training](const std::string &text) {
               parseStepWindow(text, training.traceSteps.emplace());
             },
             "With --trace, trace only steps FIRST to LAST (FIRST:LAST; of a forward, its "
             "--repeat runs)")
          ->check(stepWindow());
  auto *quietOpt =
      app.add_flag("--quiet", training.quiet, "Training: print no progress lines");
  auto *timeoutOpt =
      app.add_option("--collective-timeout", training.collectiveTimeout,
                     "Training on a mesh: end the job when a collective takes longer than this "
                     "many seconds (default 300)")
          ->check(positiveNumber());
  auto *checkpointDirOpt =
      app.add_option("--checkpoint-dir", training.checkpointDir,
                     "Training: write checkpoints into this directory (after the last step, "
                     "and every --checkpoint-every steps)");
  auto *checkpointEveryOpt = app.add_option("--checkpoint-every", training.checkpointEvery,
                                            "Training: write a checkpoint after every N steps")
                                 ->check(stepCount());
  auto *keepOpt = app.add_option("--keep", training.keepCheckpoints,
                                 "Training: keep the newest K complete checkpoints (default: all)")
                      ->check(stepCount());
  auto *checkpointAsyncOpt =
      app.add_flag("--checkpoint-async", training.checkpointAsync,
                   "Training: write each rank's checkpoint file on a thread of its own while "
                   "training goes on (the last one at once)");
  auto *resumeOpt =
      app.add_option("--resume", training.resumeDir,
                     "Training: continue from the latest complete checkpoint in this directory");
  auto *initFromOpt =
      app.add_option("--init-from", training.initFrom,
                     "Training: start from the parameters of this safetensors file");
  // cleave run's, for --save-onnx: not for users, so not in --help.
  app.add_flag("--defer-commit", training.deferCommit,
               "Training: leave the results staged as FILE.partial")
      ->group("");
  stepsOpt->excludes(epochsOpt);
  shuffleOpt->excludes(noShuffleOpt);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    return fail("usage", e.what(), 2, "see --help");
  }

  Plan plan;
  std::string error;
  const std::string planPath = dir + "/plan.json";
  if (!readPlan(planPath, plan, error))
    return fail(planPath, error, 1);
  if (int code = checkIdentity(planPath, plan, programs.front()))
    return code;
  // Before any kernel runs and any thread of the run starts: they inherit it.
  if (flushSubnormals && !backend.flushSubnormals(threads))
    return fail("--flush-subnormals",
                std::string("the ") + backend.name() + " backend's kernels keep subnormals", 2);

  if (plan.training) {
    if (const CLI::Option *option = firstGiven({inputOpt, repeatOpt, statsOpt}))
      return fail(option->get_name(), "a training program does not take it", 2,
                  option == inputOpt ? "pass the data sets with --data NAME=FILE.npy"
                                     : "see --help");
    if (stepsOpt->count())
      training.steps = steps;
    if (epochsOpt->count())
      training.epochs = epochs;
    if (totalStepsOpt->count())
      training.totalSteps = totalSteps;
    if (seedOpt->count())
      training.seed = seed;
    training.shuffle = !noShuffle;
    training.outputDir = outputDir;
    training.threads = threads;
    backend.setThreads(threads);
    std::vector<Plan> plans;
    plans.push_back(std::move(plan));
    std::vector<std::string> dirs{dir};
    if (int code = readRankPlans(programs, plans, dirs))
      return code;
    return runTraining(dirs, plans, training, backend);
  }
  if (const CLI::Option *option =
          firstGiven({dataOpt, stepsOpt, epochsOpt, shuffleOpt, noShuffleOpt, seedOpt,
                      totalStepsOpt, logJsonOpt, quietOpt, timeoutOpt, checkpointDirOpt,
                      checkpointEveryOpt, keepOpt, checkpointAsyncOpt, resumeOpt, initFromOpt}))
    return fail(option->get_name(), "only a training program takes it", 2,
                "compile the model with cleave compile --train to train it");

  for (const CLI::Option *option : {traceOpsOpt, traceStepsOpt})
    if (option->count() && training.trace.empty())
      return fail(option->get_name(), "needs --trace FILE", 2);
  backend.setThreads(threads);
  return runForward(dir, plan,
                    {inputFlags, outputDir, repeat, stats, threads, training.trace,
                     training.traceOps, training.traceSteps.value_or(StepWindow{})},
                    backend);
}

} // namespace

int runDriver(int argc, char **argv, const std::vector<ProgramIdentity> &programs,
              Backend &backend) {
  for (int sig : {SIGTERM, SIGINT, SIGHUP})
    std::signal(sig, comm::launchedRanks() > 1 ? stopQuietlyOnSignal : stopOnSignal);
  try {
    return runDriverChecked(argc, argv, programs, backend);
  } catch (const std::bad_alloc &) {
    return fail("program", "out of memory for what plan.json and the inputs ask for", 1);
  }
}

} // namespace cleave::rt
