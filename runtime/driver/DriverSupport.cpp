//===- DriverSupport.cpp - the plan and helpers both driver modes share --===//

#include "runtime/driver/DriverSupport.h"

#include "runtime/Cores.h"
#include "runtime/Npy.h"
#include "runtime/comm/Start.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <fcntl.h>
#include <iostream>
#include <sys/resource.h>
#include <unistd.h>

namespace cleave::rt {

int fail(const std::string &where, const std::string &what, int code, const std::string &note) {
  // One write: under mpirun, a line written in pieces can be interleaved
  // with other ranks' output and mpirun's own.
  std::string text = "cleave: error: " + where + ": " + what + "\n";
  if (!note.empty())
    text += "note: " + note + "\n";
  std::cerr << text << std::flush;
  return code;
}

int loadWeights(const std::string &dir, const std::string &file, const Plan &plan,
                std::vector<char> &weights) {
  // The file's size is checked before anything of plan.json's size is
  // allocated: a damaged plan must not ask for a terabyte.
  std::ifstream in(dir + "/" + file, std::ios::binary | std::ios::ate);
  if (!in || in.tellg() != plan.weightsBytes)
    return fail(dir + "/" + file, "missing or not " + std::to_string(plan.weightsBytes) + " bytes",
                1, "recompile the model with cleave compile");
  weights.assign(static_cast<size_t>(plan.weightsBytes), 0);
  in.seekg(0);
  if (!in.read(weights.data(), plan.weightsBytes))
    return fail(dir + "/" + file, "cannot read: " + std::string(std::strerror(errno)), 1);
  return 0;
}

int parseNamedFiles(const std::vector<std::string> &entries, const std::string &flag,
                    const std::string &noun, const std::vector<std::string> &names,
                    std::map<std::string, std::string> &files) {
  for (const std::string &entry : entries) {
    size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size())
      return fail(flag + " '" + entry + "'", "expected NAME=FILE.npy", 2);
    std::string name = entry.substr(0, eq);
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      std::string known;
      for (const std::string &n : names)
        known += (known.empty() ? "" : ", ") + n;
      return fail(flag + " '" + entry + "'", "the model has no " + noun + " '" + name + "'", 1,
                  "its " + noun + "s are: " + known);
    }
    if (files.count(name))
      return fail(flag + " '" + entry + "'", "'" + name + "' is given twice", 2);
    files[name] = entry.substr(eq + 1);
  }
  return 0;
}

int stageOutputs(const std::vector<TensorSpec> &specs, const std::vector<Tensor> &outputs,
                 const std::string &dir, Backend &backend, FileSet &files) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::vector<char> host(outputs[i].bytes());
    backend.copyToHost(host.data(), outputs[i].data, host.size());
    std::string path = dir + "/" + npyFileName(specs[i].name), error;
    if (!stageNpy(files, path, outputs[i].dtype, specs[i].shape, host.data(), error))
      return fail(path, error, 1);
  }
  return 0;
}

StderrSilencer::StderrSilencer(bool silence) {
  if (!silence)
    return;
  std::fflush(stderr);
  saved = dup(STDERR_FILENO);
  int null = open("/dev/null", O_WRONLY);
  if (saved < 0 || null < 0) {
    if (null >= 0)
      close(null);
    return;
  }
  dup2(null, STDERR_FILENO);
  close(null);
}

void StderrSilencer::restore() {
  if (saved < 0)
    return;
  std::fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  saved = -1;
}

int defaultThreads() { return threadsPerRank(comm::launchedLocalRanks()); }

int64_t processPeakRssBytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024; // Linux reports KiB
}

Tensor tensorAt(void *data, const TensorSpec &spec) {
  Tensor t{data, spec.dtype, {}};
  for (int64_t d : spec.shape)
    t.shape[t.shape.size++] = d;
  return t;
}

} // namespace cleave::rt
