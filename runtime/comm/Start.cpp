//===- Start.cpp - the communicators of one rank of a job ----------------===//

#include "runtime/comm/Start.h"

#include "runtime/comm/Mpi.h"

#include <cstdlib>
#include <initializer_list>
#include <string>

namespace cleave::rt::comm {

namespace {

/// The first of `variables` set to a positive count, or `fallback`.
int countFromEnvironment(std::initializer_list<const char *> variables, int fallback) {
  for (const char *variable : variables)
    if (const char *value = std::getenv(variable)) {
      int count = std::atoi(value);
      if (count >= 1)
        return count;
    }
  return fallback;
}

} // namespace

int launchedRanks() { return countFromEnvironment({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}, 1); }

int launchedLocalRanks() {
  return countFromEnvironment({"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}, launchedRanks());
}

int launchedRank() {
  for (const char *variable : {"OMPI_COMM_WORLD_RANK", "PMI_RANK"})
    if (const char *value = std::getenv(variable))
      return std::atoi(value);
  return 0;
}

Communication::Communication() = default;
Communication::~Communication() = default;

Communicator *Communication::axis(std::string_view name) {
  int index = mesh_.axisIndex(name);
  return index < 0 ? nullptr : axes_[index].get();
}

std::unique_ptr<Communication> startCommunication(const Mesh &mesh, const CommOptions &options,
                                                  std::string &error) {
  int ranks = launchedRanks();
  error = launchMismatch(mesh, ranks);
  if (!error.empty())
    return nullptr;
  std::unique_ptr<Communication> communication(new Communication());
  communication->mesh_ = mesh;
  if (ranks == 1) {
    communication->world_ = std::make_unique<LocalCommunicator>("world", options);
    for (const std::string &name : mesh.axisNames)
      communication->axes_.push_back(std::make_unique<LocalCommunicator>(name, options));
    return communication;
  }

  communication->session_ = MpiSession::start(error);
  if (!communication->session_)
    return nullptr;
  auto world = MpiCommunicator::world(*communication->session_, options);
  for (const std::string &name : mesh.axisNames) {
    auto axis = world->split(mesh, {name}, error);
    if (!axis)
      return nullptr;
    communication->axes_.push_back(std::move(axis));
  }
  // The ranks sharing this machine's memory, numbered in world order.
  MPI_Comm local = MPI_COMM_NULL;
  MPI_Comm_split_type(world->handle(), MPI_COMM_TYPE_SHARED, world->rank(), MPI_INFO_NULL,
                      &local);
  MPI_Comm_rank(local, &communication->localRank_);
  MPI_Comm_free(&local);
  communication->world_ = std::move(world);
  return communication;
}

} // namespace cleave::rt::comm
