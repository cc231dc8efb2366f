//===- CpuMain.cpp - main of a generated CPU program ---------------------===//

#include "runtime/cpu/ConvPrimitives.h"
#include "runtime/cpu/ProductPrimitives.h"
#include "runtime/cpu/Program.h"
#include "runtime/driver/Driver.h"

#include <cstdlib>
#include <cstring>
#include <utility>

namespace {

class CpuBackend final : public cleave::rt::Backend {
public:
  CpuBackend() {
    context.allocations = &allocations_;
    context.convolutions = &convolutions_;
    context.products = &products_;
  }
  const char *name() const override { return "cpu"; }
  void *allocate(std::size_t bytes) override {
    std::size_t rounded = (bytes + 63) / 64 * 64;
    void *memory = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (!memory)
      throw std::bad_alloc(); // the driver reports it as one line
    allocations_.allocated(bytes);
    return memory;
  }
  void release(void *memory, std::size_t bytes) override {
    allocations_.released(bytes);
    std::free(memory);
  }
  const cleave::rt::AllocationMeter &allocations() const override { return allocations_; }
  void *allocateStaging(std::size_t bytes) override { return allocate(bytes); }
  void releaseStaging(void *memory, std::size_t bytes) override { release(memory, bytes); }
  bool readsStaging() const override { return true; }
  // An empty tensor may have no memory at all: memcpy's null is undefined
  // even for no bytes (UBSan's finding).
  void copyToDevice(void *device, const void *host, std::size_t bytes) override {
    if (bytes > 0)
      std::memcpy(device, host, bytes);
  }
  void copyToHost(void *host, const void *device, std::size_t bytes) override {
    if (bytes > 0)
      std::memcpy(host, device, bytes);
  }
  void setThreads(int threads) override { context.threads = threads; }
  bool flushSubnormals(int threads) override { return cleave::rt::cpu::flushSubnormals(threads); }
  void setStep(int64_t step, uint64_t randomStream, bool lastMicrobatch, bool firstCall) override {
    context.step = step;
    context.randomStream = randomStream;
    context.lastMicrobatch = lastMicrobatch;
    context.firstCall = firstCall;
  }
  void setBackground(cleave::rt::comm::BackgroundCollectives *background) override {
    context.background = background;
  }
  void setCommunicators(const std::vector<cleave::rt::comm::Communicator *> &axes) override {
    context.axes = axes;
  }
  std::vector<cleave::rt::comm::Communicator *> communicators() const override {
    return context.axes;
  }
  void setMarks(cleave::rt::ProgramMarks *marks, bool ops) override {
    context.marks = marks;
    context.markOps = marks && ops;
  }
  void setApplyPhase(int phase) override { context.applyPhase = phase; }
  void *takeStagePartial() override { return std::exchange(context.stagePartial, nullptr); }
  void run(size_t program, cleave::rt::ProgramEntryPoint entry, char *arena, char *weights,
           const cleave::rt::Tensor *inputs, cleave::rt::Tensor *outputs) override {
    cleave_programs[program].entryPoint(entry)(context, arena, weights, inputs, outputs);
  }

private:
  cleave::rt::AllocationMeter allocations_;
  cleave::rt::cpu::ConvPrimitives convolutions_;
  cleave::rt::cpu::ProductPrimitives products_;
  cleave::rt::cpu::Context context;
};

} // namespace

int main(int argc, char **argv) {
  CpuBackend backend;
  return cleave::rt::runDriver(
      argc, argv, cleave::rt::identitiesOf(cleave_programs, cleave_program_count), backend);
}
