//===- Program.h - what a generated CPU program defines ---------*- C++ -*-===//
//
// The generated program.cpp includes this header and defines its entry
// points and their table (runtime/ProgramEntry.h); the driver
// (runtime/driver) calls them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_CPU_PROGRAM_H
#define CLEAVE_RUNTIME_CPU_PROGRAM_H

#include "runtime/ProgramEntry.h"
#include "runtime/cpu/Kernels.h"

cleave::rt::ProgramEntry<cleave::rt::cpu::Context> cleave_narrow_weights;
cleave::rt::ProgramEntry<cleave::rt::cpu::Context> cleave_forward;
cleave::rt::ProgramEntry<cleave::rt::cpu::Context> cleave_backward;
cleave::rt::ProgramEntry<cleave::rt::cpu::Context> cleave_backward_weight;
cleave::rt::ProgramEntry<cleave::rt::cpu::Context> cleave_apply;

/// The executable's programs: this one's entry points above, or on a rank
/// of an interleaved pipeline each of its stages' (runtime/ProgramEntry.h).
extern const cleave::rt::CompiledProgram<cleave::rt::cpu::Context> cleave_programs[];
extern const std::size_t cleave_program_count;

#endif
