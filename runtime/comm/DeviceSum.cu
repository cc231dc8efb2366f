//===- DeviceSum.cu - the deterministic sum on the GPU -------------------===//

#include "runtime/comm/DeviceSum.h"

#include "runtime/comm/RankOrderSum.h"
#include "runtime/cuda/Common.cuh" // CLEAVE_GRID_LOOP

#include <cstdint>

namespace cleave::rt::comm {
namespace {

template <typename T>
__global__ void sumParts(const T *parts, int n, std::size_t count, T *sum) {
  CLEAVE_GRID_LOOP(i, static_cast<int64_t>(count)) {
    // From the first part, not from zero (0 + -0.0 is +0.0); only additions,
    // which nvcc never contracts, in rank order.
    T total = parts[i];
    for (int r = 1; r < n; ++r)
      total = total + parts[r * count + i];
    sum[i] = total;
  }
}

template <typename Sum>
__global__ void sumBFloat16Parts(const uint16_t *parts, int n, std::size_t count, Sum *sum) {
  CLEAVE_GRID_LOOP(i, static_cast<int64_t>(count)) {
    sum[i] = bfloat16PartsSum<Sum>(parts, n, count, static_cast<std::size_t>(i));
  }
}

__global__ void narrowElements(const float *values, std::size_t count, uint16_t *narrowed) {
  CLEAVE_GRID_LOOP(i, static_cast<int64_t>(count)) { narrowed[i] = toBFloat16(values[i]).bits; }
}

__global__ void widenElements(const uint16_t *narrowed, std::size_t count, float *values) {
  CLEAVE_GRID_LOOP(i, static_cast<int64_t>(count)) { values[i] = fromBFloat16({narrowed[i]}); }
}

/// Launches `kernel` over `count` elements on `stream`.
template <typename... Params, typename... Args>
cudaError_t launch(void (*kernel)(Params...), std::size_t count, cudaStream_t stream,
                   Args... args) {
  if (count == 0)
    return cudaSuccess;
  constexpr unsigned threads = 256;
  std::size_t blocks = (count + threads - 1) / threads;
  unsigned grid = blocks > 4096 ? 4096u : static_cast<unsigned>(blocks);
  kernel<<<grid, threads, 0, stream>>>(args...);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launchSum(const void *parts, int n, std::size_t count, void *sum, cudaStream_t stream) {
  return launch(sumParts<T>, count, stream, static_cast<const T *>(parts), n, count,
                static_cast<T *>(sum));
}

} // namespace

cudaError_t sumInRankOrderOnDevice(const void *parts, int n, std::size_t count, DType type,
                                   void *sum, DType sumType, cudaStream_t stream) {
  if (type == DType::BF16 && sumType == DType::F32)
    return launch(sumBFloat16Parts<float>, count, stream, static_cast<const uint16_t *>(parts), n,
                  count, static_cast<float *>(sum));
  switch (type) {
  case DType::F32:
    return launchSum<float>(parts, n, count, sum, stream);
  case DType::F64:
    return launchSum<double>(parts, n, count, sum, stream);
  // Integers add as unsigned: wrapping, not undefined, on overflow.
  case DType::I32:
    return launchSum<uint32_t>(parts, n, count, sum, stream);
  case DType::I64:
    return launchSum<uint64_t>(parts, n, count, sum, stream);
  case DType::BF16:
    return launch(sumBFloat16Parts<uint16_t>, count, stream, static_cast<const uint16_t *>(parts),
                  n, count, static_cast<uint16_t *>(sum));
  default: return cudaErrorInvalidValue;
  }
}

cudaError_t narrowToBFloat16OnDevice(const float *values, std::size_t count, uint16_t *narrowed,
                                     cudaStream_t stream) {
  return launch(narrowElements, count, stream, values, count, narrowed);
}

cudaError_t widenFromBFloat16OnDevice(const uint16_t *narrowed, std::size_t count, float *values,
                                      cudaStream_t stream) {
  return launch(widenElements, count, stream, narrowed, count, values);
}

} // namespace cleave::rt::comm
