//===- NpyFuzzer.cpp - libFuzzer target: the .npy reader -----------------===//
//
// Any bytes given to rt::readNpy are read or refused with an error; never a
// crash, a sanitizer report, an uncaught exception, or more memory than the
// bytes hold. Built by -DCLEAVE_FUZZ=ON (scripts/fuzz.sh).
//
//===----------------------------------------------------------------------===//

#include "runtime/Npy.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char *>(data), size));
  cleave::rt::NpyArray array;
  std::string error;
  bool read = cleave::rt::readNpy(in, size, array, error);
  if (!read && error.empty())
    std::abort();
  // What was read fits in the bytes given.
  if (read && array.data.size() > size)
    std::abort();
  return 0;
}
