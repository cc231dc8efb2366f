//===- Conformance.h - cleave conformance -----------------------*- C++ -*-===//

#ifndef CLEAVE_COMPILER_CONFORMANCE_H
#define CLEAVE_COMPILER_CONFORMANCE_H

#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace cleave {

struct ConformanceOptions {
  /// Test case directories, or directories holding them.
  std::vector<std::string> roots;
  /// NAME STATUS lines ("pass" or "skip: REASON") every case must match.
  std::string expectedFile;
  /// Where to write the statuses of this run in that form.
  std::string recordFile;
};

/// Runs the ONNX backend test cases in or under `roots`, printing one line per
/// case (PASS; FAIL with the first difference; SKIP with the reason's
/// category and the refusal), the summary `N passed, M failed, K skipped`
/// and the skips' counts by reason, then every case whose status differs
/// from the expected file. Returns 0 when nothing failed or differed.
int runConformance(const ConformanceOptions &options, llvm::raw_ostream &os);

} // namespace cleave

#endif
