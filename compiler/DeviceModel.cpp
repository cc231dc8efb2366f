//===- DeviceModel.cpp - device files and this machine's calibration -----===//

#include "compiler/DeviceModel.h"

#include "compiler/RunCommand.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"

#include <nlohmann/json.hpp>

#include <unistd.h>

namespace cleave {

using Json = nlohmann::json;

namespace {

constexpr int kDeviceFormatVersion = 1;

/// A positive number at `key` of `json`, or an error naming the key.
bool positive(const Json &json, const char *key, double &value, std::string &error) {
  auto it = json.find(key);
  if (it == json.end() || !it->is_number() || !(it->get<double>() > 0)) {
    error = std::string("'") + key + "' must be a positive number";
    return false;
  }
  value = it->get<double>();
  return true;
}

/// A positive whole number below 2^62 at `key` of `json` (a count of ranks
/// or bytes), or an error naming the key.
bool positiveCount(const Json &json, const char *key, int64_t &value, std::string &error) {
  double number = 0;
  if (!positive(json, key, number, error))
    return false;
  if (number >= 0x1p62 || number != static_cast<double>(static_cast<int64_t>(number))) {
    error = std::string("'") + key + "' must be a whole number below 2^62";
    return false;
  }
  value = static_cast<int64_t>(number);
  return true;
}

bool linkRate(const Json &json, LinkRate &rate, std::string &error) {
  return positive(json, "latency_seconds", rate.latencySeconds, error) &&
         positive(json, "bandwidth_bytes_per_second", rate.bandwidthBytesPerSecond, error);
}

/// The link at `key` of `json`: its all-reduce rate, and the rate of each
/// kind of collective that has its own (an object at the kind's name).
bool link(const Json &json, const char *key, LinkModel &model, std::string &error) {
  auto it = json.find(key);
  if (it == json.end() || !it->is_object()) {
    error = std::string("'links' has no object '") + key + "'";
    return false;
  }
  std::string where = std::string("links.") + key;
  if (!linkRate(*it, model, error)) {
    error = where + ": " + error;
    return false;
  }
  for (const char *kind : kLinkRateKinds) {
    auto own = it->find(kind);
    if (own == it->end())
      continue;
    if (!own->is_object() || !linkRate(*own, model.kinds[kind], error)) {
      error = where + "." + kind + ": " +
              (own->is_object() ? error
                                : "must be an object with 'latency_seconds' and "
                                  "'bandwidth_bytes_per_second'");
      return false;
    }
  }
  return true;
}

Json rateJson(const LinkRate &rate) {
  return {{"latency_seconds", rate.latencySeconds},
          {"bandwidth_bytes_per_second", rate.bandwidthBytesPerSecond}};
}

Json linkJson(const LinkModel &model) {
  Json json = rateJson(model);
  for (const auto &[kind, rate] : model.kinds)
    json[kind] = rateJson(rate);
  return json;
}

/// The rates every device file and calibration has, and the low-precision
/// product rate where it gives one.
bool rates(const Json &json, DeviceModel &device, std::string &error) {
  return positive(json, "product_flops_per_second", device.productFlopsPerSecond, error) &&
         (!json.contains("low_precision_product_flops_per_second") ||
          positive(json, "low_precision_product_flops_per_second",
                   device.lowPrecisionProductFlopsPerSecond, error)) &&
         positive(json, "memory_bytes_per_second", device.memoryBytesPerSecond, error) &&
         positive(json, "streaming_bytes_per_second", device.streamingBytesPerSecond, error) &&
         positive(json, "kernel_seconds", device.kernelSeconds, error);
}

} // namespace

bool readJsonObject(const std::string &path, Json &json, std::string &error) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) {
    error = "cannot read: " + buffer.getError().message();
    return false;
  }
  json = Json::parse((*buffer)->getBuffer().begin(), (*buffer)->getBuffer().end(), nullptr,
                     /*allow_exceptions=*/false);
  if (!json.is_object()) {
    error = "not a JSON object";
    return false;
  }
  return true;
}

bool readDeviceFile(const std::string &path, DeviceModel &device, std::string &error) {
  Json json;
  if (!readJsonObject(path, json, error))
    return false;
  if (json.value("format_version", Json()) != kDeviceFormatVersion) {
    error = "'format_version' must be " + std::to_string(kDeviceFormatVersion);
    return false;
  }
  device = DeviceModel();
  device.name = json.value("name", Json()).is_string() ? json["name"].get<std::string>() : path;
  device.source = path;
  if (!positiveCount(json, "ranks_per_node", device.ranksPerNode, error) ||
      !positiveCount(json, "nodes", device.nodes, error) ||
      !positiveCount(json, "memory_per_rank_bytes", device.memoryPerRankBytes, error) ||
      !rates(json, device, error))
    return false;
  if (device.ranksPerNode > (int64_t{1} << 31) / device.nodes) {
    error = "'ranks_per_node' x 'nodes' must be below 2^31";
    return false;
  }
  auto links = json.find("links");
  if (links == json.end() || !links->is_object()) {
    error = "'links' must be an object with 'intra_node' (and 'inter_node' past one node)";
    return false;
  }
  if (!link(*links, "intra_node", device.intraNode, error))
    return false;
  if (device.nodes > 1 && !link(*links, "inter_node", device.interNode.emplace(), error))
    return false;
  auto overlaps = json.find("overlaps_communication");
  if (overlaps == json.end() || !overlaps->is_boolean()) {
    error = "'overlaps_communication' must be true or false";
    return false;
  }
  device.overlapsCommunication = overlaps->get<bool>();
  return true;
}

Json deviceObject(const DeviceModel &device) {
  Json links = {{"intra_node", linkJson(device.intraNode)}};
  if (device.interNode)
    links["inter_node"] = linkJson(*device.interNode);
  Json json = {{"format_version", kDeviceFormatVersion},
               {"name", device.name},
               {"ranks_per_node", device.ranksPerNode},
               {"nodes", device.nodes},
               {"memory_per_rank_bytes", device.memoryPerRankBytes},
               {"product_flops_per_second", device.productFlopsPerSecond},
               {"memory_bytes_per_second", device.memoryBytesPerSecond},
               {"streaming_bytes_per_second", device.streamingBytesPerSecond},
               {"kernel_seconds", device.kernelSeconds},
               {"links", links},
               {"overlaps_communication", device.overlapsCommunication}};
  if (device.lowPrecisionProductFlopsPerSecond > 0)
    json["low_precision_product_flops_per_second"] = device.lowPrecisionProductFlopsPerSecond;
  return json;
}

std::string deviceJson(const DeviceModel &device) { return deviceObject(device).dump(2) + "\n"; }

bool calibrateThisMachine(const std::string &calibrator, int ranks, DeviceModel &device,
                          std::string &error) {
  std::vector<std::string> args;
  if (ranks > 1) {
    llvm::ErrorOr<std::string> mpirun = llvm::sys::findProgramByName("mpirun");
    if (!mpirun) {
      error = "mpirun is not on PATH (install OpenMPI, Debian: openmpi-bin)";
      return false;
    }
    args = mpirunCommand(*mpirun, ranks);
  }
  args.push_back(calibrator);
  llvm::SmallString<128> output;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile("cleave-calibrate", "json", output)) {
    error = "cannot create a temporary file: " + ec.message();
    return false;
  }
  llvm::FileRemover removeOutput(output);
  std::vector<llvm::StringRef> argRefs(args.begin(), args.end());
  std::optional<llvm::StringRef> redirects[] = {llvm::StringRef(""), llvm::StringRef(output),
                                                std::nullopt};
  std::string message;
  int status =
      llvm::sys::ExecuteAndWait(args.front(), argRefs, std::nullopt, redirects, 0, 0, &message);
  Json json;
  std::string unread;
  if (status != 0 || !readJsonObject(output.str().str(), json, unread)) {
    error = calibrator + " failed" + (message.empty() ? "" : ": " + message) + " (exit " +
            std::to_string(status) + ")";
    return false;
  }
  device = DeviceModel();
  device.name = "this machine, " + std::to_string(ranks) + " rank(s) of " +
                std::to_string(json.value("threads", 0)) + " thread(s)";
  device.source = "measured by cleave-calibrate";
  device.kernelThreads = std::max(1, json.value("threads", 1));
  device.ranksPerNode = ranks;
  device.memoryPerRankBytes = sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGE_SIZE) / ranks;
  if (!rates(json, device, error))
    return false;
  if (ranks > 1 && !link(json, "link", device.intraNode, error))
    return false;
  return true;
}

} // namespace cleave
