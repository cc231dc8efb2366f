//===- Collectives.cu - collectives of the CUDA backend -------------------===//
//
// The communicators of a CUDA program are NCCL's, on the backend's stream
// (runtime/driver/CudaMain.cu), so buffers stay in device memory.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Kernels.h"

#include "runtime/comm/Communicator.h"

namespace cleave::rt::cuda {

void all_reduce(Context &ctx, const Tensor &buffer, int64_t axis) {
  comm::allReduceOnAxis(ctx.axes, axis, buffer, ctx.step);
}

} // namespace cleave::rt::cuda
