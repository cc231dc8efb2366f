//===- FusedChain.cuh - a fused elementwise chain as one kernel -*- C++ -*-===//
//
// What a generated CUDA program calls for a `cleave.fused_elementwise` op:
// fused_elementwise<Code...> (runtime/ChainCode.h), a kernel made for the
// chain, one thread an element, its registers the thread's own. Each
// opcode computes what its standalone kernel computes, so a chain gives the
// unfused ops' results bit for bit: the arithmetic is spelled with the
// round-to-nearest intrinsics, which nvcc never contracts into fused
// multiply-adds, and exp, sqrt, tanh and erf call the device functions the
// standalone kernels call; a bf16 tensor is widened or rounded as the cast
// kernel does.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_CUDA_FUSEDCHAIN_CUH
#define CLEAVE_RUNTIME_CUDA_FUSEDCHAIN_CUH

#include "runtime/ChainCode.h"
#include "runtime/cuda/Common.cuh"

#include <utility>

namespace cleave::rt::cuda {

namespace chain {

template <class C, int I>
__device__ __forceinline__ float load(const ChainOperands &call, int64_t i) {
  const int64_t at = C::scalar(I) ? 0 : i;
  if constexpr (C::narrow(I))
    return detail::convert<float>(static_cast<const __nv_bfloat16 *>(call.inputs[I])[at]);
  else if constexpr (C::boolean(I))
    return static_cast<const bool *>(call.inputs[I])[at] ? 1.0f : 0.0f;
  else
    return static_cast<const float *>(call.inputs[I])[at];
}

template <class C, int K> __device__ __forceinline__ void step(float *v) {
  const float a = v[C::operand(K, 0)], b = v[C::operand(K, 1)], c = v[C::operand(K, 2)];
  float &y = v[C::inputs + K];
  constexpr ElementwiseOpcode op = C::op(K);
  if constexpr (op == ElementwiseOpcode::Add)
    y = __fadd_rn(a, b);
  else if constexpr (op == ElementwiseOpcode::Sub)
    y = __fsub_rn(a, b);
  else if constexpr (op == ElementwiseOpcode::Mul)
    y = __fmul_rn(a, b);
  else if constexpr (op == ElementwiseOpcode::Div)
    y = __fdiv_rn(a, b);
  else if constexpr (op == ElementwiseOpcode::Gate)
    y = a > 0.0f ? b : 0.0f;
  else if constexpr (op == ElementwiseOpcode::Select)
    y = a != 0.0f ? b : c;
  else if constexpr (op == ElementwiseOpcode::Neg)
    y = -a;
  else if constexpr (op == ElementwiseOpcode::Sqrt)
    y = detail::msqrt(a);
  else if constexpr (op == ElementwiseOpcode::Exp)
    y = detail::mexp(a);
  else if constexpr (op == ElementwiseOpcode::Tanh)
    y = detail::mtanh(a);
  else
    y = detail::merf(a);
}

template <class C, int O>
__device__ __forceinline__ void write(const ChainOperands &call, const float *v, int64_t i) {
  if constexpr (C::output(O) == ChainOutput::BF16)
    static_cast<__nv_bfloat16 *>(call.outputs[O])[i] =
        detail::convert<__nv_bfloat16>(v[C::result(O)]);
  else
    static_cast<float *>(call.outputs[O])[i] = v[C::result(O)];
}

/// Element i; an output may be an input (updated in place), each element
/// read before it is written.
template <class C, std::size_t... I, std::size_t... K, std::size_t... O>
__device__ __forceinline__ void element(const ChainOperands &call, int64_t i,
                                        std::index_sequence<I...>, std::index_sequence<K...>,
                                        std::index_sequence<O...>) {
  float v[C::registers];
  ((v[I] = load<C, I>(call, i)), ...);
  (step<C, K>(v), ...);
  (write<C, O>(call, v, i), ...);
}

template <class C> __global__ void kernel(int64_t n, ChainOperands call) {
  CLEAVE_GRID_LOOP(i, n) {
    element<C>(call, i, std::make_index_sequence<C::inputs>(),
               std::make_index_sequence<C::instructions>(), std::make_index_sequence<C::outputs>());
  }
}

} // namespace chain

/// A chain of elementwise ops in one pass over memory (the file comment);
/// `program` is its text, for errors.
template <int... Code>
void fused_elementwise(Context &ctx, const TensorList &inputs, const TensorList &outputs,
                       const char *program) {
  using C = ChainCode<Code...>;
  ChainOperands call;
  const int64_t n = chainOperands<C>(inputs, outputs, program, call);
  if (n == 0)
    return;
  chain::kernel<C><<<detail::blocksFor(n), detail::kThreads, 0, ctx.stream>>>(n, call);
  detail::checkLaunch("fused_elementwise");
}

} // namespace cleave::rt::cuda

#endif
