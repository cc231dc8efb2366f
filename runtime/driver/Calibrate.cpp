//===- Calibrate.cpp - cleave-calibrate: this machine's rates for cleave plan -===//
//
//   cleave-calibrate [--threads T]           alone, or under mpirun -n N
//
// Every rank measures at once, with the kernels' threads a program of the
// job would get (the cores shared among the ranks), so the figures hold for
// N ranks sharing this machine: the CPU kernels' product rates (an f32
// matmul, and one of bf16 factors summed in f32: --precision bf16), the bytes per second of an
// elementwise kernel, the time of one kernel call on a few elements, and with N > 1 the
// latency and bus bandwidth over all N ranks of the all-reduce, the reduce-scatter and the
// all-gather. Rank 0 prints them as one JSON line,
// which `cleave plan --device cpu` reads (compiler/DeviceModel.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/Allocations.h"
#include "runtime/comm/Start.h"
#include "runtime/cpu/ConvPrimitives.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/ProductPrimitives.h"
#include "runtime/driver/DriverSupport.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace cleave::rt;

namespace {

/// Whether to call again, after `calls` calls in `elapsed` seconds.
using KeepGoing = std::function<bool(int64_t calls, double elapsed)>;

/// A rank's own kernels: for `seconds`.
KeepGoing forSeconds(double seconds) {
  return [seconds](int64_t, double elapsed) { return elapsed < seconds; };
}

/// A collective: the same count on every rank.
KeepGoing forCalls(int64_t count) {
  return [count](int64_t calls, double) { return calls < count; };
}

/// Seconds per call of `run`, after one call that warms caches and makes any
/// kernel state. Every rank starts together (`together` is a barrier over
/// all of them).
double secondsPerCall(const std::function<void()> &run, const std::function<void()> &together,
                      const KeepGoing &more) {
  run();
  together();
  auto begin = std::chrono::steady_clock::now();
  double elapsed = 0;
  int64_t calls = 0;
  while (calls == 0 || more(calls, elapsed)) {
    run();
    ++calls;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  }
  return elapsed / static_cast<double>(calls);
}

Tensor matrix(std::vector<float> &storage, int64_t rows, int64_t cols) {
  storage.assign(static_cast<std::size_t>(rows * cols), 0.5f);
  return Tensor{storage.data(), DType::F32, Dims{rows, cols}};
}

} // namespace

int main(int argc, char **argv) {
  int threads = defaultThreads();
  if (argc == 3 && std::strcmp(argv[1], "--threads") == 0 && std::atoi(argv[2]) > 0)
    threads = std::atoi(argv[2]);
  else if (argc != 1) {
    std::fprintf(stderr, "usage: cleave-calibrate [--threads T]\n");
    return 2;
  }
  const int ranks = comm::launchedRanks();
  std::string error;
  auto communication = comm::startCommunication(Mesh::line("dp", ranks), {}, error);
  if (!communication) {
    std::fprintf(stderr, "cleave-calibrate: error: %s\n", error.c_str());
    return 1;
  }
  comm::Communicator &all = *communication->axis("dp");
  auto together = [&] { all.barrier({}); };

  AllocationMeter allocations;
  cpu::ConvPrimitives workspace;
  cpu::ProductPrimitives primitives;
  cpu::Context context;
  context.threads = threads;
  context.allocations = &allocations;
  context.convolutions = &workspace;
  context.products = &primitives;

  // A product about the size of a small model's layer, on f32 factors and on
  // bf16 ones (whose kernel is oneDNN's bf16 matmul where the CPU multiplies
  // bf16 faster than f32, else the factors widened to f32: the rate programs
  // get, Context::bf16Primitives).
  const int64_t m = 256, k = 512, n = 512;
  std::vector<float> a, b, c;
  Tensor lhs = matrix(a, m, k), rhs = matrix(b, k, n), product = matrix(c, m, n);
  double productSeconds =
      secondsPerCall([&] { cpu::matmul(context, lhs, rhs, product, false, false, false); },
                     together, forSeconds(0.2));
  std::vector<uint16_t> a16(static_cast<std::size_t>(m * k), 0x3f00),
      b16(static_cast<std::size_t>(k * n), 0x3f00); // bf16 0.5
  Tensor lhs16{a16.data(), DType::BF16, Dims{m, k}}, rhs16{b16.data(), DType::BF16, Dims{k, n}};
  double lowPrecisionSeconds =
      secondsPerCall([&] { cpu::matmul(context, lhs16, rhs16, product, false, false, false); },
                     together, forSeconds(0.2));

  // An elementwise kernel within the caches (3 x 4 MiB moved a call), and
  // one streaming from memory (3 x 64 MiB, past kStreamedKernelBytes).
  const int64_t elements = int64_t{1} << 20, streamed = int64_t{1} << 24;
  std::vector<float> x(streamed, 0.5f), y(streamed, 0.5f), z(streamed, 0.5f);
  auto addSeconds = [&](int64_t count) {
    Tensor lhs{x.data(), DType::F32, Dims{count}}, rhs{y.data(), DType::F32, Dims{count}},
        sum{z.data(), DType::F32, Dims{count}};
    return secondsPerCall([&] { cpu::add(context, lhs, rhs, sum); }, together, forSeconds(0.2));
  };
  double cachedSeconds = addSeconds(elements), streamSeconds = addSeconds(streamed);

  // A kernel call on a few elements: the cost of a call itself.
  Tensor small{x.data(), DType::F32, Dims{16}}, smallOut{z.data(), DType::F32, Dims{16}};
  double callSeconds = secondsPerCall([&] { cpu::add(context, small, small, smallOut); }, together,
                                      forSeconds(0.05));

  char line[1024];
  int length = std::snprintf(line, sizeof line,
                             "{\"ranks\": %d, \"threads\": %d, \"product_flops_per_second\": %.6g, "
                             "\"low_precision_product_flops_per_second\": %.6g, "
                             "\"memory_bytes_per_second\": %.6g, "
                             "\"streaming_bytes_per_second\": %.6g, \"kernel_seconds\": %.6g",
                             ranks, threads, 2.0 * m * k * n / productSeconds,
                             2.0 * m * k * n / lowPrecisionSeconds,
                             3.0 * sizeof(float) * elements / cachedSeconds,
                             3.0 * sizeof(float) * streamed / streamSeconds, callSeconds);

  // Each kind of collective: t(S) = steps x latency + bytes sent / bus
  // bandwidth, from a tiny call and one over a 4 MiB buffer (a ring
  // all-reduce sends 2 (N - 1) / N of the buffer in 2 (N - 1) steps, a
  // reduce-scatter or all-gather (N - 1) / N in N - 1). The all-reduce's is
  // the link's; the others have their own (DeviceModel.h's LinkModel).
  // The calls take 8 sets of buffers in turn, more than the caches hold: a
  // step's collectives read gradients and parameters from memory, and over
  // one buffer kept in the caches they ran 1.7-2.7 times as fast here as
  // they do in a step (docs/performance.md).
  if (ranks > 1) {
    const std::size_t whole = std::size_t{1} << 20, share = whole / ranks;
    const int sets = 8;
    std::vector<std::vector<float>> buffers(sets, std::vector<float>(whole, 1.0f)),
        parts(sets, std::vector<float>(share, 1.0f));
    int64_t step = 0, call = 0;
    // Each call of `collective` takes the next set: the whole buffer and a
    // rank's part of it.
    using Collective = std::function<void(std::size_t perRank, float *buffer, float *part)>;
    auto rate = [&](const char *name, double steps, const Collective &collective) {
      auto next = [&](std::size_t perRank) {
        const std::size_t set = static_cast<std::size_t>(call++ % sets);
        collective(perRank, buffers[set].data(), parts[set].data());
      };
      double tiny = secondsPerCall([&] { next(1); }, together, forCalls(200));
      double large = secondsPerCall([&] { next(share); }, together, forCalls(20));
      double sent = steps / ranks * sizeof(float) * static_cast<double>(share * ranks);
      char text[160];
      std::snprintf(text, sizeof text,
                    "%s\"latency_seconds\": %.6g, \"bandwidth_bytes_per_second\": %.6g", name,
                    tiny / steps, sent / std::max(large - tiny, 1e-9));
      return std::string(text);
    };
    const double ring = ranks - 1.0;
    std::string allReduce = rate("", 2 * ring, [&](std::size_t perRank, float *buffer, float *) {
      all.allReduceSum(buffer, perRank * ranks, DType::F32, {step++, "calibrate"});
    });
    std::string reduceScatter =
        rate("\"reduce_scatter\": {", ring, [&](std::size_t perRank, float *buffer, float *part) {
          all.reduceScatterSum(buffer, part, perRank, DType::F32, {step++, "calibrate"});
        });
    std::string allGather =
        rate("\"all_gather\": {", ring, [&](std::size_t perRank, float *buffer, float *part) {
          all.allGather(part, buffer, perRank, DType::F32, {step++, "calibrate"});
        });
    length += std::snprintf(line + length, sizeof line - length, ", \"link\": {%s, %s}, %s}}",
                            allReduce.c_str(), reduceScatter.c_str(), allGather.c_str());
  }
  if (communication->rank() == 0)
    std::printf("%s}\n", line);
  return 0;
}
