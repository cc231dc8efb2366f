//===- Collectives.cpp - collectives of the CPU backend -------------------===//
//
// Host buffers go to the mesh axis's communicator (MPI) as they are
// (runtime/comm/CollectiveKernels.inc); all_slice copies on the host.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"

#include "runtime/comm/BackgroundCollectives.h"
#include "runtime/comm/Communicator.h"

#include <cstring>

namespace cleave::rt::cpu {

#include "runtime/comm/CollectiveKernels.inc"

void all_slice(Context &ctx, const Tensor &in, const Tensor &out, int64_t axis) {
  const char *part = static_cast<const char *>(in.data) + comm::sliceOffset(ctx.axes, axis, in, out);
  std::memcpy(out.data, part, out.bytes());
}

} // namespace cleave::rt::cpu
