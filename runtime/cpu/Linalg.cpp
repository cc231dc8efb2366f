//===- Linalg.cpp - matmul, gemm and the shared matrix product ------------===//

#include "runtime/cpu/ProductPrimitives.h"
#include "runtime/cpu/Support.h"

#include <algorithm>
#include <climits>
#include <optional>
#include <tuple>

#include <cblas.h>

// Exported by every OpenBLAS build; declared here too so any cblas.h works.
extern "C" void openblas_set_num_threads(int numThreads);

namespace cleave::rt::cpu {
namespace {

void checkBlasDims(const char *kernel, std::initializer_list<int64_t> dims) {
  for (int64_t d : dims)
    if (d > INT_MAX)
      fail(kernel, "matrix dim %lld exceeds BLAS's 32-bit indices", static_cast<long long>(d));
}

template <typename T> void scaleMatrix(int64_t m, int64_t n, double beta, T *c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      c[i * ldc + j] =
          beta == 0.0 ? T{} : convert<T>(beta * static_cast<double>(widen(c[i * ldc + j])));
}

/// The loop product for integer types (wrapping arithmetic).
template <typename T>
void loopGemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, double alpha,
              const T *a, int64_t lda, const T *b, int64_t ldb, double beta, T *c, int64_t ldc) {
  if (beta != 1.0)
    scaleMatrix(m, n, beta, c, ldc);
  for (int64_t i = 0; i < m; ++i) {
    T *cr = c + i * ldc;
    if (alpha == 1.0 && !transB) {
      // i-p-j order: the inner loop streams rows of B and C.
      for (int64_t p = 0; p < k; ++p) {
        T av = transA ? a[p * lda + i] : a[i * lda + p];
        const T *br = b + p * ldb;
        for (int64_t j = 0; j < n; ++j)
          cr[j] = wrapAdd(cr[j], wrapMul(av, br[j]));
      }
      continue;
    }
    for (int64_t j = 0; j < n; ++j) {
      T acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        T av = transA ? a[p * lda + i] : a[i * lda + p];
        T bv = transB ? b[j * ldb + p] : b[p * ldb + j];
        acc = wrapAdd(acc, wrapMul(av, bv));
      }
      cr[j] = wrapAdd(cr[j], alpha == 1.0 ? acc : convert<T>(alpha * static_cast<double>(acc)));
    }
  }
}

/// The checks every float product makes: what is left to compute, or
/// nothing (an empty result, or beta C alone when K is 0).
template <typename T>
bool needsProduct(int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc,
                  double beta, T *c) {
  if (m == 0 || n == 0)
    return false;
  if (k == 0) {
    scaleMatrix(m, n, beta, c, ldc);
    return false;
  }
  checkBlasDims("gemm", {m, n, k, lda, ldb, ldc});
  return true;
}

/// C = alpha op(A) op(B) + beta C + bias as a oneDNN primitive
/// (ProductPrimitives.h): the run's kept one, or one made for this call
/// where the context keeps none.
void primitiveProduct(Context &ctx, const char *kernel, const ProductProblem &p, const void *a,
                      const void *b, const float *bias, void *c) {
  // A batch's results lie one after the other: rows of one matrix.
  const int64_t rows = p.m * p.batch;
  if (p.result == DType::BF16
          ? !needsProduct(rows, p.n, p.k, p.lda, p.ldb, p.ldc, p.beta, static_cast<BFloat16 *>(c))
          : !needsProduct(rows, p.n, p.k, p.lda, p.ldb, p.ldc, p.beta, static_cast<float *>(c)))
    return;
  std::optional<ProductPrimitives> own;
  ProductPrimitives &primitives = ctx.products ? *ctx.products : own.emplace();
  if (!primitives.run(p, std::max(1, ctx.threads), a, b, bias, c, ctx.allocations))
    fail(kernel, "oneDNN's %s matmul failed on %lld x %lld x %lld", dtypeName(p.operands),
         static_cast<long long>(p.m), static_cast<long long>(p.n), static_cast<long long>(p.k));
}

} // namespace

template <>
void gemmCore<float>(Context &ctx, bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                     double alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                     double beta, float *c, int64_t ldc) {
  ProductProblem problem;
  problem.transA = transA;
  problem.transB = transB;
  std::tie(problem.m, problem.n, problem.k) = std::tie(m, n, k);
  std::tie(problem.lda, problem.ldb, problem.ldc) = std::tie(lda, ldb, ldc);
  problem.alpha = static_cast<float>(alpha);
  problem.beta = static_cast<float>(beta);
  primitiveProduct(ctx, "gemm", problem, a, b, nullptr, c);
}

/// f64 products, which oneDNN does not have, go to OpenBLAS.
template <>
void gemmCore<double>(Context &ctx, bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                      double alpha, const double *a, int64_t lda, const double *b, int64_t ldb,
                      double beta, double *c, int64_t ldc) {
  if (!needsProduct(m, n, k, lda, ldb, ldc, beta, c))
    return;
  openblas_set_num_threads(std::max(1, ctx.threads));
  cblas_dgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb),
              beta, c, static_cast<int>(ldc));
}

template <>
void gemmCore<int64_t>(Context &, bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                       double alpha, const int64_t *a, int64_t lda, const int64_t *b, int64_t ldb,
                       double beta, int64_t *c, int64_t ldc) {
  loopGemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <>
void gemmCore<int32_t>(Context &, bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                       double alpha, const int32_t *a, int64_t lda, const int32_t *b, int64_t ldb,
                       double beta, int32_t *c, int64_t ldc) {
  loopGemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

namespace {

/// Products of bf16 or f16 operands `a` and `b` into `out` (f32, or bf16
/// for bf16 operands), for one kernel call (ProductPrimitives.h): oneDNN's
/// bf16 primitives where the context runs them (Context::bf16Primitives),
/// else both operands widened to f32 once, into scratch, and the f32
/// product. Operands are addressed by element offsets into a and b.
class LowPrecisionProducts {
public:
  LowPrecisionProducts(Context &ctx, const char *kernel, const Tensor &a, const Tensor &b,
                       const Tensor &out)
      : ctx(ctx), kernel(kernel), a(a), b(b) {
    if (productOperands(a.dtype, ctx.bf16Primitives) == a.dtype)
      return;
    widened.emplace(ctx, kernel,
                    widenedProductScratchBytes(a.numel(), b.numel(), out.dtype, out.numel()));
    float *wide = widened->as<float>();
    cast(ctx, a, Tensor{wide, DType::F32, a.shape});
    cast(ctx, b, Tensor{wide + a.numel(), DType::F32, b.shape});
  }

  /// `problem` (its operands f32 where they are widened:
  /// productOperands) with A at `aOffset` into a and B at `bOffset` into b.
  void gemm(const ProductProblem &problem, int64_t aOffset, int64_t bOffset, const float *bias,
            void *c) {
    if (!widened) {
      primitiveProduct(ctx, kernel, problem, static_cast<const uint16_t *>(a.data) + aOffset,
                       static_cast<const uint16_t *>(b.data) + bOffset, bias, c);
      return;
    }
    float *wide = widened->as<float>();
    const float *wideA = wide + aOffset, *wideB = wide + a.numel() + bOffset;
    if (problem.result != DType::BF16) {
      primitiveProduct(ctx, kernel, problem, wideA, wideB, bias, c);
      return;
    }
    // oneDNN makes no product of f32 operands into bf16 here: the f32 sum
    // goes to scratch, then C's previous value is added and the whole
    // rounded, as the bf16 primitive does.
    ProductProblem sum = problem;
    sum.result = DType::F32;
    sum.beta = 0;
    sum.ldc = problem.n;
    float *summed = wide + a.numel() + b.numel();
    primitiveProduct(ctx, kernel, sum, wideA, wideB, nullptr, summed);
    const int64_t n = problem.n;
    forEachChunk(
        ctx, problem.m, std::max<int64_t>(1, (1 << 14) / n), [&](int64_t begin, int64_t end) {
          for (int64_t row = begin; row < end; ++row) {
            BFloat16 *to = static_cast<BFloat16 *>(c) + row * problem.ldc;
            const float *from = summed + row * n;
            for (int64_t j = 0; j < n; ++j)
              to[j] = toBFloat16(problem.beta == 0 ? from[j]
                                                   : from[j] + problem.beta * fromBFloat16(to[j]));
          }
        });
  }

private:
  Context &ctx;
  const char *kernel;
  const Tensor &a, &b;
  std::optional<Scratch> widened;
};

bool isLowPrecision(DType type) { return type == DType::BF16 || type == DType::F16; }
} // namespace

void matmul(Context &ctx, const Tensor &lhs, const Tensor &rhs, const Tensor &out, bool transA,
            bool transB, bool constantWeights) {
  const char *kernel = "matmul";
  checkType(kernel, rhs, lhs.dtype);
  const bool lowPrecision = isLowPrecision(lhs.dtype);
  checkType(kernel, out, lowPrecision ? DType::F32 : lhs.dtype);
  int rl = lhs.rank(), rr = rhs.rank();
  if (rl < 1 || rr < 1)
    fail(kernel, "operands must have rank 1 or more");
  if ((transA && rl < 2) || (transB && rr < 2))
    fail(kernel, "a transposed operand must have rank 2 or more");
  // numpy: a 1-D lhs is a row (1 x K), a 1-D rhs a column (K x 1); the unit
  // dim is dropped from the result.
  int64_t m = rl == 1 ? 1 : lhs.shape[rl - (transA ? 1 : 2)];
  int64_t k = lhs.shape[rl - (transA ? 2 : 1)];
  int64_t k2 = rr == 1 ? rhs.shape[0] : rhs.shape[rr - (transB ? 1 : 2)];
  int64_t n = rr == 1 ? 1 : rhs.shape[rr - (transB ? 2 : 1)];
  if (k != k2)
    fail(kernel, "contraction dims differ (%lld and %lld)", static_cast<long long>(k),
         static_cast<long long>(k2));
  Dims lb, rb, ob;
  for (int i = 0; i + 2 < rl; ++i)
    lb.values[lb.size++] = lhs.shape[i];
  for (int i = 0; i + 2 < rr; ++i)
    rb.values[rb.size++] = rhs.shape[i];
  int obRank = out.rank() - (rl > 1) - (rr > 1);
  if (obRank < 0)
    fail(kernel, "result rank %d is too small", out.rank());
  for (int i = 0; i < obRank; ++i)
    ob.values[ob.size++] = out.shape[i];
  int64_t batch = ob.product();
  if (batch * m * n != out.numel())
    fail(kernel, "result shape does not match the operands");

  // Every product is `problem` (problem.m x k times k x n) at element
  // offsets into lhs, rhs and out.
  const ProductProblem problem =
      matmulProblem(productOperands(lhs.dtype, ctx.bf16Primitives), lhs.shape, rhs.shape, out.shape,
                    transA, transB, constantWeights);
  auto forEachProduct = [&](auto &&product) {
    if (problem.m * problem.batch == batch * m) {
      // The batch folded into the rows, a batched product or a batch of
      // one: one call.
      product(0, 0, 0);
      return;
    }
    const Dims *inputs[2] = {&lb, &rb};
    LoopNest<3> nest = broadcastNest<3>(kernel, ob, inputs);
    nest.forEachRow([&](const int64_t *off, int64_t rows, const int64_t *step) {
      for (int64_t i = 0; i < rows; ++i)
        product((off[1] + i * step[1]) * m * k, (off[2] + i * step[2]) * k * n,
                (off[0] + i) * m * n);
    });
  };
  if (lowPrecision) {
    LowPrecisionProducts products(ctx, kernel, lhs, rhs, out);
    float *c = out.as<float>();
    forEachProduct(
        [&](int64_t a, int64_t b, int64_t o) { products.gemm(problem, a, b, nullptr, c + o); });
    return;
  }
  dispatch(kernel, lhs.dtype, MatrixTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *a = lhs.as<T>();
    const T *b = rhs.as<T>();
    T *c = out.as<T>();
    if constexpr (std::is_same_v<T, float>) {
      if (problem.constantB || problem.batch > 1) {
        // One B, read in oneDNN's layout (ProductPrimitives.h), or a batch.
        forEachProduct([&](int64_t ao, int64_t, int64_t co) {
          primitiveProduct(ctx, kernel, problem, a + ao, b, nullptr, c + co);
        });
        return;
      }
    }
    forEachProduct([&](int64_t ao, int64_t bo, int64_t co) {
      gemmCore<T>(ctx, transA, transB, problem.m, n, k, 1.0, a + ao, problem.lda, b + bo,
                  problem.ldb, 0.0, c + co, n);
    });
  });
}

void gemm(Context &ctx, const Tensor &a, const Tensor &b, const Tensor *c, const Tensor &out,
          float alpha, float beta, bool transA, bool transB, Activation activation,
          bool constantWeights, bool firstCallWrites) {
  const char *kernel = "gemm";
  if (firstCallWrites && ctx.firstCall)
    beta = 0.0f;
  checkType(kernel, b, a.dtype);
  const bool lowPrecision = isLowPrecision(a.dtype);
  // bf16 factors may write a bf16 result: the f32 sum, plus c, rounded.
  const DType result = !lowPrecision                                        ? a.dtype
                       : a.dtype == DType::BF16 && out.dtype == DType::BF16 ? DType::BF16
                                                                            : DType::F32;
  checkType(kernel, out, result);
  if (result == DType::BF16 && activation != Activation::None)
    fail(kernel, "a bf16 result takes no activation");
  if (a.rank() != 2 || b.rank() != 2 || out.rank() != 2)
    fail(kernel, "operands must be matrices");
  int64_t m = transA ? a.shape[1] : a.shape[0];
  int64_t k = transA ? a.shape[0] : a.shape[1];
  int64_t k2 = transB ? b.shape[1] : b.shape[0];
  int64_t n = transB ? b.shape[0] : b.shape[1];
  if (k != k2 || out.shape[0] != m || out.shape[1] != n)
    fail(kernel, "shapes do not agree");
  const Tensor *added = c && beta != 0.0f ? c : nullptr;
  if (added) {
    checkType(kernel, *added, result);
    if (added->data == out.data && added->numel() != out.numel())
      fail(kernel, "C aliases the result with another shape");
  }
  const bool inPlace = added && added->data == out.data;
  const ProductProblem problem =
      gemmProblem(productOperands(a.dtype, ctx.bf16Primitives), result, a.shape, b.shape,
                  added ? &added->shape : nullptr, inPlace, alpha, beta, transA, transB, activation,
                  constantWeights);
  const float *bias = problem.hasBias() ? added->as<float>() : nullptr;
  if (added && !inPlace && !bias) {
    // C broadcasts (unidirectionally) into the result, which the product
    // then accumulates into with beta.
    int64_t strides[kMaxRank];
    broadcastStrides(kernel, added->shape, out.shape, strides);
    stridedCopy(ctx, kernel, added->data, strides, out);
  }
  if (lowPrecision || result == DType::F32) {
    if (lowPrecision)
      LowPrecisionProducts(ctx, kernel, a, b, out).gemm(problem, 0, 0, bias, out.data);
    else
      primitiveProduct(ctx, kernel, problem, a.data, b.data, bias, out.data);
    // Without a product (k = 0) there was no primitive to apply it.
    if (k == 0)
      applyActivation(ctx, activation, out);
    return;
  }
  dispatch(kernel, a.dtype, MatrixTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    gemmCore<T>(ctx, transA, transB, m, n, k, static_cast<double>(alpha), a.as<T>(), a.shape[1],
                b.as<T>(), b.shape[1], static_cast<double>(problem.beta), out.as<T>(), n);
  });
  applyActivation(ctx, activation, out);
}

} // namespace cleave::rt::cpu
