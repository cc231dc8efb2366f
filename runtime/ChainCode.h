//===- ChainCode.h - a fused chain's program as template arguments -*- C++ -*-===//
//
// What both backends' compiled chains (runtime/cpu/FusedChain.h,
// runtime/cuda/FusedChain.cuh) share: a `cleave.fused_elementwise` op's
// program (runtime/ElementwiseProgram.h) as the integers Code... that the
// generated program passes as template arguments, read at compile time, and
// the check of a call's tensors against them. Code is
//
//   inputs, instructions, outputs,
//   the ChainInput of each input,
//   opcode (ElementwiseOpcode) and kMaxElementwiseOperands registers of each
//   instruction (those it does not read 0),
//   register, ChainOutput of each output.
//
// passes/LowerToEmitC.cpp writes it (chainTemplateArgs).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_CHAINCODE_H
#define CLEAVE_RUNTIME_CHAINCODE_H

#include "runtime/ElementwiseProgram.h"
#include "runtime/KernelError.h"
#include "runtime/Tensor.h"

namespace cleave::rt {

/// Element i of Code (a function, not a static array of ChainCode's, so
/// that ChainCode's own constants can be computed from it).
template <int... Code> CLEAVE_HOST_DEVICE constexpr int codeAt(int i) {
  const int code[] = {Code...};
  return code[i];
}

/// The program in Code.
template <int... Code> struct ChainCode {
  static constexpr int inputs = codeAt<Code...>(0), instructions = codeAt<Code...>(1),
                       outputs = codeAt<Code...>(2);
  static constexpr int registers = inputs + instructions;

  CLEAVE_HOST_DEVICE static constexpr ChainInput input(int i) {
    return ChainInput(codeAt<Code...>(3 + i));
  }
  /// Integers per instruction: the opcode and its operands.
  static constexpr int stride = 1 + kMaxElementwiseOperands;

  CLEAVE_HOST_DEVICE static constexpr ElementwiseOpcode op(int k) {
    return ElementwiseOpcode(codeAt<Code...>(3 + inputs + stride * k));
  }
  /// Operand j of instruction k.
  CLEAVE_HOST_DEVICE static constexpr int operand(int k, int j) {
    return codeAt<Code...>(4 + inputs + stride * k + j);
  }
  CLEAVE_HOST_DEVICE static constexpr int result(int o) {
    return codeAt<Code...>(3 + inputs + stride * instructions + 2 * o);
  }
  CLEAVE_HOST_DEVICE static constexpr ChainOutput output(int o) {
    return ChainOutput(codeAt<Code...>(4 + inputs + stride * instructions + 2 * o));
  }
  CLEAVE_HOST_DEVICE static constexpr bool scalar(int i) {
    return input(i) == ChainInput::F32Scalar || input(i) == ChainInput::BF16Scalar ||
           input(i) == ChainInput::BoolScalar;
  }
  CLEAVE_HOST_DEVICE static constexpr bool narrow(int i) {
    return input(i) == ChainInput::BF16 || input(i) == ChainInput::BF16Scalar;
  }
  CLEAVE_HOST_DEVICE static constexpr bool boolean(int i) {
    return input(i) == ChainInput::Bool || input(i) == ChainInput::BoolScalar;
  }
  /// The element type input i is read from.
  static constexpr DType inputType(int i) {
    return narrow(i) ? DType::BF16 : boolean(i) ? DType::Bool : DType::F32;
  }
  CLEAVE_HOST_DEVICE static constexpr bool reads(int k, int q) {
    for (int j = 0; j < operandCount(op(k)); ++j)
      if (operand(k, j) == q)
        return true;
    return false;
  }

  static constexpr bool valid() {
    if (sizeof...(Code) < 3 || inputs < 1 || instructions < 1 || outputs < 1 ||
        registers > kMaxElementwiseRegisters || outputs > kMaxElementwiseOutputs ||
        static_cast<int>(sizeof...(Code)) != 3 + inputs + stride * instructions + 2 * outputs)
      return false;
    for (int i = 0; i < inputs; ++i)
      if (codeAt<Code...>(3 + i) < 0 || codeAt<Code...>(3 + i) > int(ChainInput::BoolScalar))
        return false;
    for (int k = 0; k < instructions; ++k) {
      if (codeAt<Code...>(3 + inputs + stride * k) < 0 ||
          codeAt<Code...>(3 + inputs + stride * k) >= kElementwiseOpcodes)
        return false;
      for (int j = 0; j < kMaxElementwiseOperands; ++j)
        if (operand(k, j) < 0 || operand(k, j) >= inputs + k)
          return false;
    }
    for (int o = 0; o < outputs; ++o)
      if (result(o) < 0 || result(o) >= registers)
        return false;
    return true;
  }
};

/// Where a call's tensors are: a kernel argument on CUDA.
struct ChainOperands {
  const void *inputs[kMaxElementwiseRegisters] = {};
  void *outputs[kMaxElementwiseOutputs] = {};
};

/// The operands of a call of the chain C, `program` its text (for errors),
/// after checking that the tensors are those it was compiled for; returns
/// the outputs' element count.
template <class C>
int64_t chainOperands(const TensorList &inputs, const TensorList &outputs, const char *program,
                      ChainOperands &operands) {
  static_assert(C::valid(), "a malformed chain program");
  const char *kernel = "fused_elementwise";
  if (inputs.size() != C::inputs || outputs.size() != C::outputs)
    fail(kernel, "'%s' takes %d inputs and %d outputs, not %zu and %zu", program, C::inputs,
         C::outputs, inputs.size(), outputs.size());
  const int64_t n = outputs[0].numel();
  for (int i = 0; i < C::inputs; ++i) {
    const bool scalar = C::scalar(i);
    if (inputs[i].dtype != C::inputType(i) || inputs[i].numel() != (scalar ? 1 : n))
      fail(kernel, "'%s': input %d is not the %s of %lld elements it was compiled for", program, i,
           dtypeName(C::inputType(i)), static_cast<long long>(scalar ? 1 : n));
    operands.inputs[i] = inputs[i].data;
  }
  for (int o = 0; o < C::outputs; ++o) {
    const bool bf16 = C::output(o) == ChainOutput::BF16;
    if (outputs[o].dtype != (bf16 ? DType::BF16 : DType::F32) || outputs[o].numel() != n)
      fail(kernel, "'%s': output %d is not the %s of %lld elements it was compiled for", program, o,
           bf16 ? "bf16" : "f32", static_cast<long long>(n));
    operands.outputs[o] = outputs[o].data;
  }
  return n;
}

} // namespace cleave::rt

#endif
