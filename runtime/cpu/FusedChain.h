//===- FusedChain.h - a fused elementwise chain as one loop -----*- C++ -*-===//
//
// What a generated CPU program calls for a `cleave.fused_elementwise` op:
// fused_elementwise<Code...>, whose template arguments are the op's program
// and how each input is read and each output written (runtime/ChainCode.h),
// so that the C++ compiler makes of the chain one loop over the elements
// that keeps every intermediate in registers.
//
// Each opcode computes what its standalone kernel computes, so a chain gives
// the unfused ops' results bit for bit: add, sub, mul, div, neg and sqrt are
// exact IEEE operations whatever the vector width (contraction into fused
// multiply-adds is off here), the gate and select exact choices; exp, tanh
// and erf run the standalone kernels' loops (chainTile) over a tile of the
// elements, so a chain is runs of inline instructions between them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_CPU_FUSEDCHAIN_H
#define CLEAVE_RUNTIME_CPU_FUSEDCHAIN_H

#include "runtime/ChainCode.h"
#include "runtime/LowPrecision.h"
#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace cleave::rt::cpu {

/// Elements a chain computes at a time: an out-of-line result is a tile.
inline constexpr int64_t kChainTile = 256;

/// Calls tiles(call, begin, end) on chunks of [0, n), each a multiple of
/// kChainTile but the last, split among ctx.threads as every elementwise
/// kernel splits its elements (the results do not depend on the split).
void forEachChainChunk(const Context &ctx, int64_t n,
                       void (*tiles)(const void *call, int64_t begin, int64_t end),
                       const void *call);

/// y = op(a) over n elements, for exp, tanh and erf: the loop their
/// standalone kernels run (libmvec's vector functions).
void chainTile(ElementwiseOpcode op, const float *a, float *y, int64_t n);

/// The tensors of one call.
struct ChainCall {
  ChainOperands operands;
  /// The one element of each broadcast input.
  float scalars[kMaxElementwiseRegisters] = {};
};

// -O3 for the chains whatever the program is built with (-O1: its entry
// points are long straight lines of calls), so that their loops vectorise;
// no contraction, so that a*b+c rounds twice as the standalone kernels do.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("O3", "fp-contract=off")
#endif

namespace chain {

constexpr bool outOfLine(ElementwiseOpcode op) {
  return op == ElementwiseOpcode::Exp || op == ElementwiseOpcode::Tanh ||
         op == ElementwiseOpcode::Erf;
}

/// The program in Code, and how it is cut into runs of inline
/// instructions between the out-of-line ones.
template <int... Code> struct Program : ChainCode<Code...> {
  using C = ChainCode<Code...>;
  using C::inputs, C::instructions, C::outputs, C::registers, C::op, C::operand, C::result,
      C::reads;

  /// The run of inline instructions instruction k belongs to; an
  /// out-of-line instruction runs after its run.
  static constexpr int run(int k) {
    int r = 0;
    for (int j = 0; j < k; ++j)
      r += outOfLine(op(j));
    return r;
  }
  static constexpr int runs = run(instructions) + 1;
  /// The out-of-line instruction that follows run r, or -1.
  static constexpr int after(int r) {
    for (int k = 0; k < instructions; ++k)
      if (outOfLine(op(k)) && run(k) == r)
        return k;
    return -1;
  }
  /// The run that computes register q (inputs are read in every run).
  static constexpr int madeIn(int q) { return q < inputs ? 0 : run(q - inputs); }
  /// Whether register q is kept in a tile: an out-of-line result, an
  /// out-of-line instruction's operand, or read in a later run.
  static constexpr bool tiled(int q) {
    if (q >= inputs && outOfLine(op(q - inputs)))
      return true;
    for (int k = 0; k < instructions; ++k)
      if (reads(k, q) && (outOfLine(op(k)) || (q >= inputs && run(k) > madeIn(q))))
        return true;
    for (int o = 0; o < outputs; ++o)
      if (result(o) == q && q >= inputs && madeIn(q) < runs - 1)
        return true;
    return false;
  }
};

// The loop's pieces are always inlined: GCC vectorises no loop around a call.
template <class P, int I>
CLEAVE_ALWAYS_INLINE inline float load(const void *in, float scalar, int64_t at) {
  if constexpr (P::input(I) == ChainInput::F32)
    return static_cast<const float *>(in)[at];
  else if constexpr (P::input(I) == ChainInput::BF16)
    return fromBFloat16(static_cast<const BFloat16 *>(in)[at]);
  else if constexpr (P::input(I) == ChainInput::Bool)
    return static_cast<const bool *>(in)[at] ? 1.0f : 0.0f;
  else
    return scalar;
}

template <class P, int R, int K> CLEAVE_ALWAYS_INLINE inline void step(float *v) {
  if constexpr (!outOfLine(P::op(K)) && P::run(K) == R) {
    const float a = v[P::operand(K, 0)], b = v[P::operand(K, 1)], c = v[P::operand(K, 2)];
    float &y = v[P::inputs + K];
    constexpr ElementwiseOpcode op = P::op(K);
    if constexpr (op == ElementwiseOpcode::Add)
      y = a + b;
    else if constexpr (op == ElementwiseOpcode::Sub)
      y = a - b;
    else if constexpr (op == ElementwiseOpcode::Mul)
      y = a * b;
    else if constexpr (op == ElementwiseOpcode::Div)
      y = a / b;
    else if constexpr (op == ElementwiseOpcode::Gate)
      y = a > 0.0f ? b : 0.0f;
    else if constexpr (op == ElementwiseOpcode::Select)
      y = a != 0.0f ? b : c;
    else if constexpr (op == ElementwiseOpcode::Neg)
      y = -a;
    else
      y = __builtin_sqrtf(a);
  }
}

template <class P, int R, int Q>
CLEAVE_ALWAYS_INLINE inline void loadTile(float *v, float (*tiles)[kChainTile], int64_t j) {
  if constexpr (Q >= P::inputs && P::tiled(Q) && P::madeIn(Q) < R)
    v[Q] = tiles[Q][j];
}

template <class P, int R, int Q>
CLEAVE_ALWAYS_INLINE inline void storeTile(const float *v, float (*tiles)[kChainTile], int64_t j) {
  if constexpr (P::tiled(Q) && P::madeIn(Q) == R &&
                (Q < P::inputs || !outOfLine(P::op(Q - P::inputs))))
    tiles[Q][j] = v[Q];
}

template <class P, int O>
CLEAVE_ALWAYS_INLINE inline void write(void *out, const float *v, int64_t at) {
  if constexpr (P::output(O) == ChainOutput::F32)
    static_cast<float *>(out)[at] = v[P::result(O)];
  else
    static_cast<BFloat16 *>(out)[at] = toBFloat16(v[P::result(O)]);
}

/// Run R of the chain over elements [start, start + length): one loop.
template <class P, int R, std::size_t... I, std::size_t... K, std::size_t... Q, std::size_t... O>
void runLoop(const ChainCall &call, float (*tiles)[kChainTile], int64_t start, int64_t length,
             std::index_sequence<I...>, std::index_sequence<K...>, std::index_sequence<Q...>,
             std::index_sequence<O...>) {
  const void *in[] = {call.operands.inputs[I]...};
  const float scalars[] = {call.scalars[I]...};
  [[maybe_unused]] void *out[] = {call.operands.outputs[O]...};
  // Outputs may be inputs (updated in place), each element read before it is written.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC ivdep
#endif
  for (int64_t j = 0; j < length; ++j) {
    float v[P::registers];
    ((v[I] = load<P, I>(in[I], scalars[I], start + j)), ...);
    (loadTile<P, R, Q>(v, tiles, j), ...);
    (step<P, R, K>(v), ...);
    (storeTile<P, R, Q>(v, tiles, j), ...);
    if constexpr (R == P::runs - 1)
      (write<P, O>(out[O], v, start + j), ...);
  }
}

template <class P, std::size_t... R>
void runTile(const ChainCall &call, float (*tiles)[kChainTile], int64_t start, int64_t length,
             std::index_sequence<R...>) {
  auto run = [&](auto r) {
    constexpr int runIndex = decltype(r)::value;
    runLoop<P, runIndex>(call, tiles, start, length, std::make_index_sequence<P::inputs>(),
                         std::make_index_sequence<P::instructions>(),
                         std::make_index_sequence<P::registers>(),
                         std::make_index_sequence<P::outputs>());
    if constexpr (constexpr int k = P::after(runIndex); k >= 0)
      chainTile(P::op(k), tiles[P::operand(k, 0)], tiles[P::inputs + k], length);
  };
  (run(std::integral_constant<int, static_cast<int>(R)>()), ...);
}

template <class P> void tiles(const void *call, int64_t begin, int64_t end) {
  alignas(64) float tiles[P::registers][kChainTile];
  for (int64_t start = begin; start < end; start += kChainTile)
    runTile<P>(*static_cast<const ChainCall *>(call), tiles, start,
               std::min(kChainTile, end - start), std::make_index_sequence<P::runs>());
}

} // namespace chain

/// A chain of elementwise ops in one pass over memory (the file comment);
/// `program` is its text, for errors.
template <int... Code>
void fused_elementwise(Context &ctx, const TensorList &inputs, const TensorList &outputs,
                       const char *program) {
  using P = chain::Program<Code...>;
  ChainCall call;
  const int64_t n = chainOperands<P>(inputs, outputs, program, call.operands);
  for (int i = 0; i < P::inputs; ++i)
    if (P::scalar(i))
      call.scalars[i] = P::narrow(i)    ? fromBFloat16(*inputs[i].as<BFloat16>())
                        : P::boolean(i) ? (*inputs[i].as<bool>() ? 1.0f : 0.0f)
                                        : *inputs[i].as<float>();
  forEachChainChunk(ctx, n, &chain::tiles<P>, &call);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

} // namespace cleave::rt::cpu

#endif
