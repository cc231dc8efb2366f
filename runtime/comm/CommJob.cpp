//===- CommJob.cpp - small jobs over startCommunication, for the tests ---===//
//
//   cleave-runtime-comm-job groups MESH        each rank prints its groups
//   cleave-runtime-comm-job timeout SECONDS    rank 1 sleeps through step 1
//   cleave-runtime-comm-job die                rank 1 exits during step 1
//   cleave-runtime-comm-job expect-mismatch    rank 1 expects 10 floats,
//                        its recv takes 20
//   cleave-runtime-comm-job time BYTES REPEATS [VARIANT]
//                        all-reduce time (rank 0 prints); VARIANT:
//                        `deterministic` (the sum in rank order), `blocking`
//                        (a plain MPI_Allreduce on the same group, for
//                        comparison), `reduce-scatter` (the communicator's
//                        reduce-scatter of BYTES) or `library-reduce-scatter`
//                        (MPI_Ireduce_scatter_block, polled, for comparison)
//
// Run under mpirun (test/runtime/comm-job.test, comm-timeout.test), or
// alone.
//
//===----------------------------------------------------------------------===//

#include "runtime/MedianTime.h"
#include "runtime/comm/Mpi.h"
#include "runtime/comm/Start.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace cleave::rt;
using namespace cleave::rt::comm;

namespace {

int usage() {
  std::fprintf(stderr, "usage: cleave-runtime-comm-job groups MESH | timeout SECONDS | die | "
                       "expect-mismatch | time BYTES REPEATS "
                       "[deterministic|blocking|reduce-scatter|library-reduce-scatter]\n");
  return 2;
}

std::unique_ptr<Communication> start(const Mesh &mesh, const CommOptions &options) {
  std::string error;
  auto communication = startCommunication(mesh, options, error);
  if (!communication)
    std::fprintf(stderr, "cleave: error: mesh %s: %s\n", mesh.text().c_str(), error.c_str());
  return communication;
}

/// One line per rank: its coordinates and the members of each axis group
/// (the sum over the group of 2^world rank).
int printGroups(const std::string &meshText) {
  Mesh mesh;
  std::string error;
  if (!Mesh::parse(meshText, mesh, error)) {
    std::fprintf(stderr, "cleave: error: mesh '%s': %s\n", meshText.c_str(), error.c_str());
    return 2;
  }
  auto communication = start(mesh, {});
  if (!communication)
    return 1;
  std::string line = "rank " + std::to_string(communication->rank()) + " of " +
                     std::to_string(communication->size()) + ":";
  for (const std::string &name : mesh.axisNames) {
    Communicator &axis = *communication->axis(name);
    int64_t members = int64_t{1} << communication->rank();
    axis.allReduceSum(&members, 1, DType::I64, {0, "members"});
    line += " " + name + " " + std::to_string(axis.rank()) + "/" + std::to_string(axis.size()) +
            " {";
    for (int r = 0, first = 1; r < 63; ++r)
      if (members >> r & 1) {
        line += (first ? "" : ",") + std::to_string(r);
        first = 0;
      }
    line += "}";
  }
  std::printf("%s\n", line.c_str());
  return 0;
}

/// Every rank all-reduces at steps 0 and 1, except that rank 1 sleeps (or
/// exits) instead of its step-1 call.
int missStep(bool die, double timeoutSeconds) {
  int ranks = launchedRanks();
  CommOptions options;
  options.timeoutSeconds = timeoutSeconds;
  auto communication = start(Mesh::line("dp", ranks), options);
  if (!communication)
    return 1;
  Communicator &dp = *communication->axis("dp");
  for (int64_t step = 0; step < 2; ++step) {
    if (step == 1 && dp.rank() == 1) {
      if (die)
        std::_Exit(7);
      std::this_thread::sleep_for(std::chrono::seconds(120));
    }
    float loss = 1.0f;
    dp.allReduceSum(&loss, 1, DType::F32, {step, "loss"});
  }
  return 0;
}

/// Rank 0 sends 10 floats; rank 1 expects them and then receives 20: an
/// error of the recv, on rank 1.
int expectMismatch() {
  auto communication = start(Mesh::line("pp", launchedRanks()), {});
  if (!communication)
    return 1;
  Communicator &pp = *communication->axis("pp");
  std::vector<float> values(20, 1.0f);
  if (pp.rank() == 0) {
    // Then it waits for rank 1, as a pipeline's next action would, until
    // the job is ended: a rank that had already left for MPI_Finalize could
    // hold mpirun up as rank 1 aborted (seen once in about fifty runs).
    pp.send(values.data(), 10, DType::F32, 1, 3, {2, "activation"});
    pp.completeSends({2, "activation"});
    pp.barrier({2, "the next action"});
  } else if (pp.rank() == 1) {
    pp.expect(10, DType::F32, 0, 3, {2, "activation"});
    pp.recv(values.data(), 20, DType::F32, 0, 3, {2, "activation"});
  }
  return 0;
}

/// What `time` measures: its argument, its name in the output, and how it
/// calls: the communicator's sum in rank order, MPI's own call (rather than
/// the communicator's), a reduce-scatter (rather than an all-reduce).
struct Variant {
  const char *argument, *name;
  bool deterministic, library, scatter;
};
constexpr Variant kVariants[] = {
    {"", "all_reduce", false, false, false},
    {"deterministic", "all_reduce (deterministic)", true, false, false},
    {"blocking", "MPI_Allreduce (blocking)", false, true, false},
    {"reduce-scatter", "reduce_scatter", false, false, true},
    {"library-reduce-scatter", "MPI_Ireduce_scatter_block", false, true, true}};

/// The median time of `repeats` calls of `variant` over `bytes` of f32.
int timeCollective(long long bytes, int repeats, const Variant &variant) {
  int ranks = launchedRanks();
  CommOptions options;
  options.deterministic = variant.deterministic;
  auto communication = start(Mesh::line("dp", ranks), options);
  if (!communication)
    return 1;
  Communicator &dp = *communication->axis("dp");
  std::vector<float> buffer(static_cast<std::size_t>(bytes) / 4, 1.0f);
  std::vector<float> part(buffer.size() / ranks);
  // The library's own calls need MPI's group: alone, the communicator is a
  // local one, and they time its calls instead.
  const bool library = ranks > 1 && variant.library;
  const bool scatter = variant.scatter;
  auto call = [&](int64_t step) {
    if (library && !scatter) {
      MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(buffer.size()), MPI_FLOAT,
                    MPI_SUM, static_cast<MpiCommunicator &>(dp).handle());
    } else if (library) {
      MPI_Request request;
      MPI_Ireduce_scatter_block(buffer.data(), part.data(), static_cast<int>(part.size()),
                                MPI_FLOAT, MPI_SUM, static_cast<MpiCommunicator &>(dp).handle(),
                                &request);
      for (int done = 0; !done;)
        MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    } else if (scatter) {
      dp.reduceScatterSum(buffer.data(), part.data(), part.size(), DType::F32, {step});
    } else {
      dp.allReduceSum(buffer.data(), buffer.size(), DType::F32, {step});
    }
  };
  std::vector<double> seconds;
  for (int i = 0; i < repeats + 1; ++i) {
    dp.barrier({});
    auto begin = std::chrono::steady_clock::now();
    call(i);
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    if (i > 0) // the first call sets up connections
      seconds.push_back(elapsed);
  }
  if (dp.rank() == 0)
    std::printf("%s of %lld bytes on %d ranks: median %.3f ms over %d runs\n", variant.name, bytes,
                ranks, median(std::move(seconds)) * 1e3, repeats);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "groups" && argc == 3)
    return printGroups(argv[2]);
  if (mode == "timeout" && argc == 3)
    return missStep(/*die=*/false, std::atof(argv[2]));
  if (mode == "die" && argc == 2)
    return missStep(/*die=*/true, 60);
  if (mode == "expect-mismatch" && argc == 2)
    return expectMismatch();
  if (mode == "time" && (argc == 4 || argc == 5)) {
    std::string argument = argc == 5 ? argv[4] : "";
    const Variant *variant =
        std::find_if(std::begin(kVariants), std::end(kVariants),
                     [&](const Variant &known) { return argument == known.argument; });
    if (variant == std::end(kVariants))
      return usage();
    return timeCollective(std::atoll(argv[2]), std::max(1, std::atoi(argv[3])), *variant);
  }
  return usage();
}
