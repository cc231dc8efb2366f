//===- Program.h - what a generated CPU program defines ---------*- C++ -*-===//
//
// The generated program.cpp includes this header and defines cleave_forward;
// the driver (runtime/driver) calls it. Declaring it here makes the compiler
// check that both sides agree.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_CPU_PROGRAM_H
#define CLEAVE_RUNTIME_CPU_PROGRAM_H

#include "runtime/cpu/Kernels.h"

/// One forward pass: reads `inputs` (in @forward's input order), the weights
/// blob and writes `outputs` (views of the arena, the weights or the inputs).
void cleave_forward(cleave::rt::cpu::Context &ctx, char *arena, char *weights,
                    const cleave::rt::Tensor *inputs, cleave::rt::Tensor *outputs);

#endif
