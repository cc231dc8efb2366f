//===- Collectives.cu - collectives of the CUDA backend -------------------===//
//
// The communicators of a CUDA program are NCCL's, on the backend's stream
// (runtime/driver/CudaMain.cu), so buffers stay in device memory
// (runtime/comm/CollectiveKernels.inc); all_slice copies on the device.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Common.cuh"

#include "runtime/comm/BackgroundCollectives.h"
#include "runtime/comm/Communicator.h"

namespace cleave::rt::cuda {

using detail::check;

#include "runtime/comm/CollectiveKernels.inc"

void all_slice(Context &ctx, const Tensor &in, const Tensor &out, int64_t axis) {
  const char *part = static_cast<const char *>(in.data) + comm::sliceOffset(ctx.axes, axis, in, out);
  check(cudaMemcpyAsync(out.data, part, out.bytes(), cudaMemcpyDeviceToDevice, ctx.stream),
        "all_slice");
}

} // namespace cleave::rt::cuda
