//===- DeviceSum.h - the deterministic sum on the GPU -----------*- C++ -*-===//

#ifndef CLEAVE_RUNTIME_COMM_DEVICESUM_H
#define CLEAVE_RUNTIME_COMM_DEVICESUM_H

#include "runtime/Tensor.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace cleave::rt::comm {

/// sumInRankOrder (Communicator.h) on device memory, queued on `stream`:
/// sum[i] = ((parts[0][i] + parts[1][i]) + ...) + parts[n-1][i], `sum` of
/// `sumType` (`type`, or f32 for bf16 parts). Returns the launch's status.
cudaError_t sumInRankOrderOnDevice(const void *parts, int n, std::size_t count, DType type,
                                   void *sum, DType sumType, cudaStream_t stream);

/// A sum through bf16's roundings on device memory, queued on `stream`
/// (runtime/LowPrecision.h's, as the host's): narrowed[i] = values[i]
/// rounded to nearest even, and values[i] = narrowed[i] widened.
cudaError_t narrowToBFloat16OnDevice(const float *values, std::size_t count, uint16_t *narrowed,
                                     cudaStream_t stream);
cudaError_t widenFromBFloat16OnDevice(const uint16_t *narrowed, std::size_t count, float *values,
                                      cudaStream_t stream);

} // namespace cleave::rt::comm

#endif
