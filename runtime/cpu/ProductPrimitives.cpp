//===- ProductPrimitives.cpp - matrix products as oneDNN primitives -------===//
//
// Through oneDNN's C API, which reports failure as a status: the kernels are
// built without exceptions.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/ProductPrimitives.h"

#include "runtime/cpu/DnnlHandles.h"
#include "runtime/cpu/Support.h"

#include <dnnl.h>

#include <cstdlib>

namespace cleave::rt::cpu {

bool nativeLowPrecisionProducts(DType operands) {
  const unsigned bf16 = dnnl_cpu_isa_avx512_core_bf16;
  return operands == DType::BF16 &&
         (static_cast<unsigned>(dnnl_get_effective_cpu_isa()) & bf16) == bf16;
}

int64_t lowPrecisionScratchBytes(DType operands, int64_t lhsElements, int64_t rhsElements) {
  if (nativeLowPrecisionProducts(operands))
    return 0;
  return (lhsElements + rhsElements) * static_cast<int64_t>(sizeof(float));
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

/// A row-major rows x columns matrix with leading dim `ld`, read
/// transposed when `transposed`: the layout oneDNN takes as strides.
dnnl_memory_desc_t matrixDesc(int64_t rows, int64_t columns, int64_t ld, bool transposed,
                              dnnl_data_type_t type, bool &ok) {
  dnnl_memory_desc_t desc{};
  dnnl_dims_t dims = {rows, columns};
  dnnl_dims_t strides = {transposed ? 1 : ld, transposed ? ld : 1};
  ok = ok && dnnl_memory_desc_init_by_strides(&desc, 2, dims, type, strides) == dnnl_success;
  return desc;
}

} // namespace

int64_t packedWeightsBytes(int64_t k, int64_t n) {
  dnnl_engine_t engine = nullptr;
  if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success)
    return 0;
  bool ok = true;
  dnnl_memory_desc_t a = matrixDesc(1, k, k, false, dnnl_f32, ok);
  dnnl_memory_desc_t b = anyMatrixDesc(k, n, dnnl_f32, ok);
  dnnl_memory_desc_t c = matrixDesc(1, n, n, false, dnnl_f32, ok);
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
  /// The layout it reads a constant B in (ProductProblem::constantB).
  dnnl_memory_desc_t packedB{};
  ~Primitive() {
    for (dnnl_memory_t memory : {a, b, bias, c})
      if (memory)
        dnnl_memory_destroy(memory);
    if (primitive)
      dnnl_primitive_destroy(primitive);
  }
};

/// A constant B's kept copy in its primitive's layout.
namespace {

/// The primitive of `p`, or null when oneDNN does not make it.
std::unique_ptr<ProductPrimitives::Primitive> makePrimitive(const ProductProblem &p,
                                                            dnnl_engine_t engine) {
  bool ok = true;
  const dnnl_data_type_t operands = p.operands == DType::BF16 ? dnnl_bf16 : dnnl_f32;
  dnnl_memory_desc_t a = matrixDesc(p.m, p.k, p.lda, p.transA, operands, ok);
  dnnl_memory_desc_t b = p.constantB ? anyMatrixDesc(p.k, p.n, operands, ok)
                                     : matrixDesc(p.k, p.n, p.ldb, p.transB, operands, ok);
  dnnl_memory_desc_t bias{};
  if (p.hasBias())
    bias = matrixDesc(p.biasRows, p.biasColumns, p.biasColumns, false, dnnl_f32, ok);
  dnnl_memory_desc_t c = matrixDesc(p.m, p.n, p.ldc, false, dnnl_f32, ok);
  dnnl_matmul_desc_t desc{};
  ok =
      ok && dnnl_matmul_desc_init(&desc, &a, &b, p.hasBias() ? &bias : nullptr, &c) == dnnl_success;
  if (!ok)
    return nullptr;
  // alpha scales the product; beta adds the C already there (a sum post-op).
  dnnl_primitive_attr_t attr = nullptr;
  dnnl_post_ops_t postOps = nullptr;
  ok = dnnl_primitive_attr_create(&attr) == dnnl_success &&
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
  ok = ok && dnnl_primitive_create(&made->primitive, pd) == dnnl_success &&
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
  dnnl_memory_desc_t stored = matrixDesc(p.k, p.n, p.ldb, p.transB, type, ok);
  DescriptorHandle pd;
  PrimitiveHandle reorder;
  ScopedMemory from, to;
  ok = ok &&
       dnnl_reorder_primitive_desc_create(pd.out(), &stored, handles->engine, &primitive.packedB,
                                          handles->engine, nullptr) == dnnl_success &&
       dnnl_primitive_create(reorder.out(), pd.get()) == dnnl_success &&
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

bool ProductPrimitives::run(const ProductProblem &p, int threads, const void *a, const void *b,
                            const float *bias, float *c, AllocationMeter *meter) {
  if (!handles->engine && (dnnl_engine_create(&handles->engine, dnnl_cpu, 0) != dnnl_success ||
                           dnnl_stream_create(&handles->stream, handles->engine,
                                              dnnl_stream_default_flags) != dnnl_success))
    return false;
  // oneDNN sizes its work for the threads there are when it is made.
  omp_set_num_threads(threads);
  auto [at, added] = made.try_emplace(std::make_pair(p, threads));
  if (added)
    at->second = makePrimitive(p, handles->engine);
  Primitive *primitive = at->second.get();
  if (!primitive)
    return false;
  if (p.constantB) {
    KeptBuffer *copy = packed(p, *primitive, b, meter);
    if (!copy)
      return false;
    b = copy->data();
  }
  dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, primitive->a},
                             {DNNL_ARG_WEIGHTS, primitive->b},
                             {DNNL_ARG_DST, primitive->c},
                             {DNNL_ARG_BIAS, primitive->bias}};
  return dnnl_memory_set_data_handle(primitive->a, const_cast<void *>(a)) == dnnl_success &&
         dnnl_memory_set_data_handle(primitive->b, const_cast<void *>(b)) == dnnl_success &&
         dnnl_memory_set_data_handle(primitive->c, c) == dnnl_success &&
         (!p.hasBias() || dnnl_memory_set_data_handle(primitive->bias, const_cast<float *>(bias)) ==
                              dnnl_success) &&
         dnnl_primitive_execute(primitive->primitive, handles->stream, p.hasBias() ? 4 : 3, args) ==
             dnnl_success &&
         dnnl_stream_wait(handles->stream) == dnnl_success;
}

} // namespace cleave::rt::cpu
