//===- NcclTest.cpp - the NCCL communicator on device buffers ------------===//
//
// Under mpirun with one GPU per rank (rank r takes device r). Without enough
// GPUs every test reports itself skipped. The expected values are the closed
// forms of CommTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Nccl.h"
#include "runtime/LowPrecision.h"
#include "runtime/comm/BFloat16SumCases.h"
#include "runtime/comm/BackgroundCollectives.h"
#include "runtime/comm/Mpi.h"
#include "runtime/comm/MpiTest.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace cleave::rt;
using namespace cleave::rt::comm;

namespace {

constexpr std::size_t kCount = 1003;

/// A device buffer of `count` T, freed on scope exit.
template <typename T> class DeviceBuffer {
public:
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    cudaMalloc(&data_, count * sizeof(T) + 1);
  }
  ~DeviceBuffer() { cudaFree(data_); }
  T *get() { return data_; }
  void upload(const std::vector<T> &host) {
    cudaMemcpy(data_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice);
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost);
    return host;
  }

private:
  T *data_ = nullptr;
  std::size_t count_;
};

/// The world over MPI and over NCCL, on this rank's GPU and a stream of its
/// own; skips the test when the ranks outnumber the GPUs.
class NcclTest : public testing::TestWithParam<bool> {
protected:
  void SetUp() override {
    CommOptions options;
    options.timeoutSeconds = 60;
    options.deterministic = GetParam();
    host_ = MpiCommunicator::world(testSession(), options);
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess)
      devices = 0;
    // Every rank decides alike, so that none creates NCCL alone.
    int64_t enough = devices > host_->rank() ? 1 : 0;
    host_->allReduceSum(&enough, 1, DType::I64, {});
    if (enough != host_->size())
      GTEST_SKIP() << "needs one GPU per rank (" << devices << " here)";
    ASSERT_EQ(cudaSetDevice(host_->rank()), cudaSuccess);
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
    nccl_ = NcclCommunicator::create(*host_, stream_);
  }
  void TearDown() override {
    nccl_.reset();
    if (stream_)
      cudaStreamDestroy(stream_);
  }

  std::unique_ptr<MpiCommunicator> host_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<NcclCommunicator> nccl_;
};

TEST_P(NcclTest, AllReduceSum) {
  int n = nccl_->size(), r = nccl_->rank();
  std::vector<float> host(kCount);
  for (std::size_t i = 0; i < kCount; ++i)
    host[i] = static_cast<float>((r + 1) * (i + 1));
  DeviceBuffer<float> buffer(kCount);
  buffer.upload(host);
  nccl_->allReduceSum(buffer.get(), kCount, DType::F32, {0, "grads"});
  std::vector<float> result = buffer.download();
  for (std::size_t i = 0; i < kCount; ++i)
    ASSERT_EQ(result[i], static_cast<float>(n * (n + 1) / 2 * (i + 1))) << i;
  EXPECT_EQ(nccl_->bytesSent()[CollectiveKind::AllReduce],
            2 * uint64_t(n - 1) * kCount * 4 / n);
}

TEST_P(NcclTest, AllGatherReduceScatterBroadcast) {
  int n = nccl_->size(), r = nccl_->rank();
  std::vector<double> mine(kCount);
  for (std::size_t i = 0; i < kCount; ++i)
    mine[i] = r * 10000.0 + i;
  DeviceBuffer<double> sent(kCount), gathered(n * kCount), scattered(kCount);
  sent.upload(mine);
  nccl_->allGather(sent.get(), gathered.get(), kCount, DType::F64, {});
  std::vector<double> all = gathered.download();
  for (int from = 0; from < n; ++from)
    for (std::size_t i = 0; i < kCount; ++i)
      ASSERT_EQ(all[from * kCount + i], from * 10000.0 + i);
  // Every rank sends the gathered buffer: chunk r sums to n times rank r's.
  nccl_->reduceScatterSum(gathered.get(), scattered.get(), kCount, DType::F64, {});
  std::vector<double> chunk = scattered.download();
  for (std::size_t i = 0; i < kCount; ++i)
    ASSERT_EQ(chunk[i], n * (r * 10000.0 + i));
  nccl_->broadcast(sent.get(), kCount, DType::F64, n - 1, {});
  std::vector<double> fromLast = sent.download();
  for (std::size_t i = 0; i < kCount; ++i)
    ASSERT_EQ(fromLast[i], (n - 1) * 10000.0 + i);
  nccl_->barrier({});
}

TEST_P(NcclTest, DeterministicSumIsSequential) {
  if (!GetParam())
    GTEST_SKIP() << "the deterministic mode only";
  int n = nccl_->size(), r = nccl_->rank();
  auto value = [](int rank, std::size_t i) {
    return static_cast<float>((rank % 2 ? -1.0 : 1.0) * (1.0 + i) * (rank == 0 ? 1e7 : 0.37));
  };
  std::vector<float> host(kCount), expected(kCount);
  for (std::size_t i = 0; i < kCount; ++i) {
    host[i] = value(r, i);
    float total = value(0, i);
    for (int k = 1; k < n; ++k)
      total = total + value(k, i);
    expected[i] = total;
  }
  DeviceBuffer<float> buffer(kCount);
  buffer.upload(host);
  nccl_->allReduceSum(buffer.get(), kCount, DType::F32, {});
  std::vector<float> result = buffer.download();
  EXPECT_EQ(std::memcmp(result.data(), expected.data(), kCount * sizeof(float)), 0);
}

// Sums through bf16 on device buffers (--grad-reduce-dtype bf16 on CUDA):
// the closed forms of runtime/comm/BFloat16SumCases.h, as on the host.
TEST_P(NcclTest, BFloat16SumsRoundEachPartAndTheSumOnce) {
  int n = nccl_->size(), r = nccl_->rank();
  for (const test::BFloat16SumCase &c : test::kBFloat16SumCases) {
    std::vector<float> mine(kCount), sent(n * kCount);
    for (std::size_t i = 0; i < kCount; ++i)
      mine[i] = c.part(r, i);
    for (std::size_t j = 0; j < sent.size(); ++j)
      sent[j] = c.part(r, j);
    DeviceBuffer<float> buffer(kCount), scattered(n * kCount), received(kCount);
    buffer.upload(mine);
    scattered.upload(sent);
    nccl_->allReduceSumAs(buffer.get(), kCount, DType::F32, DType::BF16, {1, "gradients"});
    nccl_->reduceScatterSumAs(scattered.get(), received.get(), kCount, DType::F32, DType::BF16,
                              {1, "gradients"});
    std::vector<float> summed = buffer.download(), part = received.download();
    for (std::size_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(summed[i], c.expected(n)) << "all-reduce, element " << i;
      ASSERT_EQ(part[i], c.expected(n)) << "reduce-scatter, element " << i;
    }
  }
}

// bf16 parts summed in f32 and kept (ZeRO's reduce-scatters of bf16
// accumulators summed in f32): rank 0 gives 256, the others 1; the sum is
// 255 + n, not rounded.
TEST_P(NcclTest, WidenedReduceScatterSumsBFloat16PartsInF32) {
  int n = nccl_->size(), r = nccl_->rank();
  DeviceBuffer<uint16_t> sent(n * kCount);
  DeviceBuffer<float> received(kCount);
  sent.upload(std::vector<uint16_t>(n * kCount, toBFloat16(r == 0 ? 256.0f : 1.0f).bits));
  nccl_->reduceScatterSumWidened(sent.get(), received.get(), kCount, {1, "gradients"});
  std::vector<float> part = received.download();
  for (std::size_t i = 0; i < kCount; ++i)
    ASSERT_EQ(part[i], 255.0f + n) << i;
}

// The background collectives' duplicate (an ncclCommSplit on a stream of
// its own) reads what the compute stream wrote before each collective was
// queued: a host function holds the compute stream for 200 ms before it
// writes the values, so a call that did not wait for its mark would sum
// and scatter the zeros it finds. The integers' sums are exact in any order.
TEST_P(NcclTest, BackgroundCollectivesWaitForTheComputeStream) {
  int n = nccl_->size();
  std::string error;
  std::unique_ptr<Communicator> duplicate = nccl_->duplicate(error);
  ASSERT_TRUE(duplicate) << error;
  EXPECT_EQ(duplicate->size(), n);
  std::vector<BackgroundCollectives::Axis> axes;
  axes.push_back({0, std::move(duplicate)});
  BackgroundCollectives background(std::move(axes));

  DeviceBuffer<int32_t> summed(kCount), sent(n * kCount), received(kCount);
  summed.upload(std::vector<int32_t>(kCount, 0));
  sent.upload(std::vector<int32_t>(n * kCount, 0));
  ASSERT_EQ(cudaLaunchHostFunc(
                stream_,
                [](void *) { std::this_thread::sleep_for(std::chrono::milliseconds(200)); },
                nullptr),
            cudaSuccess);
  // Every byte 1: each int32 is 0x01010101.
  ASSERT_EQ(cudaMemsetAsync(summed.get(), 1, kCount * sizeof(int32_t), stream_), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(sent.get(), 1, n * kCount * sizeof(int32_t), stream_), cudaSuccess);
  background.start(0, summed.get(), kCount, DType::I32, DType::I32, 0, "summed");
  background.startReduceScatter(0, sent.get(), received.get(), kCount, DType::I32, DType::I32, 0,
                                "scattered");
  background.waitAll();
  const int32_t expected = n * 0x01010101;
  for (const std::vector<int32_t> &result : {summed.download(), received.download()})
    for (std::size_t i = 0; i < kCount; ++i)
      ASSERT_EQ(result[i], expected) << i;
  EXPECT_EQ(background.takeReport().done.size(), 2u);
}

INSTANTIATE_TEST_SUITE_P(Modes, NcclTest, testing::Values(false, true),
                         [](const testing::TestParamInfo<bool> &info) {
                           return info.param ? "Deterministic" : "Library";
                         });

} // namespace
