//===- Reduce.cpp - reduce_sum, reduce_mean, reduce_max, reduce_prod, top_k ===//
//
// One walk for every reduction: the input is traversed contiguously while
// the output is addressed with stride 0 on the reduced dims. After dims are
// coalesced, a row either folds into one output element (reducing the
// innermost dims) or accumulates elementwise into a contiguous output row
// (reducing outer dims); both loops are plain and vectorisable. top_k
// partially sorts each slice's indices.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Support.h"

#include <algorithm>
#include <vector>

namespace cleave::rt::cpu {
namespace {

struct SumOp {
  using Types = NumericTypes;
  template <typename T> static T identity() { return T(0); }
  template <typename T> static T combine(T a, T b) { return wrapAdd(a, b); }
  template <typename T> static T row(const T *x, int64_t n, int64_t step) {
    return static_cast<T>(sumRow(x, n, step));
  }
};

struct MaxOp {
  using Types = ComparableTypes; // Bool too: the maximum of bools is their or
  template <typename T> static T identity() {
    if constexpr (std::is_floating_point_v<T>)
      return -std::numeric_limits<T>::infinity();
    else
      return std::numeric_limits<T>::lowest();
  }
  template <typename T> static T combine(T a, T b) { return maximum(a, b); }
  template <typename T> static T row(const T *x, int64_t n, int64_t step) {
    T m = identity<T>();
    for (int64_t i = 0; i < n; ++i)
      m = combine(m, x[i * step]);
    return m;
  }
};

struct ProdOp {
  using Types = NumericTypes;
  template <typename T> static T identity() { return T(1); }
  template <typename T> static T combine(T a, T b) { return wrapMul(a, b); }
  template <typename T> static T row(const T *x, int64_t n, int64_t step) {
    T p = identity<T>();
    for (int64_t i = 0; i < n; ++i)
      p = combine(p, x[i * step]);
    return p;
  }
};

/// Columns a column reduction keeps in registers at a time.
inline constexpr int64_t kColumnTile = 64;

/// Elements of each block a whole tensor's sum adds up on its own.
inline constexpr int64_t kSumBlock = int64_t(1) << 16;

/// The sum of the n floating-point elements at x: each block of kSumBlock
/// summed by sumRow, on the threads, and the blocks' sums added in block
/// order, so that the result is the same on any number of threads. A loss's
/// sum, the gradients' norm for clipping and fp16's overflow check reduce
/// megabytes to one value, which one core read at a fraction of the
/// memory's bandwidth.
template <typename T> T blockedSum(const Context &ctx, const T *x, int64_t n) {
  std::vector<double> blocks(static_cast<size_t>((n + kSumBlock - 1) / kSumBlock));
  forEachChunk(ctx, n, kSumBlock, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; b += kSumBlock)
      blocks[static_cast<size_t>(b / kSumBlock)] =
          static_cast<double>(sumRow(x + b, std::min(kSumBlock, end - b)));
  });
  double total = 0;
  for (double block : blocks)
    total += block;
  return static_cast<T>(total);
}

/// Whether `nest` sums a whole contiguous float tensor into y[0]: then
/// y[0] is its blockedSum.
template <typename Op, typename T>
bool sumsWholeTensor(const Context &ctx, const LoopNest<2> &nest, const T *x, T *y) {
  if constexpr (std::is_same_v<Op, SumOp> && std::is_floating_point_v<T>) {
    if (!nest.empty && nest.rank == 1 && nest.strides[0][0] == 1 && nest.strides[0][1] == 0) {
      y[0] = blockedSum(ctx, x, nest.dims[0]);
      return true;
    }
  }
  return false;
}

/// y[c] = combine(y[c], x[r][c]) over the rows r in order, for `width`
/// columns of a row-major matrix of `columns`; a full tile's loop has a
/// constant width, so that GCC keeps it in vector registers.
template <typename Op, typename T>
void combineColumns(const T *x, T *y, int64_t rows, int64_t columns, int64_t width) {
  if (width == kColumnTile) {
    T acc[kColumnTile];
    std::copy(y, y + kColumnTile, acc);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < kColumnTile; ++j)
        acc[j] = Op::combine(acc[j], x[r * columns + j]);
    std::copy(acc, acc + kColumnTile, y);
    return;
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < width; ++j)
      y[j] = Op::combine(y[j], x[r * columns + j]);
}

/// Each row of `nest` folded into its output element, or added element by
/// element into its output row.
template <typename Op, typename T> void reduceRows(const LoopNest<2> &nest, const T *x, T *y) {
  nest.forEachRow([&](const int64_t *off, int64_t n, const int64_t *step) {
    const T *xr = x + off[0];
    T *yr = y + off[1];
    if (step[1] == 0) {
      *yr = Op::combine(*yr, Op::row(xr, n, step[0]));
    } else if (step[0] == 1 && step[1] == 1) {
      for (int64_t i = 0; i < n; ++i)
        yr[i] = Op::combine(yr[i], xr[i]);
    } else {
      for (int64_t i = 0; i < n; ++i)
        yr[i * step[1]] = Op::combine(yr[i * step[1]], xr[i * step[0]]);
    }
  });
}

template <typename Op>
void reduce(const Context &ctx, const char *kernel, const Tensor &in, const Tensor &out,
            const Dims &axes, bool mean) {
  checkType(kernel, out, in.dtype);
  int rank = in.rank();
  bool reduced[kMaxRank] = {};
  if (axes.size == 0) { // ONNX's default: every dim
    for (int d = 0; d < rank; ++d)
      reduced[d] = true;
  }
  for (int i = 0; i < axes.size; ++i) {
    int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a < 0 || a >= rank)
      fail(kernel, "axis %lld out of range for rank %d", static_cast<long long>(axes[i]), rank);
    reduced[a] = true;
  }
  int64_t outStrides[kMaxRank];
  int64_t kept = 1;
  for (int d = rank - 1; d >= 0; --d) {
    outStrides[d] = reduced[d] ? 0 : kept;
    if (!reduced[d])
      kept *= in.shape[d];
  }
  if (kept != out.numel())
    fail(kernel, "result has %lld elements, expected %lld", static_cast<long long>(out.numel()),
         static_cast<long long>(kept));
  int64_t inStrides[kMaxRank];
  rowMajorStrides(in.shape, inStrides);
  LoopNest<2> nest;
  for (int d = 0; d < rank; ++d)
    nest.push(in.shape[d], {inStrides[d], outStrides[d]});
  nest.coalesce();
  int64_t count = kept == 0 ? 0 : in.numel() / kept;

  dispatch(kernel, in.dtype, typename Op::Types{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *x = in.as<T>();
    T *y = out.as<T>();
    for (int64_t i = 0; i < kept; ++i)
      y[i] = Op::template identity<T>();
    // Column sums (rows x columns over the rows: a bias's gradient): each
    // column added up over the rows in order, a tile of columns at a time
    // in registers (a pass over a row's columns for each row loaded and
    // stored them all); the threads take whole tiles.
    if (!nest.empty && nest.rank == 2 && nest.strides[1][0] == 0 && nest.strides[0][1] == 1 &&
        nest.strides[1][1] == 1 && nest.strides[0][0] == nest.dims[1] && nest.dims[0] > 0) {
      const int64_t rows = nest.dims[0], columns = nest.dims[1];
      forEachChunk(ctx, rows * columns, rows * kColumnTile, [&](int64_t begin, int64_t end) {
        for (int64_t c = begin / rows; c < end / rows; c += kColumnTile)
          combineColumns<Op>(x + c, y + c, rows, columns, std::min(kColumnTile, end / rows - c));
      });
    } else if (!sumsWholeTensor<Op>(ctx, nest, x, y)) {
      reduceRows<Op>(nest, x, y);
    }
    if (mean && count > 0) {
      if constexpr (isInteger<T>) {
        for (int64_t i = 0; i < kept; ++i)
          y[i] = static_cast<T>(y[i] / count); // truncates, as ONNX's reference
      } else if constexpr (isFloat<T>) {
        T divisor = static_cast<T>(count);
        for (int64_t i = 0; i < kept; ++i)
          y[i] /= divisor;
      }
    }
  });
}

} // namespace

void reduce_sum(Context &ctx, const Tensor &in, const Tensor &out, Dims axes) {
  reduce<SumOp>(ctx, "reduce_sum", in, out, axes, false);
}

void reduce_mean(Context &ctx, const Tensor &in, const Tensor &out, Dims axes) {
  reduce<SumOp>(ctx, "reduce_mean", in, out, axes, true);
}

void reduce_max(Context &ctx, const Tensor &in, const Tensor &out, Dims axes) {
  reduce<MaxOp>(ctx, "reduce_max", in, out, axes, false);
}

void reduce_prod(Context &ctx, const Tensor &in, const Tensor &out, Dims axes) {
  reduce<ProdOp>(ctx, "reduce_prod", in, out, axes, false);
}

void top_k(Context &, const Tensor &in, const Tensor &values, const Tensor &indices, int64_t axis,
           bool largest) {
  const char *kernel = "top_k";
  checkType(kernel, values, in.dtype);
  checkType(kernel, indices, DType::I64);
  int rank = in.rank();
  if (axis < 0 || axis >= rank || values.rank() != rank || indices.rank() != rank)
    fail(kernel, "axis %lld out of range for rank %d", static_cast<long long>(axis), rank);
  int64_t extent = in.shape[axis], k = values.shape[axis];
  int64_t inner = 1, outer = 1;
  for (int d = axis + 1; d < rank; ++d)
    inner *= in.shape[d];
  for (int d = 0; d < axis; ++d)
    outer *= in.shape[d];
  if (k > extent || values.numel() != outer * k * inner || indices.numel() != values.numel())
    fail(kernel, "results do not hold k = %lld of %lld entries", static_cast<long long>(k),
         static_cast<long long>(extent));
  dispatch(kernel, in.dtype, NumericTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *x = in.as<T>();
    T *v = values.as<T>();
    int64_t *idx = indices.as<int64_t>();
    std::vector<int64_t> order(extent);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const T *slice = x + o * extent * inner + i;
        // a before b: larger (smaller) first, NaN above every number, then
        // the lower index.
        auto before = [&](int64_t a, int64_t b) {
          T va = slice[a * inner], vb = slice[b * inner];
          bool aNan = va != va, bNan = vb != vb;
          if (aNan || bNan)
            return aNan != bNan ? (aNan == largest) : a < b;
          if (va != vb)
            return largest ? va > vb : va < vb;
          return a < b;
        };
        for (int64_t j = 0; j < extent; ++j)
          order[j] = j;
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        for (int64_t j = 0; j < k; ++j) {
          int64_t at = o * k * inner + j * inner + i;
          v[at] = slice[order[j] * inner];
          idx[at] = order[j];
        }
      }
  });
}

} // namespace cleave::rt::cpu
