//===- CommTest.cpp - communicators against closed-form sums --------------===//
//
// Runs under mpirun with any number of ranks (test/runtime/comm-mpi.test runs
// 1, 2 and 4). Inputs depend on the rank so that every expected value has a
// closed form, or can be recomputed by any rank for every other rank.
//
//===----------------------------------------------------------------------===//

#include "runtime/LowPrecision.h"
#include "runtime/Mesh.h"
#include "runtime/comm/BFloat16SumCases.h"
#include "runtime/comm/BackgroundCollectives.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/HostStaged.h"
#include "runtime/comm/Mpi.h"
#include "runtime/comm/MpiTest.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace cleave::rt;
using namespace cleave::rt::comm;

namespace {

/// Short enough that a test whose ranks disagree ends instead of hanging.
CommOptions testOptions(bool deterministic = false) {
  CommOptions options;
  options.timeoutSeconds = 60;
  options.deterministic = deterministic;
  return options;
}

std::unique_ptr<MpiCommunicator> world(bool deterministic = false) {
  return MpiCommunicator::world(testSession(), testOptions(deterministic));
}

/// An element count that no group size up to 8 divides (uneven chunks).
constexpr std::size_t kCount = 1003;

template <typename T> constexpr DType dtypeOf();
template <> constexpr DType dtypeOf<float>() { return DType::F32; }
template <> constexpr DType dtypeOf<double>() { return DType::F64; }
template <> constexpr DType dtypeOf<int32_t>() { return DType::I32; }
template <> constexpr DType dtypeOf<int64_t>() { return DType::I64; }

uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Rank `rank`'s element `i` for the deterministic tests: signs and
/// magnitudes (2^-12 .. 2^12) vary, so the order of a sum changes its bits.
template <typename T> T contribution(int rank, std::size_t i) {
  uint64_t h = mix(static_cast<uint64_t>(rank) * 1000003ull + i);
  double mantissa = static_cast<double>(h % 2000001) / 1000000.0 - 1.0;
  int exponent = static_cast<int>((h >> 32) % 25) - 12;
  return static_cast<T>(std::ldexp(mantissa, exponent));
}

/// ((x0 + x1) + x2) + ... of every rank's contribution to element i.
template <typename T> T sequentialSum(int ranks, std::size_t i) {
  T total = contribution<T>(0, i);
  for (int r = 1; r < ranks; ++r)
    total = total + contribution<T>(r, i);
  return total;
}

template <typename T> T reverseSum(int ranks, std::size_t i) {
  T total = contribution<T>(ranks - 1, i);
  for (int r = ranks - 2; r >= 0; --r)
    total = total + contribution<T>(r, i);
  return total;
}

// --- Mesh -----------------------------------------------------------------

TEST(MeshTest, ParsesAndLaysOutRowMajor) {
  Mesh mesh;
  std::string error;
  ASSERT_TRUE(Mesh::parse("dp=2,tp=3", mesh, error)) << error;
  EXPECT_EQ(mesh.text(), "dp=2,tp=3");
  EXPECT_EQ(mesh.size(), 6);
  EXPECT_EQ(mesh.axisIndex("tp"), 1);
  EXPECT_EQ(mesh.axisIndex("pp"), -1);
  // The last axis fastest: rank 4 = dp 1, tp 1.
  EXPECT_EQ(mesh.coordinates(4), (std::vector<int>{1, 1}));
  EXPECT_EQ(mesh.coordinates(2), (std::vector<int>{0, 2}));
  EXPECT_EQ(Mesh{}.size(), 1);
}

TEST(MeshTest, RefusesBadText) {
  Mesh mesh;
  std::string error;
  EXPECT_FALSE(Mesh::parse("", mesh, error));
  EXPECT_FALSE(Mesh::parse("dp", mesh, error));
  EXPECT_FALSE(Mesh::parse("dp=0", mesh, error));
  EXPECT_FALSE(Mesh::parse("dp=2,dp=2", mesh, error));
  EXPECT_EQ(error, "axis 'dp' is named twice");
  EXPECT_FALSE(Mesh::parse("d-p=2", mesh, error));
  EXPECT_FALSE(Mesh::parse("dp=x", mesh, error));
  EXPECT_EQ(error, "axis 'dp' has size 'x': expected a whole number >= 1");
}

TEST(MeshTest, GroupsOfA2x2Mesh) {
  Mesh mesh{{"dp", "tp"}, {2, 2}};
  int dp = mesh.axisIndex("dp"), tp = mesh.axisIndex("tp");
  // tp groups {0, 1} and {2, 3}; dp groups {0, 2} and {1, 3}.
  int tpGroup[4] = {0, 0, 1, 1}, tpIndex[4] = {0, 1, 0, 1};
  int dpGroup[4] = {0, 1, 0, 1}, dpIndex[4] = {0, 0, 1, 1};
  for (int rank = 0; rank < 4; ++rank) {
    GroupPlace inTp = groupPlace(mesh, rank, {tp});
    GroupPlace inDp = groupPlace(mesh, rank, {dp});
    EXPECT_EQ(inTp.group, tpGroup[rank]) << rank;
    EXPECT_EQ(inTp.index, tpIndex[rank]) << rank;
    EXPECT_EQ(inTp.size, 2);
    EXPECT_EQ(inDp.group, dpGroup[rank]) << rank;
    EXPECT_EQ(inDp.index, dpIndex[rank]) << rank;
    GroupPlace inBoth = groupPlace(mesh, rank, {dp, tp});
    EXPECT_EQ(inBoth.group, 0);
    EXPECT_EQ(inBoth.index, rank);
    EXPECT_EQ(inBoth.size, 4);
    // Listed the other way round, the group is numbered tp-major.
    EXPECT_EQ(groupPlace(mesh, rank, {tp, dp}).index, tpIndex[rank] * 2 + dpIndex[rank]);
  }
}

// --- Byte counts ----------------------------------------------------------

TEST(RingBytesTest, Formulas) {
  EXPECT_EQ(ringBytesSent(CollectiveKind::AllReduce, 4000, 1), 0u);
  EXPECT_EQ(ringBytesSent(CollectiveKind::AllReduce, 4000, 2), 4000u);  // 2·1/2
  EXPECT_EQ(ringBytesSent(CollectiveKind::AllReduce, 4000, 4), 6000u);  // 2·3/4
  EXPECT_EQ(ringBytesSent(CollectiveKind::AllReduce, 4000, 3), 5333u);  // 8000/3, rounded down
  EXPECT_EQ(ringBytesSent(CollectiveKind::AllGather, 4000, 4), 3000u);
  EXPECT_EQ(ringBytesSent(CollectiveKind::ReduceScatter, 4000, 4), 3000u);
  EXPECT_EQ(ringBytesSent(CollectiveKind::Broadcast, 4000, 4), 3000u);
  EXPECT_EQ(ringBytesSent(CollectiveKind::Send, 4000, 4), 4000u);
  EXPECT_EQ(ringBytesSent(CollectiveKind::Recv, 4000, 4), 0u);
  EXPECT_EQ(ringBytesSent(CollectiveKind::Barrier, 4000, 4), 0u);
}

// --- One rank alone -------------------------------------------------------

TEST(LocalCommunicatorTest, CopiesAndCountsNothing) {
  LocalCommunicator local("dp", testOptions());
  EXPECT_EQ(local.rank(), 0);
  EXPECT_EQ(local.size(), 1);
  std::vector<float> buffer{1.5f, -2.0f};
  local.allReduceSum(buffer.data(), buffer.size(), DType::F32, {});
  EXPECT_EQ(buffer, (std::vector<float>{1.5f, -2.0f}));
  std::vector<float> gathered(2);
  local.allGather(buffer.data(), gathered.data(), 2, DType::F32, {});
  EXPECT_EQ(gathered, buffer);
  local.reduceScatterSum(buffer.data(), gathered.data(), 2, DType::F32, {});
  EXPECT_EQ(gathered, buffer);
  local.broadcast(buffer.data(), 2, DType::F32, 0, {});
  local.barrier({});
  EXPECT_EQ(local.bytesSent().total(), 0u);
}

// --- Collectives over the job ---------------------------------------------

/// Rank r contributes (r + 1) * (i + 1): the sum is n(n+1)/2 * (i + 1).
template <typename T> void checkAllReduceSum(bool deterministic) {
  auto comm = world(deterministic);
  int n = comm->size(), r = comm->rank();
  std::vector<T> buffer(kCount);
  for (std::size_t i = 0; i < kCount; ++i)
    buffer[i] = static_cast<T>((r + 1) * static_cast<int64_t>(i + 1));
  comm->allReduceSum(buffer.data(), kCount, dtypeOf<T>(), {0, "buffer"});
  for (std::size_t i = 0; i < kCount; ++i)
    ASSERT_EQ(buffer[i], static_cast<T>(n * (n + 1) / 2 * static_cast<int64_t>(i + 1)))
        << "element " << i;
}

TEST(MpiCommunicatorTest, AllReduceSumF32) { checkAllReduceSum<float>(false); }
TEST(MpiCommunicatorTest, AllReduceSumF64) { checkAllReduceSum<double>(false); }
TEST(MpiCommunicatorTest, AllReduceSumI32) { checkAllReduceSum<int32_t>(false); }
TEST(MpiCommunicatorTest, AllReduceSumI64) { checkAllReduceSum<int64_t>(false); }
TEST(MpiCommunicatorTest, DeterministicAllReduceSumF32) { checkAllReduceSum<float>(true); }
TEST(MpiCommunicatorTest, DeterministicAllReduceSumI64) { checkAllReduceSum<int64_t>(true); }

TEST(MpiCommunicatorTest, AllReduceSumI64BeyondDoublePrecision) {
  auto comm = world();
  int n = comm->size(), r = comm->rank();
  // 2^60 + r: a double would lose the low bits.
  int64_t value = (int64_t{1} << 60) / 8 + r;
  comm->allReduceSum(&value, 1, DType::I64, {});
  EXPECT_EQ(value, n * ((int64_t{1} << 60) / 8) + int64_t{n} * (n - 1) / 2);
}

TEST(MpiCommunicatorTest, AllGather) {
  auto comm = world();
  int n = comm->size(), r = comm->rank();
  // Any type moves, bit for bit: f16 bit patterns as u16.
  std::vector<uint16_t> sent(kCount), received(n * kCount);
  for (std::size_t i = 0; i < kCount; ++i)
    sent[i] = static_cast<uint16_t>(r * 7000 + i);
  comm->allGather(sent.data(), received.data(), kCount, DType::F16, {3, "activations"});
  for (int from = 0; from < n; ++from)
    for (std::size_t i = 0; i < kCount; ++i)
      ASSERT_EQ(received[from * kCount + i], static_cast<uint16_t>(from * 7000 + i))
          << "from rank " << from << ", element " << i;
}

/// Rank r sends (r + 1) * (j + 1) for j < n * count; rank m receives
/// n(n+1)/2 * (m * count + i + 1).
void checkReduceScatter(bool deterministic) {
  auto comm = world(deterministic);
  int n = comm->size(), r = comm->rank();
  std::vector<double> sent(n * kCount), received(kCount);
  for (std::size_t j = 0; j < sent.size(); ++j)
    sent[j] = (r + 1) * static_cast<double>(j + 1);
  comm->reduceScatterSum(sent.data(), received.data(), kCount, DType::F64, {0, "grads"});
  for (std::size_t i = 0; i < kCount; ++i)
    ASSERT_EQ(received[i], n * (n + 1) / 2 * static_cast<double>(r * kCount + i + 1))
        << "element " << i;
}

TEST(MpiCommunicatorTest, ReduceScatterSum) { checkReduceScatter(false); }
TEST(MpiCommunicatorTest, DeterministicReduceScatterSum) { checkReduceScatter(true); }

/// Rank r's element i is (r + 1) * (i % 1000 + 1), exact in f32, as is
/// their sum over the ranks.
float partOf(int rank, std::size_t i) { return (rank + 1) * static_cast<float>(i % 1000 + 1); }
float sumOf(int ranks, std::size_t i) { return ranks * (ranks + 1) / 2 * partOf(0, i); }

// Lengths below the ranks, odd ones and ones past 64 KiB: the algorithm
// OpenMPI takes depends on them (MpiSession::start chooses one).
TEST(MpiCommunicatorTest, AllReduceSumOfEveryLength) {
  auto comm = world();
  int n = comm->size(), r = comm->rank();
  for (std::size_t count : {1, 2, 3, 5, 17, 70001}) {
    std::vector<float> buffer(count);
    for (std::size_t i = 0; i < count; ++i)
      buffer[i] = partOf(r, i);
    comm->allReduceSum(buffer.data(), count, DType::F32, {0, "buffer"});
    for (std::size_t i = 0; i < count; ++i)
      ASSERT_EQ(buffer[i], sumOf(n, i)) << count << " elements, element " << i;
  }
}

TEST(MpiCommunicatorTest, ReduceScatterSumOfEveryLength) {
  auto comm = world();
  int n = comm->size(), r = comm->rank();
  for (std::size_t count : {1, 2, 3, 17, 30001}) {
    std::vector<float> sent(n * count), received(count);
    for (std::size_t j = 0; j < sent.size(); ++j)
      sent[j] = partOf(r, j);
    comm->reduceScatterSum(sent.data(), received.data(), count, DType::F32, {0, "grads"});
    for (std::size_t i = 0; i < count; ++i)
      ASSERT_EQ(received[i], sumOf(n, r * count + i)) << count << " elements, element " << i;
  }
}

// MpiSession::start (the tests' main started one) asks OpenMPI for
// Rabenseifner's all-reduce unless the environment chose one:
// test/runtime/comm-mpi.test also runs these tests with ring's (1), and
// CLEAVE_TEST_EXPECTED_ALGORITHM saying so.
TEST(MpiSessionTest, ChoosesTheAllReduceAlgorithmUnlessTheUserDid) {
  const char *chosen = std::getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm");
  const char *expected = std::getenv("CLEAVE_TEST_EXPECTED_ALGORITHM");
  ASSERT_NE(chosen, nullptr);
  EXPECT_STREQ(chosen, expected ? expected : "3");
}

TEST(MpiCommunicatorTest, BroadcastFromEveryRoot) {
  auto comm = world();
  int n = comm->size(), r = comm->rank();
  for (int root = 0; root < n; ++root) {
    std::vector<int64_t> buffer(kCount);
    for (std::size_t i = 0; i < kCount; ++i)
      buffer[i] = r == root ? root * 100000 + static_cast<int64_t>(i) : -1;
    comm->broadcast(buffer.data(), kCount, DType::I64, root, {});
    for (std::size_t i = 0; i < kCount; ++i)
      ASSERT_EQ(buffer[i], root * 100000 + static_cast<int64_t>(i)) << "root " << root;
  }
}

TEST(MpiCommunicatorTest, Barrier) {
  auto comm = world();
  comm->barrier({1});
  comm->barrier({2});
}

/// Rank 0 sends to 1, which adds its rank and sends to 2, ...: a pipeline.
TEST(MpiCommunicatorTest, SendRecvAlongAChain) {
  auto comm = world();
  int n = comm->size(), r = comm->rank();
  if (n == 1)
    GTEST_SKIP() << "needs two ranks";
  // Larger than MPI's eager limit: the send returns at once all the same
  // (it sends a copy, completeSends waits for it).
  std::vector<float> message(64 * 1024, 0.0f);
  const int tag = 40 + 0;
  if (r > 0) {
    comm->recv(message.data(), message.size(), DType::F32, r - 1, tag, {5, "stage input"});
    for (std::size_t i = 0; i < message.size(); ++i)
      ASSERT_EQ(message[i], static_cast<float>((r - 1) * r / 2 + i % 3)) << i;
  } else {
    for (std::size_t i = 0; i < message.size(); ++i)
      message[i] = static_cast<float>(i % 3);
  }
  for (float &x : message)
    x += r;
  if (r + 1 < n)
    comm->send(message.data(), message.size(), DType::F32, r + 1, tag, {5, "stage output"});
  EXPECT_EQ(comm->bytesSent()[CollectiveKind::Send], r + 1 < n ? message.size() * 4 : 0u);
  EXPECT_EQ(comm->bytesSent()[CollectiveKind::Recv], 0u);
  comm->completeSends({5, "stage output"});
}

/// Messages between ranks 0 and 1 of the world: skipped on one rank, and
/// by the ranks past 1, which take no part.
class RankPairTest : public testing::Test {
protected:
  void SetUp() override {
    if (comm->size() == 1)
      GTEST_SKIP() << "needs two ranks";
    if (comm->rank() > 1)
      GTEST_SKIP() << "ranks 0 and 1 only";
  }
  std::unique_ptr<MpiCommunicator> comm = world();
};

/// Ranks 0 and 1 each send the other a message past the eager limit before
/// either receives: with sends that waited for their receive this would
/// deadlock (a pipeline's 1f1b does it). The sender overwrites its buffer
/// at once; the message is the value sent.
TEST_F(RankPairTest, SendDoesNotWaitForItsReceive) {
  const int r = comm->rank(), peer = 1 - r;
  std::vector<float> out(64 * 1024, static_cast<float>(r + 1)), in(out.size(), 0.0f);
  comm->send(out.data(), out.size(), DType::F32, peer, 7, {3, "activation"});
  std::fill(out.begin(), out.end(), -1.0f);
  comm->recv(in.data(), in.size(), DType::F32, peer, 7, {3, "activation"});
  comm->completeSends({3, "activation"});
  for (float x : in)
    ASSERT_EQ(x, static_cast<float>(peer + 1));
}

// Messages expected before they are sent (a pipeline's next action's,
// expected while the action before it computes): each recv of that peer and
// tag takes the oldest, in the order they were sent, whichever arrives
// first; another tag's recv is not held up by them.
TEST_F(RankPairTest, ExpectedMessagesAreTakenInOrder) {
  std::vector<float> first(1000, 1.0f), second(1000, 2.0f);
  std::vector<int64_t> other(10, 7);
  if (comm->rank() == 0) {
    comm->send(other.data(), other.size(), DType::I64, 1, 6, {1, "other"});
    comm->send(first.data(), first.size(), DType::F32, 1, 5, {1, "activation"});
    comm->send(second.data(), second.size(), DType::F32, 1, 5, {1, "activation"});
    comm->completeSends({1, "activation"});
    return;
  }
  comm->expect(1000, DType::F32, 0, 5, {1, "activation"});
  comm->expect(1000, DType::F32, 0, 5, {1, "activation"});
  std::vector<int64_t> gotOther(10);
  comm->recv(gotOther.data(), gotOther.size(), DType::I64, 0, 6, {1, "other"});
  EXPECT_EQ(gotOther, other);
  std::vector<float> got(1000);
  comm->recv(got.data(), got.size(), DType::F32, 0, 5, {1, "activation"});
  EXPECT_EQ(got, first);
  comm->recv(got.data(), got.size(), DType::F32, 0, 5, {1, "activation"});
  EXPECT_EQ(got, second);
}

TEST(MpiCommunicatorTest, BytesSentFollowTheRingFormula) {
  auto comm = world();
  uint64_t n = comm->size();
  std::vector<float> buffer(1000, 1.0f), gathered(n * 1000);
  comm->allReduceSum(buffer.data(), 1000, DType::F32, {});
  comm->allReduceSum(buffer.data(), 1000, DType::F32, {});
  comm->allGather(buffer.data(), gathered.data(), 1000, DType::F32, {});
  comm->reduceScatterSum(gathered.data(), buffer.data(), 1000, DType::F32, {});
  comm->broadcast(buffer.data(), 1000, DType::F32, 0, {});
  comm->barrier({});
  const BytesSent &sent = comm->bytesSent();
  // Ring all-reduce: 2(n-1)/n of the 4000-byte buffer, twice.
  EXPECT_EQ(sent[CollectiveKind::AllReduce], 2 * (2 * (n - 1) * 4000 / n));
  // All-gather and reduce-scatter: (n-1)/n of the full n * 4000 bytes.
  EXPECT_EQ(sent[CollectiveKind::AllGather], (n - 1) * 4000);
  EXPECT_EQ(sent[CollectiveKind::ReduceScatter], (n - 1) * 4000);
  EXPECT_EQ(sent[CollectiveKind::Broadcast], (n - 1) * 4000 / n);
  EXPECT_EQ(sent[CollectiveKind::Barrier], 0u);
  EXPECT_EQ(sent.total(), 2 * (2 * (n - 1) * 4000 / n) + 2 * (n - 1) * 4000 + (n - 1) * 4000 / n);
}

// --- A device's buffers through the host (HostStagedCommunicator) --------

/// A device whose memory holds every byte inverted, so that a buffer handed
/// to the host communicator without its copy would be summed, sent or
/// gathered wrong. Counts the host staging it lends, the marks of its queued
/// work it makes and the threads that wait for them; the work it has queued
/// (`queued`, writes to its memory) is done when a mark is waited for.
class InvertingDevice final : public DeviceCopies {
public:
  std::shared_ptr<const QueuedWork> markQueuedWork(std::string &) override {
    ++marks;
    return std::make_shared<QueuedWork>();
  }
  std::string awaitQueuedWork(const QueuedWork &, double) override {
    awaitedOn.push_back(std::this_thread::get_id());
    if (queued)
      std::exchange(queued, nullptr)();
    return "";
  }
  void *allocateStaging(std::size_t bytes) override {
    ++staged;
    return new unsigned char[bytes];
  }
  void releaseStaging(void *memory, std::size_t) override {
    --staged;
    delete[] static_cast<unsigned char *>(memory);
  }
  void copyToHost(void *host, const void *device, std::size_t bytes) override {
    invert(host, device, bytes);
  }
  void copyToDevice(void *device, const void *host, std::size_t bytes) override {
    invert(device, host, bytes);
  }
  /// `values` as this device holds them.
  template <typename T> std::vector<T> held(const std::vector<T> &values) {
    std::vector<T> memory(values.size());
    invert(memory.data(), values.data(), values.size() * sizeof(T));
    return memory;
  }
  template <typename T> std::vector<T> read(const std::vector<T> &memory) { return held(memory); }
  int staged = 0;
  int marks = 0;
  std::vector<std::thread::id> awaitedOn;
  std::function<void()> queued;

private:
  static void invert(void *to, const void *from, std::size_t bytes) {
    for (std::size_t i = 0; i < bytes; ++i)
      static_cast<unsigned char *>(to)[i] = ~static_cast<const unsigned char *>(from)[i];
  }
};

TEST(HostStagedCommunicatorTest, CollectivesMoveTheDevicesValues) {
  auto host = world();
  InvertingDevice device;
  {
    HostStagedCommunicator staged(*host, device);
    int n = staged.size(), r = staged.rank();
    std::vector<float> values(kCount);
    for (std::size_t i = 0; i < kCount; ++i)
      values[i] = static_cast<float>(r + 1) * static_cast<float>(i % 7);
    std::vector<float> buffer = device.held(values);
    staged.allReduceSum(buffer.data(), kCount, DType::F32, {1, "loss"});
    std::vector<float> sum = device.read(buffer);
    for (std::size_t i = 0; i < kCount; ++i)
      ASSERT_EQ(sum[i], static_cast<float>(n * (n + 1) / 2) * static_cast<float>(i % 7)) << i;

    std::vector<float> gathered(n * kCount);
    staged.allGather(device.held(values).data(), gathered.data(), kCount, DType::F32, {1});
    std::vector<float> all = device.read(gathered);
    for (int q = 0; q < n; ++q)
      ASSERT_EQ(all[q * kCount + 5], static_cast<float>(q + 1) * 5.0f) << q;

    std::vector<float> part(kCount);
    staged.reduceScatterSum(gathered.data(), part.data(), kCount, DType::F32, {1});
    std::vector<float> scattered = device.read(part);
    // Every rank sent the same gathered buffer: chunk r sums to n times rank r's.
    ASSERT_EQ(scattered[5], static_cast<float>(n) * static_cast<float>(r + 1) * 5.0f);

    std::vector<int64_t> root = device.held(std::vector<int64_t>{r == 0 ? 42 : -1});
    staged.broadcast(root.data(), 1, DType::I64, 0, {1});
    EXPECT_EQ(device.read(root)[0], 42);
    staged.barrier({1});
    EXPECT_EQ(staged.bytesSent()[CollectiveKind::AllReduce],
              ringBytesSent(CollectiveKind::AllReduce, kCount * 4, n));
  }
  EXPECT_EQ(device.staged, 0) << "the staging is released with the communicator";
}

// The background collectives over a staged axis (ranks that share a GPU):
// each runs on the duplicate after waiting, on the collectives' thread, for
// the mark the device made when it was queued, so it reads what the
// device's queued work writes (a call made before the wait would move
// zeros); an original makes none.
TEST(HostStagedCommunicatorTest, DuplicateWaitsForTheDevicesMarksOnItsThread) {
  auto host = world();
  InvertingDevice device;
  HostStagedCommunicator staged(*host, device);
  int n = staged.size(), r = staged.rank();
  EXPECT_EQ(staged.markQueuedWork(CollectiveKind::AllReduce, {}), nullptr);
  std::string error;
  std::unique_ptr<Communicator> duplicate = staged.duplicate(error);
  ASSERT_TRUE(duplicate) << error;
  std::vector<BackgroundCollectives::Axis> axes;
  axes.push_back({0, std::move(duplicate)});
  std::vector<float> buffer = device.held(std::vector<float>(kCount, 0.0f));
  std::vector<float> sent = buffer, gathered(n * kCount);
  device.queued = [&] {
    const std::vector<float> ones =
        device.held(std::vector<float>(kCount, static_cast<float>(r + 1)));
    const std::vector<float> own = device.held(std::vector<float>(kCount, static_cast<float>(r)));
    std::copy(ones.begin(), ones.end(), buffer.begin());
    std::copy(own.begin(), own.end(), sent.begin());
  };
  {
    BackgroundCollectives background(std::move(axes));
    background.start(0, buffer.data(), kCount, DType::F32, DType::F32, 1, "gradients");
    background.startGather(0, sent.data(), gathered.data(), kCount, DType::F32, 1, "parameters");
    background.waitAll();
  }
  EXPECT_EQ(device.read(buffer)[kCount - 1], static_cast<float>(n * (n + 1) / 2));
  std::vector<float> all = device.read(gathered);
  for (int q = 0; q < n; ++q)
    ASSERT_EQ(all[q * kCount + 3], static_cast<float>(q)) << q;
  EXPECT_EQ(device.marks, 2);
  ASSERT_EQ(device.awaitedOn.size(), 2u);
  for (std::thread::id thread : device.awaitedOn)
    EXPECT_NE(thread, std::this_thread::get_id());
}

/// As MpiCommunicatorTest.SendDoesNotWaitForItsReceive, from the device's
/// memory: the crossing sends of a 1f1b pipeline, which NCCL's sends (they
/// wait for their receive) would deadlock.
TEST(HostStagedCommunicatorTest, SendDoesNotWaitForItsReceive) {
  auto host = world();
  InvertingDevice device;
  HostStagedCommunicator staged(*host, device);
  int n = staged.size(), r = staged.rank();
  if (n == 1)
    GTEST_SKIP() << "needs two ranks";
  if (r > 1)
    return;
  const int peer = 1 - r;
  std::vector<float> out = device.held(std::vector<float>(64 * 1024, static_cast<float>(r + 1)));
  std::vector<float> in(out.size());
  staged.send(out.data(), out.size(), DType::F32, peer, 7, {3, "activation"});
  std::fill(out.begin(), out.end(), -1.0f);
  staged.recv(in.data(), in.size(), DType::F32, peer, 7, {3, "activation"});
  staged.completeSends({3, "activation"});
  for (float x : device.read(in))
    ASSERT_EQ(x, static_cast<float>(peer + 1));
}

// --- Sums through bf16 (--grad-reduce-dtype bf16) -------------------------

/// The closed forms of runtime/comm/BFloat16SumCases.h.
/// The sums through bf16 on `comm`, whose buffers lie in `device`'s memory
/// (null: the host's).
void checkBFloat16Sums(Communicator &comm, InvertingDevice *device) {
  int n = comm.size(), r = comm.rank();
  auto held = [&](const std::vector<float> &values) {
    return device ? device->held(values) : values;
  };
  for (const comm::test::BFloat16SumCase &c : comm::test::kBFloat16SumCases) {
    std::vector<float> buffer(kCount), sent(n * kCount);
    for (std::size_t i = 0; i < kCount; ++i)
      buffer[i] = c.part(r, i);
    for (std::size_t j = 0; j < sent.size(); ++j)
      sent[j] = c.part(r, j);
    buffer = held(buffer);
    sent = held(sent);
    std::vector<float> received(kCount);
    comm.allReduceSumAs(buffer.data(), kCount, DType::F32, DType::BF16, {1, "gradients"});
    comm.reduceScatterSumAs(sent.data(), received.data(), kCount, DType::F32, DType::BF16,
                            {1, "gradients"});
    // The device's memory reads back as it holds it (inverting twice).
    buffer = held(buffer);
    received = held(received);
    for (std::size_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(buffer[i], c.expected(n)) << "all-reduce, element " << i;
      ASSERT_EQ(received[i], c.expected(n)) << "reduce-scatter, element " << i;
    }
  }
  // Half the bytes of f32: 2 per element on the wire.
  uint64_t ranks = n;
  EXPECT_EQ(comm.bytesSent()[CollectiveKind::AllReduce],
            2 * (2 * (ranks - 1) * kCount * 2 / ranks));
  EXPECT_EQ(comm.bytesSent()[CollectiveKind::ReduceScatter], 2 * ((ranks - 1) * kCount * 2));
}

TEST(MpiCommunicatorTest, BFloat16SumsRoundEachPartAndTheSumOnce) {
  checkBFloat16Sums(*world(false), nullptr);
}
TEST(MpiCommunicatorTest, DeterministicBFloat16SumsAreTheSame) {
  checkBFloat16Sums(*world(true), nullptr);
}

// Through the host (ranks that share a GPU): the host's sums of copies of
// the device's values, the same bits, counted on the staged axis.
TEST(HostStagedCommunicatorTest, SumsThroughBFloat16AreTheHostsSums) {
  auto host = world();
  InvertingDevice device;
  {
    HostStagedCommunicator staged(*host, device);
    checkBFloat16Sums(staged, &device);
  }
  EXPECT_EQ(device.staged, 0);
}

/// Rank 0 gives 256 a part, the others 1, all exact in bf16: added in f32
/// the sum is 255 + n, kept f32 (rounded to bf16 it would be 256 for n = 2).
void checkWidenedReduceScatter(bool deterministic) {
  auto comm = world(deterministic);
  int n = comm->size(), r = comm->rank();
  std::vector<uint16_t> sent(n * kCount, toBFloat16(r == 0 ? 256.0f : 1.0f).bits);
  std::vector<float> received(kCount);
  comm->reduceScatterSumWidened(sent.data(), received.data(), kCount, {1, "gradients"});
  for (std::size_t i = 0; i < kCount; ++i)
    ASSERT_EQ(received[i], 255.0f + n) << "element " << i;
  // bf16 parts on the wire: 2 bytes an element.
  EXPECT_EQ(comm->bytesSent()[CollectiveKind::ReduceScatter], (n - 1) * kCount * 2);
}

TEST(MpiCommunicatorTest, WidenedReduceScatterSumsBFloat16PartsInF32) {
  checkWidenedReduceScatter(false);
}
TEST(MpiCommunicatorTest, DeterministicWidenedReduceScatterIsTheSame) {
  checkWidenedReduceScatter(true);
}

TEST(LocalCommunicatorTest, WidenedReduceScatterOfOneRankIsItsPartWidened) {
  LocalCommunicator alone("dp");
  std::vector<uint16_t> sent{toBFloat16(1.5f).bits, toBFloat16(-3.0f).bits};
  std::vector<float> received(2);
  alone.reduceScatterSumWidened(sent.data(), received.data(), 2, {});
  EXPECT_EQ(received, (std::vector<float>{1.5f, -3.0f}));
}

TEST(LocalCommunicatorTest, BFloat16SumOfOneRankIsItsRoundedPart) {
  LocalCommunicator alone("dp");
  std::vector<float> buffer{1.0f + std::ldexp(1.0f, -9), 3.0f};
  alone.allReduceSumAs(buffer.data(), 2, DType::F32, DType::BF16, {});
  EXPECT_EQ(buffer[0], 1.0f);
  EXPECT_EQ(buffer[1], 3.0f);
}

// --- Deterministic mode ---------------------------------------------------

template <typename T> void checkSequentialAllReduce() {
  auto comm = world(/*deterministic=*/true);
  int n = comm->size(), r = comm->rank();
  std::vector<T> buffer(kCount), expected(kCount);
  bool orderMatters = false;
  for (std::size_t i = 0; i < kCount; ++i) {
    buffer[i] = contribution<T>(r, i);
    expected[i] = sequentialSum<T>(n, i);
    T reverse = reverseSum<T>(n, i);
    orderMatters |= std::memcmp(&reverse, &expected[i], sizeof(T)) != 0;
  }
  comm->allReduceSum(buffer.data(), kCount, dtypeOf<T>(), {0});
  for (std::size_t i = 0; i < kCount; ++i)
    ASSERT_EQ(std::memcmp(&buffer[i], &expected[i], sizeof(T)), 0)
        << "element " << i << ": " << buffer[i] << " != " << expected[i];
  // With three ranks or more the inputs are such that another order gives
  // other bits, so the comparison above can tell orders apart.
  if (n >= 3)
    EXPECT_TRUE(orderMatters);
  // The same bytes as a ring all-reduce.
  EXPECT_EQ(comm->bytesSent()[CollectiveKind::AllReduce],
            2 * (uint64_t(n) - 1) * kCount * sizeof(T) / n);
}

TEST(DeterministicTest, AllReduceF32IsTheSequentialSumBitForBit) {
  checkSequentialAllReduce<float>();
}
TEST(DeterministicTest, AllReduceF64IsTheSequentialSumBitForBit) {
  checkSequentialAllReduce<double>();
}

TEST(DeterministicTest, ReduceScatterIsTheSequentialSumBitForBit) {
  auto comm = world(/*deterministic=*/true);
  int n = comm->size(), r = comm->rank();
  std::vector<float> sent(n * kCount), received(kCount);
  for (std::size_t j = 0; j < sent.size(); ++j)
    sent[j] = contribution<float>(r, j);
  comm->reduceScatterSum(sent.data(), received.data(), kCount, DType::F32, {0});
  for (std::size_t i = 0; i < kCount; ++i) {
    float expected = sequentialSum<float>(n, r * kCount + i);
    ASSERT_EQ(std::memcmp(&received[i], &expected, sizeof expected), 0) << "element " << i;
  }
}

TEST(RankChunksTest, OwnedChunksAreTheSpansPartInEachSlice) {
  // Elements [5, 15) of a buffer of slices of 8: rank 0 owns [5, 8), rank 1
  // [8, 15), rank 2 none of it.
  RankChunks chunks = RankChunks::owned(5, 10, 8, 3);
  EXPECT_EQ(chunks.counts, (std::vector<std::size_t>{3, 7, 0}));
  EXPECT_EQ(chunks.offsets, (std::vector<std::size_t>{0, 3, 10}));
  EXPECT_EQ(chunks.end(), 10u);
}

// ZeRO 1's buckets: a span of a flat buffer whose slices the ranks own,
// summed in place into each owner's part in rank order (in either mode),
// the rest of the span left as it was.
void checkOwnedReduceScatter(bool deterministic) {
  auto comm = world(deterministic);
  const int n = comm->size(), r = comm->rank();
  const std::size_t slice = kCount, first = slice / 2, count = slice * (n - 1) + 7;
  std::vector<float> flat(slice * n);
  for (std::size_t j = 0; j < flat.size(); ++j)
    flat[j] = contribution<float>(r, j);
  const std::vector<float> before = flat;
  RankChunks chunks = RankChunks::owned(first, count, slice, n);
  float *span = flat.data() + first;
  comm->reduceScatterSumUneven(span, chunks, span + chunks.offsets[r], DType::F32, {0, "bucket"});
  const std::size_t low = first + chunks.offsets[r], high = low + chunks.counts[r];
  ASSERT_EQ(low, std::max(first, r * slice));
  for (std::size_t j = 0; j < flat.size(); ++j) {
    float expected = j >= low && j < high ? sequentialSum<float>(n, j) : before[j];
    ASSERT_EQ(std::memcmp(&flat[j], &expected, sizeof expected), 0) << "element " << j;
  }
  // The ring's bytes of a reduce-scatter of the span.
  EXPECT_EQ(comm->bytesSent()[CollectiveKind::ReduceScatter],
            ringBytesSent(CollectiveKind::ReduceScatter, count * sizeof(float), n));
}

TEST(MpiCommunicatorTest, OwnedReduceScatterSumsInRankOrder) { checkOwnedReduceScatter(false); }
TEST(DeterministicTest, OwnedReduceScatterSumsInRankOrder) { checkOwnedReduceScatter(true); }

TEST(DeterministicTest, KeepsTheSignOfZero) {
  auto comm = world(/*deterministic=*/true);
  float buffer[3] = {-0.0f, -0.0f, 0.0f};
  comm->allReduceSum(buffer, 3, DType::F32, {});
  EXPECT_TRUE(std::signbit(buffer[0]));
  EXPECT_TRUE(std::signbit(buffer[1]));
  EXPECT_FALSE(std::signbit(buffer[2]));
}

TEST(DeterministicTest, FewerElementsThanRanks) {
  auto comm = world(/*deterministic=*/true);
  int n = comm->size();
  double value = comm->rank() + 0.5;
  comm->allReduceSum(&value, 1, DType::F64, {});
  EXPECT_EQ(value, n * (n - 1) / 2.0 + 0.5 * n);
}

// --- The background collectives -------------------------------------------

/// Background collectives over a duplicate of `comm` (mesh axis 0), as the
/// driver makes them; null, with the test failed, when it cannot duplicate.
std::unique_ptr<BackgroundCollectives> backgroundOver(Communicator &comm) {
  std::string error;
  std::unique_ptr<Communicator> group = comm.duplicate(error);
  if (!group) {
    ADD_FAILURE() << error;
    return nullptr;
  }
  std::vector<BackgroundCollectives::Axis> axes;
  axes.push_back({/*meshAxis=*/0, std::move(group)});
  return std::make_unique<BackgroundCollectives>(std::move(axes));
}

// Sums queued on the thread, while the main thread makes a call of its own on
// the original communicator, come out as the deterministic mode's sequential
// sums bit for bit, and the report lists them in order with the ring's bytes.
TEST(BackgroundCollectivesTest, SumsBesideTheMainThreadsCalls) {
  auto comm = world(/*deterministic=*/true);
  const int n = comm->size(), r = comm->rank();
  std::string error;
  std::unique_ptr<Communicator> group = comm->duplicate(error);
  ASSERT_TRUE(group) << error;
  EXPECT_EQ(group->axis(), comm->axis());
  EXPECT_EQ(group->size(), n);
  std::vector<BackgroundCollectives::Axis> axes;
  axes.push_back({/*meshAxis=*/0, std::move(group)});
  BackgroundCollectives background(std::move(axes));
  const std::vector<std::size_t> counts = {kCount, 7, 3 * kCount};
  std::vector<std::vector<float>> buffers;
  std::size_t first = 0;
  for (std::size_t count : counts) {
    buffers.emplace_back(count);
    for (std::size_t i = 0; i < count; ++i)
      buffers.back()[i] = contribution<float>(r, first + i);
    first += count;
  }
  for (size_t b = 0; b < buffers.size(); ++b)
    background.start(0, buffers[b].data(), counts[b], DType::F32, DType::F32, 5,
                     "bucket " + std::to_string(b));
  double mine = r + 1;
  comm->allReduceSum(&mine, 1, DType::F64, {5, "beside"});
  EXPECT_EQ(mine, n * (n + 1) / 2.0);
  background.waitAll();

  first = 0;
  for (size_t b = 0; b < buffers.size(); ++b) {
    for (std::size_t i = 0; i < counts[b]; ++i) {
      float expected = sequentialSum<float>(n, first + i);
      ASSERT_EQ(std::memcmp(&buffers[b][i], &expected, sizeof expected), 0)
          << "bucket " << b << " element " << i;
    }
    first += counts[b];
  }
  BackgroundCollectives::Report report = background.takeReport();
  ASSERT_EQ(report.done.size(), counts.size());
  for (size_t b = 0; b < counts.size(); ++b) {
    const BackgroundCollectives::Finished &sum = report.done[b];
    EXPECT_EQ(sum.what, "bucket " + std::to_string(b));
    EXPECT_EQ(sum.step, 5);
    EXPECT_EQ(sum.bufferBytes, counts[b] * sizeof(float));
    EXPECT_EQ(sum.bytesSent, ringBytesSent(CollectiveKind::AllReduce, sum.bufferBytes, n));
    EXPECT_LE(sum.begin, sum.end);
  }
  ASSERT_EQ(report.waits.size(), 1u);
  EXPECT_EQ(report.waits[0].kind, CollectiveKind::AllReduce);
  EXPECT_LE(report.waits[0].begin, report.waits[0].end);
  // Taken: the next report starts empty.
  EXPECT_TRUE(background.takeReport().done.empty());
  // The thread's bytes are its communicator's, not the original's.
  EXPECT_EQ(comm->bytesSent()[CollectiveKind::AllReduce],
            ringBytesSent(CollectiveKind::AllReduce, sizeof(double), n));
}

// A wait for any byte of a queued sum's buffer (an accumulator inside a
// bucket) returns once that sum is done: the bucket holds the ranks' sums.
TEST(BackgroundCollectivesTest, WaitForAByteWaitsForTheSumThatHoldsIt) {
  auto comm = world(/*deterministic=*/true);
  const int n = comm->size(), r = comm->rank();
  std::unique_ptr<BackgroundCollectives> background = backgroundOver(*comm);
  ASSERT_TRUE(background);
  std::vector<float> first(kCount), bucket(16 * kCount);
  for (std::size_t i = 0; i < first.size(); ++i)
    first[i] = contribution<float>(r, i);
  for (std::size_t i = 0; i < bucket.size(); ++i)
    bucket[i] = contribution<float>(r, kCount + i);
  background->start(0, first.data(), first.size(), DType::F32, DType::F32, 1, "first");
  background->start(0, bucket.data(), bucket.size(), DType::F32, DType::F32, 1, "bucket");
  background->waitFor(CollectiveKind::AllReduce, bucket.data() + 5 * kCount);
  for (std::size_t i = 0; i < bucket.size(); ++i) {
    float expected = sequentialSum<float>(n, kCount + i);
    ASSERT_EQ(std::memcmp(&bucket[i], &expected, sizeof expected), 0) << "element " << i;
  }
  background->waitAll();
  EXPECT_EQ(background->takeReport().waits.size(), 2u);
}

// Gathers and a reduce-scatter queued behind a sum, while the main thread
// makes a call of its own: waiting for one leaves the next queued or
// running; each gather's destination holds every rank's part in rank order,
// the reduce-scatter's this rank's part of the sum (whole numbers: exact in
// any order).
TEST(BackgroundCollectivesTest, GathersAndReduceScattersWaitedForOneByOne) {
  auto comm = world(/*deterministic=*/false);
  const int n = comm->size(), r = comm->rank();
  std::unique_ptr<BackgroundCollectives> background = backgroundOver(*comm);
  ASSERT_TRUE(background);
  const std::vector<std::size_t> perRank = {kCount, 5};
  std::vector<std::vector<float>> parts, gathered;
  for (std::size_t count : perRank) {
    parts.emplace_back(count);
    for (std::size_t i = 0; i < count; ++i)
      parts.back()[i] = static_cast<float>(1000 * r + i);
    gathered.emplace_back(count * n, -1.0f);
  }
  float sum = 1.0f;
  background->start(0, &sum, 1, DType::F32, DType::F32, 3, "loss");
  for (size_t g = 0; g < perRank.size(); ++g)
    background->startGather(0, parts[g].data(), gathered[g].data(), perRank[g], DType::F32, 3,
                            "parameters");
  std::vector<float> whole(kCount * n), mine(kCount, -1.0f);
  for (std::size_t i = 0; i < whole.size(); ++i)
    whole[i] = static_cast<float>(r + 1) * static_cast<float>(i % 97);
  background->startReduceScatter(0, whole.data(), mine.data(), kCount, DType::F32, DType::F32, 3,
                                 "gradients");
  double beside = r + 1;
  comm->allReduceSum(&beside, 1, DType::F64, {3, "beside"});
  EXPECT_EQ(beside, n * (n + 1) / 2.0);
  background->waitFor(CollectiveKind::ReduceScatter, mine.data());
  for (std::size_t i = 0; i < kCount; ++i)
    ASSERT_EQ(mine[i],
              static_cast<float>(n * (n + 1) / 2) * static_cast<float>((r * kCount + i) % 97))
        << "reduce-scatter element " << i;
  for (size_t g = 0; g < perRank.size(); ++g) {
    background->waitFor(CollectiveKind::AllGather, gathered[g].data());
    for (int rank = 0; rank < n; ++rank)
      for (std::size_t i = 0; i < perRank[g]; ++i)
        ASSERT_EQ(gathered[g][rank * perRank[g] + i], static_cast<float>(1000 * rank + i))
            << "gather " << g << " rank " << rank << " element " << i;
  }
  // In queue order, the sum before the gathers, so it is done too.
  EXPECT_EQ(sum, static_cast<float>(n));
  BackgroundCollectives::Report report = background->takeReport();
  ASSERT_EQ(report.done.size(), 4u);
  EXPECT_EQ(report.done[0].kind, CollectiveKind::AllReduce);
  for (size_t g = 0; g < perRank.size(); ++g) {
    const BackgroundCollectives::Finished &done = report.done[1 + g];
    EXPECT_EQ(done.kind, CollectiveKind::AllGather);
    EXPECT_EQ(done.bufferBytes, perRank[g] * n * sizeof(float));
    EXPECT_EQ(done.bytesSent, ringBytesSent(CollectiveKind::AllGather, done.bufferBytes, n));
  }
  const BackgroundCollectives::Finished &scattered = report.done[3];
  EXPECT_EQ(scattered.kind, CollectiveKind::ReduceScatter);
  EXPECT_EQ(scattered.bufferBytes, whole.size() * sizeof(float));
  EXPECT_EQ(scattered.bytesSent,
            ringBytesSent(CollectiveKind::ReduceScatter, scattered.bufferBytes, n));
  ASSERT_EQ(report.waits.size(), 1 + perRank.size());
  EXPECT_EQ(report.waits[0].kind, CollectiveKind::ReduceScatter);
  for (size_t g = 0; g < perRank.size(); ++g)
    EXPECT_EQ(report.waits[1 + g].kind, CollectiveKind::AllGather);
}

// A wait for a whole flat buffer waits for every uneven reduce-scatter of
// a span of it.
TEST(BackgroundCollectivesTest, AWaitForABufferWaitsForEachSpanOfIt) {
  auto comm = world(/*deterministic=*/false);
  const int n = comm->size(), r = comm->rank();
  std::unique_ptr<BackgroundCollectives> background = backgroundOver(*comm);
  ASSERT_TRUE(background);
  const std::size_t slice = 64;
  std::vector<float> flat(slice * n);
  for (std::size_t j = 0; j < flat.size(); ++j)
    flat[j] = static_cast<float>(r + 1) * static_cast<float>(j);
  // The last layers' span first, as a backward finishes them.
  const std::size_t cut = flat.size() / 3;
  background->startReduceScatterUneven(0, flat.data() + cut,
                                       RankChunks::owned(cut, flat.size() - cut, slice, n),
                                       DType::F32, 3, "gradients");
  background->startReduceScatterUneven(0, flat.data(), RankChunks::owned(0, cut, slice, n),
                                       DType::F32, 3, "gradients");
  background->waitFor(CollectiveKind::ReduceScatter, flat.data(), flat.size() * sizeof(float));
  for (std::size_t j = r * slice; j < (r + 1) * slice; ++j)
    ASSERT_EQ(flat[j], static_cast<float>(n * (n + 1) / 2) * static_cast<float>(j))
        << "element " << j;
  BackgroundCollectives::Report report = background->takeReport();
  ASSERT_EQ(report.done.size(), 2u);
  EXPECT_EQ(report.done[0].bufferBytes, (flat.size() - cut) * sizeof(float));
  EXPECT_EQ(report.done[1].bufferBytes, cut * sizeof(float));
  EXPECT_EQ(report.waits.size(), 1u);
}

TEST(BackgroundCollectivesTest, ARankAloneSumsNothing) {
  LocalCommunicator local("dp");
  std::string error;
  std::vector<BackgroundCollectives::Axis> axes;
  axes.push_back({0, local.duplicate(error)});
  BackgroundCollectives background(std::move(axes));
  float buffer[2] = {1.5f, -2.0f};
  background.start(0, buffer, 2, DType::F32, DType::F32, 1, "gradients");
  background.waitAll();
  EXPECT_EQ(buffer[0], 1.5f);
  EXPECT_EQ(buffer[1], -2.0f);
  EXPECT_EQ(background.takeReport().done.size(), 1u);
}

// On a 2 x 2 mesh one thread sums over both axes in the order queued (each
// on its axis's duplicate, beside the main thread's call on the original
// tp group): each buffer holds its group's sum, the report names each
// sum's axis, and each axis's duplicate counts its own bytes.
TEST(BackgroundCollectivesTest, SumsOverTwoAxesInOneOrder) {
  auto comm = world();
  if (comm->size() != 4)
    GTEST_SKIP() << "needs four ranks";
  const int r = comm->rank();
  Mesh mesh{{"dp", "tp"}, {2, 2}};
  std::string error;
  auto dp = comm->split(mesh, {"dp"}, error);
  auto tp = comm->split(mesh, {"tp"}, error);
  ASSERT_TRUE(dp && tp) << error;
  std::vector<BackgroundCollectives::Axis> axes;
  axes.push_back({0, dp->duplicate(error)});
  axes.push_back({1, tp->duplicate(error)});
  ASSERT_TRUE(axes[0].group && axes[1].group) << error;
  BackgroundCollectives background(std::move(axes));
  EXPECT_EQ(background.group(1)->axis(), "tp");
  EXPECT_EQ(background.group(2), nullptr);
  // tp groups {0, 1} and {2, 3}, dp groups {0, 2} and {1, 3}.
  std::vector<float> first(kCount, static_cast<float>(r)), second(7, static_cast<float>(r));
  std::vector<float> third(3, static_cast<float>(10 * r));
  background.start(1, first.data(), first.size(), DType::F32, DType::F32, 2, "tp first");
  background.start(0, second.data(), second.size(), DType::F32, DType::F32, 2, "dp");
  background.start(1, third.data(), third.size(), DType::F32, DType::F32, 2, "tp second");
  int64_t beside = r;
  tp->allReduceSum(&beside, 1, DType::I64, {2, "beside"});
  EXPECT_EQ(beside, r / 2 == 0 ? 1 : 5);
  background.waitFor(CollectiveKind::AllReduce, third.data());
  const float tpSum = r / 2 == 0 ? 1.0f : 5.0f, dpSum = r % 2 == 0 ? 2.0f : 4.0f;
  for (float v : first)
    ASSERT_EQ(v, tpSum);
  for (float v : second)
    ASSERT_EQ(v, dpSum);
  for (float v : third)
    ASSERT_EQ(v, 10 * tpSum);
  BackgroundCollectives::Report report = background.takeReport();
  ASSERT_EQ(report.done.size(), 3u);
  EXPECT_EQ(report.done[0].meshAxis, 1);
  EXPECT_EQ(report.done[1].meshAxis, 0);
  EXPECT_EQ(report.done[2].meshAxis, 1);
  EXPECT_EQ(report.done[1].what, "dp");
  EXPECT_EQ(background.group(0)->bytesSent()[CollectiveKind::AllReduce],
            ringBytesSent(CollectiveKind::AllReduce, 7 * sizeof(float), 2));
  EXPECT_EQ(background.group(1)->bytesSent()[CollectiveKind::AllReduce],
            ringBytesSent(CollectiveKind::AllReduce, kCount * sizeof(float), 2) +
                ringBytesSent(CollectiveKind::AllReduce, 3 * sizeof(float), 2));
}

// --- Splitting per mesh axis ----------------------------------------------

TEST(SplitTest, A2x2MeshHasOneGroupPerAxis) {
  auto comm = world();
  if (comm->size() != 4)
    GTEST_SKIP() << "needs four ranks";
  int r = comm->rank();
  Mesh mesh{{"dp", "tp"}, {2, 2}};
  std::string error;
  auto dp = comm->split(mesh, {"dp"}, error);
  auto tp = comm->split(mesh, {"tp"}, error);
  ASSERT_TRUE(dp && tp) << error;
  EXPECT_EQ(dp->axis(), "dp");
  EXPECT_EQ(tp->axis(), "tp");
  EXPECT_EQ(dp->size(), 2);
  EXPECT_EQ(tp->size(), 2);
  EXPECT_EQ(dp->rank(), r / 2);
  EXPECT_EQ(tp->rank(), r % 2);
  EXPECT_EQ(dp->worldRank(), r);
  // Summing the world ranks over a group names its members: tp groups
  // {0, 1} and {2, 3}, dp groups {0, 2} and {1, 3}.
  int64_t tpSum = r, dpSum = r;
  tp->allReduceSum(&tpSum, 1, DType::I64, {0});
  dp->allReduceSum(&dpSum, 1, DType::I64, {0});
  EXPECT_EQ(tpSum, r < 2 ? 0 + 1 : 2 + 3);
  EXPECT_EQ(dpSum, r % 2 == 0 ? 0 + 2 : 1 + 3);
  // Both axes together: the whole job, numbered as the world.
  auto both = comm->split(mesh, {"dp", "tp"}, error);
  ASSERT_TRUE(both) << error;
  EXPECT_EQ(both->axis(), "dp,tp");
  EXPECT_EQ(both->rank(), r);
  EXPECT_EQ(both->size(), 4);
  // Each group counts its own bytes: 2(n-1)/n of 8 bytes with n = 2.
  EXPECT_EQ(tp->bytesSent()[CollectiveKind::AllReduce], 8u);
  EXPECT_EQ(comm->bytesSent().total(), 0u);
}

TEST(SplitTest, ALineIsTheWholeJob) {
  auto comm = world();
  std::string error;
  auto dp = comm->split(Mesh::line("dp", comm->size()), {"dp"}, error);
  ASSERT_TRUE(dp) << error;
  EXPECT_EQ(dp->rank(), comm->rank());
  EXPECT_EQ(dp->size(), comm->size());
}

TEST(SplitTest, RefusesAMeshOfAnotherSizeOrAxis) {
  auto comm = world();
  std::string error;
  int n = comm->size();
  EXPECT_FALSE(comm->split(Mesh::line("dp", n + 1), {"dp"}, error));
  EXPECT_EQ(error, "the mesh dp=" + std::to_string(n + 1) + " has " + std::to_string(n + 1) +
                       " ranks, the group 'world' " + std::to_string(n));
  EXPECT_FALSE(comm->split(Mesh::line("dp", n), {"tp"}, error));
  EXPECT_EQ(error, "the mesh dp=" + std::to_string(n) + " has no axis 'tp'");
}

} // namespace
