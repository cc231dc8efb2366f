//===- Start.h - the communicators of one rank of a job ---------*- C++ -*-===//
//
// What a program's driver calls once, before its first step:
//
//   Mesh mesh = ...;                  // from plan.json (one axis "dp" for data parallel)
//   comm::CommOptions options;              // timeout, --deterministic
//   std::string error;
//   auto communication = comm::startCommunication(mesh, options, error);
//   if (!communication) return fail("mesh " + mesh.text(), error, 1);
//   comm::Communicator &dp = *communication->axis("dp");
//   dp.allReduceSum(grads, count, DType::F32, {step, "gradients"});
//
// Launched by mpirun with several ranks it starts MPI and splits one
// communicator per mesh axis; started alone (plain `cleave run`, or mpirun
// -n 1) it starts no MPI at all and every axis is a LocalCommunicator of one
// rank, so a single-device program pays nothing. The Communication must
// outlive every use of its communicators; destroying it finalizes MPI, so
// keep it alive until main returns.
//
// A CUDA program makes its NCCL communicators from these (runtime/comm/Nccl.h):
// cudaSetDevice(communication->localRank() % deviceCount), then
// NcclCommunicator::create(*communication->axis("dp"), stream) per axis.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_COMM_START_H
#define CLEAVE_RUNTIME_COMM_START_H

#include "runtime/comm/Communicator.h"
#include "runtime/Mesh.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cleave::rt::comm {

class MpiSession;

/// The number of ranks an MPI launcher started this job with, from the
/// environment it sets (OMPI_COMM_WORLD_SIZE for OpenMPI's mpirun, PMI_SIZE
/// for MPICH and Slurm); 1 when the process was started on its own.
int launchedRanks();
/// How many of them run on this machine (OMPI_COMM_WORLD_LOCAL_SIZE,
/// MPI_LOCALNRANKS for MPICH); launchedRanks() when the launcher does not
/// say.
int launchedLocalRanks();
/// This process's rank in the job by the same environment (known before MPI
/// starts); 0 when started on its own.
int launchedRank();

/// One rank's communicators: the whole job, and one per mesh axis.
class Communication {
public:
  ~Communication();
  Communication(const Communication &) = delete;
  Communication &operator=(const Communication &) = delete;

  int rank() const { return world_->rank(); }
  int size() const { return world_->size(); }
  /// This rank among the ranks on its machine (which GPU it takes).
  int localRank() const { return localRank_; }
  const Mesh &mesh() const { return mesh_; }
  Communicator &world() { return *world_; }
  /// The communicator of the mesh axis `name`, or null if there is none.
  Communicator *axis(std::string_view name);

private:
  friend std::unique_ptr<Communication> startCommunication(const Mesh &, const CommOptions &,
                                                           std::string &);
  Communication();

  Mesh mesh_;
  int localRank_ = 0;
  // Declared first, destroyed last: MPI must outlive the communicators.
  std::unique_ptr<MpiSession> session_;
  std::unique_ptr<Communicator> world_;
  /// One per axis of mesh_, in its order.
  std::vector<std::unique_ptr<Communicator>> axes_;
};

/// Starts the communicators of a program compiled for `mesh`; null, with
/// `error`, if the job's rank count (launchedRanks()) is not mesh.size() or
/// MPI does not start. Call it once per process.
std::unique_ptr<Communication> startCommunication(const Mesh &mesh, const CommOptions &options,
                                                  std::string &error);

} // namespace cleave::rt::comm

#endif
