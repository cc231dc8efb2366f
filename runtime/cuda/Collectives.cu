//===- Collectives.cu - collectives of the CUDA backend -------------------===//
//
// The communicators of a CUDA program are NCCL's, on the backend's stream
// (runtime/driver/CudaMain.cu), so buffers stay in device memory
// (runtime/comm/CollectiveKernels.inc).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Common.cuh"

#include "runtime/comm/BackgroundCollectives.h"
#include "runtime/comm/Communicator.h"

namespace cleave::rt::cuda {

#include "runtime/comm/CollectiveKernels.inc"

} // namespace cleave::rt::cuda
