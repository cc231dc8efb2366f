//===- Movement.cu - transpose, concat, split, slice, gather, expand, trilu ===//
//
// Element type agnostic: elements move as unsigned integers of their size.
// Transpose, slice, expand, concat and split are strided copies. The
// adjoints of gather and slice come last: gather_grad adds (f32, f64, i32,
// i64, atomically, so repeated float indices sum in no fixed order),
// slice_grad zeroes and copies.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Common.cuh"

namespace cleave::rt::cuda {
namespace detail {
namespace {

int64_t normaliseAxis(const char *kernel, int64_t axis, int rank) {
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank)
    fail(kernel, "axis %lld out of range for rank %d", static_cast<long long>(axis), rank);
  return axis;
}

/// A gather along one axis of `table`: viewed as outer x axisDim x inner,
/// it gives or takes (gather_grad) `count` rows of `inner` elements per
/// outer index.
struct GatherShape {
  int64_t outer = 1, axisDim = 0, inner = 1, count = 0;
};

/// The gather of `indices` along `axis` of `table`; fails unless `gathered`
/// (`what`) holds outer x count x inner elements.
GatherShape gatherShape(const char *kernel, const Tensor &table, int64_t axis,
                        const Tensor &indices, const Tensor &gathered, const char *what) {
  axis = normaliseAxis(kernel, axis, table.rank());
  GatherShape shape;
  shape.axisDim = table.shape[axis];
  shape.count = indices.numel();
  for (int d = 0; d < axis; ++d)
    shape.outer *= table.shape[d];
  for (int d = static_cast<int>(axis) + 1; d < table.rank(); ++d)
    shape.inner *= table.shape[d];
  requireNumel(kernel, gathered, shape.outer * shape.count * shape.inner, what);
  return shape;
}

/// Checks that `piece` (concat's input, split's output) has `whole`'s rank
/// and dims but along `axis`; the errors name them `pieceName` and
/// `wholeName`.
void requirePieceOf(const char *kernel, const Tensor &piece, const Tensor &whole, int64_t axis,
                    const char *pieceName, const char *wholeName) {
  if (piece.rank() != whole.rank())
    fail(kernel, "%s has rank %d, %s %d", pieceName, piece.rank(), wholeName, whole.rank());
  for (int d = 0; d < piece.rank(); ++d)
    if (d != axis && piece.shape[d] != whole.shape[d])
      fail(kernel, "%s's dim %d differs from %s's", pieceName, d, wholeName);
}

/// The layout over `shape` with dense strides of `dstShape` and `srcShape`
/// (both of `shape`'s rank).
Layout<2> denseCopyLayout(const Dims &shape, const Dims &dstShape, const Dims &srcShape) {
  Layout<2> layout;
  layout.rank = shape.size;
  for (int d = 0; d < shape.size; ++d)
    layout.dims[d] = shape[d];
  denseStrides(dstShape, layout.strides[0]);
  denseStrides(srcShape, layout.strides[1]);
  return layout;
}

/// The element of the table (outer x axisDim x inner) that element `i` of
/// the gathered tensor (outer x count x inner) stands for, or -1 where its
/// index is out of range: undefined in ONNX, so gather writes zero and
/// gather_grad skips it rather than fault.
template <typename I>
__device__ int64_t gatheredFrom(int64_t i, int64_t count, int64_t axisDim, int64_t inner,
                                const I *indices) {
  int64_t j = i % inner;
  int64_t t = i / inner;
  int64_t k = t % count;
  int64_t o = t / count;
  int64_t index = static_cast<int64_t>(indices[k]);
  if (index < 0)
    index += axisDim;
  return index >= 0 && index < axisDim ? (o * axisDim + index) * inner + j : -1;
}

template <typename U, typename I>
__global__ void gatherKernel(int64_t n, int64_t count, int64_t axisDim, int64_t inner,
                             const U *data, const I *indices, U *out) {
  CLEAVE_GRID_LOOP(i, n) {
    int64_t from = gatheredFrom(i, count, axisDim, inner, indices);
    out[i] = from >= 0 ? data[from] : U(0);
  }
}

template <typename U>
__global__ void triluKernel(int64_t n, int64_t rows, int64_t cols, bool upper, int64_t k,
                            const U *in, U *out) {
  CLEAVE_GRID_LOOP(i, n) {
    int64_t c = i % cols;
    int64_t r = (i / cols) % rows;
    bool keep = upper ? c - r >= k : c - r <= k;
    out[i] = keep ? in[i] : U(0);
  }
}

/// atomicAdd, an int64_t added as unsigned: two's complement adds alike,
/// and CUDA has no signed 64-bit form.
template <typename T> __device__ void addAtomically(T *to, T value) {
  if constexpr (std::is_same_v<T, int64_t>)
    atomicAdd(reinterpret_cast<unsigned long long *>(to), static_cast<unsigned long long>(value));
  else
    atomicAdd(to, value);
}

/// One thread per element of grad, added at its index (atomically: repeated
/// indices meet in one element).
template <typename T, typename I>
__global__ void gatherGradKernel(int64_t n, int64_t count, int64_t axisDim, int64_t inner,
                                 const T *grad, const I *indices, T *out) {
  CLEAVE_GRID_LOOP(i, n) {
    int64_t to = gatheredFrom(i, count, axisDim, inner, indices);
    if (to >= 0)
      addAtomically(out + to, grad[i]);
  }
}

/// The copy between a slice (`sliced`: dims from `starts` by `steps`, one
/// step when `steps` is empty) and `whole`, once checked to stay inside
/// (`outside` says how the kernel uses it): operand `slicedOperand` of the
/// layout walks the slice densely, the other one `whole` at the slice's
/// positions from the returned element offset.
int64_t sliceLayout(const char *kernel, const Tensor &whole, const Tensor &sliced, Dims starts,
                    Dims steps, int slicedOperand, const char *outside, Layout<2> &layout) {
  int rank = whole.rank();
  int64_t wholeStrides[kMaxRank];
  denseStrides(whole.shape, wholeStrides);
  layout.rank = rank;
  denseStrides(sliced.shape, layout.strides[slicedOperand]);
  int64_t base = 0;
  for (int d = 0; d < rank; ++d) {
    int64_t step = steps.size ? steps[d] : 1;
    int64_t last = starts[d] + (sliced.shape[d] - 1) * step;
    if (sliced.shape[d] > 0 && (starts[d] < 0 || starts[d] >= whole.shape[d] || last < 0 ||
                                last >= whole.shape[d]))
      fail(kernel, "dim %d %s", d, outside);
    layout.dims[d] = sliced.shape[d];
    layout.strides[1 - slicedOperand][d] = wholeStrides[d] * step;
    base += starts[d] * wholeStrides[d];
  }
  return base;
}

/// Concat and split: `whole` is the pieces laid side by side along `axis`.
/// Copies the pieces into whole (concat, whose inputs must fill it) or whole
/// into the pieces (split, whose outputs may leave its end out), all checked
/// before anything is copied.
void joinOrSplit(Context &ctx, const char *kernel, const TensorList &pieces, const Tensor &whole,
                 int64_t axis, bool intoWhole) {
  axis = normaliseAxis(kernel, axis, whole.rank());
  const char *pieceName = intoWhole ? "an input" : "an output";
  const char *wholeName = intoWhole ? "the result" : "the input";
  int64_t total = 0;
  for (const Tensor &piece : pieces) {
    requireSameType(kernel, piece, whole);
    requirePieceOf(kernel, piece, whole, axis, pieceName, wholeName);
    total += piece.shape[axis];
  }
  if (intoWhole && total != whole.shape[axis])
    fail(kernel, "the inputs' dims along the axis add up to %lld, not %lld",
         static_cast<long long>(total), static_cast<long long>(whole.shape[axis]));
  if (!intoWhole && total > whole.shape[axis])
    fail(kernel, "the outputs are larger than the input along the axis");
  int64_t wholeStrides[kMaxRank];
  denseStrides(whole.shape, wholeStrides);
  int64_t offset = 0;
  for (const Tensor &piece : pieces) {
    int64_t wholeOffset = offset * wholeStrides[axis];
    if (intoWhole)
      stridedCopy(ctx, kernel, whole.dtype, denseCopyLayout(piece.shape, whole.shape, piece.shape),
                  whole.data, wholeOffset, piece.data, 0);
    else
      stridedCopy(ctx, kernel, whole.dtype, denseCopyLayout(piece.shape, piece.shape, whole.shape),
                  piece.data, 0, whole.data, wholeOffset);
    offset += piece.shape[axis];
  }
}

} // namespace
} // namespace detail

using namespace detail;

void transpose(Context &ctx, const Tensor &in, const Tensor &out, Dims perm) {
  const char *kernel = "transpose";
  requireSameType(kernel, in, out);
  int rank = in.rank();
  if (perm.size == 0) { // ONNX's default: reverse the dims
    perm.size = rank;
    for (int d = 0; d < rank; ++d)
      perm[d] = rank - 1 - d;
  }
  if (perm.size != rank || out.rank() != rank)
    fail(kernel, "perm has %d entries for rank %d", perm.size, rank);
  int64_t inStrides[kMaxRank];
  denseStrides(in.shape, inStrides);
  Layout<2> layout;
  layout.rank = rank;
  bool seen[kMaxRank] = {};
  for (int d = 0; d < rank; ++d) {
    int64_t p = perm[d];
    if (p < 0 || p >= rank || seen[p] || out.shape[d] != in.shape[p])
      fail(kernel, "perm is not a permutation matching the result's shape");
    seen[p] = true;
    layout.dims[d] = out.shape[d];
    layout.strides[1][d] = inStrides[p];
  }
  denseStrides(out.shape, layout.strides[0]);
  stridedCopy(ctx, kernel, in.dtype, layout, out.data, 0, in.data, 0);
}

void concat(Context &ctx, const TensorList &inputs, const Tensor &out, int64_t axis) {
  joinOrSplit(ctx, "concat", inputs, out, axis, true);
}

void split(Context &ctx, const Tensor &in, const TensorList &outputs, int64_t axis) {
  joinOrSplit(ctx, "split", outputs, in, axis, false);
}

void slice(Context &ctx, const Tensor &in, const Tensor &out, Dims starts, Dims steps) {
  const char *kernel = "slice";
  requireSameType(kernel, in, out);
  int rank = in.rank();
  if (out.rank() != rank || starts.size != rank || (steps.size != rank && steps.size != 0))
    fail(kernel, "starts and steps need one entry per dim of rank %d", rank);
  Layout<2> layout;
  int64_t base = sliceLayout(kernel, in, out, starts, steps, 0, "reads outside the input", layout);
  if (out.numel() == 0)
    return;
  stridedCopy(ctx, kernel, in.dtype, layout, out.data, 0, in.data, base);
}

void gather(Context &ctx, const Tensor &data, const Tensor &indices, const Tensor &out,
            int64_t axis) {
  const char *kernel = "gather";
  requireSameType(kernel, data, out);
  GatherShape shape = gatherShape(kernel, data, axis, indices, out, "the result");
  int64_t n = out.numel();
  dispatch(kernel, indices.dtype, IndexTypes{}, [&](auto indexTag) {
    using I = typename decltype(indexTag)::type;
    dispatchBySize(kernel, data.dtype, [&](auto tag) {
      using U = typename decltype(tag)::type;
      if (n == 0)
        return;
      gatherKernel<U, I><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
          n, shape.count, shape.axisDim, shape.inner, data.as<U>(), indices.as<I>(), out.as<U>());
      checkLaunch(kernel);
    });
  });
}

void expand(Context &ctx, const Tensor &in, const Tensor &out) {
  const char *kernel = "expand";
  requireSameType(kernel, in, out);
  Layout<2> layout;
  layout.rank = out.rank();
  for (int d = 0; d < out.rank(); ++d)
    layout.dims[d] = out.shape[d];
  denseStrides(out.shape, layout.strides[0]);
  broadcastStrides(kernel, in, out.shape, layout.strides[1]);
  stridedCopy(ctx, kernel, in.dtype, layout, out.data, 0, in.data, 0);
}

void trilu(Context &ctx, const Tensor &in, const Tensor &out, bool upper, int64_t k) {
  const char *kernel = "trilu";
  requireSameType(kernel, in, out);
  requireNumel(kernel, out, in.numel(), "the result");
  if (in.rank() < 2)
    fail(kernel, "the input has rank %d, expected 2 or more", in.rank());
  int64_t rows = in.shape[in.rank() - 2], cols = in.shape[in.rank() - 1];
  int64_t n = in.numel();
  dispatchBySize(kernel, in.dtype, [&](auto tag) {
    using U = typename decltype(tag)::type;
    if (n == 0)
      return;
    triluKernel<U><<<blocksFor(n), kThreads, 0, ctx.stream>>>(n, rows, cols, upper, k,
                                                              in.as<U>(), out.as<U>());
    checkLaunch(kernel);
  });
}

void gather_grad(Context &ctx, const Tensor &grad, const Tensor &indices, const Tensor &out,
                 int64_t axis) {
  const char *kernel = "gather_grad";
  requireSameType(kernel, grad, out);
  GatherShape shape = gatherShape(kernel, out, axis, indices, grad, "grad");
  int64_t n = grad.numel();
  dispatch(kernel, indices.dtype, IndexTypes{}, [&](auto indexTag) {
    using I = typename decltype(indexTag)::type;
    dispatch(kernel, out.dtype, ScatterTypes{}, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (out.numel() > 0)
        check(cudaMemsetAsync(out.data, 0, out.bytes(), ctx.stream), kernel);
      if (n == 0)
        return;
      gatherGradKernel<T, I><<<blocksFor(n), kThreads, 0, ctx.stream>>>(
          n, shape.count, shape.axisDim, shape.inner, grad.as<T>(), indices.as<I>(), out.as<T>());
      checkLaunch(kernel);
    });
  });
}

void slice_grad(Context &ctx, const Tensor &grad, const Tensor &out, Dims starts, Dims steps) {
  const char *kernel = "slice_grad";
  requireSameType(kernel, grad, out);
  int rank = out.rank();
  if (grad.rank() != rank || starts.size != rank || (steps.size != rank && steps.size != 0))
    fail(kernel, "grad, starts and steps need one entry per dim of rank %d", rank);
  // The copy walks grad densely (operand 1) and out at the slice's positions.
  Layout<2> layout;
  int64_t base =
      sliceLayout(kernel, out, grad, starts, steps, 1, "writes outside the result", layout);
  if (out.numel() > 0)
    check(cudaMemsetAsync(out.data, 0, out.bytes(), ctx.stream), kernel);
  if (grad.numel() == 0)
    return;
  stridedCopy(ctx, kernel, out.dtype, layout, out.data, base, grad.data, 0);
}

} // namespace cleave::rt::cuda
