//===- Mpi.h - communicators over MPI (host memory) -------------*- C++ -*-===//
//
// MpiSession owns MPI's lifetime in a process; MpiCommunicator is a group of
// ranks (the whole job, or one mesh axis split from it) on host buffers.
// Every collective is issued in its non-blocking form and polled with
// MPI_Test until the call's deadline, so a peer that never arrives ends the
// job with a line naming the collective instead of a hang. MPI errors are
// returned to the communicator (MPI_ERRORS_RETURN), which reports them the
// same way; a peer that dies ends the job through mpirun, which kills the
// other ranks when one exits before MPI_Finalize.
//
// Every communicator must be destroyed before the session that made it.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_COMM_MPI_H
#define CLEAVE_RUNTIME_COMM_MPI_H

#include "runtime/comm/Communicator.h"
#include "runtime/Mesh.h"

#include <mpi.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace cleave::rt::comm {

class Deadline;

/// Ends every rank of the job with `exitCode`: MPI_Abort on MPI_COMM_WORLD
/// while MPI runs in this process, otherwise an exit of this process.
[[noreturn]] void abortJob(int exitCode);

/// MPI_Init on creation, MPI_Finalize on destruction. Any thread may call
/// MPI (MPI_THREAD_MULTIPLE), each on communicators of its own: the main
/// thread and the background collectives' (BackgroundCollectives.h); the
/// input thread never communicates.
class MpiSession {
public:
  /// Starts MPI, or returns null and says why (MPI already started in this
  /// process, or it would not start).
  static std::unique_ptr<MpiSession> start(std::string &error);
  ~MpiSession();
  MpiSession(const MpiSession &) = delete;
  MpiSession &operator=(const MpiSession &) = delete;

  int worldRank() const { return worldRank_; }
  int worldSize() const { return worldSize_; }

private:
  MpiSession(int worldRank, int worldSize) : worldRank_(worldRank), worldSize_(worldSize) {}
  int worldRank_;
  int worldSize_;
};

class MpiCommunicator final : public Communicator {
public:
  /// Every rank of the job, on a duplicate of MPI_COMM_WORLD (so this
  /// library's error handler and names stay off the world communicator).
  static std::unique_ptr<MpiCommunicator> world(const MpiSession &session,
                                                CommOptions options = {});
  ~MpiCommunicator() override;

  /// The ranks of this group that differ from this rank only along `axes`
  /// of `mesh` (mesh.size() == size(); this group's ranks laid out
  /// row-major on the mesh), numbered row-major over `axes`. Its axis name
  /// is the axes joined by ','. Every rank of this group must call it with
  /// the same arguments. Null, with `error`, if `axes` are not distinct
  /// axes of `mesh` or the mesh does not have this group's size.
  std::unique_ptr<MpiCommunicator> split(const Mesh &mesh, const std::vector<std::string> &axes,
                                         std::string &error);

  /// MPI_Comm_idup of this group, within the timeout.
  std::unique_ptr<Communicator> duplicate(std::string &error) override;

  MPI_Comm handle() const { return comm_; }

protected:
  void doAllReduceSum(void *buffer, std::size_t count, DType type,
                      const CallSite &site) override;
  void doAllGather(const void *sent, void *received, std::size_t countPerRank, DType type,
                   const CallSite &site) override;
  void doReduceScatterSum(const void *sent, void *received, std::size_t countPerRank,
                          DType type, const CallSite &site) override;
  /// In rank order: every rank receives everyone's piece of its own chunk
  /// (all-to-all), adds them in rank order, and (for the all-reduce) the
  /// summed chunks are gathered.
  void doAllReduceSumInRankOrder(void *buffer, std::size_t count, DType type,
                                 const CallSite &site) override;
  void doReduceScatterSumInRankOrder(const void *sent, void *received, std::size_t countPerRank,
                                     DType type, DType sumType, const CallSite &site) override;
  void doReduceScatterSumUneven(const void *sent, const RankChunks &chunks, void *received,
                                DType type, const CallSite &site) override;
  void doBroadcast(void *buffer, std::size_t count, DType type, int root,
                   const CallSite &site) override;
  void doBarrier(const CallSite &site) override;
  void doSend(const void *buffer, std::size_t count, DType type, int peer, int tag,
              const CallSite &site) override;
  void doRecv(void *buffer, std::size_t count, DType type, int peer, int tag,
              const CallSite &site) override;
  /// Posts the receive (MPI_Irecv) into a buffer of its own.
  void doExpect(std::size_t count, DType type, int peer, int tag, const CallSite &site) override;
  bool doAwaitMessage(int peer, int tag, const CallSite &site) override;
  void doCompleteSends(const CallSite &site) override;
  [[noreturn]] void endJob(int exitCode) override;

private:
  /// A message sent and maybe not yet taken, with the copy it is sent from.
  struct PendingSend {
    std::vector<char> bytes;
    MPI_Request request;
  };

  /// A message expected (doExpect), received into `bytes` once `done`.
  struct ExpectedMessage {
    int peer, tag;
    DType type;
    std::vector<char> bytes;
    MPI_Request request;
    MPI_Status status;
    bool done = false;
    std::size_t count() const { return bytes.size() / dtypeSize(type); }
  };

  MpiCommunicator(MPI_Comm comm, int worldRank, std::string axis, CommOptions options);
  /// The oldest expected message of `peer` with `tag`, or expected_.end().
  std::deque<ExpectedMessage>::iterator expectedFrom(int peer, int tag);
  /// Waits for `message` to arrive (until `deadline`) and checks its length.
  void complete(ExpectedMessage &message, const Deadline &deadline, const CallSite &site);
  /// Fails unless a message from `peer` with `tag` (`status`) holds the
  /// `expected` elements of `type`.
  void checkReceived(const MPI_Status &status, DType type, int expected, int peer, int tag,
                     const CallSite &site);
  static int rankIn(MPI_Comm comm);
  static int sizeOf(MPI_Comm comm);

  /// Fails unless `status` is MPI_SUCCESS.
  void check(int status, CollectiveKind kind, const CallSite &site, const char *call);
  /// Waits for `request` until `deadline`; fails or times out.
  void wait(MPI_Request &request, const Deadline &deadline, CollectiveKind kind,
            const CallSite &site, MPI_Status *status = MPI_STATUS_IGNORE);
  /// Fails unless `tag` is within MPI's limit for this communicator.
  void checkTag(int tag, CollectiveKind kind, const CallSite &site);
  /// sum = the rank-order sum of every rank's chunk rank() of `sent`
  /// (`chunks`, whose furthest end mpiCount has checked), through an
  /// all-to-all into scratch_.
  void sumOwnChunk(const void *sent, const RankChunks &chunks, DType type, void *sum,
                   CollectiveKind kind, const CallSite &site, const Deadline &deadline);
  /// `count` as an MPI count (int), or fails.
  int mpiCount(std::size_t count, CollectiveKind kind, const CallSite &site);

  MPI_Comm comm_;
  /// Oldest first; those taken are dropped at each send and completeSends.
  std::deque<PendingSend> pendingSends_;
  /// Oldest first; each is dropped by the recv that takes it.
  std::deque<ExpectedMessage> expected_;
  /// Reused between the calls that sum through an all-to-all.
  std::vector<char> scratch_;
};

} // namespace cleave::rt::comm

#endif
