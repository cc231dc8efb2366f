//===- Files.h - files written whole or not at all --------------*- C++ -*-===//
//
// Every file a program or `cleave run` leaves behind (outputs, trained
// weights, metrics, --save-onnx) is written through FileSet: staged under a
// temporary name next to it, every write, flush and close checked, and
// renamed into place only when the whole set is staged, so a failure (a full
// disk, a bad path, a signal) leaves the earlier files as they were.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_FILES_H
#define CLEAVE_RUNTIME_FILES_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cleave::rt {

/// A piece of a file: its bytes and their count.
using FileChunk = std::pair<const void *, std::size_t>;

/// Files replaced together. stage() writes each to PATH.partial; commit()
/// renames them all into place (with SIGTERM, SIGINT and SIGHUP held off, so
/// a stop does not leave half a set); whatever is not committed is removed
/// when the set ends.
class FileSet {
public:
  FileSet() = default;
  ~FileSet();
  FileSet(const FileSet &) = delete;
  FileSet &operator=(const FileSet &) = delete;

  /// Writes the chunks, in order, to `path`'s temporary file. On failure
  /// returns false and sets `error` (without the path).
  bool stage(const std::string &path, const std::vector<FileChunk> &chunks, std::string &error);
  /// Takes into the set the file another process staged for `path` (left by
  /// its keepStaged()); false if there is none.
  bool adopt(const std::string &path, std::string &error);
  /// Leaves the staged files under their temporary names, for the process
  /// that started this one to commit with files of its own (cleave run
  /// --save-onnx), instead of removing them.
  void keepStaged() { staged.clear(); }
  /// Renames every staged file into place. On failure returns false and sets
  /// `failed` to the file that could not be put in place and `error` to why.
  bool commit(std::string &failed, std::string &error);

  /// Where a file for `path` is staged.
  static std::string stagedName(const std::string &path) { return path + ".partial"; }

private:
  std::vector<std::string> staged;
};

/// One file written whole or not at all: a FileSet of one.
bool writeFileAtomically(const std::string &path, const std::vector<FileChunk> &chunks,
                         std::string &error);

/// Whether `path` can be written later: its directory exists, it is not a
/// directory, and PATH.partial can be created (and is removed again).
bool canCreate(const std::string &path, std::string &error);

/// Reads the whole file at `path` into `bytes`, refusing one larger than
/// `limit` bytes before reading it.
bool readFile(const std::string &path, uint64_t limit, std::string &bytes, std::string &error);

} // namespace cleave::rt

#endif
