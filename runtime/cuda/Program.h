//===- Program.h - what a generated CUDA program defines ---------*- C++ -*-===//
//
// The generated program.cu includes this header and defines cleave_forward
// and cleave_apply;
// the driver (runtime/driver) calls it. Declaring it here makes the compiler
// check that both sides agree.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_CUDA_PROGRAM_H
#define CLEAVE_RUNTIME_CUDA_PROGRAM_H

#include "runtime/cuda/Kernels.h"

/// @forward: a forward pass (in a training program, the forward and backward
/// of one microbatch, adding into the gradient accumulators). Reads `inputs`
/// (plan.json's input order) and the weights blob and writes its `outputs`
/// (views of the arena, the weights or the inputs).
void cleave_forward(cleave::rt::cuda::Context &ctx, char *arena, char *weights,
                    const cleave::rt::Tensor *inputs, cleave::rt::Tensor *outputs);

/// @apply: a training program's optimizer update from the accumulated
/// gradients; does nothing in a forward program. Same arguments.
void cleave_apply(cleave::rt::cuda::Context &ctx, char *arena, char *weights,
                  const cleave::rt::Tensor *inputs, cleave::rt::Tensor *outputs);

#endif
