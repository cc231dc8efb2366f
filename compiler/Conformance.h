//===- Conformance.h - cleave conformance -----------------------*- C++ -*-===//

#ifndef CLEAVE_COMPILER_CONFORMANCE_H
#define CLEAVE_COMPILER_CONFORMANCE_H

#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace cleave {

/// Runs the ONNX backend test cases in or under `roots`, printing one line per
/// case (PASS, FAIL with the first difference, SKIP with the reason) and the
/// summary `N passed, M failed, K skipped`. Returns 0 when nothing failed.
int runConformance(const std::vector<std::string> &roots, llvm::raw_ostream &os);

} // namespace cleave

#endif
