//===- Movement.cpp - transpose, concat, split, slice, gather, expand, trilu //
//
// Element-type agnostic: everything moves whole elements by byte size. The
// adjoints of gather and slice come last: gather_grad adds (f32, f64, i32,
// i64), slice_grad moves.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Support.h"

#include <algorithm>

namespace cleave::rt::cpu {
namespace {

char *bytes(const Tensor &t) { return static_cast<char *>(t.data); }

int checkAxis(const char *kernel, int64_t axis, int rank) {
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank)
    fail(kernel, "axis %lld out of range for rank %d", static_cast<long long>(axis), rank);
  return static_cast<int>(axis);
}

/// A gather along one axis of `table`: viewed as outer x dim x inner, it
/// gives or takes (gather_grad) `count` rows of `inner` elements per outer
/// index.
struct GatherShape {
  int64_t outer, dim, inner, count;
};

/// The gather of `indices` along `axis` of `table`; fails with `mismatch`
/// unless `gathered` holds outer x count x inner elements.
GatherShape gatherShape(const char *kernel, const Tensor &table, int64_t axis,
                        const Tensor &indices, const Tensor &gathered, const char *mismatch) {
  int a = checkAxis(kernel, axis, table.rank());
  GatherShape shape{product(table.shape, 0, a), table.shape[a],
                    product(table.shape, a + 1, table.rank()), indices.numel()};
  if (gathered.numel() != shape.outer * shape.count * shape.inner)
    fail(kernel, "%s", mismatch);
  return shape;
}

/// `index` into a dim of `dim` entries, negative ones counting from the end;
/// one out of range is an error of `kernel` at the context's step.
int64_t indexWithin(const Context &ctx, const char *kernel, int64_t index, int64_t dim) {
  int64_t i = index < 0 ? index + dim : index;
  if (i < 0 || i >= dim)
    failOnData(ctx.step, kernel, "index %lld out of range [-%lld, %lld)",
               static_cast<long long>(index), static_cast<long long>(dim),
               static_cast<long long>(dim));
  return i;
}

/// Fills in a slice's default starts (0) and steps (1), one per dim of
/// `whole`, and checks that `sliced` has its rank; the error names them
/// `slicedName` and `wholeName`.
void completeSlice(const char *kernel, const Tensor &whole, const Tensor &sliced, Dims &starts,
                   Dims &steps, const char *slicedName, const char *wholeName) {
  int rank = whole.rank();
  starts = orDefault(kernel, "starts", starts, rank, 0);
  steps = orDefault(kernel, "steps", steps, rank, 1);
  if (sliced.rank() != rank)
    fail(kernel, "%s rank %d differs from %s %d", slicedName, sliced.rank(), wholeName, rank);
}

/// Where a slice (`sliced`: dims from `starts` by `steps`) lies in `whole`:
/// the element offset of its first element and the distance between its
/// elements along each dim, once checked to stay inside (`outside` says how
/// the kernel uses it: "reads outside the input").
struct SliceWindow {
  int64_t base = 0;
  int64_t strides[kMaxRank];
};
SliceWindow sliceWindow(const char *kernel, const Tensor &whole, const Tensor &sliced,
                        Dims starts, Dims steps, const char *outside) {
  SliceWindow window;
  int64_t wholeStrides[kMaxRank];
  rowMajorStrides(whole.shape, wholeStrides);
  for (int d = 0; d < whole.rank(); ++d) {
    int64_t last = starts[d] + (sliced.shape[d] - 1) * steps[d];
    if (sliced.shape[d] > 0 && (starts[d] < 0 || starts[d] >= whole.shape[d] || last < 0 ||
                                last >= whole.shape[d]))
      fail(kernel, "dim %d %s", d, outside);
    window.base += starts[d] * wholeStrides[d];
    window.strides[d] = steps[d] * wholeStrides[d];
  }
  return window;
}

/// Concat and split: `whole` is the pieces laid side by side along `axis`.
/// Copies pieces into whole (gathering) or whole into pieces.
void joinOrSplit(const char *kernel, const TensorList &pieces, const Tensor &whole, int64_t axis,
                 bool intoWhole) {
  int a = checkAxis(kernel, axis, whole.rank());
  std::size_t esize = dtypeSize(whole.dtype);
  int64_t outer = product(whole.shape, 0, a);
  int64_t wholeChunk = product(whole.shape, a, whole.rank());
  int64_t total = 0;
  for (const Tensor &p : pieces) {
    checkType(kernel, p, whole.dtype);
    if (p.rank() != whole.rank())
      fail(kernel, "piece rank %d differs from %d", p.rank(), whole.rank());
    total += product(p.shape, a, p.rank());
  }
  if (total != wholeChunk)
    fail(kernel, "pieces do not add up to the joined dim");
  int64_t offset = 0;
  for (const Tensor &p : pieces) {
    std::size_t chunk = static_cast<std::size_t>(product(p.shape, a, p.rank())) * esize;
    for (int64_t o = 0; o < outer; ++o) {
      char *w = bytes(whole) + (static_cast<std::size_t>(o * wholeChunk + offset)) * esize;
      char *q = bytes(p) + static_cast<std::size_t>(o) * chunk;
      if (intoWhole)
        std::memmove(w, q, chunk);
      else
        std::memmove(q, w, chunk);
    }
    offset += product(p.shape, a, p.rank());
  }
}

} // namespace

void transpose(Context &ctx, const Tensor &in, const Tensor &out, Dims perm) {
  const char *kernel = "transpose";
  checkSameLayout(kernel, in, out);
  if (perm.size == 0) { // ONNX's default: reverse the dims
    perm.size = in.rank();
    for (int i = 0; i < in.rank(); ++i)
      perm[i] = in.rank() - 1 - i;
  }
  if (perm.size != in.rank() || out.rank() != in.rank())
    fail(kernel, "perm has %d entries for rank %d", perm.size, in.rank());
  int64_t inStrides[kMaxRank], srcStrides[kMaxRank];
  rowMajorStrides(in.shape, inStrides);
  for (int i = 0; i < perm.size; ++i) {
    int64_t p = perm[i];
    if (p < 0 || p >= in.rank() || out.shape[i] != in.shape[static_cast<int>(p)])
      fail(kernel, "perm does not map the input onto the result");
    srcStrides[i] = inStrides[p];
  }
  if (in.data == out.data && in.numel() > 1)
    fail(kernel, "cannot transpose in place");
  stridedCopy(ctx, kernel, in.data, srcStrides, out);
}

void concat(Context &, const TensorList &inputs, const Tensor &out, int64_t axis) {
  joinOrSplit("concat", inputs, out, axis, true);
}

void split(Context &, const Tensor &in, const TensorList &outputs, int64_t axis) {
  joinOrSplit("split", outputs, in, axis, false);
}

void slice(Context &ctx, const Tensor &in, const Tensor &out, Dims starts, Dims steps) {
  const char *kernel = "slice";
  checkType(kernel, out, in.dtype);
  completeSlice(kernel, in, out, starts, steps, "result", "the input's");
  SliceWindow window = sliceWindow(kernel, in, out, starts, steps, "reads outside the input");
  if (out.numel() == 0)
    return;
  stridedCopy(ctx, kernel, bytes(in) + static_cast<std::size_t>(window.base) * dtypeSize(in.dtype),
              window.strides, out);
}

void gather(Context &ctx, const Tensor &data, const Tensor &indices, const Tensor &out,
            int64_t axis) {
  const char *kernel = "gather";
  checkType(kernel, out, data.dtype);
  GatherShape shape =
      gatherShape(kernel, data, axis, indices, out, "result shape does not match data and indices");
  dispatch(kernel, indices.dtype, IntTypes{}, [&](auto itag) {
    using I = typename decltype(itag)::type;
    const I *idx = indices.as<I>();
    dispatchBySize(kernel, data.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T *src = data.as<T>();
      T *dst = out.as<T>();
      for (int64_t o = 0; o < shape.outer; ++o)
        for (int64_t j = 0; j < shape.count; ++j) {
          int64_t i = indexWithin(ctx, kernel, static_cast<int64_t>(idx[j]), shape.dim);
          const T *s = src + (o * shape.dim + i) * shape.inner;
          T *d = dst + (o * shape.count + j) * shape.inner;
          if (shape.inner == 1)
            *d = *s;
          else
            std::memcpy(d, s, static_cast<std::size_t>(shape.inner) * sizeof(T));
        }
    });
  });
}

void expand(Context &ctx, const Tensor &in, const Tensor &out) {
  checkType("expand", out, in.dtype);
  int64_t strides[kMaxRank];
  broadcastStrides("expand", in.shape, out.shape, strides);
  if (in.data == out.data && in.numel() != out.numel())
    fail("expand", "cannot expand in place");
  stridedCopy(ctx, "expand", in.data, strides, out);
}

void trilu(Context &, const Tensor &in, const Tensor &out, bool upper, int64_t k) {
  const char *kernel = "trilu";
  checkSameLayout(kernel, in, out);
  if (in.rank() < 2)
    fail(kernel, "input rank %d is below 2", in.rank());
  int64_t rows = in.shape[in.rank() - 2], cols = in.shape[in.rank() - 1];
  int64_t batch = product(in.shape, 0, in.rank() - 2);
  std::size_t esize = dtypeSize(in.dtype);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < rows; ++i) {
      std::size_t row = static_cast<std::size_t>((b * rows + i) * cols) * esize;
      char *src = bytes(in) + row;
      char *dst = bytes(out) + row;
      // Kept columns: j <= i + k (lower) or j >= i + k (upper).
      int64_t lo = upper ? std::clamp<int64_t>(i + k, 0, cols) : 0;
      int64_t hi = upper ? cols : std::clamp<int64_t>(i + k + 1, 0, cols);
      if (src != dst)
        std::memmove(dst + lo * esize, src + lo * esize, static_cast<std::size_t>(hi - lo) * esize);
      std::memset(dst, 0, static_cast<std::size_t>(lo) * esize);
      std::memset(dst + hi * esize, 0, static_cast<std::size_t>(cols - hi) * esize);
    }
}

void gather_grad(Context &ctx, const Tensor &grad, const Tensor &indices, const Tensor &out,
                 int64_t axis) {
  const char *kernel = "gather_grad";
  checkType(kernel, grad, out.dtype);
  GatherShape shape = gatherShape(kernel, out, axis, indices, grad,
                                  "grad shape does not match the result and indices");
  if (grad.data == out.data && out.numel() > 0)
    fail(kernel, "cannot scatter in place");
  dispatch(kernel, indices.dtype, IntTypes{}, [&](auto itag) {
    using I = typename decltype(itag)::type;
    const I *idx = indices.as<I>();
    dispatch(kernel, out.dtype, ScatterTypes{}, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T *src = grad.as<T>();
      T *dst = out.as<T>();
      std::fill(dst, dst + out.numel(), T(0));
      // Serial, in index order: repeated indices add up deterministically.
      for (int64_t o = 0; o < shape.outer; ++o)
        for (int64_t j = 0; j < shape.count; ++j) {
          int64_t i = indexWithin(ctx, kernel, static_cast<int64_t>(idx[j]), shape.dim);
          const T *s = src + (o * shape.count + j) * shape.inner;
          T *d = dst + (o * shape.dim + i) * shape.inner;
          for (int64_t k = 0; k < shape.inner; ++k)
            d[k] += s[k];
        }
    });
  });
}

void slice_grad(Context &, const Tensor &grad, const Tensor &out, Dims starts, Dims steps) {
  const char *kernel = "slice_grad";
  checkType(kernel, grad, out.dtype);
  completeSlice(kernel, out, grad, starts, steps, "grad", "the result's");
  if (grad.data == out.data && out.numel() > 0)
    fail(kernel, "cannot place a slice in place");
  SliceWindow window = sliceWindow(kernel, out, grad, starts, steps, "writes outside the result");
  int64_t gradStrides[kMaxRank];
  rowMajorStrides(grad.shape, gradStrides);
  LoopNest<2> nest; // operand 0: grad (contiguous), 1: the positions in out
  for (int d = 0; d < grad.rank(); ++d)
    nest.push(grad.shape[d], {gradStrides[d], window.strides[d]});
  std::memset(out.data, 0, out.bytes());
  if (grad.numel() == 0)
    return;
  nest.coalesce();
  dispatchBySize(kernel, out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *src = grad.as<T>();
    T *dst = out.as<T>() + window.base;
    nest.forEachRow([&](const int64_t *offsets, int64_t n, const int64_t *step) {
      const T *s = src + offsets[0];
      T *d = dst + offsets[1];
      for (int64_t k = 0; k < n; ++k)
        d[k * step[1]] = s[k * step[0]];
    });
  });
}

} // namespace cleave::rt::cpu
