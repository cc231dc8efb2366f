//===- ProductPrimitives.h - matrix products as oneDNN primitives -*- C++ -*-===//
//
// Every f32 and bf16 matrix product (matmul, gemm, and convolution's im2col
// products) runs as a oneDNN matmul primitive, made on a problem's first
// call and kept for the run. Its kernels (brgemm) take either operand
// transposed at the full rate, where oneDNN's sgemm loses a quarter on the
// transposed weights of every Linear layer's forward (docs/performance.md),
// and they add a gemm's bias as they write the result, where it was
// broadcast into the result in a pass of its own before.
//
// A product whose B does not change during the run (a parameter of a
// program that trains nothing: cleave-constant-weights) reads B in the
// layout oneDNN prefers, reordered once on its first call and kept: the
// products run 10-15% faster here than on B as it is stored
// (docs/performance.md). The kept copies are allocations of the program,
// which plan.json's packed_weight_bytes predicts with packedWeightsBytes.
//
// Products of bf16 operands accumulate in f32 and write f32 (what
// --precision bf16 asks of every matmul and gemm), or for bf16 operands
// write a bf16 C: the f32 sum, plus C's previous value, rounded to bf16 as
// it is written (a gradient accumulator kept in bf16 that its product adds
// into: cleave-accumulate-into-products). They run as bf16 primitives where
// the CPU multiplies bf16 faster than f32 (cpu::Context::bf16Primitives,
// bf16PrimitivesByDefault: AMX, or AVX512_BF16 on a CPU without
// AVX512_FP16, such as AMD's Zen 4, where they ran at about twice oneDNN's
// own f32 rate); elsewhere (an Intel core with AVX512_FP16 but no AMX
// makes half as many multiply-adds a second with its bf16 dot product as
// with its f32 FMA, and its bf16 primitives ran at 0.57 of the f32 rate:
// bench/bf16_rate.cpp; a CPU without bf16 instructions), and for f16 operands (oneDNN 2.6 has no
// f16 product on the CPU), the operands are widened to f32 into scratch and multiplied by the f32
// product (a bf16 C: into an f32 sum in scratch, then added and rounded). Both give the exact
// products of the rounded operands summed in f32, each in its own order: a bf16 or f16 value's
// significand fits in half of f32's.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_CPU_PRODUCTPRIMITIVES_H
#define CLEAVE_RUNTIME_CPU_PRODUCTPRIMITIVES_H

#include "runtime/Allocations.h"
#include "runtime/Tensor.h"

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <utility>

// oneDNN's list of post-ops (dnnl_types.h), named here without oneDNN's
// headers.
struct dnnl_post_ops;

namespace cleave::rt::cpu {

/// Whether oneDNN may use bf16 dot-product instructions on this CPU
/// (AVX512_BF16, or AMX; as far as ONEDNN_MAX_CPU_ISA lets it): without
/// them, products and convolutions of bf16 factors are widened.
bool bf16Instructions();

/// Bytes of the scratch a product kernel (matmul or gemm) allocates where
/// it widens its factors (productOperands): the f32 copies of operands of
/// `lhsElements` and `rhsElements` elements, and for a bf16 `result` the
/// f32 sum of its `resultElements` elements.
int64_t widenedProductScratchBytes(int64_t lhsElements, int64_t rhsElements, DType result,
                                   int64_t resultElements);

/// Bytes of the kept copy of an f32 k x n B in the layout oneDNN prefers
/// (ProductProblem::constantB); 0 where oneDNN makes no such product. The
/// layout depends on k and n alone, not on m or the threads (a kernel test
/// checks it).
int64_t packedWeightsBytes(int64_t k, int64_t n);

/// One row-major product C = alpha op(A) op(B) + beta C + bias of f32 or
/// bf16 A and B into f32 C (or bf16 C for bf16 A and B), with its dims and
/// leading dims, as the primitive is made for it. The bias, when there is
/// one, is an f32 biasRows x biasColumns matrix broadcast to an f32 C (each
/// dim 1 or C's). `batch` such products at once (one primitive), each
/// factor's and the result's matrices one after the other.
struct ProductProblem {
  DType operands = DType::F32;
  DType result = DType::F32;
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  int64_t batch = 1;
  float alpha = 1, beta = 0;
  int64_t biasRows = 0, biasColumns = 0;
  /// Applied to the result as the primitive writes it (a post-op after
  /// beta's sum).
  Activation activation = Activation::None;
  /// B does not change during the run: an f32 product reads it from a copy
  /// in oneDNN's layout, made on the first call with this B.
  bool constantB = false;

  bool hasBias() const { return biasRows > 0; }
  bool operator<(const ProductProblem &o) const {
    return std::tie(operands, result, transA, transB, m, n, k, lda, ldb, ldc, batch, alpha, beta,
                    biasRows, biasColumns, activation, constantB) <
           std::tie(o.operands, o.result, o.transA, o.transB, o.m, o.n, o.k, o.lda, o.ldb, o.ldc,
                    o.batch, o.alpha, o.beta, o.biasRows, o.biasColumns, o.activation, o.constantB);
  }
};

/// The type the products of `factors` run on: bf16 as oneDNN's bf16
/// primitives where `bf16Primitives` (cpu::Context::bf16Primitives), f32
/// for the widened copies of f16 factors and of bf16 ones otherwise, else
/// `factors` themselves.
DType productOperands(DType factors, bool bf16Primitives);

/// The problem each product of a matmul kernel call runs: `lhs` (batch... x
/// m x k, or k; k x m with `transA`) times `rhs` (batch... x k x n, or k;
/// n x k with `transB`) into `out`, numpy's broadcast over the batch,
/// `operands` the type both run on (productOperands). One rhs matrix under a full untransposed
/// lhs batch is one product with the batch folded into its rows (m: the
/// batch's rows); batches of both, neither broadcast, one batched product
/// (`batch`) of f32 or bf16 operands; otherwise one m-row product per
/// matrix of the batch.
/// `constantWeights`: a constant f32 rhs matrix (ProductProblem::constantB).
ProductProblem matmulProblem(DType operands, const Dims &lhs, const Dims &rhs, const Dims &out,
                             bool transA, bool transB, bool constantWeights);

/// The problem of a gemm kernel call: alpha op(a) op(b) + beta c, a and b
/// matrices run as `operands` (productOperands), the result and c of type `result`, `c` null
/// where there is none or beta is 0,
/// `cIsResult` where the result is written over c (an accumulation in
/// place). A row of n added with alpha and beta 1 is the primitive's bias;
/// any other c is scaled by beta and added as the result's previous value.
ProductProblem gemmProblem(DType operands, DType result, const Dims &a, const Dims &b,
                           const Dims *c, bool cIsResult, float alpha, float beta, bool transA,
                           bool transB, Activation activation, bool constantWeights);

/// Appends `activation` (none: nothing) to a primitive's post-ops; false
/// when oneDNN refuses. Convolutions use it too (ConvPrimitives.cpp).
bool appendActivation(dnnl_post_ops *postOps, Activation activation);

/// The oneDNN primitives of a run's products, each made on its problem's
/// first call (making one costs more than running a small one), and the
/// scratchpad they share: each takes oneDNN's scratchpad from memory the
/// run counts (oneDNN's user mode), grown to the largest product's, as
/// plan.json's memory.product_scratchpad_bytes predicts it. Its size
/// depends on the threads the primitive is made for.
class ProductPrimitives {
public:
  ProductPrimitives();
  ~ProductPrimitives();
  ProductPrimitives(const ProductPrimitives &) = delete;
  ProductPrimitives &operator=(const ProductPrimitives &) = delete;

  /// Runs `problem` on `threads` threads over a, b, its bias (null when it
  /// has none) and c; false when oneDNN refused to make or run it. A
  /// constant B's kept copy is counted in `meter` (null: not counted).
  bool run(const ProductProblem &problem, int threads, const void *a, const void *b,
           const float *bias, void *c, AllocationMeter *meter);

  /// Bytes of the scratchpad `problem`'s primitive on `threads` threads
  /// takes (0: none), or -1 when oneDNN does not make it.
  int64_t scratchpadBytes(const ProductProblem &problem, int threads);

  struct Primitive;

private:
  /// `problem`'s primitive on `threads` threads, made on first need; null
  /// when oneDNN refused.
  Primitive *find(const ProductProblem &problem, int threads);
  /// The kept copy of constant B `b` read as `problem` reads it, made on
  /// first need; null when oneDNN refused.
  KeptBuffer *packed(const ProductProblem &problem, const Primitive &primitive, const void *b,
                     AllocationMeter *meter);

  struct Handles;
  std::unique_ptr<Handles> handles;
  /// By problem and thread count; null where oneDNN refused.
  std::map<std::pair<ProductProblem, int>, std::unique_ptr<Primitive>> made;
  /// Constant Bs' copies, by address, orientation, k, n and leading dim.
  std::map<std::tuple<const void *, bool, int64_t, int64_t, int64_t>, std::unique_ptr<KeptBuffer>>
      packedWeights;
  GrowingBuffer scratchpad;
};

} // namespace cleave::rt::cpu

#endif
