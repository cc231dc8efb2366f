//===- Files.h - files written whole or not at all --------------*- C++ -*-===//

#ifndef CLEAVE_RUNTIME_FILES_H
#define CLEAVE_RUNTIME_FILES_H

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace cleave::rt {

/// A piece of a file: its bytes and their count.
using FileChunk = std::pair<const void *, std::size_t>;

/// Writes the chunks, in order, to `path` through a temporary file and a
/// rename, so readers see the old file or the whole new one. On failure
/// returns false, sets `error` and leaves `path` as it was.
bool writeFileAtomically(const std::string &path, const std::vector<FileChunk> &chunks,
                         std::string &error);

} // namespace cleave::rt

#endif
