//===- ElementwiseProgram.h - a fused chain of elementwise ops -*- C++ -*-===//
//
// The program of a `cleave.fused_elementwise` op and of the kernel of the
// same name: a chain of f32 elementwise ops that the kernels run in one pass
// over memory. Its text, which the op carries and the kernel receives, is
//
//   program     := instruction (';' instruction)* '>' register (',' register)*
//   instruction := opcode (' ' register){1 to 3: the opcode's operands}
//
// Registers 0 .. inputs-1 are the inputs (each the outputs' shape, or one
// element broadcast), register inputs + i is instruction i's result, and the
// registers after '>' are the outputs, in order. Each opcode computes what
// the standalone kernel of the same name computes, element by element, so a
// fused chain gives the unfused chain's results bit for bit (`select c x y`
// is `where`'s x where c is true, else y). Registers hold f32; a bf16 input
// is widened as it is read and a bf16 output rounded to nearest even as it
// is written (what the chain's casts did), a bool input (a where's
// condition) read as 1 or 0. The compiler's verifier and its lowering to the
// backends' compiled chains (runtime/ChainCode.h) parse it here.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_ELEMENTWISEPROGRAM_H
#define CLEAVE_RUNTIME_ELEMENTWISEPROGRAM_H

#include "runtime/Tensor.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace cleave::rt {

/// The ops a program may hold: binary ones first, then unary ones, then
/// Select. Gate is a ReLU's gradient: its second operand where its first is
/// above 0, else 0. Select is a where: its second operand where its first
/// is not 0, else its third.
enum class ElementwiseOpcode : uint8_t {
  Add,
  Sub,
  Mul,
  Div,
  Gate,
  Neg,
  Sqrt,
  Exp,
  Tanh,
  Erf,
  Select
};

inline constexpr const char *kElementwiseOpcodeNames[] = {
    "add", "sub", "mul", "div", "gate", "neg", "sqrt", "exp", "tanh", "erf", "select"};
inline constexpr int kElementwiseOpcodes =
    sizeof(kElementwiseOpcodeNames) / sizeof(kElementwiseOpcodeNames[0]);

/// How many registers `op` reads.
CLEAVE_HOST_DEVICE constexpr int operandCount(ElementwiseOpcode op) {
  return op == ElementwiseOpcode::Select ? 3 : op <= ElementwiseOpcode::Gate ? 2 : 1;
}

/// Registers (inputs and instruction results) and outputs a program may use.
inline constexpr int kMaxElementwiseRegisters = 48;
inline constexpr int kMaxElementwiseOutputs = 8;

/// How a compiled chain (runtime/ChainCode.h) reads an input:
/// every element, or its one element for all; and write an output (bf16
/// rounded to nearest even).
enum class ChainInput : int { F32, F32Scalar, BF16, BF16Scalar, Bool, BoolScalar };
enum class ChainOutput : int { F32, BF16 };

inline constexpr int kMaxElementwiseOperands = 3;

struct ElementwiseInstruction {
  ElementwiseOpcode op;
  /// The registers it reads: operandCount(op) of them, the others 0.
  uint8_t operands[kMaxElementwiseOperands];
};

struct ElementwiseProgram {
  int inputs = 0, instructions = 0, outputs = 0;
  ElementwiseInstruction code[kMaxElementwiseRegisters];
  uint8_t results[kMaxElementwiseOutputs];

  int registers() const { return inputs + instructions; }
};

/// The opcode named `name` (of `length` characters), or -1.
inline int elementwiseOpcode(const char *name, std::size_t length) {
  for (int i = 0; i < kElementwiseOpcodes; ++i)
    if (std::strlen(kElementwiseOpcodeNames[i]) == length &&
        std::strncmp(kElementwiseOpcodeNames[i], name, length) == 0)
      return i;
  return -1;
}

/// Parses `text`, a program over `inputs` inputs, into `program`; returns
/// what is wrong with it, or an empty string.
inline std::string parseElementwiseProgram(const char *text, int inputs,
                                           ElementwiseProgram &program) {
  program = ElementwiseProgram();
  program.inputs = inputs;
  if (inputs < 1 || inputs > kMaxElementwiseRegisters)
    return "takes 1 to " + std::to_string(kMaxElementwiseRegisters) + " inputs";
  const char *at = text;
  // A register defined before the current instruction (or output list).
  auto readRegister = [&](uint8_t &out) -> bool {
    char *end = nullptr;
    long value = std::strtol(at, &end, 10);
    if (end == at || value < 0 || value >= program.registers())
      return false;
    out = static_cast<uint8_t>(value);
    at = end;
    return true;
  };
  for (;;) {
    if (program.registers() >= kMaxElementwiseRegisters)
      return "has more than " + std::to_string(kMaxElementwiseRegisters) + " registers";
    const char *name = at;
    while (*at >= 'a' && *at <= 'z')
      ++at;
    int opcode = elementwiseOpcode(name, static_cast<std::size_t>(at - name));
    if (opcode < 0)
      return "has an unknown op '" + std::string(name, static_cast<std::size_t>(at - name)) +
             "' in instruction " + std::to_string(program.instructions);
    ElementwiseInstruction &instruction = program.code[program.instructions];
    instruction = {static_cast<ElementwiseOpcode>(opcode), {}};
    for (int j = 0; j < operandCount(instruction.op); ++j)
      if (*at++ != ' ' || !readRegister(instruction.operands[j]))
        return "has a bad operand " + std::to_string(j) + " in instruction " +
               std::to_string(program.instructions);
    ++program.instructions;
    if (*at == '>')
      break;
    if (*at++ != ';')
      return "has no ';' or '>' after instruction " + std::to_string(program.instructions - 1);
  }
  ++at;
  for (;;) {
    if (program.outputs == kMaxElementwiseOutputs)
      return "has more than " + std::to_string(kMaxElementwiseOutputs) + " outputs";
    if (!readRegister(program.results[program.outputs]))
      return "has a bad output register";
    ++program.outputs;
    if (*at == '\0')
      return "";
    if (*at++ != ',')
      return "has no ',' between output registers";
  }
}

} // namespace cleave::rt

#endif
