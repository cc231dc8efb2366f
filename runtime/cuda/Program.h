//===- Program.h - what a generated CUDA program defines --------*- C++ -*-===//
//
// The generated program.cu includes this header and defines its entry
// points (runtime/ProgramEntry.h); the driver (runtime/driver) calls them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_CUDA_PROGRAM_H
#define CLEAVE_RUNTIME_CUDA_PROGRAM_H

#include "runtime/ProgramEntry.h"
#include "runtime/cuda/Kernels.h"

cleave::rt::ProgramEntry<cleave::rt::cuda::Context> cleave_forward;
cleave::rt::ProgramEntry<cleave::rt::cuda::Context> cleave_backward;
cleave::rt::ProgramEntry<cleave::rt::cuda::Context> cleave_backward_weight;
cleave::rt::ProgramEntry<cleave::rt::cuda::Context> cleave_apply;

#endif
