//===- Linalg.cu - matmul, gemm and conv (and its adjoints) through cuBLAS ===//
//
// cuBLAS is column-major: a row-major C[M,N] = A[M,K] B[K,N] is the
// column-major C^T = B^T A^T, so every call passes B before A and N before M.
// matmul and gemm take f32, bf16 or f16 factors (cublasGemmEx) and give f32.
//
// Convolutions unfold the input into columns (im2col) and multiply them by
// the weights. conv_grad_weight multiplies dy by the same columns
// transposed, accumulating over the images; conv_grad_input multiplies the
// weights transposed by dy into columns and folds them back (col2im, one
// thread per input element summing what read it).
//
//===----------------------------------------------------------------------===//

#include "runtime/ConvScratch.h"
#include "runtime/cuda/Common.cuh"

#include <algorithm>
#include <climits>
#include <optional>

namespace cleave::rt::cuda {
namespace detail {
namespace {

void requireInt(const char *kernel, int64_t v, const char *what) {
  if (v < 0 || v > INT_MAX)
    fail(kernel, "%s (%lld) exceeds cuBLAS's int range", what, static_cast<long long>(v));
}

/// cuBLAS's type of factors of `type`: f32, or bf16 and f16, whose products
/// cuBLAS sums in f32 as f32's (CUBLAS_COMPUTE_32F).
cudaDataType blasType(const char *kernel, DType type) {
  switch (type) {
  case DType::F32:
    return CUDA_R_32F;
  case DType::BF16:
    return CUDA_R_16BF;
  case DType::F16:
    return CUDA_R_16F;
  default:
    fail(kernel, "the factors must be f32, bf16 or f16, not %s", dtypeName(type));
  }
}

/// cuBLAS's type of a product's factors `a` and `b` (blasType); the result
/// is f32 either way.
cudaDataType factorType(const char *kernel, const Tensor &a, const Tensor &b) {
  if (a.dtype != b.dtype)
    fail(kernel, "the factors are %s and %s", dtypeName(a.dtype), dtypeName(b.dtype));
  return blasType(kernel, a.dtype);
}

/// Row-major out[b] = op(lhs[b]) (M x K) * op(rhs[b]) (K x N), for `batch`
/// matrices `strideLhs`, `strideRhs`, `strideOut` elements apart, lhs
/// stored K x M with `transA` and rhs N x K with `transB`; the factors of
/// type `factors`, out f32. cuBLAS is column-major: it computes out^T =
/// op(rhs)^T op(lhs)^T, each row-major matrix read as its transpose.
void gemmBatched(const char *kernel, cublasHandle_t handle, cudaDataType factors, bool transA,
                 bool transB, int64_t m, int64_t n, int64_t k, const void *lhs, int64_t strideLhs,
                 const void *rhs, int64_t strideRhs, float *out, int64_t strideOut, int64_t batch) {
  requireInt(kernel, m, "M");
  requireInt(kernel, n, "N");
  requireInt(kernel, k, "K");
  requireInt(kernel, batch, "the batch");
  const float one = 1.0f, zero = 0.0f;
  int M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(k);
  // The leading dims of the matrices as stored (row-major rows).
  int ldb = std::max(transB ? K : N, 1), lda = std::max(transA ? M : K, 1), ldc = std::max(N, 1);
  const cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (batch == 1)
    checkBlas(cublasGemmEx(handle, opB, opA, N, M, K, &one, rhs, factors, ldb, lhs, factors, lda,
                           &zero, out, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              kernel);
  else
    checkBlas(cublasGemmStridedBatchedEx(handle, opB, opA, N, M, K, &one, rhs, factors, ldb,
                                         strideRhs, lhs, factors, lda, strideLhs, &zero, out,
                                         CUDA_R_32F, ldc, strideOut, static_cast<int>(batch),
                                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              kernel);
}

/// Strides of an operand's batch dims `dims[0, rank)` (matrices of
/// `matrix` elements) broadcast to the output's batch dims.
void batchStrides(const char *kernel, const Dims &dims, int rank, int64_t matrix,
                  const Layout<3> &batch, int64_t *strides) {
  if (rank > batch.rank)
    fail(kernel, "an operand has more batch dims than the result");
  int lead = batch.rank - rank;
  int64_t s = matrix;
  for (int d = batch.rank - 1; d >= 0; --d) {
    if (d < lead) {
      strides[d] = 0;
      continue;
    }
    int64_t dim = dims[d - lead];
    if (dim != batch.dims[d] && dim != 1)
      fail(kernel, "batch dim %lld does not broadcast to %lld", static_cast<long long>(dim),
           static_cast<long long>(batch.dims[d]));
    strides[d] = dim == 1 ? 0 : s;
    s *= dim;
  }
}

template <typename T>
__global__ void im2colKernel(int64_t total, Window win, int64_t channels, int64_t groupChannels,
                             int64_t groups, const T *x, T *col) {
  CLEAVE_GRID_LOOP(i, total) {
    // col is [image][group][channel][kernel position][output position].
    int64_t p = i % win.outSize;
    int64_t t = i / win.outSize;
    int64_t kpos = t % win.kernelSize;
    t /= win.kernelSize;
    int64_t c = t % groupChannels;
    t /= groupChannels;
    int64_t g = t % groups;
    int64_t image = t / groups;
    int64_t offset = 0;
    bool inside = true;
    for (int d = win.rank - 1; d >= 0; --d) {
      int64_t o = p % win.out[d], kd = kpos % win.kernel[d];
      p /= win.out[d];
      kpos /= win.kernel[d];
      int64_t coord = o * win.stride[d] - win.padBegin[d] + kd * win.dilation[d];
      inside = inside && coord >= 0 && coord < win.in[d];
      int64_t inner = 1;
      for (int e = d + 1; e < win.rank; ++e)
        inner *= win.in[e];
      offset += coord * inner;
    }
    int64_t plane = (image * channels + g * groupChannels + c) * win.inSize;
    col[i] = inside ? x[plane + offset] : T(0.0f);
  }
}

__global__ void addChannelBiasKernel(int64_t n, int64_t channels, int64_t spatial,
                                     const float *bias, float *y) {
  CLEAVE_GRID_LOOP(i, n) y[i] += bias[(i / spatial) % channels];
}

/// The adjoint of im2colKernel: dx[image][channel][position] is the sum of
/// the column entries that read it ([image][group][channel][kernel
/// position][output position] with the group's channels contiguous, so
/// [image][channel][kernel position][output position]), gathered per input
/// element: no atomics, a fixed order.
__global__ void col2imKernel(int64_t total, Window win, int64_t channels, const float *col,
                             float *dx) {
  CLEAVE_GRID_LOOP(i, total) {
    int64_t pos = i % win.inSize;
    int64_t plane = i / win.inSize; // image * channels + channel
    const float *rows = col + plane * win.kernelSize * win.outSize;
    double sum = 0;
    forEachWindowHolding(win, pos, [&](int64_t o, int64_t k) { sum += rows[k * win.outSize + o]; });
    dx[i] = static_cast<float>(sum);
  }
}

/// Checks the channels of conv(x: images x channels, w: maps x
/// channels/group) -> y: images x maps, and returns channels / group.
int64_t convGroupChannels(const char *kernel, int64_t channels, int64_t maps, const Tensor &w,
                          int64_t group) {
  if (group < 1 || channels % group || maps % group)
    fail(kernel, "group %lld does not divide %lld input and %lld output channels",
         static_cast<long long>(group), static_cast<long long>(channels),
         static_cast<long long>(maps));
  int64_t groupChannels = channels / group;
  if (w.shape[0] != maps || w.shape[1] != groupChannels)
    fail(kernel, "w is not %lld x %lld x kernel", static_cast<long long>(maps),
         static_cast<long long>(groupChannels));
  return groupChannels;
}

/// A convolution's dims, from its input x (N x C x in...), output y (N x M x
/// out...) and weights w (M x C/group x kernel...), checked; `roles` names
/// x, w and y in errors (an adjoint's are its result and operands).
struct ConvDims {
  Window win;
  int64_t images, channels, maps, group, groupChannels, groupMaps;
  /// Rows of one group's column matrix, and output positions per image.
  int64_t columns, positions;
  /// The two factors' type: f32, or bf16 (cuBLAS sums their products in
  /// f32); the result is f32.
  DType factors;
};

/// `result` is the one of x, w and y the kernel writes, f32; the other two
/// are its factors, both f32 or both bf16.
ConvDims convDims(const char *kernel, const Tensor &x, const Tensor &w, const Tensor &y,
                  const Tensor &result, const char *const roles[3], Dims strides, Dims pads,
                  Dims dilations, int64_t group) {
  const Tensor *tensors[3] = {&x, &w, &y};
  const int first = &x == &result ? 1 : 0;
  const Tensor &factor = *tensors[first];
  if (factor.dtype != DType::F32 && factor.dtype != DType::BF16)
    fail(kernel, "%s must be f32 or bf16, not %s", roles[first], dtypeName(factor.dtype));
  for (int i = 0; i < 3; ++i)
    requireType(kernel, *tensors[i], tensors[i] == &result ? DType::F32 : factor.dtype, roles[i]);
  ConvDims d;
  d.factors = factor.dtype;
  d.win = makeWindow(kernel, x, y, Dims(), strides, pads, dilations, &w);
  d.images = x.shape[0];
  d.channels = x.shape[1];
  d.maps = y.shape[1];
  d.groupChannels = convGroupChannels(kernel, d.channels, d.maps, w, group);
  d.group = group;
  d.groupMaps = d.maps / group;
  d.columns = d.groupChannels * d.win.kernelSize;
  d.positions = d.win.outSize;
  return d;
}

/// The dims of an adjoint writing `out` (conv_grad_input's x, or
/// conv_grad_weight's w), checked; none when nothing is left to compute: an
/// empty result, or one of zeros (no gradient, or no columns), filled here.
std::optional<ConvDims> adjointDims(Context &ctx, const char *kernel, const Tensor &x,
                                    const Tensor &w, const Tensor &grad, const Tensor &out,
                                    Dims strides, Dims pads, Dims dilations, int64_t group) {
  const char *const roles[3] = {&x == &out ? "the result" : "x", &w == &out ? "the result" : "w",
                                "grad"};
  ConvDims d = convDims(kernel, x, w, grad, out, roles, strides, pads, dilations, group);
  if (out.numel() == 0)
    return std::nullopt;
  if (grad.numel() == 0 || d.columns == 0) {
    fill(ctx, out, 0.0);
    return std::nullopt;
  }
  return d;
}

/// Whether conv with this window reads x as its own column matrix.
bool isPointwise(const Window &win) {
  bool pointwise = win.kernelSize == 1;
  for (int d = 0; d < win.rank && pointwise; ++d)
    pointwise = win.stride[d] == 1 && win.padBegin[d] == 0 && win.in[d] == win.out[d];
  return pointwise;
}

/// What sizes a conv's column workspace (runtime/ConvScratch.h).
ConvColumns convColumns(const Window &win, int64_t images, int64_t group, int64_t columns) {
  return {images, group, columns, win.outSize, win.out[win.rank - 1], isPointwise(win)};
}

/// One call's column workspace of whole images of `elementBytes` elements,
/// stream-ordered, counted in the run's allocations; none for a pointwise
/// conv.
class ColumnWorkspace {
public:
  ColumnWorkspace(Context &ctx, const ConvColumns &columns, int64_t elementBytes,
                  const char *kernel)
      : ctx(ctx), kernel(kernel),
        bytes(static_cast<std::size_t>(cudaScratchBytes(columns, elementBytes))) {
    if (bytes == 0)
      return;
    check(cudaMallocAsync(reinterpret_cast<void **>(&data), bytes, ctx.stream), kernel);
    if (ctx.allocations)
      ctx.allocations->allocated(bytes);
  }
  ~ColumnWorkspace() {
    if (!data)
      return;
    check(cudaFreeAsync(data, ctx.stream), kernel);
    if (ctx.allocations)
      ctx.allocations->released(bytes);
  }
  ColumnWorkspace(const ColumnWorkspace &) = delete;
  ColumnWorkspace &operator=(const ColumnWorkspace &) = delete;
  template <typename T> T *as() const { return reinterpret_cast<T *>(data); }

private:
  Context &ctx;
  const char *kernel;
  std::size_t bytes;
  char *data = nullptr;
};

/// Column-major C[b] = op(A[b]) op(B[b]) + beta C[b] (m x n, k deep) over
/// `batch` matrices, each operand's `stride` elements apart: cuBLAS's
/// strided batch, the factors of `factors` (f32 or bf16) summed in f32
/// into f32 C.
void convGemm(const char *kernel, cublasHandle_t blas, DType factors, cublasOperation_t opA,
              cublasOperation_t opB, int m, int n, int k, const void *a, int lda, int64_t strideA,
              const void *b, int ldb, int64_t strideB, float beta, float *c, int ldc,
              int64_t strideC, int64_t batch) {
  const float one = 1.0f;
  const cudaDataType type = blasType(kernel, factors);
  checkBlas(cublasGemmStridedBatchedEx(blas, opA, opB, m, n, k, &one, a, type, lda, strideA, b,
                                       type, ldb, strideB, &beta, c, CUDA_R_32F, ldc, strideC,
                                       static_cast<int>(batch), CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT),
            kernel);
}

/// A conv's column matrices of T (the factors' type, or f32 for the
/// columns conv_grad_input computes), a chunk of images at a time: the
/// GEMM dims (checked to fit cuBLAS's int) and handle, the chunking and its
/// workspace.
template <typename T> struct ColumnChunks {
  ColumnChunks(Context &ctx, const char *kernel, const ConvDims &dims)
      : dims(dims), shape(convColumns(dims.win, dims.images, dims.group, dims.columns)),
        perImage(dims.group * dims.columns * dims.positions),
        chunk(shape.pointwise ? dims.images : cudaImagesPerChunk(shape, sizeof(T))),
        workspace(ctx, shape, sizeof(T), kernel) {
    for (int64_t v : {dims.positions, dims.columns, dims.groupMaps, dims.group, dims.images})
      requireInt(kernel, v, "a conv GEMM dim");
    P = static_cast<int>(dims.positions);
    CK = static_cast<int>(dims.columns);
    Mg = static_cast<int>(dims.groupMaps);
    blas = blasHandle(ctx, kernel);
  }
  /// Calls f(first, count) for each chunk of images.
  template <typename F> void forEach(F &&f) const {
    for (int64_t first = 0; first < shape.images; first += chunk)
      f(first, std::min(chunk, shape.images - first));
  }
  /// The column matrices of images [first, first + count) of x (channels x
  /// spatial each): x itself for a pointwise conv, else unfolded into the
  /// workspace.
  const T *unfold(Context &ctx, const char *kernel, const Tensor &x, int64_t first,
                  int64_t count) const {
    const T *images = x.as<T>() + first * dims.channels * dims.win.inSize;
    if (shape.pointwise)
      return images;
    int64_t total = count * perImage;
    im2colKernel<T><<<blocksFor(total), kThreads, 0, ctx.stream>>>(
        total, dims.win, dims.channels, dims.groupChannels, shape.groups, images,
        workspace.template as<T>());
    checkLaunch(kernel);
    return workspace.template as<T>();
  }

  const ConvDims &dims;
  ConvColumns shape;
  int64_t perImage, chunk;
  ColumnWorkspace workspace;
  int P = 0, CK = 0, Mg = 0;
  cublasHandle_t blas;
};

/// A convolution's factor types (dispatch).
using ConvFactorTypes = Types<float, __nv_bfloat16>;

} // namespace
} // namespace detail

using namespace detail;

// cuBLAS reads every operand as stored: `constantWeights` changes nothing here.
void matmul(Context &ctx, const Tensor &lhs, const Tensor &rhs, const Tensor &out, bool transA,
            bool transB, bool) {
  const char *kernel = "matmul";
  const cudaDataType factors = factorType(kernel, lhs, rhs);
  requireType(kernel, out, DType::F32, "the result");
  int lr = lhs.rank(), rr = rhs.rank();
  if (lr < 1 || rr < 1)
    fail(kernel, "operands must have rank 1 or more");
  if ((transA && lr < 2) || (transB && rr < 2))
    fail(kernel, "a transposed operand must have rank 2 or more");
  int64_t m = lr >= 2 ? lhs.shape[lr - (transA ? 1 : 2)] : 1,
          k = lhs.shape[lr - (transA && lr >= 2 ? 2 : 1)];
  int64_t k2 = rr >= 2 ? rhs.shape[rr - (transB ? 1 : 2)] : rhs.shape[0],
          n = rr >= 2 ? rhs.shape[rr - (transB ? 2 : 1)] : 1;
  if (k != k2)
    fail(kernel, "inner dims %lld and %lld differ", static_cast<long long>(k),
         static_cast<long long>(k2));
  int outMatrixRank = (lr >= 2) + (rr >= 2);
  int batchRank = out.rank() - outMatrixRank;
  if (batchRank < 0)
    fail(kernel, "the result has rank %d, too low", out.rank());
  if ((lr >= 2 && out.shape[batchRank] != m) || (rr >= 2 && out.shape[out.rank() - 1] != n))
    fail(kernel, "the result's matrix dims do not match the operands");

  // The batch dims with out's, lhs's and rhs's strides, merged where all
  // three are contiguous: one strided-batched call per remaining outer index.
  Layout<3> batch;
  batch.rank = batchRank;
  for (int d = 0; d < batchRank; ++d)
    batch.dims[d] = out.shape[d];
  batchStrides(kernel, out.shape, batchRank, m * n, batch, batch.strides[0]);
  batchStrides(kernel, lhs.shape, lr >= 2 ? lr - 2 : 0, m * k, batch, batch.strides[1]);
  batchStrides(kernel, rhs.shape, rr >= 2 ? rr - 2 : 0, k * n, batch, batch.strides[2]);
  batch.simplify();
  if (out.numel() == 0)
    return;
  if (k == 0) {
    fill(ctx, out, 0.0);
    return;
  }
  cublasHandle_t handle = blasHandle(ctx, kernel);
  int64_t inner = batch.rank ? batch.dims[batch.rank - 1] : 1;
  int64_t stride[3] = {0, 0, 0};
  for (int j = 0; j < 3 && batch.rank; ++j)
    stride[j] = batch.strides[j][batch.rank - 1];
  Layout<3> outerLayout = batch;
  outerLayout.rank = batch.rank ? batch.rank - 1 : 0;
  int64_t outer = 1;
  for (int d = 0; d < outerLayout.rank; ++d)
    outer *= outerLayout.dims[d];
  for (int64_t o = 0; o < outer; ++o) {
    int64_t off[3];
    outerLayout.offsets(o, off);
    const std::size_t size = dtypeSize(lhs.dtype);
    gemmBatched(kernel, handle, factors, transA, transB, m, n, k,
                static_cast<const char *>(lhs.data) + off[1] * size, stride[1],
                static_cast<const char *>(rhs.data) + off[2] * size, stride[2],
                out.as<float>() + off[0], stride[0], inner);
  }
}

void gemm(Context &ctx, const Tensor &a, const Tensor &b, const Tensor *c, const Tensor &out,
          float alpha, float beta, bool transA, bool transB, Activation activation, bool,
          bool firstCallWrites) {
  const char *kernel = "gemm";
  if (firstCallWrites && ctx.firstCall)
    beta = 0.0f;
  const cudaDataType factors = factorType(kernel, a, b);
  // bf16 factors may write a bf16 result: the f32 sum, plus c, rounded
  // (cuBLAS's bf16 C under f32 compute).
  const DType result =
      factors == CUDA_R_16BF && out.dtype == DType::BF16 ? DType::BF16 : DType::F32;
  const cudaDataType resultType = blasType(kernel, result);
  requireType(kernel, out, result, "the result");
  if (result == DType::BF16 && activation != Activation::None)
    fail(kernel, "a bf16 result takes no activation");
  if (a.rank() != 2 || b.rank() != 2 || out.rank() != 2)
    fail(kernel, "A, B and the result must be matrices");
  int64_t m = transA ? a.shape[1] : a.shape[0], k = transA ? a.shape[0] : a.shape[1];
  int64_t kb = transB ? b.shape[1] : b.shape[0], n = transB ? b.shape[0] : b.shape[1];
  if (k != kb || out.shape[0] != m || out.shape[1] != n)
    fail(kernel, "shapes do not agree");
  for (int64_t v : {m, n, k})
    requireInt(kernel, v, "a dim");
  if (out.numel() == 0)
    return;
  float blasBeta = 0.0f;
  if (c && beta != 0.0f) {
    requireType(kernel, *c, result, "C");
    // out = broadcast(C), then cuBLAS accumulates alpha A B onto beta out.
    if (!(c->data == out.data && c->numel() == out.numel())) {
      Layout<2> copy;
      copy.rank = 2;
      copy.dims[0] = m;
      copy.dims[1] = n;
      denseStrides(out.shape, copy.strides[0]);
      broadcastStrides(kernel, *c, out.shape, copy.strides[1]);
      stridedCopy(ctx, kernel, result, copy, out.data, 0, c->data, 0);
    }
    blasBeta = beta;
  }
  cublasHandle_t handle = blasHandle(ctx, kernel);
  int M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(k);
  if (K == 0) {
    // No products: out = beta * C (or 0).
    if (blasBeta == 0.0f)
      fill(ctx, out, 0.0);
    else
      checkBlas(
          cublasScalEx(handle, M * N, &blasBeta, CUDA_R_32F, out.data, resultType, 1, CUDA_R_32F),
          kernel);
    applyActivation(ctx, activation, out);
    return;
  }
  int ldb = transB ? K : N, lda = transA ? M : K;
  checkBlas(cublasGemmEx(handle, transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                         transA ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, b.data, factors,
                         ldb > 1 ? ldb : 1, a.data, factors, lda > 1 ? lda : 1, &blasBeta, out.data,
                         resultType, N > 1 ? N : 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            kernel);
  applyActivation(ctx, activation, out);
}

// The convolutions read their weights as stored: `constantWeights` changes
// nothing here. Their factors are f32, or bf16 (--precision bf16) with f32
// sums and results.
void conv(Context &ctx, const Tensor &x, const Tensor &w, const Tensor *b, const Tensor &y,
          Dims strides, Dims pads, Dims dilations, int64_t group, Activation activation, bool) {
  const char *kernel = "conv";
  static const char *const roles[3] = {"x", "w", "y"};
  if (b)
    requireType(kernel, *b, DType::F32, "the bias");
  ConvDims d = convDims(kernel, x, w, y, y, roles, strides, pads, dilations, group);
  int64_t maps = d.maps, positions = d.positions;
  if (b)
    requireNumel(kernel, *b, maps, "the bias");
  if (y.numel() == 0)
    return;
  if (d.columns == 0) {
    fill(ctx, y, 0.0);
  } else {
    dispatch(kernel, d.factors, ConvFactorTypes{}, [&](auto tag) {
      using T = typename decltype(tag)::type;
      // A pointwise conv reads x as its column matrix; others unfold a
      // chunk of images at a time into a stream-ordered workspace.
      ColumnChunks<T> chunks(ctx, kernel, d);
      chunks.forEach([&](int64_t first, int64_t count) {
        const T *col = chunks.unfold(ctx, kernel, x, first, count);
        // y_g[Mg, P] = w_g[Mg, CK] col_g[CK, P] for each image and group:
        // batch over the larger of the two, loop over the other.
        float *yChunk = y.as<float>() + first * maps * positions;
        const T *wData = w.as<T>();
        int64_t groupColumns = d.columns * positions, groupWeights = d.groupMaps * d.columns;
        if (count >= group) {
          for (int64_t g = 0; g < group; ++g)
            convGemm(kernel, chunks.blas, d.factors, CUBLAS_OP_N, CUBLAS_OP_N, chunks.P, chunks.Mg,
                     chunks.CK, col + g * groupColumns, chunks.P, chunks.perImage,
                     wData + g * groupWeights, chunks.CK, 0, 0.0f,
                     yChunk + g * d.groupMaps * positions, chunks.P, maps * positions, count);
        } else {
          for (int64_t image = 0; image < count; ++image)
            convGemm(kernel, chunks.blas, d.factors, CUBLAS_OP_N, CUBLAS_OP_N, chunks.P, chunks.Mg,
                     chunks.CK, col + image * chunks.perImage, chunks.P, groupColumns, wData,
                     chunks.CK, groupWeights, 0.0f, yChunk + image * maps * positions, chunks.P,
                     d.groupMaps * positions, group);
        }
      });
    });
  }
  if (b) {
    int64_t n = y.numel();
    addChannelBiasKernel<<<blocksFor(n), kThreads, 0, ctx.stream>>>(n, maps, positions,
                                                                    b->as<float>(), y.as<float>());
    checkLaunch(kernel);
  }
  applyActivation(ctx, activation, y);
}

void conv_grad_input(Context &ctx, const Tensor &grad, const Tensor &w, const Tensor &out,
                     Dims strides, Dims pads, Dims dilations, int64_t group) {
  const char *kernel = "conv_grad_input";
  std::optional<ConvDims> d =
      adjointDims(ctx, kernel, out, w, grad, out, strides, pads, dilations, group);
  if (!d)
    return;
  dispatch(kernel, d->factors, ConvFactorTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    // A pointwise conv's columns are dx itself; others go through an f32
    // workspace of a chunk of images and are folded back onto dx.
    ColumnChunks<float> chunks(ctx, kernel, *d);
    bool pointwise = chunks.shape.pointwise;
    float *workspace = chunks.workspace.template as<float>();
    chunks.forEach([&](int64_t first, int64_t count) {
      float *dx = out.as<float>() + first * d->channels * d->win.inSize;
      float *col = pointwise ? dx : workspace;
      const T *gChunk = grad.as<T>() + first * d->maps * d->positions;
      // col_g[CK, P] = w_g[Mg, CK]^T dy_g[Mg, P], per image and group: in
      // column-major terms col_g^T[P, CK] = dy_g^T[P, Mg] w_g[Mg, CK].
      for (int64_t g = 0; g < group; ++g)
        convGemm(kernel, chunks.blas, d->factors, CUBLAS_OP_N, CUBLAS_OP_T, chunks.P, chunks.CK,
                 chunks.Mg, gChunk + g * d->groupMaps * d->positions, chunks.P,
                 d->maps * d->positions, w.as<T>() + g * d->groupMaps * d->columns, chunks.CK, 0,
                 0.0f, col + g * d->columns * d->positions, chunks.P, chunks.perImage, count);
      if (!pointwise) {
        int64_t total = count * d->channels * d->win.inSize;
        col2imKernel<<<blocksFor(total), kThreads, 0, ctx.stream>>>(total, d->win, d->channels,
                                                                    workspace, dx);
        checkLaunch(kernel);
      }
    });
  });
}

void conv_grad_weight(Context &ctx, const Tensor &grad, const Tensor &x, const Tensor &out,
                      Dims strides, Dims pads, Dims dilations, int64_t group) {
  const char *kernel = "conv_grad_weight";
  std::optional<ConvDims> d =
      adjointDims(ctx, kernel, x, out, grad, out, strides, pads, dilations, group);
  if (!d)
    return;
  // The images' products add up in dw.
  fill(ctx, out, 0.0);
  dispatch(kernel, d->factors, ConvFactorTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    ColumnChunks<T> chunks(ctx, kernel, *d);
    chunks.forEach([&](int64_t first, int64_t count) {
      const T *col = chunks.unfold(ctx, kernel, x, first, count);
      // dw_g[Mg, CK] += dy_g[Mg, P] col_g[CK, P]^T for each image, the
      // groups batched (each writes its own dw_g): in column-major terms
      // dw_g^T[CK, Mg] += col_g^T'[CK, P] dy_g^T[P, Mg].
      for (int64_t image = 0; image < count; ++image)
        convGemm(kernel, chunks.blas, d->factors, CUBLAS_OP_T, CUBLAS_OP_N, chunks.CK, chunks.Mg,
                 chunks.P, col + image * chunks.perImage, chunks.P, d->columns * d->positions,
                 grad.as<T>() + (first + image) * d->maps * d->positions, chunks.P,
                 d->groupMaps * d->positions, 1.0f, out.as<float>(), chunks.CK,
                 d->groupMaps * d->columns, group);
    });
  });
}

} // namespace cleave::rt::cuda
