//===- Cores.cpp - the cores a run's kernels share ------------------------===//

#include "runtime/Cores.h"

#include <algorithm>
#include <thread>

#include <sched.h>

namespace cleave::rt {

int threadsPerRank(int ranks) {
  cpu_set_t usable;
  int cores = sched_getaffinity(0, sizeof(usable), &usable) == 0
                  ? CPU_COUNT(&usable)
                  : static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cores / std::max(1, ranks));
}

} // namespace cleave::rt
