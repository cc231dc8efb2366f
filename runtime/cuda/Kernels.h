//===- Kernels.h - the CUDA backend -----------------------------*- C++ -*-===//

#ifndef CLEAVE_RUNTIME_CUDA_KERNELS_H
#define CLEAVE_RUNTIME_CUDA_KERNELS_H

#include "runtime/Allocations.h"
#include "runtime/Tensor.h"

#include <cstdint>
#include <vector>

// Opaque handles, so generated host code does not need the CUDA headers.
struct CUstream_st;
struct cublasContext;

namespace cleave::rt::comm {
class Communicator;
}

namespace cleave::rt::cuda {

/// The stream every kernel of a run is queued on, and the cuBLAS handle
/// bound to it. Tensors point to device memory.
struct Context {
  CUstream_st *stream = nullptr;
  cublasContext *blas = nullptr;
  /// Which microbatch of which training step runs (runtime/Random.h's
  /// trainingStream; 0 outside training): part of every dropout mask's key.
  uint64_t randomStream = 0;
  /// The training step (what a collective's error names); -1 outside.
  int64_t step = -1;
  /// The communicator of each mesh axis, in the mesh's order (all_reduce's
  /// `axis`); empty without a mesh. Owned by the driver.
  std::vector<comm::Communicator *> axes;
  /// Where kernels count the scratch they allocate for a call (a
  /// convolution's columns, runtime/ConvScratch.h); null: not counted.
  AllocationMeter *allocations = nullptr;
};

#define CLEAVE_KERNEL(name, ...) void name(Context &ctx, __VA_ARGS__);
#include "runtime/Kernels.def"
#undef CLEAVE_KERNEL

} // namespace cleave::rt::cuda

#endif
