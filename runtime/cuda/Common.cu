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
__global__ void stridedCopyKernel(int32_t n, Layout<2> layout, U *dst, const U *src) {
  using I = int32_t;
  // Each value carries its destination, computed with its source.
  struct Element {
    I at;
    U value;
  };
  unrolledLoop<I>(
      n,
      [&](I i) {
        I off[2];
        layout.offsets(i, off);
        return Element{off[0], src[off[1]]};
      },
      [&](I, const Element &element) { dst[element.at] = element.value; });
}

/// The batched transposes' tile: kTile x kTile elements through shared
/// memory (a column of padding against bank conflicts), so that both its
/// reads and its writes are coalesced; kTileRows rows of threads.
constexpr int kTile = 32, kTileRows = 8;

/// A batch of rows x cols copies where dst is dense along cols and src along
/// rows: dst[b + r * dstRowStride + c] = src[b' + r + c * srcColStride], the
/// batch index mapped to b and b' by `batches`.
template <typename U>
__global__ void transposeTilesKernel(int64_t batchCount, Layout<2> batches, int64_t rows,
                                     int64_t cols, int64_t dstRowStride, int64_t srcColStride,
                                     U *dst, const U *src) {
  __shared__ U tile[kTile][kTile + 1];
  int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTile,
          c0 = static_cast<int64_t>(blockIdx.x) * kTile;
  for (int64_t batch = blockIdx.z; batch < batchCount; batch += gridDim.z) {
    int64_t base[2];
    batches.offsets(batch, base);
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {
      int64_t r = r0 + threadIdx.x, c = c0 + j;
      if (r < rows && c < cols)
        tile[j][threadIdx.x] = src[base[1] + r + c * srcColStride];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {
      int64_t r = r0 + j, c = c0 + threadIdx.x;
      if (r < rows && c < cols)
        dst[base[0] + r * dstRowStride + c] = tile[threadIdx.x][j];
    }
    __syncthreads();
  }
}

/// Whether `layout` (simplified) is a batch of transposes: its last dim
/// dense in dst (strides[0]) and the one before dense in src (strides[1]),
/// with few enough tile rows for the grid.
bool isBatchedTranspose(const Layout<2> &layout) {
  int r = layout.rank;
  return r >= 2 && layout.strides[0][r - 1] == 1 && layout.strides[1][r - 2] == 1 &&
         layout.strides[1][r - 1] != 1 && (layout.dims[r - 2] + kTile - 1) / kTile <= 65535;
}

template <typename U>
void transposeTiles(Context &ctx, const char *kernel, const Layout<2> &layout, U *dst,
                    const U *src) {
  int r = layout.rank;
  Layout<2> batches = layout.dimsIn(0, r - 2);
  int64_t rows = layout.dims[r - 2], cols = layout.dims[r - 1], count = batches.numel();
  dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile),
            static_cast<unsigned>((rows + kTile - 1) / kTile),
            static_cast<unsigned>(std::min<int64_t>(count, 65535)));
  transposeTilesKernel<U><<<grid, dim3(kTile, kTileRows), 0, ctx.stream>>>(
      count, batches, rows, cols, layout.strides[0][r - 2], layout.strides[1][r - 1], dst, src);
  checkLaunch(kernel);
}

void stridedCopy(Context &ctx, const char *kernel, DType type, Layout<2> layout, void *dst,
                 int64_t dstBase, const void *src, int64_t srcBase) {
  layout.simplify();
  int64_t n = layout.numel();
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
    if (isBatchedTranspose(layout))
      return transposeTiles(ctx, kernel, layout, d, s);
    forEachInt32Part(layout, 0, {},
                     [&](const Layout<2> &part, int64_t, const Layout<2>::Bases &bases) {
                       int64_t count = part.numel();
                       stridedCopyKernel<U><<<blocksForUnrolled(count), kThreads, 0, ctx.stream>>>(
                           static_cast<int32_t>(count), part, d + bases[0], s + bases[1]);
                       checkLaunch(kernel);
                     });
  });
}

} // namespace cleave::rt::cuda::detail
