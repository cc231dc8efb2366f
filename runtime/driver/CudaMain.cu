//===- CudaMain.cu - main of a generated CUDA program --------------------===//

#include "runtime/comm/HostStaged.h"
#include "runtime/comm/StreamEvent.h"
#include "runtime/cuda/Program.h"
#include "runtime/driver/Driver.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#ifdef CLEAVE_HAVE_NCCL
#include "runtime/comm/Nccl.h"
#endif

namespace {

void check(cudaError_t status, const char *what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "cleave: error: cuda: %s: %s\n", what, cudaGetErrorString(status));
    std::exit(3);
  }
}

/// Owns the run's stream and cuBLAS handle; tensors live in device memory.
/// Its copies and pinned staging are also those of the axes that go through
/// the host (runtime/comm/HostStaged.h): a pipeline's, and every axis whose
/// ranks share a GPU.
class CudaBackend final : public cleave::rt::Backend, public cleave::rt::comm::DeviceCopies {
public:
  CudaBackend() {
    // One GPU per rank of a machine: the launcher's local rank picks it.
    int devices = 0;
    if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 1)
      check(cudaSetDevice(localRank() % devices), "cudaSetDevice");
    context.allocations = &allocations_;
    check(cudaStreamCreate(&context.stream), "cudaStreamCreate");
    if (cublasCreate(&context.blas) != CUBLAS_STATUS_SUCCESS) {
      std::fprintf(stderr, "cleave: error: cuda: cublasCreate failed\n");
      std::exit(3);
    }
    cublasSetStream(context.blas, context.stream);
    synced.stream = context.stream;
  }
  ~CudaBackend() override {
    cublasDestroy(context.blas);
    cudaStreamDestroy(context.stream);
  }
  const char *name() const override { return "cuda"; }
  void *allocate(std::size_t bytes) override {
    void *memory = nullptr;
    check(cudaMalloc(&memory, bytes == 0 ? 64 : bytes), "cudaMalloc");
    allocations_.allocated(bytes);
    return memory;
  }
  void release(void *memory, std::size_t bytes) override {
    allocations_.released(bytes);
    cudaFree(memory);
  }
  const cleave::rt::AllocationMeter &allocations() const override { return allocations_; }
  void *allocateStaging(std::size_t bytes) override {
    void *memory = nullptr;
    check(cudaMallocHost(&memory, bytes == 0 ? 64 : bytes), "cudaMallocHost");
    return memory;
  }
  void releaseStaging(void *memory, std::size_t) override { cudaFreeHost(memory); }
  std::shared_ptr<const cleave::rt::comm::QueuedWork> markQueuedWork(std::string &error) override {
    cudaError_t status = cudaSuccess;
    std::shared_ptr<const cleave::rt::comm::StreamEvent> mark =
        cleave::rt::comm::StreamEvent::record(context.stream, status);
    if (!mark)
      error =
          std::string("recording an event on the compute stream: ") + cudaGetErrorString(status);
    return mark;
  }
  // The staged copies on the legacy default stream then also wait for
  // what the compute stream queued after the mark: slower, not wrong.
  std::string awaitQueuedWork(const cleave::rt::comm::QueuedWork &mark,
                              double timeoutSeconds) override {
    cudaError_t status = static_cast<const cleave::rt::comm::StreamEvent &>(mark).await(
        cleave::rt::comm::Deadline(timeoutSeconds));
    if (status == cudaErrorNotReady)
      return "the compute stream's work before it did not finish within the timeout";
    if (status != cudaSuccess)
      return std::string("waiting for the compute stream: ") + cudaGetErrorString(status);
    return "";
  }
  bool readsStaging() const override { return false; }
  void copyToDevice(void *device, const void *host, std::size_t bytes) override {
    check(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }
  void copyToHost(void *host, const void *device, std::size_t bytes) override {
    check(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
  }
  void setThreads(int) override {}
  // The device's kernels keep the subnormals (they are built without
  // --ftz=true).
  bool flushSubnormals(int) override { return false; }
  void setStep(int64_t step, uint64_t randomStream, bool lastMicrobatch, bool firstCall) override {
    context.step = step;
    context.randomStream = randomStream;
    context.lastMicrobatch = lastMicrobatch;
    context.firstCall = firstCall;
  }
  void setBackground(cleave::rt::comm::BackgroundCollectives *background) override {
    context.background = background;
  }
  void setCommunicators(const std::vector<cleave::rt::comm::Communicator *> &axes) override {
    context.axes.clear();
    for (cleave::rt::comm::Communicator *host : axes) {
      if (host->size() == 1) { // nothing to reduce: the host's copy does
        context.axes.push_back(host);
        continue;
      }
      // A pipeline's sends must not wait for their receives (the schedules'
      // proof assumes so), as NCCL's do; and NCCL refuses two ranks on one
      // device.
      if (host->axis() == "pp" || sharesDevice(*host)) {
        staged.push_back(std::make_unique<cleave::rt::comm::HostStagedCommunicator>(*host, *this));
        context.axes.push_back(staged.back().get());
        continue;
      }
#ifdef CLEAVE_HAVE_NCCL
      nccl.push_back(cleave::rt::comm::NcclCommunicator::create(*host, context.stream));
      context.axes.push_back(nccl.back().get());
#else
      host->fail("this CUDA program was built without NCCL, so it runs on one GPU only");
#endif
    }
  }
  std::vector<cleave::rt::comm::Communicator *> communicators() const override {
    return context.axes;
  }
  void setMarks(cleave::rt::ProgramMarks *marks, bool ops) override {
    synced.next = marks;
    context.marks = marks ? &synced : nullptr;
    context.markOps = marks && ops;
  }
  void setApplyPhase(int phase) override { context.applyPhase = phase; }
  void *takeStagePartial() override { return std::exchange(context.stagePartial, nullptr); }
  void run(size_t program, cleave::rt::ProgramEntryPoint entry, char *arena, char *weights,
           const cleave::rt::Tensor *inputs, cleave::rt::Tensor *outputs) override {
    cleave_programs[program].entryPoint(entry)(context, arena, weights, inputs, outputs);
    check(cudaStreamSynchronize(context.stream), cleave::rt::entryPointName(entry));
  }

private:
  /// Whether two ranks of `group` run on one GPU: the devices' UUIDs,
  /// gathered over the group's host communicator.
  bool sharesDevice(cleave::rt::comm::Communicator &group) const {
    int device = 0;
    cudaDeviceProp properties{};
    check(cudaGetDevice(&device), "cudaGetDevice");
    check(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties");
    std::vector<cudaUUID_t> devices(group.size());
    group.allGather(&properties.uuid, devices.data(), sizeof(cudaUUID_t), cleave::rt::DType::U8,
                    {-1, "the GPUs' identities"});
    std::set<std::string> distinct;
    for (const cudaUUID_t &device : devices)
      distinct.insert(std::string(device.bytes, sizeof device.bytes));
    return distinct.size() < devices.size();
  }

  /// The rank among this machine's ranks, from the launcher's environment.
  static int localRank() {
    for (const char *name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
      if (const char *value = std::getenv(name))
        return std::atoi(value);
    return 0;
  }

  /// Passes marks on once the stream's work before them is done.
  struct SyncedMarks final : cleave::rt::ProgramMarks {
    cudaStream_t stream = nullptr;
    cleave::rt::ProgramMarks *next = nullptr;
    void backward() override {
      check(cudaStreamSynchronize(stream), "mark");
      next->backward();
    }
    void op(const char *label) override {
      check(cudaStreamSynchronize(stream), "mark");
      next->op(label);
    }
  };

  cleave::rt::AllocationMeter allocations_;
  cleave::rt::cuda::Context context;
  SyncedMarks synced;
  std::vector<std::unique_ptr<cleave::rt::comm::HostStagedCommunicator>> staged;
#ifdef CLEAVE_HAVE_NCCL
  std::vector<std::unique_ptr<cleave::rt::comm::NcclCommunicator>> nccl;
#endif
};

} // namespace

int main(int argc, char **argv) {
  CudaBackend backend;
  return cleave::rt::runDriver(
      argc, argv, cleave::rt::identitiesOf(cleave_programs, cleave_program_count), backend);
}
