//===- DriverSupport.h - the plan and helpers both driver modes share -*- C++ -*-===//
//
// Internal to the driver: the one-line error format, device buffers, the
// weights blob, and stderr while ranks check the same things (plan.json itself
// is runtime/Plan.h).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_DRIVER_DRIVERSUPPORT_H
#define CLEAVE_RUNTIME_DRIVER_DRIVERSUPPORT_H

#include "runtime/Files.h"
#include "runtime/Plan.h"
#include "runtime/driver/Driver.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cleave::rt {

/// Prints `cleave: error: WHERE: WHAT` (and `note: NOTE`) to stderr and
/// returns `code`.
int fail(const std::string &where, const std::string &what, int code, const std::string &note = "");

/// Reads the weights blob DIR/FILE into `weights`, or prints why it cannot
/// and returns the exit code.
int loadWeights(const std::string &dir, const std::string &file, const Plan &plan,
                std::vector<char> &weights);

/// Reads NAME=FILE `entries` of `flag` into `files`, each NAME one of
/// `names` (the model's `noun`s: "input", "data input") and given once; or
/// prints why not and returns the exit code.
int parseNamedFiles(const std::vector<std::string> &entries, const std::string &flag,
                    const std::string &noun, const std::vector<std::string> &names,
                    std::map<std::string, std::string> &files);

/// Stages each output (`specs[i]` says what `outputs[i]` is) as
/// DIR/NAME.npy in `files`, or prints why it cannot and returns the exit
/// code.
int stageOutputs(const std::vector<TensorSpec> &specs, const std::vector<Tensor> &outputs,
                 const std::string &dir, Backend &backend, FileSet &files);

/// The kernels' threads when --threads is not given: the cores this process
/// may run on shared among the job's ranks on this machine
/// (runtime/Cores.h).
int defaultThreads();

/// The process's peak resident memory so far (getrusage), in bytes: the
/// program's allocations and everything else (libraries, host copies).
int64_t processPeakRssBytes();

/// Device memory owned for the length of the run.
class Buffer {
public:
  Buffer(Backend &backend, std::size_t bytes)
      : backend(backend), bytes(bytes), memory(static_cast<char *>(backend.allocate(bytes))) {}
  ~Buffer() { backend.release(memory, bytes); }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  char *get() const { return memory; }

private:
  Backend &backend;
  std::size_t bytes;
  char *memory;
};

/// Sends stderr to /dev/null until restore() or the end of the scope, when
/// `silence` is set: ranks other than 0 of a job check the same plan and data
/// as rank 0, so only rank 0 reports what is wrong with them.
class StderrSilencer {
public:
  explicit StderrSilencer(bool silence);
  ~StderrSilencer() { restore(); }
  StderrSilencer(const StderrSilencer &) = delete;
  StderrSilencer &operator=(const StderrSilencer &) = delete;
  void restore();

private:
  int saved = -1;
};

/// A tensor view of `spec` at `data`.
Tensor tensorAt(void *data, const TensorSpec &spec);

} // namespace cleave::rt

#endif
