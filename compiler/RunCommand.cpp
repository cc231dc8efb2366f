//===- RunCommand.cpp - cleave run ---------------------------------------===//

#include "compiler/RunCommand.h"

#include "compiler/Diagnostics.h"
#include "compiler/ExportModel.h"
#include "compiler/OnnxTensor.h"
#include "onnx/onnx.pb.h"
#include "runtime/Files.h"
#include "runtime/Npy.h"
#include "runtime/Plan.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <regex>
#include <set>
#include <sstream>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
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

/// `value` as text that reads back as the same double.
std::string doubleText(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

/// "SIGKILL" for 9.
std::string signalName(int sig) {
  const char *abbreviation = sigabbrev_np(sig);
  return abbreviation ? std::string("SIG") + abbreviation : "signal " + std::to_string(sig);
}

/// mpirun's stderr as it comes: the ranks' lines pass through, mpirun's own
/// banners (blocks between lines of dashes) are held back, and what they and
/// the progress lines say is kept: which rank died of which signal, the last
/// step reported.
class MpirunReport {
public:
  void feed(const char *data, size_t size) {
    pending.append(data, size);
    for (size_t end; (end = pending.find('\n')) != std::string::npos;) {
      line(pending.substr(0, end));
      pending.erase(0, end + 1);
    }
  }
  void finish() {
    if (!pending.empty())
      line(pending);
    pending.clear();
  }
  /// The dead rank and its signal, if a banner said so.
  std::optional<std::pair<int, int>> deadRank;
  std::optional<int64_t> lastStep;
  bool rankReportedError = false;
  /// Rank 0 said the job stopped after a checkpoint every rank finished
  /// (a stop signal with --checkpoint-dir), however mpirun then exits.
  bool stoppedAfterCheckpoint = false;
  /// Everything mpirun's banners said, shown when nothing else explains a
  /// failure.
  std::string banners;
  /// A rank's collective timeout, as it said it.
  std::string timeout;

private:
  void line(const std::string &text) {
    std::smatch match;
    if (std::regex_match(text, rule)) {
      inBanner = !inBanner;
      return;
    }
    if (inBanner) {
      banners += text + "\n";
      if (std::regex_search(text, match, died))
        deadRank = {std::stoi(match[1]), std::stoi(match[2])};
      return;
    }
    if (std::regex_search(text, match, progress))
      lastStep = std::stoll(match[1]);
    rankReportedError |= text.rfind("cleave: error: ", 0) == 0;
    if (text.rfind("cleave: error: ", 0) == 0 && text.find(" timed out after ") != std::string::npos)
      timeout = text.substr(std::strlen("cleave: error: "));
    stoppedAfterCheckpoint |= std::regex_search(text, stoppedLine);
    std::fprintf(stderr, "%s\n", text.c_str());
  }
  const std::regex rule{"^-{20,}$"};
  const std::regex died{"process rank ([0-9]+) with PID [0-9]+ on node \\S+ exited on signal "
                        "([0-9]+)"};
  const std::regex progress{"^step ([0-9]+)/[0-9]+ "};
  const std::regex stoppedLine{"^stopped by [^:]+ after step [0-9]+ of [0-9]+: continue with "
                               "--resume "};
  std::string pending;
  bool inBanner = false;
};

/// How a job ended: its wait status, and the stop signal cleave run passed
/// on to it (0 if none).
struct JobEnd {
  int status = 0;
  int forwarded = 0;
};

/// The processes whose parent is `parent`: mpirun's ranks, which OpenMPI
/// starts each in a process group of its own.
std::vector<pid_t> childrenOf(pid_t parent) {
  std::vector<pid_t> children;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it("/proc", ec), end; !ec && it != end;
       it.increment(ec)) {
    pid_t pid = 0;
    if (llvm::StringRef(llvm::sys::path::filename(it->path())).getAsInteger(10, pid))
      continue;
    // Read as a stream: /proc's files say they are empty.
    auto stat = llvm::MemoryBuffer::getFileAsStream(it->path() + "/stat");
    if (!stat)
      continue;
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    llvm::StringRef text = (*stat)->getBuffer();
    size_t close = text.rfind(')');
    if (close == llvm::StringRef::npos)
      continue;
    llvm::SmallVector<llvm::StringRef, 3> fields;
    text.drop_front(close + 1).trim().split(fields, ' ', 2);
    pid_t ppid = 0;
    if (fields.size() >= 2 && !fields[1].getAsInteger(10, ppid) && ppid == parent)
      children.push_back(pid);
  }
  return children;
}

/// Starts `args` in a process group of its own, with stdin from /dev/null
/// and stderr to `stderrFile` (if set) or through `report` (if set), and
/// waits for it. SIGTERM, SIGINT and SIGHUP sent to cleave run go to the
/// job, so none of it runs on and writes results after cleave run has
/// ended. Under mpirun (`report` set) the first goes to the ranks
/// themselves: mpirun would pass it on and kill every rank a second later,
/// cutting short the checkpoint a rank writes when stopped; a second one
/// goes to mpirun's group too.
bool runJob(const std::vector<std::string> &args, const std::string &stderrFile,
            MpirunReport *report, JobEnd &end, std::string &error) {
  sigset_t watched, saved;
  sigemptyset(&watched);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGCHLD})
    sigaddset(&watched, sig);
  pthread_sigmask(SIG_BLOCK, &watched, &saved);
  llvm::scope_exit restore([&] { pthread_sigmask(SIG_SETMASK, &saved, nullptr); });
  int signals = signalfd(-1, &watched, SFD_CLOEXEC);
  int pipeFds[2] = {-1, -1};
  if (signals < 0 || (report && pipe2(pipeFds, O_CLOEXEC) != 0)) {
    error = std::string("cannot start: ") + std::strerror(errno);
    return false;
  }
  llvm::scope_exit closeAll([&] {
    for (int fd : {signals, pipeFds[0], pipeFds[1]})
      if (fd >= 0)
        close(fd);
  });

  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  if (!stderrFile.empty())
    posix_spawn_file_actions_addopen(&files, STDERR_FILENO, stderrFile.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
  else if (report)
    posix_spawn_file_actions_adddup2(&files, pipeFds[1], STDERR_FILENO);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
  std::vector<char *> argv;
  for (const std::string &arg : args)
    argv.push_back(const_cast<char *>(arg.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  int spawned = posix_spawn(&pid, argv[0], &files, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attributes);
  if (spawned != 0) {
    error = std::string("cannot start: ") + std::strerror(spawned);
    return false;
  }
  if (pipeFds[1] >= 0) {
    close(pipeFds[1]);
    pipeFds[1] = -1;
  }

  bool exited = false;
  while (!exited || pipeFds[0] >= 0) {
    pollfd fds[2] = {{signals, POLLIN, 0}, {pipeFds[0], POLLIN, 0}};
    // Once the job has ended, its output is drained; a rank's orphan holding
    // the pipe open does not hold cleave run.
    int ready = poll(fds, pipeFds[0] >= 0 ? 2 : 1, exited ? 2000 : -1);
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready <= 0)
      break;
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo info{};
      if (read(signals, &info, sizeof info) == sizeof info) {
        int sig = static_cast<int>(info.ssi_signo);
        if (sig != SIGCHLD) {
          std::vector<pid_t> ranks;
          if (report && !end.forwarded)
            ranks = childrenOf(pid);
          for (pid_t rank : ranks)
            kill(rank, sig);
          if (ranks.empty())
            kill(-pid, sig);
          end.forwarded = sig;
        }
      }
      if (!exited && waitpid(pid, &end.status, WNOHANG) == pid)
        exited = true;
    }
    if (pipeFds[0] >= 0 && (fds[1].revents & (POLLIN | POLLHUP))) {
      char chunk[4096];
      ssize_t got = read(pipeFds[0], chunk, sizeof chunk);
      if (got > 0) {
        report->feed(chunk, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        close(pipeFds[0]);
        pipeFds[0] = -1;
      }
    }
  }
  if (!exited)
    waitpid(pid, &end.status, 0);
  if (report)
    report->finish();
  return true;
}

/// " after step N", the last step the job's progress lines reported, or
/// nothing.
std::string afterLastStep(const MpirunReport *report) {
  return report && report->lastStep ? " after step " + std::to_string(*report->lastStep) : "";
}

/// The exit code of a job that ended as `end` says, after printing what
/// happened when cleave has something to add.
int jobExitCode(const std::string &program, const JobEnd &end, const MpirunReport *report) {
  // A stop passed on: 128 + N, as a shell would. A program alone says so
  // itself; the ranks of a job stop quietly. A job that checkpoints stops
  // after its step, writes a checkpoint and exits 0.
  const bool finished = (WIFEXITED(end.status) && WEXITSTATUS(end.status) == 0) ||
                        (report && report->stoppedAfterCheckpoint);
  if (end.forwarded && !finished) {
    if (report)
      printError({"cleave run",
                  "stopped by " + signalName(end.forwarded) +
                      ": every rank was stopped, nothing was written",
                  "", kExitInternal});
    return 128 + end.forwarded;
  }
  if (finished)
    return kExitOk;
  if (WIFSIGNALED(end.status)) {
    int sig = WTERMSIG(end.status);
    bool crash = sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE ||
                 sig == SIGABRT || sig == SIGTRAP || sig == SIGSYS;
    if (crash) {
      printError({program, "crashed (" + signalName(sig) + ")", "a cleave bug: please report it",
                  kExitInternal});
      return kExitInternal;
    }
    printError({program, "killed by " + signalName(sig), "", kExitInternal});
    return 128 + sig;
  }
  int code = WEXITSTATUS(end.status);
  if (!report || code == 0)
    return code;
  if (report->deadRank) {
    auto [rank, sig] = *report->deadRank;
    std::string step = afterLastStep(report);
    printError(
        {"rank " + std::to_string(rank),
         "killed by " + signalName(sig) + step + "; the job exits with " + std::to_string(code), "",
         kExitInternal});
  } else if (!report->rankReportedError) {
    std::fputs(report->banners.c_str(), stderr);
  }
  return code;
}

/// Why a job that ended as `end` may be started again (a rank died, or a
/// collective timed out), or nothing when its failure would only repeat
/// (bad input, a stop the user asked for) or it did not fail.
std::optional<std::string> restartReason(const JobEnd &end, const MpirunReport *report) {
  if (end.forwarded || (WIFEXITED(end.status) && WEXITSTATUS(end.status) == 0) ||
      (report && report->stoppedAfterCheckpoint))
    return std::nullopt;
  std::string step = afterLastStep(report);
  if (report && report->deadRank)
    return "rank " + std::to_string(report->deadRank->first) + " was killed by " +
           signalName(report->deadRank->second) + step;
  if (WIFSIGNALED(end.status))
    return "the program was killed by " + signalName(WTERMSIG(end.status)) + step;
  if (report && !report->timeout.empty())
    return report->timeout;
  return std::nullopt;
}

/// The step of the checkpoint DIR/latest names ("step-N"), or -1.
int64_t latestCheckpointStep(const std::string &dir) {
  auto latest = llvm::MemoryBuffer::getFile(dir + "/latest");
  if (!latest)
    return -1;
  llvm::StringRef text = (*latest)->getBuffer().trim();
  int64_t step = -1;
  return text.consume_front("step-") && !text.getAsInteger(10, step) ? step : -1;
}

/// Checks, before training, that every result can be written where asked.
bool checkResultPaths(const RunOptions &options) {
  std::string error;
  if (!options.outputDir.empty()) {
    if (std::error_code ec = llvm::sys::fs::create_directories(options.outputDir)) {
      printError({options.outputDir, "cannot create: " + ec.message(), "", kExitBadUsage});
      return false;
    }
    if (!rt::canCreate(options.outputDir + "/weights.bin", error)) {
      printError({"--output-dir " + options.outputDir, error, "", kExitBadUsage});
      return false;
    }
  }
  if (!options.logJson.empty() && !rt::canCreate(options.logJson, error)) {
    printError({"--log-json " + options.logJson, error, "", kExitBadUsage});
    return false;
  }
  if (!options.trace.empty() && !rt::canCreate(options.trace, error)) {
    printError({"--trace " + options.trace, error, "", kExitBadUsage});
    return false;
  }
  if (!options.saveOnnx.empty() && !rt::canCreate(options.saveOnnx, error)) {
    printError({"--save-onnx " + options.saveOnnx, error, "", kExitBadUsage});
    return false;
  }
  return true;
}

/// With --save-onnx, the program leaves its results staged (--defer-commit)
/// in `outputDir` and at --log-json; they and the model are put in place
/// together, or none of them.
int commitWithModel(const RunOptions &options, const std::string &outputDir) {
  std::vector<rt::Plan> plans;
  std::vector<std::string> dirs;
  std::string where, message;
  if (!rt::readCompiledPlans(options.dir, plans, dirs, where, message)) {
    printError({where, message});
    return kExitBadInput;
  }
  rt::FileSet files;
  // What the ranks wrote: the blobs (one per coordinate of the axes they
  // differ along; a pipeline's in stage<S>/) and rank 0's outputs (of a
  // pipeline, the loss) and metrics.
  std::set<std::string> written;
  const bool pipeline = plans.size() > 1;
  for (size_t s = 0; s < plans.size(); ++s) {
    const rt::Plan &plan = plans[s];
    const rt::Mesh mesh = plan.mesh ? *plan.mesh : rt::Mesh::line("dp", 1);
    const std::string blobDir = pipeline ? outputDir + "/stage" + std::to_string(s) : outputDir;
    for (int rank = 0; rank < mesh.size(); ++rank)
      written.insert(blobDir + "/" + rt::weightsBlobName(plan, mesh.coordinates(rank)));
  }
  const rt::Plan &plan = plans.front();
  for (size_t i = 0; i < plan.outputs.size(); ++i)
    if (!pipeline || i == plan.training->lossOutput)
      written.insert(outputDir + "/" + rt::npyFileName(plan.outputs[i].name));
  for (const std::string &path : {options.logJson, options.trace})
    if (!path.empty())
      written.insert(path);
  for (const std::string &path : written) {
    if (!files.adopt(path, message)) {
      printError({path, message, "a cleave bug: please report it", kExitInternal});
      return kExitInternal;
    }
  }
  UserError error;
  if (failed(exportTrainedModel(options.dir, outputDir, /*staged=*/true, options.saveOnnx, files,
                                error))) {
    printError(error);
    return error.code;
  }
  std::string failedPath;
  if (!files.commit(failedPath, message)) {
    printError({failedPath, message});
    return kExitBadInput;
  }
  return kExitOk;
}

} // namespace

/// The command that starts `program` on `ranks` local ranks: mpirun, allowed
/// to run as root (containers), to start more ranks than cores, and to leave
/// each rank's threads unpinned (its default binds a rank to one core, which
/// would starve --threads).
std::vector<std::string> mpirunCommand(const std::string &mpirun, int ranks) {
  std::vector<std::string> command{mpirun,      "-n",  std::to_string(ranks), "--oversubscribe",
                                   "--bind-to", "none"};
  if (geteuid() == 0)
    command.push_back("--allow-run-as-root");
  return command;
}

/// The mpirun command of a pipeline's job, from the one-program command
/// `args` (mpirun's options, "-n N", then `program --dir DIR` at
/// `programAt`, then the program's flags): one app context per rank, each
/// running its pp stage's program (DIR/stage<S>/) with the same flags.
std::vector<std::string> pipelineCommand(const std::vector<std::string> &args, size_t programAt,
                                         const std::string &dir, const rt::Mesh &mesh) {
  std::vector<std::string> command{args[0]};
  command.insert(command.end(), args.begin() + 3, args.begin() + programAt);
  const int ppAxis = mesh.axisIndex("pp");
  for (int rank = 0; rank < mesh.size(); ++rank) {
    std::string stageDir = dir + "/stage" + std::to_string(mesh.coordinates(rank)[ppAxis]);
    if (rank > 0)
      command.push_back(":");
    command.insert(command.end(), {"-n", "1", stageDir + "/program", "--dir", stageDir});
    command.insert(command.end(), args.begin() + programAt + 3, args.end());
  }
  return command;
}

int runProgram(const RunOptions &options) {
  std::string program = options.dir + "/program";
  // A pipeline's compile has one program per stage, in stage<S>/.
  std::optional<rt::Mesh> pipelineMesh;
  if (!llvm::sys::fs::exists(program) &&
      llvm::sys::fs::can_execute(options.dir + "/stage0/program")) {
    std::vector<rt::Plan> plans;
    std::vector<std::string> dirs;
    std::string where, message;
    if (!rt::readCompiledPlans(options.dir, plans, dirs, where, message)) {
      printError({where, message});
      return kExitBadInput;
    }
    pipelineMesh = plans.front().mesh;
    if (options.ranks != pipelineMesh->size()) {
      printError({"-n " + std::to_string(options.ranks),
                  "the pipeline in " + options.dir + " runs on " +
                      std::to_string(pipelineMesh->size()) + " ranks",
                  "run it with -n " + std::to_string(pipelineMesh->size()), kExitBadUsage});
      return kExitBadUsage;
    }
    if (options.repeat) {
      printError({"--repeat", "a training program does not take it: a pipeline's stages train",
                  "--repeat times a forward program (cleave compile without --train)",
                  kExitBadUsage});
      return kExitBadUsage;
    }
    program = options.dir + "/stage0/program";
  }
  if (!llvm::sys::fs::can_execute(program)) {
    printError({options.dir, "not a compiled program (no executable 'program' in it)",
                "build one with: cleave compile MODEL.onnx -o " + options.dir});
    return kExitBadInput;
  }
  // A training program on the wrong number of ranks is refused here: once
  // one rank of a job exits, mpirun may drop the others' error lines. (A
  // plan.json that does not read is the program's to report.)
  rt::Plan plan;
  std::string planError;
  if (!pipelineMesh && options.ranks > 1 &&
      rt::readPlan(options.dir + "/plan.json", plan, planError) && plan.training) {
    if (std::string why = rt::launchMismatch(plan.mesh, options.ranks); !why.empty()) {
      printError({plan.mesh ? "mesh " + plan.mesh->text() : "program", why});
      return kExitBadUsage;
    }
  }
  std::vector<std::string> args;
  if (options.ranks > 1) {
    llvm::ErrorOr<std::string> mpirun = llvm::sys::findProgramByName("mpirun");
    if (!mpirun) {
      printError({"-n " + std::to_string(options.ranks), "mpirun is not on PATH",
                  "install OpenMPI (Debian: openmpi-bin), or run one rank without -n",
                  kExitBadUsage});
      return kExitBadUsage;
    }
    args = mpirunCommand(*mpirun, options.ranks);
  }
  if (options.maxRestarts > 0 && options.checkpointDir.empty()) {
    printError({"--max-restarts " + std::to_string(options.maxRestarts),
                "needs --checkpoint-dir: a restart continues from the run's latest checkpoint",
                "e.g. --checkpoint-dir ckpt/ --checkpoint-every 100", kExitBadUsage});
    return kExitBadUsage;
  }
  if (!checkResultPaths(options))
    return kExitBadUsage;
  llvm::SmallString<128> scratch;
  if (llvm::sys::fs::createUniqueDirectory("cleave-run", scratch)) {
    printError({"cleave run", "cannot create a temporary directory", "", kExitInternal});
    return kExitInternal;
  }
  llvm::scope_exit cleanup([&] { llvm::sys::fs::remove_directories(scratch); });

  const size_t programAt = args.size();
  args.insert(args.end(), {program, "--dir", options.dir});
  if (options.threads)
    args.insert(args.end(), {"--threads", std::to_string(*options.threads)});
  if (options.repeat)
    args.insert(args.end(), {"--repeat", std::to_string(*options.repeat)});
  if (options.flushSubnormals)
    args.push_back("--flush-subnormals");
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
  if (!options.checkpointDir.empty())
    args.insert(args.end(), {"--checkpoint-dir", options.checkpointDir});
  if (options.checkpointEvery)
    args.insert(args.end(), {"--checkpoint-every", std::to_string(*options.checkpointEvery)});
  if (options.keepCheckpoints)
    args.insert(args.end(), {"--keep", std::to_string(*options.keepCheckpoints)});
  if (options.checkpointAsync)
    args.push_back("--checkpoint-async");
  // A restart resumes from the run's own checkpoints once it has one.
  const size_t resumeAt = args.size();
  if (!options.resumeDir.empty())
    args.insert(args.end(), {"--resume", options.resumeDir});
  // --init-from starts a run; a restart continues it from its checkpoint.
  const size_t initFromAt = args.size();
  if (!options.initFrom.empty())
    args.insert(args.end(), {"--init-from", options.initFrom});
  // With --save-onnx the program leaves its results staged, to be put in
  // place with the model (commitWithModel).
  const bool withModel = !options.saveOnnx.empty();
  if (withModel)
    args.push_back("--defer-commit");
  if (!options.logJson.empty())
    args.insert(args.end(), {"--log-json", options.logJson});
  if (!options.trace.empty())
    args.insert(args.end(), {"--trace", options.trace});
  if (options.traceOps)
    args.push_back("--trace-ops");
  if (!options.traceSteps.empty())
    args.insert(args.end(), {"--trace-steps", options.traceSteps});
  if (options.quiet)
    args.push_back("--quiet");
  if (options.collectiveTimeout) {
    std::ostringstream seconds; // the shortest spelling: 2, 0.5
    seconds << *options.collectiveTimeout;
    args.insert(args.end(), {"--collective-timeout", seconds.str()});
  }
  // --save-onnx reads the trained weights the program writes to its output
  // directory (a scratch one if the user gave none).
  std::string outputDir = options.outputDir;
  if (withModel && outputDir.empty()) {
    outputDir = (scratch + "/outputs").str();
    if (std::error_code ec = llvm::sys::fs::create_directories(outputDir)) {
      printError({outputDir, "cannot create: " + ec.message(), "", kExitInternal});
      return kExitInternal;
    }
  }
  if (!outputDir.empty())
    args.insert(args.end(), {"--output-dir", outputDir});
  if (options.stats)
    args.push_back("--stats");
  int code = kExitOk;
  bool resuming = !options.resumeDir.empty();
  for (int restarts = 0;; ++restarts) {
    MpirunReport report;
    MpirunReport *watched = options.ranks > 1 ? &report : nullptr;
    JobEnd end;
    std::string message;
    const std::vector<std::string> command =
        pipelineMesh ? pipelineCommand(args, programAt, options.dir, *pipelineMesh) : args;
    if (!runJob(command, options.stderrFile, watched, end, message)) {
      printError({command[0], message, "", kExitInternal});
      return kExitInternal;
    }
    code = jobExitCode(program, end, watched);
    std::optional<std::string> reason = restartReason(end, watched);
    if (!reason || restarts == options.maxRestarts)
      break;
    const bool fromCheckpoint =
        llvm::sys::fs::exists(options.checkpointDir + "/latest");
    // A job that died after its last step's checkpoint has nothing left to
    // train; resuming it would only be refused. Its weights are in that
    // checkpoint.
    if (fromCheckpoint && options.steps &&
        latestCheckpointStep(options.checkpointDir) >= *options.steps) {
      printError({"cleave run",
                  *reason + ", after the checkpoint of the last step: not restarted, since "
                            "nothing is left to train",
                  "the trained state is in " + options.checkpointDir +
                      " (cleave ckpt consolidate or export)",
                  kExitInternal});
      break;
    }
    printWarning({"cleave run",
                  *reason + ": restarting " +
                      (fromCheckpoint ? "from the latest checkpoint in " + options.checkpointDir
                                      : std::string("from the start (no checkpoint yet)")) +
                      " (restart " + std::to_string(restarts + 1) + " of " +
                      std::to_string(options.maxRestarts) + ")",
                  "",
                  {}});
    if (fromCheckpoint && !resuming) {
      if (!options.initFrom.empty())
        args.erase(args.begin() + initFromAt, args.begin() + initFromAt + 2);
      args.insert(args.begin() + resumeAt, {"--resume", options.checkpointDir});
    }
    else if (fromCheckpoint)
      args[resumeAt + 1] = options.checkpointDir;
    resuming |= fromCheckpoint;
  }
  if (code == 0 && withModel)
    return commitWithModel(options, outputDir);
  return code;
}
} // namespace cleave
