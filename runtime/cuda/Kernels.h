//===- Kernels.h - the CUDA backend -----------------------------*- C++ -*-===//

#ifndef CLEAVE_RUNTIME_CUDA_KERNELS_H
#define CLEAVE_RUNTIME_CUDA_KERNELS_H

#include "runtime/StepContext.h"
#include "runtime/Tensor.h"

// Opaque handles, so that plain C++ (the driver, the link check) does not
// need the CUDA headers.
struct CUstream_st;
struct cublasContext;

namespace cleave::rt::cuda {

/// The stream every kernel of a run is queued on, and the cuBLAS handle
/// bound to it. Tensors point to device memory.
struct Context : StepContext {
  CUstream_st *stream = nullptr;
  cublasContext *blas = nullptr;
};

#define CLEAVE_KERNEL(name, ...) void name(Context &ctx, __VA_ARGS__);
#include "runtime/Kernels.def"
#undef CLEAVE_KERNEL

} // namespace cleave::rt::cuda

#endif
