//===- CheckpointCommand.h - cleave ckpt ------------------------*- C++ -*-===//
//
// `cleave ckpt inspect|consolidate|export`: a training run's checkpoint
// (runtime/Checkpoint.h) read whole, every file's checksum verified, its
// global tensors put together from the shards of whatever layout wrote it.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COMPILER_CHECKPOINTCOMMAND_H
#define CLEAVE_COMPILER_CHECKPOINTCOMMAND_H

#include "llvm/Support/raw_ostream.h"

#include <string>

namespace cleave {

/// Prints the checkpoint at `dir` (a --checkpoint-dir, for its latest, or
/// one of its step-N directories): the step, mesh, optimizer, each tensor's
/// global shape and shards, and each file's size and checksum, verified.
/// Returns the exit code.
int inspectCheckpoint(const std::string &dir, llvm::raw_ostream &os);

/// Writes one safetensors file at `output` of the checkpoint's whole
/// parameters (and a training_info step's state) under their ONNX
/// initializer names. Returns the exit code.
int consolidateCheckpoint(const std::string &dir, const std::string &output);

/// Writes `model` with every initializer the checkpoint holds (its
/// parameters, and a training_info step's state) replaced by the
/// checkpoint's value, as `output`. Returns the exit code.
int exportCheckpoint(const std::string &dir, const std::string &model, const std::string &output);

} // namespace cleave

#endif
