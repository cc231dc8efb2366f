//===- Collectives.cpp - collectives of the CPU backend -------------------===//
//
// Host buffers go to the mesh axis's communicator (MPI) as they are
// (runtime/comm/CollectiveKernels.inc).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"

#include "runtime/comm/BackgroundCollectives.h"
#include "runtime/comm/Communicator.h"

namespace cleave::rt::cpu {

#include "runtime/comm/CollectiveKernels.inc"

} // namespace cleave::rt::cpu
