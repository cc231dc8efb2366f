//===- RunCommand.h - cleave run --------------------------------*- C++ -*-===//

#ifndef CLEAVE_COMPILER_RUNCOMMAND_H
#define CLEAVE_COMPILER_RUNCOMMAND_H

#include <string>
#include <vector>

namespace cleave {

struct RunOptions {
  std::string dir;
  std::vector<std::string> inputs;
  std::string outputDir;
  int threads = 1;
  int repeat = 1;
  bool stats = false;
  /// Where the program's stderr goes; inherited when empty.
  std::string stderrFile;
};

/// Runs DIR/program with the inputs (ONNX TensorProto .pb files are turned
/// into .npy first) and returns its exit code, or prints why it cannot.
int runProgram(const RunOptions &options);

} // namespace cleave

#endif
