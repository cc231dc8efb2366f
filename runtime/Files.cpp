//===- Files.cpp - files written whole or not at all ---------------------===//

#include "runtime/Files.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace cleave::rt {

bool writeFileAtomically(const std::string &path, const std::vector<FileChunk> &chunks,
                         std::string &error) {
  std::string temporary = path + ".partial";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    for (const auto &[data, bytes] : chunks)
      if (out)
        out.write(static_cast<const char *>(data), static_cast<std::streamsize>(bytes));
    if (!out) {
      error = "cannot write: " + std::string(std::strerror(errno));
      std::remove(temporary.c_str());
      return false;
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    error = "cannot write: " + std::string(std::strerror(errno));
    std::remove(temporary.c_str());
    return false;
  }
  return true;
}

} // namespace cleave::rt
