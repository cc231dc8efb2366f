//===- weights_layout.cpp - a training step's weights in oneDNN's layout --===//
//
//   build/bin/cleave-bench-weights-layout [--threads T] [--batch M]
//
// Whether a training step gains from keeping its weights in the layout
// oneDNN's matmul prefers, as a forward does (cleave-constant-weights). A
// training step changes its weights every step, so the copy in that layout
// is made every step: by a reorder after the update, or at best by the
// update itself writing it beside the parameter (the bytes of the copy
// written once). For each weight of bench/forward_vs_onnxruntime.py's MLP
// (Linear layers 256 -> 1024 -> 1024 -> 10, PyTorch's [out, in] storage) it
// times, with oneDNN in the same run: the products that read the weight (the
// forward's, and the input gradient's but for the first layer, whose input
// is data) on the weight as stored and on the copy in oneDNN's layout (one
// layout per product: the two read the weight in opposite orientations); the
// reorders into those layouts; and writing the copies' bytes. Prints the
// products' time each way and the ratio (blocked products + copies) / plain
// products, for the reorder and for the fused write: below 1, the copy pays.
//
//===----------------------------------------------------------------------===//

#include "runtime/MedianTime.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

/// The median of 7 rounds of the mean seconds of `run` over about 50 ms,
/// after one call that makes any state and warms the caches.
double secondsPerCall(const std::function<void()> &run) {
  run();
  return cleave::rt::medianSecondsPerCall(run, 7, 0.05);
}

struct Weight {
  const char *name;
  memory::dim out, in;
  bool inputGradient;
};

/// One product C[m x n] = A[m x k] * B[k x n], B the weight in `weightTag`
/// (as stored) or in oneDNN's choice (`any`), timed; with `any` also the
/// reorder from the stored layout into the chosen one.
struct ProductTimes {
  double plain = 0, blocked = 0, reorder = 0;
  memory::dim copyBytes = 0;
};

ProductTimes timeProduct(const dnnl::engine &engine, dnnl::stream &stream, memory::dim m,
                         memory::dim k, memory::dim n, Tag weightTag) {
  const auto f32 = memory::data_type::f32;
  memory::desc a({m, k}, f32, Tag::ab), c({m, n}, f32, Tag::ab);
  memory::desc stored({k, n}, f32, weightTag), any({k, n}, f32, Tag::any);
  std::vector<float> aData(m * k, 0.5f), bData(k * n, 0.25f), cData(m * n);
  memory aMem(a, engine, aData.data()), bMem(stored, engine, bData.data()),
      cMem(c, engine, cData.data());
  ProductTimes times;

  dnnl::matmul plain(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, stored, c), engine));
  times.plain = secondsPerCall([&] {
    plain.execute(stream, {{DNNL_ARG_SRC, aMem}, {DNNL_ARG_WEIGHTS, bMem}, {DNNL_ARG_DST, cMem}});
    stream.wait();
  });

  dnnl::matmul::primitive_desc chosen(dnnl::matmul::desc(a, any, c), engine);
  memory blockedMem(chosen.weights_desc(), engine);
  times.copyBytes = static_cast<memory::dim>(chosen.weights_desc().get_size());
  dnnl::reorder reorder(bMem, blockedMem);
  times.reorder = secondsPerCall([&] {
    reorder.execute(stream, bMem, blockedMem);
    stream.wait();
  });
  dnnl::matmul blocked(chosen);
  times.blocked = secondsPerCall([&] {
    blocked.execute(stream,
                    {{DNNL_ARG_SRC, aMem}, {DNNL_ARG_WEIGHTS, blockedMem}, {DNNL_ARG_DST, cMem}});
    stream.wait();
  });
  return times;
}

/// Seconds to write `bytes` once into memory past the caches, split among
/// the threads as the update's elementwise loop is: what the update would
/// add to write the copy beside the parameter.
double writeSeconds(std::size_t bytes) {
  const std::size_t sets = 8; // more than the caches hold, in turn
  std::vector<std::vector<char>> buffers(sets, std::vector<char>(bytes));
  std::size_t next = 0;
  return secondsPerCall([&] {
    char *buffer = buffers[next % sets].data();
    const int value = static_cast<int>(++next & 0xff);
    const int parts = omp_get_max_threads();
#pragma omp parallel for
    for (int part = 0; part < parts; ++part) {
      const std::size_t begin = bytes * part / parts, end = bytes * (part + 1) / parts;
      std::memset(buffer + begin, value, end - begin);
    }
  });
}

} // namespace

int main(int argc, char **argv) {
  int threads = 1;
  memory::dim batch = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--threads") == 0)
      threads = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--batch") == 0)
      batch = std::atoi(argv[i + 1]);
  }
  if (threads < 1 || batch < 1 || argc % 2 == 0) {
    std::fprintf(stderr, "usage: cleave-bench-weights-layout [--threads T] [--batch M]\n");
    return 2;
  }
  omp_set_num_threads(threads);
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);

  const Weight weights[] = {
      {"fc1.weight [1024, 256]", 1024, 256, false},
      {"fc2.weight [1024, 1024]", 1024, 1024, true},
      {"fc3.weight [10, 1024]", 10, 1024, true},
  };
  std::printf("oneDNN %d.%d, %d thread(s), batch %lld: per step, ms\n", dnnl_version()->major,
              dnnl_version()->minor, threads, static_cast<long long>(batch));
  std::printf("%-26s %-14s %8s %8s %8s %8s\n", "weight", "product", "plain", "blocked", "reorder",
              "write");
  double plain = 0, blocked = 0, reorders = 0, writes = 0;
  for (const Weight &w : weights) {
    // The forward: y = x W^T, W^T read from W's rows (k = in, n = out).
    std::vector<std::pair<const char *, ProductTimes>> products = {
        {"forward", timeProduct(engine, stream, batch, w.in, w.out, Tag::ba)}};
    // The input gradient: dx = dy W (k = out, n = in).
    if (w.inputGradient)
      products.push_back(
          {"input gradient", timeProduct(engine, stream, batch, w.out, w.in, Tag::ab)});
    for (auto &[what, t] : products) {
      double write = writeSeconds(static_cast<std::size_t>(t.copyBytes));
      std::printf("%-26s %-14s %8.3f %8.3f %8.3f %8.3f\n", w.name, what, t.plain * 1e3,
                  t.blocked * 1e3, t.reorder * 1e3, write * 1e3);
      plain += t.plain;
      blocked += t.blocked;
      reorders += t.reorder;
      writes += write;
    }
  }
  std::printf("products on the weights as stored: %.3f ms a step; in oneDNN's layout %.3f "
              "(%.3f of stored)\n",
              plain * 1e3, blocked * 1e3, blocked / plain);
  std::printf("with the copies made by reorders: %.3f ms, %.3f of stored\n",
              (blocked + reorders) * 1e3, (blocked + reorders) / plain);
  std::printf("with the copies written by the update: at least %.3f ms, %.3f of stored\n",
              (blocked + writes) * 1e3, (blocked + writes) / plain);
  return 0;
}
