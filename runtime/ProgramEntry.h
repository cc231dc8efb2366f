//===- ProgramEntry.h - what a generated program defines -------*- C++ -*-===//
//
// A generated program (program.cpp for the CPU, program.cu for CUDA)
// defines cleave_narrow_weights, cleave_forward, cleave_backward,
// cleave_backward_weight and cleave_apply for its backend's kernel Context, and the table
// `cleave_programs` of them, which the driver (runtime/driver) calls. Each
// backend's Program.h declares them with the types here, so the compiler
// checks that the program and the driver agree, and the contract is written
// once.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_PROGRAMENTRY_H
#define CLEAVE_RUNTIME_PROGRAMENTRY_H

#include "runtime/Tensor.h"

#include <cstddef>
#include <vector>

namespace cleave::rt {

/// The entry points, as the driver names them.
enum class ProgramEntryPoint { NarrowWeights, Forward, Backward, BackwardWeight, Apply };

/// The type of a program's entry points on the backend whose kernels take
/// `Context`.
///
/// cleave_narrow_weights (@narrow_weights): once a step, before its first
/// microbatch, rounds the parameters the products read to their bf16 or f16
/// copies in the weights blob (--precision), which every microbatch of the
/// step then reads; where @apply keeps the copies (TrainingSpec::
/// narrowWeightsOnce), only before a run's first step; does nothing in an
/// f32 program.
///
/// cleave_forward (@forward): a forward pass (in a training program, the
/// forward and backward of one microbatch, adding into the gradient
/// accumulators). Reads `inputs` (plan.json's input order) and the weights
/// blob and writes its `outputs` (views of the arena, the weights or the
/// inputs; a stash is copied into the buffer its output already points to).
///
/// cleave_backward (@backward): in a pipeline stage's program, where
/// cleave_forward runs a microbatch's forward only, its backward: reads the
/// stash its forward wrote into `outputs` (plan.json's pipeline stash, as
/// inputs), receives and sends gradients and adds into the gradient
/// accumulators. Does nothing in any other program. With the zb-h1
/// schedule it sends the inputs' gradients only, and:
///
/// cleave_backward_weight (@backward_weight): the weights' gradients of a
/// microbatch, from both stashes (the forward's and the backward's); does
/// nothing in any other program.
///
/// cleave_apply (@apply): a training program's optimizer update from the
/// accumulated gradients; does nothing in a forward program. Same arguments.
template <typename Context>
using ProgramEntry = void(Context &ctx, char *arena, char *weights, const Tensor *inputs,
                          Tensor *outputs);

/// Every entry point, in the order a CompiledProgram lists them.
inline constexpr ProgramEntryPoint kProgramEntryPoints[] = {
    ProgramEntryPoint::NarrowWeights, ProgramEntryPoint::Forward, ProgramEntryPoint::Backward,
    ProgramEntryPoint::BackwardWeight, ProgramEntryPoint::Apply};

/// "narrow_weights", "forward", "backward", "backward_weight", "apply".
inline const char *entryPointName(ProgramEntryPoint entry) {
  switch (entry) {
  case ProgramEntryPoint::NarrowWeights:
    return "narrow_weights";
  case ProgramEntryPoint::Forward:
    return "forward";
  case ProgramEntryPoint::Backward:
    return "backward";
  case ProgramEntryPoint::BackwardWeight:
    return "backward_weight";
  case ProgramEntryPoint::Apply:
    break;
  }
  return "apply";
}

/// What a compile made a program for: the compile's build id and the
/// programInterface (runtime/Plan.h) of its plan.json.
struct ProgramIdentity {
  const char *buildId;
  const char *planInterface;
};

/// One compiled program of an executable: its identity and its entry
/// points. An executable holds one, or, on a rank of an interleaved
/// pipeline, one per stage it runs, in stage order; each backend's
/// Program.h declares the list (`cleave_programs`), which the generated
/// code defines.
template <typename Context> struct CompiledProgram {
  ProgramIdentity identity;
  ProgramEntry<Context> *narrowWeights, *forward, *backward, *backwardWeight, *apply;

  /// The function of `entry`.
  ProgramEntry<Context> &entryPoint(ProgramEntryPoint entry) const {
    return entry == ProgramEntryPoint::NarrowWeights    ? *narrowWeights
           : entry == ProgramEntryPoint::Forward        ? *forward
           : entry == ProgramEntryPoint::Backward       ? *backward
           : entry == ProgramEntryPoint::BackwardWeight ? *backwardWeight
                                                        : *apply;
  }
};

/// The identities of `count` programs.
template <typename Context>
std::vector<ProgramIdentity> identitiesOf(const CompiledProgram<Context> *programs,
                                          std::size_t count) {
  std::vector<ProgramIdentity> identities;
  for (std::size_t i = 0; i < count; ++i)
    identities.push_back(programs[i].identity);
  return identities;
}

} // namespace cleave::rt

#endif
