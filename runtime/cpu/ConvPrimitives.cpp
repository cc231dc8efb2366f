//===- ConvPrimitives.cpp - convolutions as oneDNN primitives -------------===//
//
// Through oneDNN's C API, which reports failure as a status: the kernels are
// built without exceptions, and a problem oneDNN refuses is not an error
// (the im2col kernels take it).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/ConvPrimitives.h"
#include "runtime/cpu/DnnlHandles.h"
#include "runtime/cpu/ProductPrimitives.h"

#include "runtime/cpu/Support.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <optional>

#include <dnnl.h>

namespace cleave::rt::cpu {

/// Owned oneDNN handles, released in the destructor.
struct ConvPrimitive::Impl {
  /// One of the three operands: its layout as the kernel holds it (dense,
  /// row-major) and as the primitive reads or writes it, and the reorder
  /// between them (null when they are the same) into `offset` of the
  /// scratch, or, for kept weights, into their copy (packWeights), which
  /// run() is given in their place.
  struct Operand {
    int arg = 0;
    dnnl_memory_desc_t plain{}, chosen{};
    dnnl_primitive_t reorder = nullptr;
    int64_t offset = 0;
    bool kept = false;
  };
  dnnl_engine_t engine = nullptr;
  dnnl_stream_t stream = nullptr;
  dnnl_primitive_t primitive = nullptr;
  /// a, b (read) and out (written), as ConvPrimitive::run names them.
  std::array<Operand, 3> operands;
  bool bias = false;
  dnnl_memory_desc_t biasDesc{};
  /// oneDNN's scratchpad for the primitive, at `scratchpadOffset` of the
  /// scratch (none: 0 bytes).
  dnnl_memory_desc_t scratchpad{};
  int64_t scratchpadBytes = 0, scratchpadOffset = 0;
  int64_t scratchBytes = 0, packedWeightBytes = 0;

  Impl() = default;
  Impl(const Impl &) = delete;
  Impl &operator=(const Impl &) = delete;
  ~Impl() {
    for (Operand &operand : operands)
      if (operand.reorder)
        dnnl_primitive_destroy(operand.reorder);
    if (primitive)
      dnnl_primitive_destroy(primitive);
    if (stream)
      dnnl_stream_destroy(stream);
    if (engine)
      dnnl_engine_destroy(engine);
  }
};

namespace {

/// `attributes` of a primitive that takes its scratchpad from the caller
/// (oneDNN's user mode), with `activation` (none: nothing) as a post-op as
/// it writes.
bool primitiveAttributes(AttributesHandle &attributes, Activation activation) {
  dnnl_post_ops_t postOps = nullptr;
  bool ok = dnnl_primitive_attr_create(attributes.out()) == dnnl_success &&
            dnnl_primitive_attr_set_scratchpad_mode(attributes.get(), dnnl_scratchpad_mode_user) ==
                dnnl_success &&
            dnnl_post_ops_create(&postOps) == dnnl_success &&
            appendActivation(postOps, activation) &&
            dnnl_primitive_attr_set_post_ops(attributes.get(), postOps) == dnnl_success;
  if (postOps)
    dnnl_post_ops_destroy(postOps);
  return ok;
}

/// A memory object over `data`, destroyed with its scope.
class MemoryHandle {
public:
  MemoryHandle(const dnnl_memory_desc_t &desc, dnnl_engine_t engine, void *data) {
    if (dnnl_memory_create(&handle, &desc, engine, data) != dnnl_success)
      fail("conv", "oneDNN could not wrap an operand");
  }
  MemoryHandle(const MemoryHandle &) = delete;
  MemoryHandle &operator=(const MemoryHandle &) = delete;
  ~MemoryHandle() { dnnl_memory_destroy(handle); }
  dnnl_memory_t get() const { return handle; }

private:
  dnnl_memory_t handle = nullptr;
};

void copyDims(const Dims &from, dnnl_dims_t to) {
  for (int i = 0; i < from.size; ++i)
    to[i] = from[i];
}

dnnl_data_type_t dnnlType(DType type) { return type == DType::BF16 ? dnnl_bf16 : dnnl_f32; }

/// The dense row-major layout of `dims`.
bool plainDesc(const Dims &dims, dnnl_data_type_t type, dnnl_memory_desc_t &desc) {
  dnnl_dims_t shape{}, strides{};
  copyDims(dims, shape);
  int64_t stride = 1;
  for (int i = dims.size - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= dims[i];
  }
  return dnnl_memory_desc_init_by_strides(&desc, dims.size, shape, type, strides) == dnnl_success;
}

bool anyDesc(const Dims &dims, dnnl_data_type_t type, dnnl_memory_desc_t &desc) {
  dnnl_dims_t shape{};
  copyDims(dims, shape);
  return dnnl_memory_desc_init_by_tag(&desc, dims.size, shape, type, dnnl_format_tag_any) ==
         dnnl_success;
}

/// w as oneDNN names a grouped convolution's weights: G x M/G x C/G x
/// kernel... (the same elements as M x C/G x kernel...).
Dims groupedWeights(const ConvProblem &p) {
  if (p.group == 1)
    return p.w;
  Dims dims;
  dims.values[dims.size++] = p.group;
  dims.values[dims.size++] = p.w[0] / p.group;
  for (int i = 1; i < p.w.size; ++i)
    dims.values[dims.size++] = p.w[i];
  return dims;
}

/// The convolution's op descriptor in the pass's terms, over layouts `x`,
/// `w`, `y` (and `bias`, forward only).
bool opDesc(const ConvProblem &p, ConvPass pass, const dnnl_memory_desc_t &x,
            const dnnl_memory_desc_t &w, const dnnl_memory_desc_t &y,
            const dnnl_memory_desc_t *bias, dnnl_convolution_desc_t &desc) {
  dnnl_dims_t strides{}, dilations{}, padBegin{}, padEnd{};
  copyDims(p.strides, strides);
  copyDims(p.padBegin, padBegin);
  copyDims(p.padEnd, padEnd);
  // oneDNN counts the holes between kernel taps: ONNX's dilation - 1.
  for (int i = 0; i < p.dilations.size; ++i)
    dilations[i] = p.dilations[i] - 1;
  switch (pass) {
  case ConvPass::Forward:
    return dnnl_dilated_convolution_forward_desc_init(
               &desc, dnnl_forward_training, dnnl_convolution_direct, &x, &w, bias, &y, strides,
               dilations, padBegin, padEnd) == dnnl_success;
  case ConvPass::GradInput:
    return dnnl_dilated_convolution_backward_data_desc_init(&desc, dnnl_convolution_direct, &x, &w,
                                                            &y, strides, dilations, padBegin,
                                                            padEnd) == dnnl_success;
  case ConvPass::GradWeight:
    break;
  }
  return dnnl_dilated_convolution_backward_weights_desc_init(&desc, dnnl_convolution_direct, &x, &w,
                                                             nullptr, &y, strides, dilations,
                                                             padBegin, padEnd) == dnnl_success;
}

/// Bytes of `desc`'s memory rounded up to 64.
int64_t alignedSize(const dnnl_memory_desc_t &desc) {
  return (static_cast<int64_t>(dnnl_memory_desc_get_size(&desc)) + 63) / 64 * 64;
}

/// Sets `operand` to hold `plain` in the layout the primitive `pd` chose for
/// `query`, with the reorder between them (input: into the chosen layout;
/// output: out of it) when they differ, at the scratch's next offset, or
/// (`kept`: constant weights) into a copy of their own.
bool chooseLayout(ConvPrimitive::Impl &impl, ConvPrimitive::Impl::Operand &operand,
                  dnnl_primitive_desc_t pd, dnnl_query_t query, int arg,
                  const dnnl_memory_desc_t &plain, bool output, bool kept) {
  operand.arg = arg;
  operand.plain = plain;
  const dnnl_memory_desc_t *chosen = dnnl_primitive_desc_query_md(pd, query, 0);
  if (!chosen)
    return false;
  operand.chosen = *chosen;
  if (dnnl_memory_desc_equal(&operand.plain, &operand.chosen))
    return true;
  const dnnl_memory_desc_t &from = output ? operand.chosen : operand.plain;
  const dnnl_memory_desc_t &to = output ? operand.plain : operand.chosen;
  if (!createReorder(from, to, impl.engine, operand.reorder))
    return false;
  operand.kept = kept;
  if (kept) {
    impl.packedWeightBytes = alignedSize(operand.chosen);
    return true;
  }
  operand.offset = impl.scratchBytes;
  impl.scratchBytes += alignedSize(operand.chosen);
  return true;
}

} // namespace

ConvProblem convProblem(ConvPass pass, const Dims &x, const Dims &w, const Dims &y,
                        const Dims &strides, const Dims &pads, const Dims &dilations, int64_t group,
                        bool bias, DType factors, Activation activation, bool constantWeights) {
  ConvProblem p;
  p.pass = pass;
  p.factors = factors;
  p.x = x;
  p.w = w;
  p.y = y;
  p.group = group;
  p.bias = bias;
  p.activation = pass == ConvPass::Forward ? activation : Activation::None;
  p.constantWeights = pass == ConvPass::Forward && constantWeights;
  const int spatial = std::max(0, x.size - 2);
  for (int d = 0; d < spatial; ++d) {
    p.strides.values[p.strides.size++] = strides.size ? strides[d] : 1;
    p.dilations.values[p.dilations.size++] = dilations.size ? dilations[d] : 1;
    p.padBegin.values[p.padBegin.size++] = pads.size ? pads[d] : 0;
    p.padEnd.values[p.padEnd.size++] = pads.size ? pads[d + spatial] : 0;
  }
  return p;
}

ConvProblem primitiveProblem(const ConvProblem &problem, bool bf16Primitives) {
  ConvProblem runs = problem;
  if (problem.factors == DType::BF16 && !bf16Primitives)
    runs.factors = DType::F32;
  return runs;
}

WidenedFactors widenedFactors(const ConvProblem &problem, const ConvProblem &runs) {
  WidenedFactors widened;
  if (runs.factors == problem.factors)
    return widened;
  widened.first = problem.pass == ConvPass::Forward ? problem.x.product() : problem.y.product();
  widened.second = problem.pass == ConvPass::GradWeight ? problem.x.product() : problem.w.product();
  auto alignedBytes = [](int64_t elements) {
    return (elements * static_cast<int64_t>(sizeof(float)) + 63) / 64 * 64;
  };
  widened.secondOffset = alignedBytes(widened.first);
  widened.bytes = widened.secondOffset + alignedBytes(widened.second);
  return widened;
}

ConvPrimitive::ConvPrimitive(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
ConvPrimitive::~ConvPrimitive() = default;

std::unique_ptr<ConvPrimitive> ConvPrimitive::create(const ConvProblem &p, int threads) {
  // oneDNN takes 1 to 3 spatial dims; an empty problem is the im2col
  // kernels' (nothing to compute).
  if (p.x.size < 3 || p.x.size > 5 || p.w.size != p.x.size || p.y.size != p.x.size ||
      p.x.product() == 0 || p.w.product() == 0 || p.y.product() == 0 || p.group < 1 ||
      p.w[0] % p.group != 0)
    return nullptr;
  // oneDNN sizes its work for the threads there are when it is made.
  omp_set_num_threads(threads);
  auto impl = std::make_unique<Impl>();
  if (dnnl_engine_create(&impl->engine, dnnl_cpu, 0) != dnnl_success ||
      dnnl_stream_create(&impl->stream, impl->engine, dnnl_stream_default_flags) != dnnl_success)
    return nullptr;
  if (p.factors != DType::F32 && p.factors != DType::BF16)
    return nullptr;
  // The factors' type for what the pass reads, f32 for what it writes; the
  // forward the backward passes are made against multiplies the same
  // factors.
  const dnnl_data_type_t factors = dnnlType(p.factors);
  const dnnl_data_type_t xType = p.pass == ConvPass::GradInput ? dnnl_f32 : factors;
  const dnnl_data_type_t wType = p.pass == ConvPass::GradWeight ? dnnl_f32 : factors;
  const dnnl_data_type_t yType = p.pass == ConvPass::Forward ? dnnl_f32 : factors;
  const Dims w = groupedWeights(p);
  dnnl_memory_desc_t xPlain, wPlain, yPlain, xAny, wAny, yAny, xHint, wHint;
  if (!plainDesc(p.x, xType, xPlain) || !plainDesc(w, wType, wPlain) ||
      !plainDesc(p.y, yType, yPlain) || !anyDesc(p.x, xType, xAny) || !anyDesc(w, wType, wAny) ||
      !anyDesc(p.y, yType, yAny) || !anyDesc(p.x, factors, xHint) || !anyDesc(w, factors, wHint))
    return nullptr;
  if (p.bias && !plainDesc(Dims{p.w[0]}, dnnl_f32, impl->biasDesc))
    return nullptr;
  impl->bias = p.bias;

  // The backward passes are made against the forward they differentiate.
  dnnl_convolution_desc_t forwardDesc, passDesc;
  DescriptorHandle forward, pass;
  // A fused activation is the forward's post-op (only the forward has one).
  AttributesHandle attributes, passAttributes;
  if (!primitiveAttributes(attributes, p.activation) ||
      !primitiveAttributes(passAttributes, Activation::None))
    return nullptr;
  if (!opDesc(p, ConvPass::Forward, xHint, wHint, yAny, p.bias ? &impl->biasDesc : nullptr,
              forwardDesc) ||
      dnnl_primitive_desc_create(forward.out(), &forwardDesc, attributes.get(), impl->engine,
                                 nullptr) != dnnl_success)
    return nullptr;
  dnnl_primitive_desc_t pd = forward.get();
  if (p.pass != ConvPass::Forward) {
    if (!opDesc(p, p.pass, xAny, wAny, yAny, nullptr, passDesc) ||
        dnnl_primitive_desc_create(pass.out(), &passDesc, passAttributes.get(), impl->engine,
                                   forward.get()) != dnnl_success)
      return nullptr;
    pd = pass.get();
  }
  // What the pass reads (a, b) and writes (out), as oneDNN names them.
  struct Role {
    dnnl_query_t query;
    int arg;
    const dnnl_memory_desc_t *plain;
  };
  std::array<Role, 3> roles;
  switch (p.pass) {
  case ConvPass::Forward:
    roles = {{{dnnl_query_src_md, DNNL_ARG_SRC, &xPlain},
              {dnnl_query_weights_md, DNNL_ARG_WEIGHTS, &wPlain},
              {dnnl_query_dst_md, DNNL_ARG_DST, &yPlain}}};
    break;
  case ConvPass::GradInput:
    roles = {{{dnnl_query_diff_dst_md, DNNL_ARG_DIFF_DST, &yPlain},
              {dnnl_query_weights_md, DNNL_ARG_WEIGHTS, &wPlain},
              {dnnl_query_diff_src_md, DNNL_ARG_DIFF_SRC, &xPlain}}};
    break;
  case ConvPass::GradWeight:
    roles = {{{dnnl_query_diff_dst_md, DNNL_ARG_DIFF_DST, &yPlain},
              {dnnl_query_src_md, DNNL_ARG_SRC, &xPlain},
              {dnnl_query_diff_weights_md, DNNL_ARG_DIFF_WEIGHTS, &wPlain}}};
    break;
  }
  bool chosen = true;
  for (size_t i = 0; i < roles.size() && chosen; ++i)
    chosen = chooseLayout(*impl, impl->operands[i], pd, roles[i].query, roles[i].arg,
                          *roles[i].plain, /*output=*/i == 2,
                          /*kept=*/i == 1 && p.constantWeights);
  if (!chosen || dnnl_primitive_create(&impl->primitive, pd) != dnnl_success)
    return nullptr;
  // oneDNN's scratchpad, sized for the threads, follows the operands'
  // copies in the scratch.
  if (const dnnl_memory_desc_t *scratchpad =
          dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0)) {
    impl->scratchpad = *scratchpad;
    impl->scratchpadBytes = static_cast<int64_t>(dnnl_memory_desc_get_size(scratchpad));
  }
  impl->scratchpadOffset = impl->scratchBytes;
  impl->scratchBytes += (impl->scratchpadBytes + 63) / 64 * 64;
  return std::unique_ptr<ConvPrimitive>(new ConvPrimitive(std::move(impl)));
}

int64_t ConvPrimitive::scratchBytes() const { return impl->scratchBytes; }

int64_t ConvPrimitive::packedWeightBytes() const { return impl->packedWeightBytes; }

namespace {

/// Runs `operand`'s reorder from `from` to `to` (its plain and chosen
/// memories, or the other way for an output).
void runReorder(const ConvPrimitive::Impl &m, const ConvPrimitive::Impl::Operand &operand,
                dnnl_memory_t from, dnnl_memory_t to) {
  dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
  if (dnnl_primitive_execute(operand.reorder, m.stream, 2, args) != dnnl_success)
    fail("conv", "oneDNN could not reorder an operand");
}

} // namespace

void ConvPrimitive::packWeights(int threads, const void *w, void *packed) const {
  omp_set_num_threads(threads);
  const Impl::Operand &weights = impl->operands[1];
  MemoryHandle plain(weights.plain, impl->engine, const_cast<void *>(w));
  MemoryHandle chosen(weights.chosen, impl->engine, packed);
  runReorder(*impl, weights, plain.get(), chosen.get());
  if (dnnl_stream_wait(impl->stream) != dnnl_success)
    fail("conv", "oneDNN's stream failed");
}

void ConvPrimitive::run(int threads, const void *a, const void *b, const void *bias, void *out,
                        void *scratch) const {
  omp_set_num_threads(threads);
  const Impl &m = *impl;
  auto fails = [](dnnl_status_t status) { return status != dnnl_success; };
  const std::array<void *, 3> data{const_cast<void *>(a), const_cast<void *>(b), out};
  // Each operand as the kernel holds it and, when reordered, as the
  // primitive takes it (in the scratch; kept weights: as given).
  std::array<std::optional<MemoryHandle>, 3> plain, chosen;
  for (size_t i = 0; i < m.operands.size(); ++i) {
    const Impl::Operand &operand = m.operands[i];
    if (operand.kept) {
      chosen[i].emplace(operand.chosen, m.engine, data[i]);
      continue;
    }
    plain[i].emplace(operand.plain, m.engine, data[i]);
    if (operand.reorder)
      chosen[i].emplace(operand.chosen, m.engine, static_cast<char *>(scratch) + operand.offset);
  }
  auto reorder = [&](size_t i, bool output) {
    const Impl::Operand &operand = m.operands[i];
    if (!operand.reorder || operand.kept)
      return;
    if (output)
      runReorder(m, operand, chosen[i]->get(), plain[i]->get());
    else
      runReorder(m, operand, plain[i]->get(), chosen[i]->get());
  };
  reorder(0, false);
  reorder(1, false);
  std::array<dnnl_exec_arg_t, 5> args;
  for (size_t i = 0; i < m.operands.size(); ++i)
    args[i] = {m.operands[i].arg, (chosen[i] ? chosen[i] : plain[i])->get()};
  int argCount = 3;
  std::optional<MemoryHandle> biasMemory, scratchpad;
  if (m.bias) {
    biasMemory.emplace(m.biasDesc, m.engine, const_cast<void *>(bias));
    args[argCount++] = {DNNL_ARG_BIAS, biasMemory->get()};
  }
  if (m.scratchpadBytes > 0) {
    scratchpad.emplace(m.scratchpad, m.engine, static_cast<char *>(scratch) + m.scratchpadOffset);
    args[argCount++] = {DNNL_ARG_SCRATCHPAD, scratchpad->get()};
  }
  if (fails(dnnl_primitive_execute(m.primitive, m.stream, argCount, args.data())))
    fail("conv", "oneDNN could not run the convolution");
  reorder(2, true);
  if (fails(dnnl_stream_wait(m.stream)))
    fail("conv", "oneDNN's stream failed");
}

std::vector<int64_t> convProblemKey(const ConvProblem &p) {
  std::vector<int64_t> key{static_cast<int64_t>(p.pass),
                           static_cast<int64_t>(p.factors),
                           p.group,
                           p.bias,
                           static_cast<int64_t>(p.activation),
                           p.constantWeights};
  for (const Dims *dims : {&p.x, &p.w, &p.y, &p.strides, &p.padBegin, &p.padEnd, &p.dilations}) {
    key.push_back(dims->size);
    key.insert(key.end(), dims->values, dims->values + dims->size);
  }
  return key;
}

ConvColumns im2colColumns(const ConvProblem &problem) {
  const Dims &in = problem.x, &kernel = problem.w, &out = problem.y;
  ConvColumns columns;
  columns.images = in[0];
  columns.groups = problem.group;
  columns.rows = kernel[1];
  columns.positions = 1;
  columns.lastExtent = out[out.size - 1];
  columns.pointwise = true;
  for (int d = 0; d + 2 < in.size; ++d) {
    columns.rows *= kernel[d + 2];
    columns.positions *= out[d + 2];
    bool unitStride = problem.strides[d] == 1;
    bool unpadded = problem.padBegin[d] == 0 && problem.padEnd[d] == 0;
    columns.pointwise &= kernel[d + 2] == 1 && unitStride && unpadded && out[d + 2] == in[d + 2];
  }
  return columns;
}

ProductProblem im2colProduct(ConvPass pass, int64_t mg, int64_t kdim, int64_t positions,
                             int64_t columns) {
  ProductProblem p;
  switch (pass) {
  case ConvPass::Forward:
    // y_g tile (mg x columns) = w_g (mg x kdim) col (kdim x columns).
    p.m = mg, p.n = columns, p.k = kdim;
    p.lda = kdim, p.ldb = columns, p.ldc = positions;
    break;
  case ConvPass::GradInput:
    // dcol (kdim x columns) = w_g^T (kdim x mg) dy_g tile (mg x columns).
    p.transA = true;
    p.m = kdim, p.n = columns, p.k = mg;
    p.lda = kdim, p.ldb = positions, p.ldc = columns;
    break;
  case ConvPass::GradWeight:
    // dw_g (mg x kdim) += dy_g tile (mg x columns) col^T (columns x kdim).
    p.transB = true;
    p.m = mg, p.n = kdim, p.k = columns;
    p.lda = positions, p.ldb = columns, p.ldc = kdim;
    p.beta = 1;
    break;
  }
  return p;
}

std::vector<ProductProblem> im2colProducts(const ConvProblem &problem) {
  const ConvColumns columns = im2colColumns(problem);
  const int64_t mg = problem.w[0] / problem.group;
  const int64_t rows = columns.positions / std::max<int64_t>(1, columns.lastExtent);
  const int64_t tileRows = columns.pointwise ? rows : cpuTileRows(columns);
  std::vector<ProductProblem> products;
  // An empty convolution runs no product (Conv.cpp returns first).
  if (rows == 0 || columns.images == 0 || mg == 0 || columns.rows == 0)
    return products;
  for (int64_t tile : {tileRows, rows % tileRows})
    if (tile > 0)
      products.push_back(im2colProduct(problem.pass, mg, columns.rows, columns.positions,
                                       tile * columns.lastExtent));
  return products;
}

const ConvPrimitive *ConvPrimitives::find(const ConvProblem &p, int threads) {
  std::vector<int64_t> key = convProblemKey(p);
  key.push_back(threads);
  auto [at, added] = made.try_emplace(std::move(key));
  if (added)
    at->second = ConvPrimitive::create(p, threads);
  return at->second.get();
}

const void *ConvPrimitives::keptWeights(const ConvPrimitive &primitive, const void *w, int threads,
                                        AllocationMeter *meter) {
  const int64_t bytes = primitive.packedWeightBytes();
  if (bytes == 0)
    return w;
  auto [at, added] = kept.try_emplace({w, &primitive});
  if (added) {
    at->second = std::make_unique<KeptBuffer>(static_cast<std::size_t>(bytes), meter);
    if (!at->second->data()) {
      kept.erase(at);
      return nullptr;
    }
    primitive.packWeights(threads, w, at->second->data());
  }
  return at->second->data();
}

void *ConvPrimitives::workspace(int64_t bytes, AllocationMeter *meter) {
  return scratch.reserve(bytes, meter);
}

} // namespace cleave::rt::cpu
