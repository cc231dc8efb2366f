//===- Collectives.cpp - collectives of the CPU backend -------------------===//
//
// Host buffers go to the mesh axis's communicator (MPI) as they are.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"

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
  const char *part = static_cast<const char *>(in.data) + comm::sliceOffset(ctx.axes, axis, in, out);
  std::memcpy(out.data, part, out.bytes());
}

} // namespace cleave::rt::cpu
