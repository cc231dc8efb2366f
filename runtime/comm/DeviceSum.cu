//===- DeviceSum.cu - the deterministic sum on the GPU -------------------===//

#include "runtime/comm/DeviceSum.h"

#include <cstdint>

namespace cleave::rt::comm {
namespace {

template <typename T>
__global__ void sumParts(const T *parts, int n, std::size_t count, T *sum) {
  std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < count; i += stride) {
    // From the first part, not from zero (0 + -0.0 is +0.0); only additions,
    // which nvcc never contracts, in rank order.
    T total = parts[i];
    for (int r = 1; r < n; ++r)
      total = total + parts[r * count + i];
    sum[i] = total;
  }
}

template <typename T>
cudaError_t launch(const void *parts, int n, std::size_t count, void *sum,
                   cudaStream_t stream) {
  if (count == 0)
    return cudaSuccess;
  constexpr unsigned threads = 256;
  std::size_t blocks = (count + threads - 1) / threads;
  unsigned grid = blocks > 4096 ? 4096u : static_cast<unsigned>(blocks);
  sumParts<T><<<grid, threads, 0, stream>>>(static_cast<const T *>(parts), n, count,
                                            static_cast<T *>(sum));
  return cudaGetLastError();
}

} // namespace

cudaError_t sumInRankOrderOnDevice(const void *parts, int n, std::size_t count, DType type,
                                   void *sum, cudaStream_t stream) {
  switch (type) {
  case DType::F32: return launch<float>(parts, n, count, sum, stream);
  case DType::F64: return launch<double>(parts, n, count, sum, stream);
  // Integers add as unsigned: wrapping, not undefined, on overflow.
  case DType::I32: return launch<uint32_t>(parts, n, count, sum, stream);
  case DType::I64: return launch<uint64_t>(parts, n, count, sum, stream);
  default: return cudaErrorInvalidValue;
  }
}

} // namespace cleave::rt::comm
