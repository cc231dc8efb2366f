//===- KernelsLinkCheck.cpp - every CUDA kernel exists with its type -----===//
//
// Takes the address of every kernel of Kernels.def, converted to the exact
// type Kernels.def declares, into an array with external linkage (so no
// optimiser drops the references): a kernel missing from
// cleave_runtime_cuda is an undefined symbol when this links, a kernel with
// other parameters fails to compile.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Kernels.h"

#include <cstdio>

namespace cleave::rt::cuda {

using AnyKernel = void (*)();

#define CLEAVE_KERNEL(name, ...)                                                                   \
  reinterpret_cast<AnyKernel>(static_cast<void (*)(Context &, __VA_ARGS__)>(&name)),
extern const AnyKernel kAllKernels[];
const AnyKernel kAllKernels[] = {
#include "runtime/Kernels.def"
};
#undef CLEAVE_KERNEL

} // namespace cleave::rt::cuda

int main() {
  using cleave::rt::cuda::kAllKernels;
  std::printf("%zu CUDA kernels linked\n", sizeof(kAllKernels) / sizeof(kAllKernels[0]));
  return 0;
}
