//===- Reduce.cu - reduce_sum, reduce_mean, reduce_max, reduce_prod, top_k -===//
//
// Each output element reduces the input elements that share its kept
// coordinates: one block per output when there are many of those, one thread
// per output when there are few. Floating sums and products accumulate in
// double. top_k selects each slice's entries one thread per slice.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Common.cuh"

namespace cleave::rt::cuda {
namespace detail {
namespace {

enum class ReduceKind { Sum, Mean, Max, Prod };

/// Kept dims (the output's elements, in order) and reduced dims, each with
/// the input's strides.
struct ReduceGeometry {
  Layout<1> kept, reduced;
  int64_t count = 1; // elements per output
};

template <typename T, ReduceKind Kind> struct Reducer {
  using Acc = std::conditional_t<Kind != ReduceKind::Max && std::is_floating_point_v<T>, double, T>;
  __device__ static Acc identity() {
    return Kind == ReduceKind::Max ? lowest<Acc>() : Kind == ReduceKind::Prod ? Acc(1) : Acc(0);
  }
  __device__ static Acc combine(Acc a, Acc b) {
    if constexpr (Kind == ReduceKind::Max)
      return MaxOp()(a, b);
    else if constexpr (Kind == ReduceKind::Prod) // integer products wrap, as numpy's
      return static_cast<Acc>(static_cast<WrapT<Acc>>(a) * static_cast<WrapT<Acc>>(b));
    else
      return SumOp()(a, b);
  }
  __device__ static T finish(Acc acc, int64_t count) {
    if constexpr (Kind != ReduceKind::Mean)
      return static_cast<T>(acc);
    else if constexpr (std::is_integral_v<Acc>)
      return static_cast<T>(acc / count); // truncates, as the CPU kernels; count may not fit Acc
    else
      return static_cast<T>(acc / static_cast<Acc>(count));
  }
};

template <typename T, ReduceKind Kind>
__global__ void reduceBlockKernel(int64_t outputs, ReduceGeometry g, const T *in, T *out) {
  using R = Reducer<T, Kind>;
  using Acc = typename R::Acc;
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    int64_t base[1];
    g.kept.offsets(o, base);
    Acc acc = R::identity();
    for (int64_t r = threadIdx.x; r < g.count; r += blockDim.x) {
      int64_t off[1];
      g.reduced.offsets(r, off);
      acc = R::combine(acc, static_cast<Acc>(in[base[0] + off[0]]));
    }
    auto combine = [](Acc a, Acc b) { return R::combine(a, b); };
    acc = blockReduce(acc, combine, R::identity());
    if (threadIdx.x == 0)
      out[o] = R::finish(acc, g.count);
  }
}

template <typename T, ReduceKind Kind>
__global__ void reduceThreadKernel(int64_t outputs, ReduceGeometry g, const T *in, T *out) {
  using R = Reducer<T, Kind>;
  using Acc = typename R::Acc;
  CLEAVE_GRID_LOOP(o, outputs) {
    int64_t base[1];
    g.kept.offsets(o, base);
    Acc acc = R::identity();
    for (int64_t r = 0; r < g.count; ++r) {
      int64_t off[1];
      g.reduced.offsets(r, off);
      acc = R::combine(acc, static_cast<Acc>(in[base[0] + off[0]]));
    }
    out[o] = R::finish(acc, g.count);
  }
}

template <ReduceKind Kind>
void reduce(Context &ctx, const char *kernel, const Tensor &in, const Tensor &out,
            const Dims &axes) {
  requireSameType(kernel, in, out);
  int rank = in.rank();
  bool isReduced[kMaxRank] = {};
  for (int i = 0; i < axes.size; ++i) {
    int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (axis < 0 || axis >= rank || isReduced[axis])
      fail(kernel, "axes must be distinct dims of the rank-%d input", rank);
    isReduced[axis] = true;
  }
  int64_t strides[kMaxRank];
  denseStrides(in.shape, strides);
  ReduceGeometry g;
  for (int d = 0; d < rank; ++d) {
    Layout<1> &part = isReduced[d] ? g.reduced : g.kept;
    part.dims[part.rank] = in.shape[d];
    part.strides[0][part.rank] = strides[d];
    ++part.rank;
    if (isReduced[d])
      g.count *= in.shape[d];
  }
  g.kept.simplify();
  g.reduced.simplify();
  int64_t outputs = in.numel() / (g.count ? g.count : 1);
  if (g.count == 0) { // empty reductions: outputs are the product of the kept dims
    outputs = 1;
    for (int d = 0; d < g.kept.rank; ++d)
      outputs *= g.kept.dims[d];
  }
  requireNumel(kernel, out, outputs, "the result");
  // The maximum of bools is their or.
  using ElementTypes = std::conditional_t<Kind == ReduceKind::Max, ComparableTypes, NumericTypes>;
  dispatch(kernel, in.dtype, ElementTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (outputs == 0)
      return;
    if (g.count < 64 && outputs >= 1024) {
      reduceThreadKernel<T, Kind><<<blocksFor(outputs), kThreads, 0, ctx.stream>>>(
          outputs, g, in.as<T>(), out.as<T>());
    } else {
      reduceBlockKernel<T, Kind><<<blocksForItems(outputs), threadsForReduction(g.count), 0,
                                   ctx.stream>>>(outputs, g, in.as<T>(), out.as<T>());
    }
    checkLaunch(kernel);
  });
}

/// Whether entry a of a slice comes before entry b in top_k's order: larger
/// (smaller) first, NaN above every number, then the lower index.
template <typename T>
__device__ bool topBefore(const T *slice, int64_t inner, int64_t a, int64_t b, bool largest) {
  T va = slice[a * inner], vb = slice[b * inner];
  bool aNan = va != va, bNan = vb != vb;
  if (aNan || bNan)
    return aNan != bNan ? aNan == largest : a < b;
  if (va != vb)
    return largest ? va > vb : va < vb;
  return a < b;
}

/// One thread per slice: the j-th result is the entry after the (j-1)-th in
/// the order with the fewest entries before it (k passes over the slice).
template <typename T>
__global__ void topKKernel(int64_t slices, int64_t extent, int64_t inner, int64_t k, bool largest,
                           const T *in, T *values, int64_t *indices) {
  CLEAVE_GRID_LOOP(s, slices) {
    int64_t o = s / inner, i = s % inner;
    const T *slice = in + o * extent * inner + i;
    int64_t previous = -1;
    for (int64_t j = 0; j < k; ++j) {
      int64_t best = -1;
      for (int64_t c = 0; c < extent; ++c) {
        if (previous >= 0 && !topBefore(slice, inner, previous, c, largest))
          continue; // at or before the previous pick
        if (best < 0 || topBefore(slice, inner, c, best, largest))
          best = c;
      }
      int64_t at = o * k * inner + j * inner + i;
      values[at] = slice[best * inner];
      indices[at] = best;
      previous = best;
    }
  }
}

} // namespace
} // namespace detail

using namespace detail;

void reduce_sum(Context &ctx, const Tensor &in, const Tensor &out, Dims axes) {
  reduce<ReduceKind::Sum>(ctx, "reduce_sum", in, out, axes);
}

void reduce_mean(Context &ctx, const Tensor &in, const Tensor &out, Dims axes) {
  reduce<ReduceKind::Mean>(ctx, "reduce_mean", in, out, axes);
}

void reduce_max(Context &ctx, const Tensor &in, const Tensor &out, Dims axes) {
  reduce<ReduceKind::Max>(ctx, "reduce_max", in, out, axes);
}

void reduce_prod(Context &ctx, const Tensor &in, const Tensor &out, Dims axes) {
  reduce<ReduceKind::Prod>(ctx, "reduce_prod", in, out, axes);
}

void top_k(Context &ctx, const Tensor &in, const Tensor &values, const Tensor &indices,
           int64_t axis, bool largest) {
  const char *kernel = "top_k";
  requireSameType(kernel, in, values);
  if (indices.dtype != DType::I64)
    fail(kernel, "indices must be i64");
  int rank = in.rank();
  if (axis < 0 || axis >= rank || values.rank() != rank || indices.rank() != rank)
    fail(kernel, "axis %lld out of range for rank %d", static_cast<long long>(axis), rank);
  int64_t extent = in.shape[axis], k = values.shape[axis], inner = 1, outer = 1;
  for (int d = axis + 1; d < rank; ++d)
    inner *= in.shape[d];
  for (int d = 0; d < axis; ++d)
    outer *= in.shape[d];
  if (k > extent)
    fail(kernel, "k = %lld is more than the %lld entries", static_cast<long long>(k),
         static_cast<long long>(extent));
  requireNumel(kernel, values, outer * k * inner, "values");
  requireNumel(kernel, indices, outer * k * inner, "indices");
  dispatch(kernel, in.dtype, NumericTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    int64_t slices = outer * inner;
    if (slices == 0 || k == 0)
      return;
    topKKernel<T><<<blocksFor(slices), kThreads, 0, ctx.stream>>>(
        slices, extent, inner, k, largest, in.as<T>(), values.as<T>(), indices.as<int64_t>());
    checkLaunch(kernel);
  });
}

} // namespace cleave::rt::cuda
