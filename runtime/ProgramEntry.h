//===- ProgramEntry.h - what a generated program defines -------*- C++ -*-===//
//
// A generated program (program.cpp for the CPU, program.cu for CUDA)
// defines cleave_forward and cleave_apply for its backend's kernel Context,
// and the driver (runtime/driver) calls them. Each backend's Program.h
// declares both with the one type here, so the compiler checks that the
// program and the driver agree, and the contract is written once.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_PROGRAMENTRY_H
#define CLEAVE_RUNTIME_PROGRAMENTRY_H

#include "runtime/Tensor.h"

namespace cleave::rt {

/// The type of a program's two entry points on the backend whose kernels
/// take `Context`.
///
/// cleave_forward (@forward): a forward pass (in a training program, the
/// forward and backward of one microbatch, adding into the gradient
/// accumulators). Reads `inputs` (plan.json's input order) and the weights
/// blob and writes its `outputs` (views of the arena, the weights or the
/// inputs).
///
/// cleave_apply (@apply): a training program's optimizer update from the
/// accumulated gradients; does nothing in a forward program. Same arguments.
template <typename Context>
using ProgramEntry = void(Context &ctx, char *arena, char *weights, const Tensor *inputs,
                          Tensor *outputs);

} // namespace cleave::rt

#endif
