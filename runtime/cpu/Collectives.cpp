//===- Collectives.cpp - collectives of the CPU backend -------------------===//
//
// Host buffers go to the mesh axis's communicator (MPI) as they are.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"

#include "runtime/KernelError.h"
#include "runtime/comm/Communicator.h"

#include <cstring>

namespace cleave::rt::cpu {

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
  std::memcpy(out.data, static_cast<const char *>(in.data) + group.rank() * out.bytes(),
              out.bytes());
}

} // namespace cleave::rt::cpu
