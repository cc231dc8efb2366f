//===- Collectives.cpp - collectives of the CPU backend -------------------===//

#include "runtime/cpu/Kernels.h"

#include "runtime/comm/Communicator.h"

namespace cleave::rt::cpu {

void all_reduce(Context &ctx, const Tensor &buffer, int64_t axis) {
  comm::allReduceOnAxis(ctx.axes, axis, buffer, ctx.step);
}

} // namespace cleave::rt::cpu
