//===- Cores.h - the cores a run's kernels share --------------*- C++ -*-===//
//
// A run's kernels take, by default, an equal share of the cores the process
// may run on; the compiler predicts oneDNN's scratchpads, which are sized
// for the threads, for the same share (plan.json's memory.threads).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_CORES_H
#define CLEAVE_RUNTIME_CORES_H

namespace cleave::rt {

/// The cores this process may run on (its affinity mask) shared among
/// `ranks` ranks on this machine, at least 1, so that ranks x threads =
/// cores.
int threadsPerRank(int ranks);

} // namespace cleave::rt

#endif
