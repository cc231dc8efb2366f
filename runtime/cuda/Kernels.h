//===- Kernels.h - the CUDA backend -----------------------------*- C++ -*-===//

#ifndef CLEAVE_RUNTIME_CUDA_KERNELS_H
#define CLEAVE_RUNTIME_CUDA_KERNELS_H

#include "runtime/StepContext.h"
#include "runtime/Tensor.h"

// Opaque handles, so generated host code does not need the CUDA headers.
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

/// A chain of f32 elementwise ops (runtime/ElementwiseProgram.h's `program`)
/// in one pass: each input the outputs' shape or one element. The program's
/// text is interpreted on the device, one thread an element.
void fused_elementwise(Context &ctx, const TensorList &inputs, const TensorList &outputs,
                       const char *program);

} // namespace cleave::rt::cuda

#endif
