//===- Mpi.cpp - communicators over MPI ----------------------------------===//

#include "runtime/comm/Mpi.h"

#include "runtime/comm/Deadline.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace cleave::rt::comm {
namespace {

/// The MPI type of `type`: arithmetic for the types a sum takes, an
/// unsigned integer of the same width for the others (they are only moved).
MPI_Datatype mpiType(DType type) {
  switch (type) {
  case DType::F32: return MPI_FLOAT;
  case DType::F64: return MPI_DOUBLE;
  case DType::I32: return MPI_INT32_T;
  case DType::I64: return MPI_INT64_T;
  case DType::U32: return MPI_UINT32_T;
  case DType::U64: return MPI_UINT64_T;
  case DType::F16:
  case DType::BF16:
  case DType::I16:
  case DType::U16: return MPI_UINT16_T;
  case DType::I8:
  case DType::U8:
  case DType::Bool: return MPI_UINT8_T;
  }
  return MPI_BYTE;
}

std::string mpiErrorText(int status) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(status, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(status);
  return std::string(text, length);
}

/// Errors come back to the communicator, which names the collective, rather
/// than ending the job with MPI's own message.
void prepare(MPI_Comm comm, const std::string &name) {
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_set_name(comm, name.c_str());
}

} // namespace

void abortJob(int exitCode) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized)
    MPI_Abort(MPI_COMM_WORLD, exitCode);
  std::exit(exitCode);
}

std::unique_ptr<MpiSession> MpiSession::start(std::string &error) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) {
    error = "MPI is already started in this process";
    return nullptr;
  }
  // OpenMPI's non-blocking all-reduce (its libnbc component) sums in place,
  // as every call here does, by a binomial tree whatever the ranks and the
  // size: one rank receives and adds every whole buffer, then sends the sum
  // back. Rabenseifner's algorithm
  // (each rank sums its own part, then every rank gathers the parts) takes
  // half its time or less on 5 and 16 MB over 2 ranks here, and no longer on
  // small buffers (docs/performance.md, "Collectives over MPI"). A value the
  // user set (in the environment, or by mpirun --mca) stays; other MPIs
  // ignore the name.
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", /*overwrite=*/0);
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    error = "MPI did not start (MPI_Init_thread failed)";
    return nullptr;
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    error = "this MPI does not let two threads call it (MPI_THREAD_MULTIPLE), which the "
            "background collectives need";
    return nullptr;
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<MpiSession>(new MpiSession(rank, size));
}

MpiSession::~MpiSession() { MPI_Finalize(); }

int MpiCommunicator::rankIn(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  return rank;
}

int MpiCommunicator::sizeOf(MPI_Comm comm) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  return size;
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, int worldRank, std::string axis,
                                 CommOptions options)
    : Communicator(rankIn(comm), sizeOf(comm), worldRank, std::move(axis), options),
      comm_(comm) {}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return;
  // A message not yet taken still reads its copy.
  for (PendingSend &sent : pendingSends_)
    MPI_Wait(&sent.request, MPI_STATUS_IGNORE);
  for (ExpectedMessage &message : expected_)
    if (!message.done) {
      MPI_Cancel(&message.request);
      MPI_Wait(&message.request, MPI_STATUS_IGNORE);
    }
  MPI_Comm_free(&comm_);
}

namespace {

/// MPI_Comm_idup of `source` within `timeoutSeconds`: duplicating is
/// collective, and without a deadline a rank that never comes would hang the
/// others here. MPI_COMM_NULL when the deadline passes.
MPI_Comm duplicateWithin(MPI_Comm source, double timeoutSeconds) {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Request request;
  Deadline deadline(timeoutSeconds);
  if (MPI_Comm_idup(source, &comm, &request) != MPI_SUCCESS)
    return MPI_COMM_NULL;
  bool done = pollUntil(deadline, [&] {
    int flag = 0;
    MPI_Test(&request, &flag, MPI_STATUS_IGNORE);
    return flag != 0;
  });
  return done ? comm : MPI_COMM_NULL;
}

} // namespace

std::unique_ptr<MpiCommunicator> MpiCommunicator::world(const MpiSession &session,
                                                        CommOptions options) {
  // MPI_COMM_WORLD's handler is MPI_ERRORS_ARE_FATAL: a failure ends the job.
  MPI_Comm comm = duplicateWithin(MPI_COMM_WORLD, options.timeoutSeconds);
  if (comm == MPI_COMM_NULL) {
    std::fprintf(stderr,
                 "cleave: error: rank %d: starting the communicator 'world' timed out after "
                 "%g s\n",
                 session.worldRank(), options.timeoutSeconds);
    std::fflush(stderr);
    abortJob(3);
  }
  prepare(comm, "world");
  return std::unique_ptr<MpiCommunicator>(
      new MpiCommunicator(comm, session.worldRank(), "world", options));
}

std::unique_ptr<Communicator> MpiCommunicator::duplicate(std::string &error) {
  MPI_Comm comm = duplicateWithin(comm_, options().timeoutSeconds);
  if (comm == MPI_COMM_NULL) {
    error = "duplicating the communicator '" + axis() + "' failed or timed out after " +
            std::to_string(options().timeoutSeconds) + " s";
    return nullptr;
  }
  prepare(comm, axis());
  return std::unique_ptr<MpiCommunicator>(
      new MpiCommunicator(comm, worldRank(), axis(), options()));
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::split(const Mesh &mesh,
                                                        const std::vector<std::string> &axes,
                                                        std::string &error) {
  if (mesh.size() != size()) {
    error = "the mesh " + mesh.text() + " has " + std::to_string(mesh.size()) +
            " ranks, the group '" + axis() + "' " + std::to_string(size());
    return nullptr;
  }
  std::vector<int> indices;
  std::string name;
  for (const std::string &axisName : axes) {
    int index = mesh.axisIndex(axisName);
    if (index < 0) {
      error = "the mesh " + mesh.text() + " has no axis '" + axisName + "'";
      return nullptr;
    }
    for (int seen : indices)
      if (seen == index) {
        error = "axis '" + axisName + "' is named twice";
        return nullptr;
      }
    indices.push_back(index);
    name += (name.empty() ? "" : ",") + axisName;
  }
  if (indices.empty()) {
    error = "a split needs at least one axis";
    return nullptr;
  }
  GroupPlace place = groupPlace(mesh, rank(), indices);
  // MPI has no non-blocking split: a barrier with a deadline first, so that
  // a rank that never comes ends the job instead of hanging it.
  barrier({-1, "split along '" + name + "'"});
  MPI_Comm comm = MPI_COMM_NULL;
  int status = MPI_Comm_split(comm_, place.group, place.index, &comm);
  if (status != MPI_SUCCESS)
    fail("splitting '" + axis() + "' into groups along '" + name + "': " + mpiErrorText(status));
  prepare(comm, name);
  return std::unique_ptr<MpiCommunicator>(
      new MpiCommunicator(comm, worldRank(), name, options()));
}

void MpiCommunicator::check(int status, CollectiveKind kind, const CallSite &site,
                            const char *call) {
  if (status != MPI_SUCCESS)
    fail(kind, site, std::string(call) + ": " + mpiErrorText(status));
}

void MpiCommunicator::wait(MPI_Request &request, const Deadline &deadline, CollectiveKind kind,
                           const CallSite &site, MPI_Status *status) {
  bool done = pollUntil(deadline, [&] {
    int flag = 0;
    check(MPI_Test(&request, &flag, status), kind, site, "MPI_Test");
    return flag != 0;
  });
  if (!done)
    timedOut(kind, site);
}

int MpiCommunicator::mpiCount(std::size_t count, CollectiveKind kind, const CallSite &site) {
  if (count > static_cast<std::size_t>(INT_MAX))
    fail(kind, site,
         std::to_string(count) + " elements: MPI counts stop at " + std::to_string(INT_MAX));
  return static_cast<int>(count);
}

void MpiCommunicator::doAllReduceSum(void *buffer, std::size_t count, DType type,
                                     const CallSite &site) {
  constexpr CollectiveKind kind = CollectiveKind::AllReduce;
  Deadline deadline(options().timeoutSeconds);
  MPI_Request request;
  check(MPI_Iallreduce(MPI_IN_PLACE, buffer, mpiCount(count, kind, site), mpiType(type), MPI_SUM,
                       comm_, &request),
        kind, site, "MPI_Iallreduce");
  wait(request, deadline, kind, site);
}

void MpiCommunicator::doAllGather(const void *sent, void *received, std::size_t countPerRank,
                                  DType type, const CallSite &site) {
  constexpr CollectiveKind kind = CollectiveKind::AllGather;
  Deadline deadline(options().timeoutSeconds);
  int count = mpiCount(countPerRank, kind, site);
  MPI_Request request;
  check(MPI_Iallgather(sent, count, mpiType(type), received, count, mpiType(type), comm_,
                       &request),
        kind, site, "MPI_Iallgather");
  wait(request, deadline, kind, site);
}

void MpiCommunicator::doReduceScatterSum(const void *sent, void *received,
                                         std::size_t countPerRank, DType type,
                                         const CallSite &site) {
  // OpenMPI's MPI_Ireduce_scatter_block sums every whole buffer at one rank
  // and then scatters it: 3.3-4.2 times as long on 16 MB here as the
  // all-to-all and rank-order sum (docs/performance.md, "Collectives over
  // MPI"), which sums each part where it stays, in one order.
  doReduceScatterSumInRankOrder(sent, received, countPerRank, type, type, site);
}

void MpiCommunicator::doBroadcast(void *buffer, std::size_t count, DType type, int root,
                                  const CallSite &site) {
  constexpr CollectiveKind kind = CollectiveKind::Broadcast;
  Deadline deadline(options().timeoutSeconds);
  MPI_Request request;
  check(MPI_Ibcast(buffer, mpiCount(count, kind, site), mpiType(type), root, comm_, &request),
        kind, site, "MPI_Ibcast");
  wait(request, deadline, kind, site);
}

void MpiCommunicator::doBarrier(const CallSite &site) {
  constexpr CollectiveKind kind = CollectiveKind::Barrier;
  Deadline deadline(options().timeoutSeconds);
  MPI_Request request;
  check(MPI_Ibarrier(comm_, &request), kind, site, "MPI_Ibarrier");
  wait(request, deadline, kind, site);
}

namespace {

/// The largest tag this MPI takes (at least 32767 by the standard).
int tagLimit(MPI_Comm comm) {
  int *limit = nullptr;
  int found = 0;
  MPI_Comm_get_attr(comm, MPI_TAG_UB, &limit, &found);
  return found && limit ? *limit : 32767;
}

} // namespace

void MpiCommunicator::checkTag(int tag, CollectiveKind kind, const CallSite &site) {
  if (tag > tagLimit(comm_))
    fail(kind, site,
         "tag " + std::to_string(tag) + " is above MPI's limit " + std::to_string(tagLimit(comm_)));
}

void MpiCommunicator::doSend(const void *buffer, std::size_t count, DType type, int peer,
                             int tag, const CallSite &site) {
  constexpr CollectiveKind kind = CollectiveKind::Send;
  checkTag(tag, kind, site);
  // Sent from a copy, so that the program may reuse its buffer at once.
  PendingSend &sent = pendingSends_.emplace_back();
  const auto *bytes = static_cast<const char *>(buffer);
  sent.bytes.assign(bytes, bytes + count * dtypeSize(type));
  check(MPI_Isend(sent.bytes.data(), mpiCount(count, kind, site), mpiType(type), peer, tag, comm_,
                  &sent.request),
        kind, site, "MPI_Isend");
  while (!pendingSends_.empty()) {
    int taken = 0;
    check(MPI_Test(&pendingSends_.front().request, &taken, MPI_STATUS_IGNORE), kind, site,
          "MPI_Test");
    if (!taken)
      break;
    pendingSends_.pop_front();
  }
}

void MpiCommunicator::doCompleteSends(const CallSite &site) {
  Deadline deadline(options().timeoutSeconds);
  for (; !pendingSends_.empty(); pendingSends_.pop_front())
    wait(pendingSends_.front().request, deadline, CollectiveKind::Send, site);
}

void MpiCommunicator::doRecv(void *buffer, std::size_t count, DType type, int peer, int tag,
                             const CallSite &site) {
  constexpr CollectiveKind kind = CollectiveKind::Recv;
  checkTag(tag, kind, site);
  Deadline deadline(options().timeoutSeconds);
  const int expected = mpiCount(count, kind, site);
  if (auto message = expectedFrom(peer, tag); message != expected_.end()) {
    if (message->type != type || message->count() != count)
      fail(kind, site,
           "the recv from rank " + std::to_string(peer) + " with tag " + std::to_string(tag) +
               " takes " + std::to_string(count) + " elements of " + dtypeName(type) +
               ", the message expected for it " + std::to_string(message->count()) + " of " +
               dtypeName(message->type));
    complete(*message, deadline, site);
    std::memcpy(buffer, message->bytes.data(), message->bytes.size());
    expected_.erase(message);
    return;
  }
  MPI_Request request;
  MPI_Status status;
  check(MPI_Irecv(buffer, expected, mpiType(type), peer, tag, comm_, &request), kind, site,
        "MPI_Irecv");
  wait(request, deadline, kind, site, &status);
  checkReceived(status, type, expected, peer, tag, site);
}

void MpiCommunicator::checkReceived(const MPI_Status &status, DType type, int expected, int peer,
                                    int tag, const CallSite &site) {
  int received = 0;
  MPI_Get_count(&status, mpiType(type), &received);
  // A longer message is MPI_ERR_TRUNCATE (from MPI_Test); a shorter one
  // arrives silently.
  if (received != expected)
    fail(CollectiveKind::Recv, site,
         "received " + std::to_string(received) + " elements from rank " + std::to_string(peer) +
             " with tag " + std::to_string(tag) + ", expected " + std::to_string(expected));
}

void MpiCommunicator::doExpect(std::size_t count, DType type, int peer, int tag,
                               const CallSite &site) {
  constexpr CollectiveKind kind = CollectiveKind::Recv;
  checkTag(tag, kind, site);
  ExpectedMessage &message = expected_.emplace_back();
  message.peer = peer;
  message.tag = tag;
  message.type = type;
  message.bytes.resize(count * dtypeSize(type));
  check(MPI_Irecv(message.bytes.data(), mpiCount(count, kind, site), mpiType(type), peer, tag,
                  comm_, &message.request),
        kind, site, "MPI_Irecv");
}

std::deque<MpiCommunicator::ExpectedMessage>::iterator MpiCommunicator::expectedFrom(int peer,
                                                                                     int tag) {
  return std::find_if(expected_.begin(), expected_.end(),
                      [&](const ExpectedMessage &m) { return m.peer == peer && m.tag == tag; });
}

void MpiCommunicator::complete(ExpectedMessage &message, const Deadline &deadline,
                               const CallSite &site) {
  if (message.done)
    return;
  wait(message.request, deadline, CollectiveKind::Recv, site, &message.status);
  message.done = true;
  checkReceived(message.status, message.type, static_cast<int>(message.count()), message.peer,
                message.tag, site);
}

bool MpiCommunicator::doAwaitMessage(int peer, int tag, const CallSite &site) {
  constexpr CollectiveKind kind = CollectiveKind::Recv;
  Deadline deadline(options().timeoutSeconds);
  // An expected message has arrived when its receive is complete.
  if (auto message = expectedFrom(peer, tag); message != expected_.end()) {
    complete(*message, deadline, site);
    return true;
  }
  bool arrived = pollUntil(deadline, [&] {
    int found = 0;
    check(MPI_Iprobe(peer, tag, comm_, &found, MPI_STATUS_IGNORE), kind, site, "MPI_Iprobe");
    return found != 0;
  });
  if (!arrived)
    timedOut(kind, site);
  return true;
}

void MpiCommunicator::endJob(int exitCode) { abortJob(exitCode); }

namespace {

/// Counts or offsets as MPI takes them: ints (mpiCount has checked them).
std::vector<int> mpiInts(const std::vector<std::size_t> &values) {
  return std::vector<int>(values.begin(), values.end());
}

} // namespace

void MpiCommunicator::sumOwnChunk(const void *sent, const RankChunks &chunks, DType type, void *sum,
                                  CollectiveKind kind, const CallSite &site,
                                  const Deadline &deadline) {
  std::vector<int> counts = mpiInts(chunks.counts), offsets = mpiInts(chunks.offsets);
  int n = size(), mine = counts[rank()];
  scratch_.resize(static_cast<std::size_t>(n) * mine * dtypeSize(type) + 1);
  // Rank r receives every rank's piece of chunk r, in rank order.
  std::vector<int> pieceCounts(n, mine), pieceOffsets(n);
  for (int r = 0; r < n; ++r)
    pieceOffsets[r] = r * mine;
  MPI_Datatype mpi = mpiType(type);
  MPI_Request request;
  check(MPI_Ialltoallv(sent, counts.data(), offsets.data(), mpi, scratch_.data(),
                       pieceCounts.data(), pieceOffsets.data(), mpi, comm_, &request),
        kind, site, "MPI_Ialltoallv");
  wait(request, deadline, kind, site);
  sumInRankOrder(scratch_.data(), n, mine, type, sum, type);
}

void MpiCommunicator::doAllReduceSumInRankOrder(void *buffer, std::size_t count, DType type,
                                                const CallSite &site) {
  constexpr CollectiveKind kind = CollectiveKind::AllReduce;
  Deadline deadline(options().timeoutSeconds);
  mpiCount(count, kind, site);
  // mpiCount has checked that the whole count fits an int, so every chunk's
  // count and offset does.
  RankChunks chunks(count, size());
  char *myChunk = static_cast<char *>(buffer) + chunks.offsets[rank()] * dtypeSize(type);
  sumOwnChunk(buffer, chunks, type, myChunk, kind, site, deadline);
  std::vector<int> counts = mpiInts(chunks.counts), offsets = mpiInts(chunks.offsets);
  MPI_Request request;
  check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer, counts.data(), offsets.data(),
                        mpiType(type), comm_, &request),
        kind, site, "MPI_Iallgatherv");
  wait(request, deadline, kind, site);
}

void MpiCommunicator::doReduceScatterSumUneven(const void *sent, const RankChunks &chunks,
                                               void *received, DType type, const CallSite &site) {
  constexpr CollectiveKind kind = CollectiveKind::ReduceScatter;
  Deadline deadline(options().timeoutSeconds);
  // Every count and offset fits an int where the furthest end does.
  mpiCount(chunks.end(), kind, site);
  sumOwnChunk(sent, chunks, type, received, kind, site, deadline);
}

void MpiCommunicator::doReduceScatterSumInRankOrder(const void *sent, void *received,
                                                    std::size_t countPerRank, DType type,
                                                    DType sumType, const CallSite &site) {
  constexpr CollectiveKind kind = CollectiveKind::ReduceScatter;
  Deadline deadline(options().timeoutSeconds);
  int count = mpiCount(countPerRank, kind, site);
  int n = size();
  scratch_.resize(static_cast<std::size_t>(n) * countPerRank * dtypeSize(type) + 1);
  MPI_Request request;
  check(MPI_Ialltoall(sent, count, mpiType(type), scratch_.data(), count, mpiType(type), comm_,
                      &request),
        kind, site, "MPI_Ialltoall");
  wait(request, deadline, kind, site);
  sumInRankOrder(scratch_.data(), n, countPerRank, type, received, sumType);
}

} // namespace cleave::rt::comm
