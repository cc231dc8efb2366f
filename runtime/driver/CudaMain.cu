//===- CudaMain.cu - main of a generated CUDA program --------------------===//

#include "runtime/cuda/Program.h"
#include "runtime/driver/Driver.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace {

void check(cudaError_t status, const char *what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "cleave: error: cuda: %s: %s\n", what, cudaGetErrorString(status));
    std::exit(3);
  }
}

/// Owns the run's stream and cuBLAS handle; tensors live in device memory.
class CudaBackend final : public cleave::rt::Backend {
public:
  CudaBackend() {
    check(cudaStreamCreate(&context.stream), "cudaStreamCreate");
    if (cublasCreate(&context.blas) != CUBLAS_STATUS_SUCCESS) {
      std::fprintf(stderr, "cleave: error: cuda: cublasCreate failed\n");
      std::exit(3);
    }
    cublasSetStream(context.blas, context.stream);
  }
  ~CudaBackend() override {
    cublasDestroy(context.blas);
    cudaStreamDestroy(context.stream);
  }
  const char *name() const override { return "cuda"; }
  void *allocate(std::size_t bytes) override {
    void *memory = nullptr;
    check(cudaMalloc(&memory, bytes == 0 ? 64 : bytes), "cudaMalloc");
    return memory;
  }
  void release(void *memory) override { cudaFree(memory); }
  void copyToDevice(void *device, const void *host, std::size_t bytes) override {
    check(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }
  void copyToHost(void *host, const void *device, std::size_t bytes) override {
    check(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
  }
  void setThreads(int) override {}
  void setRandomStream(uint64_t stream) override { context.randomStream = stream; }
  void forward(char *arena, char *weights, const cleave::rt::Tensor *inputs,
               cleave::rt::Tensor *outputs) override {
    cleave_forward(context, arena, weights, inputs, outputs);
    check(cudaStreamSynchronize(context.stream), "forward");
  }
  void apply(char *arena, char *weights, const cleave::rt::Tensor *inputs,
             cleave::rt::Tensor *outputs) override {
    cleave_apply(context, arena, weights, inputs, outputs);
    check(cudaStreamSynchronize(context.stream), "apply");
  }

private:
  cleave::rt::cuda::Context context;
};

} // namespace

int main(int argc, char **argv) {
  CudaBackend backend;
  return cleave::rt::runDriver(argc, argv, backend);
}
