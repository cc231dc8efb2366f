//===- Common.cu - errors, layouts and strided copies ---------------------===//

#include "runtime/cuda/Common.cuh"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace cleave::rt::cuda::detail {

void check(cudaError_t error, const char *kernel) {
  if (error != cudaSuccess)
    fail(kernel, "CUDA error %s: %s", cudaGetErrorName(error), cudaGetErrorString(error));
}

void checkBlas(cublasStatus_t status, const char *kernel) {
  if (status != CUBLAS_STATUS_SUCCESS)
    fail(kernel, "cuBLAS error %s", cublasGetStatusString(status));
}

void checkLaunch(const char *kernel) { check(cudaGetLastError(), kernel); }

cublasHandle_t blasHandle(Context &ctx, const char *kernel) {
  if (!ctx.blas)
    fail(kernel, "the context has no cuBLAS handle");
  checkBlas(cublasSetStream(ctx.blas, ctx.stream), kernel);
  return ctx.blas;
}

void requireSameType(const char *kernel, const Tensor &a, const Tensor &b) {
  if (a.dtype != b.dtype)
    fail(kernel, "mismatched element types %s and %s", dtypeName(a.dtype), dtypeName(b.dtype));
}

void requireType(const char *kernel, const Tensor &t, DType type, const char *what) {
  if (t.dtype != type)
    fail(kernel, "%s must be %s, not %s", what, dtypeName(type), dtypeName(t.dtype));
}

void requireNumel(const char *kernel, const Tensor &t, int64_t numel, const char *what) {
  if (t.numel() != numel)
    fail(kernel, "%s has %lld elements, expected %lld", what, static_cast<long long>(t.numel()),
         static_cast<long long>(numel));
}

void broadcastStrides(const char *kernel, const Tensor &in, const Dims &shape, int64_t *strides) {
  if (in.rank() > shape.size)
    fail(kernel, "an input of rank %d does not broadcast to rank %d", in.rank(), shape.size);
  int64_t inStrides[kMaxRank];
  denseStrides(in.shape, inStrides);
  int lead = shape.size - in.rank();
  for (int d = 0; d < shape.size; ++d) {
    if (d < lead) {
      strides[d] = 0;
      continue;
    }
    int64_t dim = in.shape[d - lead];
    if (dim == shape[d])
      strides[d] = dim == 1 ? 0 : inStrides[d - lead];
    else if (dim == 1)
      strides[d] = 0;
    else
      fail(kernel, "an input dim %lld does not broadcast to %lld", static_cast<long long>(dim),
           static_cast<long long>(shape[d]));
  }
}

template <typename U>
__global__ void stridedCopyKernel(int64_t n, Layout<2> layout, U *dst, const U *src) {
  CLEAVE_GRID_LOOP(i, n) {
    int64_t off[2];
    layout.offsets(i, off);
    dst[off[0]] = src[off[1]];
  }
}

void stridedCopy(Context &ctx, const char *kernel, DType type, Layout<2> layout, void *dst,
                 int64_t dstBase, const void *src, int64_t srcBase) {
  layout.simplify();
  int64_t n = 1;
  for (int d = 0; d < layout.rank; ++d)
    n *= layout.dims[d];
  if (n == 0)
    return;
  dispatchBySize(kernel, type, [&](auto tag) {
    using U = typename decltype(tag)::type;
    U *d = static_cast<U *>(dst) + dstBase;
    const U *s = static_cast<const U *>(src) + srcBase;
    if (layout.rank <= 1 && layout.strides[0][0] == 1 && layout.strides[1][0] == 1) {
      check(cudaMemcpyAsync(d, s, n * sizeof(U), cudaMemcpyDeviceToDevice, ctx.stream), kernel);
      return;
    }
    stridedCopyKernel<U><<<blocksFor(n), kThreads, 0, ctx.stream>>>(n, layout, d, s);
    checkLaunch(kernel);
  });
}

} // namespace cleave::rt::cuda::detail
