//===- ProductPrimitives.cpp - matrix products as oneDNN primitives -------===//
//
// Through oneDNN's C API, which reports failure as a status: the kernels are
// built without exceptions.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/ProductPrimitives.h"

#include "runtime/cpu/DnnlHandles.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Support.h"

#include <dnnl.h>

#include <array>
#include <cpuid.h>
#include <cstdlib>

namespace cleave::rt::cpu {

bool bf16Instructions() {
  const unsigned bf16 = dnnl_cpu_isa_avx512_core_bf16;
  return (static_cast<unsigned>(dnnl_get_effective_cpu_isa()) & bf16) == bf16;
}

namespace {

/// Whether the CPU has AVX512_FP16 (CPUID leaf 7: EDX bit 23), which marks
/// Intel's cores from Sapphire Rapids on.
bool hasAvx512Fp16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx & (1u << 23)) != 0;
}

} // namespace

bool bf16PrimitivesByDefault() {
  const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  const unsigned amx = dnnl_cpu_isa_avx512_core_amx;
  return (isa & amx) == amx || (bf16Instructions() && !hasAvx512Fp16());
}

int64_t widenedProductScratchBytes(int64_t lhsElements, int64_t rhsElements, DType result,
                                   int64_t resultElements) {
  const int64_t sum = result == DType::BF16 ? resultElements : 0;
  return (lhsElements + rhsElements + sum) * static_cast<int64_t>(sizeof(float));
}

namespace {

/// A rows x columns matrix in the layout oneDNN chooses.
dnnl_memory_desc_t anyMatrixDesc(int64_t rows, int64_t columns, dnnl_data_type_t type, bool &ok) {
  dnnl_memory_desc_t desc{};
  dnnl_dims_t dims = {rows, columns};
  ok =
      ok && dnnl_memory_desc_init_by_tag(&desc, 2, dims, type, dnnl_format_tag_any) == dnnl_success;
  return desc;
}

/// `batch` row-major rows x columns matrices one after the other, each with
/// leading dim `ld` and read transposed when `transposed`: the layout
/// oneDNN takes as strides (2-D for one matrix, 3-D for a batch).
dnnl_memory_desc_t matrixDesc(int64_t batch, int64_t rows, int64_t columns, int64_t ld,
                              bool transposed, dnnl_data_type_t type, bool &ok) {
  dnnl_memory_desc_t desc{};
  const int64_t stored = (transposed ? columns : rows) * ld;
  dnnl_dims_t dims = {batch, rows, columns};
  dnnl_dims_t strides = {stored, transposed ? 1 : ld, transposed ? ld : 1};
  const int rank = batch == 1 ? 2 : 3;
  ok = ok && dnnl_memory_desc_init_by_strides(&desc, rank, dims + 3 - rank, type,
                                              strides + 3 - rank) == dnnl_success;
  return desc;
}

/// Whether `shape` is a row of n values broadcast down the m x n result
/// (a Linear layer's bias), the one bias oneDNN 2.6's fast matmul kernels
/// take (other broadcasts fall to its reference kernel).
bool isRowBias(const Dims &shape, int64_t n) {
  return (shape.size == 1 || (shape.size == 2 && shape[0] == 1)) && shape[shape.size - 1] == n;
}

bool isLowPrecision(DType type) { return type == DType::BF16 || type == DType::F16; }

} // namespace

DType productOperands(DType factors, bool bf16Primitives) {
  if (factors == DType::BF16 && bf16Primitives)
    return factors;
  return isLowPrecision(factors) ? DType::F32 : factors;
}

ProductProblem matmulProblem(DType operands, const Dims &lhs, const Dims &rhs, const Dims &out,
                             bool transA, bool transB, bool constantWeights) {
  const int rl = lhs.size, rr = rhs.size;
  ProductProblem p;
  p.operands = operands;
  p.transA = transA;
  p.transB = transB;
  const int64_t m = rl == 1 ? 1 : lhs[rl - (transA ? 1 : 2)];
  p.k = lhs[rl - (transA ? 2 : 1)];
  p.lda = lhs[rl - 1];
  p.n = rr == 1 ? 1 : rhs[rr - (transB ? 2 : 1)];
  p.ldb = rr == 1 ? 1 : rhs[rr - 1];
  p.ldc = p.n;
  // The batch is the result's dims before its matrix dims.
  int64_t lhsBatch = 1, rhsBatch = 1, batch = 1;
  for (int i = 0; i + 2 < rl; ++i)
    lhsBatch *= lhs[i];
  for (int i = 0; i + 2 < rr; ++i)
    rhsBatch *= rhs[i];
  for (int i = 0; i < out.size - (rl > 1) - (rr > 1); ++i)
    batch *= out[i];
  // A transposed lhs's matrices do not stack into rows. Batches of both
  // factors, neither broadcast, are one batched product where oneDNN
  // multiplies them.
  p.m = rhsBatch == 1 && lhsBatch == batch && !transA ? batch * m : m;
  if (p.m == m && batch > 1 && lhsBatch == batch && rhsBatch == batch &&
      (p.operands == DType::F32 || p.operands == DType::BF16))
    p.batch = batch;
  p.constantB = constantWeights && operands == DType::F32 && rr == 2;
  return p;
}

ProductProblem gemmProblem(DType operands, DType result, const Dims &a, const Dims &b,
                           const Dims *c, bool cIsResult, float alpha, float beta, bool transA,
                           bool transB, Activation activation, bool constantWeights) {
  ProductProblem p;
  p.operands = operands;
  p.result = result;
  p.transA = transA;
  p.transB = transB;
  p.m = transA ? a[1] : a[0];
  p.k = transA ? a[0] : a[1];
  p.n = transB ? b[0] : b[1];
  p.lda = a[1];
  p.ldb = b[1];
  p.ldc = p.n;
  p.alpha = alpha;
  if (c && !cIsResult && result == DType::F32 && alpha == 1.0f && beta == 1.0f && p.k > 0 &&
      isRowBias(*c, p.n)) {
    // oneDNN adds it while it writes the result (its bias is not scaled).
    p.biasRows = 1;
    p.biasColumns = p.n;
  } else if (c) {
    p.beta = beta;
  }
  p.activation = activation;
  p.constantB = constantWeights && operands == DType::F32;
  return p;
}

int64_t packedWeightsBytes(int64_t k, int64_t n) {
  dnnl_engine_t engine = nullptr;
  if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success)
    return 0;
  bool ok = true;
  dnnl_memory_desc_t a = matrixDesc(1, 1, k, k, false, dnnl_f32, ok);
  dnnl_memory_desc_t b = anyMatrixDesc(k, n, dnnl_f32, ok);
  dnnl_memory_desc_t c = matrixDesc(1, 1, n, n, false, dnnl_f32, ok);
  dnnl_matmul_desc_t desc{};
  dnnl_primitive_desc_t pd = nullptr;
  ok = ok && dnnl_matmul_desc_init(&desc, &a, &b, nullptr, &c) == dnnl_success &&
       dnnl_primitive_desc_create(&pd, &desc, nullptr, engine, nullptr) == dnnl_success;
  int64_t bytes = ok ? static_cast<int64_t>(dnnl_memory_desc_get_size(
                           dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0)))
                     : 0;
  if (pd)
    dnnl_primitive_desc_destroy(pd);
  dnnl_engine_destroy(engine);
  return bytes;
}

/// The engine and stream every primitive of a run shares.
struct ProductPrimitives::Handles {
  dnnl_engine_t engine = nullptr;
  dnnl_stream_t stream = nullptr;
  ~Handles() {
    if (stream)
      dnnl_stream_destroy(stream);
    if (engine)
      dnnl_engine_destroy(engine);
  }
};

/// One problem's primitive and its memory objects, whose data handles each
/// call points at its operands.
struct ProductPrimitives::Primitive {
  dnnl_primitive_t primitive = nullptr;
  dnnl_memory_t a = nullptr, b = nullptr, bias = nullptr, c = nullptr;
  /// Its scratchpad (null: it needs none), which each call points into the
  /// run's (ProductPrimitives::scratchpad).
  dnnl_memory_t scratchpad = nullptr;
  int64_t scratchpadBytes = 0;
  /// The layout it reads a constant B in (ProductProblem::constantB).
  dnnl_memory_desc_t packedB{};
  ~Primitive() {
    for (dnnl_memory_t memory : {a, b, bias, c, scratchpad})
      if (memory)
        dnnl_memory_destroy(memory);
    if (primitive)
      dnnl_primitive_destroy(primitive);
  }
};

namespace {

/// The primitive of `p`, or null when oneDNN does not make it.
std::unique_ptr<ProductPrimitives::Primitive> makePrimitive(const ProductProblem &p,
                                                            dnnl_engine_t engine) {
  bool ok = true;
  const dnnl_data_type_t operands = p.operands == DType::BF16 ? dnnl_bf16 : dnnl_f32;
  dnnl_memory_desc_t a = matrixDesc(p.batch, p.m, p.k, p.lda, p.transA, operands, ok);
  dnnl_memory_desc_t b = p.constantB ? anyMatrixDesc(p.k, p.n, operands, ok)
                                     : matrixDesc(p.batch, p.k, p.n, p.ldb, p.transB, operands, ok);
  dnnl_memory_desc_t bias{};
  if (p.hasBias())
    bias = matrixDesc(1, p.biasRows, p.biasColumns, p.biasColumns, false, dnnl_f32, ok);
  dnnl_memory_desc_t c = matrixDesc(p.batch, p.m, p.n, p.ldc, false,
                                    p.result == DType::BF16 ? dnnl_bf16 : dnnl_f32, ok);
  dnnl_matmul_desc_t desc{};
  ok =
      ok && dnnl_matmul_desc_init(&desc, &a, &b, p.hasBias() ? &bias : nullptr, &c) == dnnl_success;
  if (!ok)
    return nullptr;
  // alpha scales the product; beta adds the C already there (a sum post-op).
  dnnl_primitive_attr_t attr = nullptr;
  dnnl_post_ops_t postOps = nullptr;
  ok = dnnl_primitive_attr_create(&attr) == dnnl_success &&
       dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
       (p.alpha == 1.0f ||
        dnnl_primitive_attr_set_output_scales(attr, 1, 0, &p.alpha) == dnnl_success) &&
       dnnl_post_ops_create(&postOps) == dnnl_success &&
       (p.beta == 0.0f || dnnl_post_ops_append_sum(postOps, p.beta) == dnnl_success) &&
       appendActivation(postOps, p.activation) &&
       dnnl_primitive_attr_set_post_ops(attr, postOps) == dnnl_success;
  dnnl_primitive_desc_t pd = nullptr;
  ok = ok && dnnl_primitive_desc_create(&pd, &desc, attr, engine, nullptr) == dnnl_success;
  if (postOps)
    dnnl_post_ops_destroy(postOps);
  if (attr)
    dnnl_primitive_attr_destroy(attr);
  auto made = std::make_unique<ProductPrimitives::Primitive>();
  if (ok && p.constantB)
    b = made->packedB = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  const dnnl_memory_desc_t *scratchpad =
      ok ? dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0) : nullptr;
  made->scratchpadBytes =
      scratchpad ? static_cast<int64_t>(dnnl_memory_desc_get_size(scratchpad)) : 0;
  ok = ok && dnnl_primitive_create(&made->primitive, pd) == dnnl_success &&
       (made->scratchpadBytes == 0 || dnnl_memory_create(&made->scratchpad, scratchpad, engine,
                                                         DNNL_MEMORY_NONE) == dnnl_success) &&
       dnnl_memory_create(&made->a, &a, engine, DNNL_MEMORY_NONE) == dnnl_success &&
       dnnl_memory_create(&made->b, &b, engine, DNNL_MEMORY_NONE) == dnnl_success &&
       (!p.hasBias() ||
        dnnl_memory_create(&made->bias, &bias, engine, DNNL_MEMORY_NONE) == dnnl_success) &&
       dnnl_memory_create(&made->c, &c, engine, DNNL_MEMORY_NONE) == dnnl_success;
  if (pd)
    dnnl_primitive_desc_destroy(pd);
  return ok ? std::move(made) : nullptr;
}

} // namespace

bool appendActivation(dnnl_post_ops *postOps, Activation activation) {
  switch (activation) {
  case Activation::None:
    return true;
  case Activation::Relu:
    return dnnl_post_ops_append_eltwise(postOps, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f) ==
           dnnl_success;
  case Activation::Gelu:
    return dnnl_post_ops_append_eltwise(postOps, 1.0f, dnnl_eltwise_gelu_erf, 0.0f, 0.0f) ==
           dnnl_success;
  }
  return false;
}

ProductPrimitives::ProductPrimitives() : handles(std::make_unique<Handles>()) {}

ProductPrimitives::~ProductPrimitives() = default;

KeptBuffer *ProductPrimitives::packed(const ProductProblem &p, const Primitive &primitive,
                                      const void *b, AllocationMeter *meter) {
  auto [at, added] = packedWeights.try_emplace(std::make_tuple(b, p.transB, p.k, p.n, p.ldb));
  if (!added)
    return at->second.get();
  const std::size_t bytes = dnnl_memory_desc_get_size(&primitive.packedB);
  auto copy = std::make_unique<KeptBuffer>(bytes, meter);
  if (!copy->data())
    return nullptr;
  bool ok = true;
  const dnnl_data_type_t type = p.operands == DType::BF16 ? dnnl_bf16 : dnnl_f32;
  dnnl_memory_desc_t stored = matrixDesc(1, p.k, p.n, p.ldb, p.transB, type, ok);
  PrimitiveHandle reorder;
  ScopedMemory from, to;
  ok = ok && createReorder(stored, primitive.packedB, handles->engine, *reorder.out()) &&
       dnnl_memory_create(from.out(), &stored, handles->engine, const_cast<void *>(b)) ==
           dnnl_success &&
       dnnl_memory_create(to.out(), &primitive.packedB, handles->engine, copy->data()) ==
           dnnl_success;
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from.get()}, {DNNL_ARG_TO, to.get()}};
  ok = ok && dnnl_primitive_execute(reorder.get(), handles->stream, 2, args) == dnnl_success &&
       dnnl_stream_wait(handles->stream) == dnnl_success;
  at->second = ok ? std::move(copy) : nullptr;
  return at->second.get();
}

int64_t ProductPrimitives::scratchpadBytes(const ProductProblem &p, int threads) {
  const Primitive *primitive = find(p, threads);
  return primitive ? primitive->scratchpadBytes : -1;
}

ProductPrimitives::Primitive *ProductPrimitives::find(const ProductProblem &p, int threads) {
  if (!handles->engine && (dnnl_engine_create(&handles->engine, dnnl_cpu, 0) != dnnl_success ||
                           dnnl_stream_create(&handles->stream, handles->engine,
                                              dnnl_stream_default_flags) != dnnl_success))
    return nullptr;
  // oneDNN sizes its work, and its scratchpad, for the threads there are
  // when it is made.
  omp_set_num_threads(threads);
  auto [at, added] = made.try_emplace(std::make_pair(p, threads));
  if (added)
    at->second = makePrimitive(p, handles->engine);
  return at->second.get();
}

bool ProductPrimitives::run(const ProductProblem &p, int threads, const void *a, const void *b,
                            const float *bias, void *c, AllocationMeter *meter) {
  Primitive *primitive = find(p, threads);
  if (!primitive)
    return false;
  if (p.constantB) {
    KeptBuffer *copy = packed(p, *primitive, b, meter);
    if (!copy)
      return false;
    b = copy->data();
  }
  std::array<dnnl_exec_arg_t, 5> args = {{{DNNL_ARG_SRC, primitive->a},
                                          {DNNL_ARG_WEIGHTS, primitive->b},
                                          {DNNL_ARG_DST, primitive->c}}};
  int argCount = 3;
  if (p.hasBias())
    args[argCount++] = {DNNL_ARG_BIAS, primitive->bias};
  if (primitive->scratchpad) {
    void *memory = scratchpad.reserve(primitive->scratchpadBytes, meter);
    if (!memory || dnnl_memory_set_data_handle(primitive->scratchpad, memory) != dnnl_success)
      return false;
    args[argCount++] = {DNNL_ARG_SCRATCHPAD, primitive->scratchpad};
  }
  return dnnl_memory_set_data_handle(primitive->a, const_cast<void *>(a)) == dnnl_success &&
         dnnl_memory_set_data_handle(primitive->b, const_cast<void *>(b)) == dnnl_success &&
         dnnl_memory_set_data_handle(primitive->c, c) == dnnl_success &&
         (!p.hasBias() || dnnl_memory_set_data_handle(primitive->bias, const_cast<float *>(bias)) ==
                              dnnl_success) &&
         dnnl_primitive_execute(primitive->primitive, handles->stream, argCount, args.data()) ==
             dnnl_success &&
         dnnl_stream_wait(handles->stream) == dnnl_success;
}

} // namespace cleave::rt::cpu
