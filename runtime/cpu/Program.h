//===- Program.h - what a generated CPU program defines ---------*- C++ -*-===//
//
// The generated program.cpp includes this header and defines its entry
// points (runtime/ProgramEntry.h); the driver (runtime/driver) calls them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_CPU_PROGRAM_H
#define CLEAVE_RUNTIME_CPU_PROGRAM_H

#include "runtime/ProgramEntry.h"
#include "runtime/cpu/Kernels.h"

cleave::rt::ProgramEntry<cleave::rt::cpu::Context> cleave_forward;
cleave::rt::ProgramEntry<cleave::rt::cpu::Context> cleave_backward;
cleave::rt::ProgramEntry<cleave::rt::cpu::Context> cleave_backward_weight;
cleave::rt::ProgramEntry<cleave::rt::cpu::Context> cleave_apply;

#endif
