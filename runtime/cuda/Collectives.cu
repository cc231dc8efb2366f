//===- Collectives.cu - collectives of the CUDA backend -------------------===//
//
// The communicators of a CUDA program are NCCL's, on the backend's stream
// (runtime/driver/CudaMain.cu), so buffers stay in device memory.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Common.cuh"

#include "runtime/comm/Communicator.h"

namespace cleave::rt::cuda {

using detail::check;

void all_reduce(Context &ctx, const Tensor &buffer, int64_t axis) {
  comm::allReduceOnAxis(ctx.axes, axis, buffer, ctx.step);
}

void reduce_scatter(Context &ctx, const Tensor &in, const Tensor &out, int64_t axis) {
  comm::reduceScatterOnAxis(ctx.axes, axis, in, out, ctx.step);
}

void all_gather(Context &ctx, const Tensor &in, const Tensor &out, int64_t axis) {
  comm::allGatherOnAxis(ctx.axes, axis, in, out, ctx.step);
}

void all_slice(Context &ctx, const Tensor &in, const Tensor &out, int64_t axis) {
  comm::Communicator &group = comm::axisCommunicator(ctx.axes, axis, "all_slice");
  if (in.dtype != out.dtype || out.numel() * group.size() != in.numel())
    fail("all_slice", "%lld elements do not split into %d parts of %lld",
         static_cast<long long>(in.numel()), group.size(), static_cast<long long>(out.numel()));
  check(cudaMemcpyAsync(out.data, static_cast<const char *>(in.data) + group.rank() * out.bytes(),
                        out.bytes(), cudaMemcpyDeviceToDevice, ctx.stream),
        "all_slice");
}

} // namespace cleave::rt::cuda
