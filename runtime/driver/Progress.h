//===- Progress.h - the training progress line ------------------*- C++ -*-===//
//
// Internal to the driver. On rank 0, after a step:
//
//   step 7/20  loss 2.301234  lr 0.001  1234 samples/s  comm 12%  ETA 16s
//
// (no lr for a training_info step; the communication share only on a job of
// several ranks). On a terminal the line is redrawn in place after every
// step and ended when the run ends or something else is printed; otherwise
// one plain line is printed after every `every` steps and after the last
// (cleave run reads the step of these lines). --quiet prints none.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_DRIVER_PROGRESS_H
#define CLEAVE_RUNTIME_DRIVER_PROGRESS_H

#include <chrono>
#include <cstdint>
#include <optional>

namespace cleave::rt {

class Progress {
public:
  /// `shown`: this rank prints progress and it is not --quiet. `steps`: the
  /// run's last step; `firstStep` its first; `showCommunication`: the job
  /// has several ranks.
  Progress(bool shown, int64_t firstStep, int64_t steps, bool showCommunication);
  ~Progress() { endLine(); }
  Progress(const Progress &) = delete;
  Progress &operator=(const Progress &) = delete;

  /// After step `step`: its loss and learning rate (none for a training_info
  /// step), the samples per step, when the run started and its seconds in
  /// collectives so far. Reads the clock only for a line it prints.
  void step(int64_t step, double loss, std::optional<double> lr, int64_t batch,
            std::chrono::steady_clock::time_point start, double communicationSeconds);
  /// Ends a line left open on the terminal, before something else is
  /// printed.
  void endLine();

private:
  bool shown, terminal, showCommunication;
  int64_t firstStep, steps, every;
  bool open = false;
};

} // namespace cleave::rt

#endif
