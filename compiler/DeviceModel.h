//===- DeviceModel.h - the machine cleave plan times layouts on -*- C++ -*-===//
//
// What a rank can do (its product rate, the bytes per second of its other
// kernels, a kernel call's own cost, its memory) and what links its
// collectives cross: within a node, and between nodes. Read from a device
// file (devices/*.json, docs/formats.md) or measured on this machine by
// cleave-calibrate under mpirun.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COMPILER_DEVICEMODEL_H
#define CLEAVE_COMPILER_DEVICEMODEL_H

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace cleave {

/// A collective over a link: each of its steps costs `latencySeconds`, and
/// the bytes a rank sends move at `bandwidthBytesPerSecond` (a ring
/// all-reduce of n ranks takes 2 (n - 1) steps and sends 2 (n - 1) / n of the
/// buffer: NCCL's "bus bandwidth").
struct LinkRate {
  double latencySeconds = 0;
  double bandwidthBytesPerSecond = 0;
};

/// A link's all-reduce rate, which every kind of collective takes but those
/// the link gives a rate of their own: a reduce-scatter adds what it
/// receives as it goes and an all-gather only copies: over this machine's
/// MPI on 2 ranks they move 4 MiB from memory at about 0.6 and 1.2 times
/// the all-reduce's rate (cleave-calibrate, docs/performance.md).
struct LinkModel : LinkRate {
  /// By kind ("reduce_scatter", "all_gather"), where given.
  std::map<std::string, LinkRate> kinds;

  const LinkRate &rateOf(const std::string &kind) const {
    auto it = kinds.find(kind);
    return it == kinds.end() ? *this : it->second;
  }
};

/// The collectives a link may give a rate of its own.
inline constexpr const char *kLinkRateKinds[] = {"reduce_scatter", "all_gather"};

struct DeviceModel {
  std::string name;
  /// Ranks per node (they share the intra-node link) and nodes.
  int64_t ranksPerNode = 1;
  int64_t nodes = 1;
  int64_t memoryPerRankBytes = 0;
  double productFlopsPerSecond = 0;
  /// Products of bf16 or f16 factors summed in f32 (--precision); 0 when the
  /// file gives none, and then a layout with such products is not timed.
  double lowPrecisionProductFlopsPerSecond = 0;
  /// Bytes per second of kernels within the caches, and of those that stream
  /// from memory (plan.json's streamed_bytes).
  double memoryBytesPerSecond = 0, streamingBytesPerSecond = 0;
  double kernelSeconds = 0;
  LinkModel intraNode;
  std::optional<LinkModel> interNode;
  /// Whether collectives run beside the kernels (a GPU's copy engines) or
  /// take the same cores (this CPU: a bucket summed during the backward
  /// slows it as much).
  bool overlapsCommunication = false;
  /// Where the figures come from: the file, or "measured by cleave-calibrate".
  std::string source;
  /// The kernels' threads a rank, where cleave-calibrate measured this
  /// machine (0 with a device file).
  int kernelThreads = 0;
};

/// Reads the JSON object in the file at `path`; on failure sets `error`
/// ("cannot read: ..." or "not a JSON object").
bool readJsonObject(const std::string &path, nlohmann::json &json, std::string &error);

/// Reads a device file; on failure sets `error` (without the path).
bool readDeviceFile(const std::string &path, DeviceModel &device, std::string &error);

/// The device file's JSON of `device` (what --save-device writes), as an
/// object and as text.
nlohmann::json deviceObject(const DeviceModel &device);
std::string deviceJson(const DeviceModel &device);

/// Measures this machine for `ranks` local ranks: runs `calibrator`
/// (cleave-calibrate) under mpirun with `ranks` ranks (alone for one).
/// On failure sets `error`.
bool calibrateThisMachine(const std::string &calibrator, int ranks, DeviceModel &device,
                          std::string &error);

} // namespace cleave

#endif
