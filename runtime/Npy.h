//===- Npy.h - NumPy .npy arrays in and out ---------------------*- C++ -*-===//

#ifndef CLEAVE_RUNTIME_NPY_H
#define CLEAVE_RUNTIME_NPY_H

#include "runtime/Files.h"
#include "runtime/Tensor.h"

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace cleave::rt {

/// A .npy array in host memory: C order, little-endian.
struct NpyArray {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<char> data;
};

/// The longest .npy header read (numpy writes a few hundred bytes).
inline constexpr uint32_t kMaxNpyHeaderBytes = 1 << 20;

/// Reads a version 1/2/3 .npy file. On failure returns false and sets `error`
/// (without the path).
bool readNpy(const std::string &path, NpyArray &array, std::string &error);

/// Reads a .npy array from `in`, which holds `size` bytes. The header is
/// checked against `size` (its length, then the shape's bytes) before
/// anything it claims is allocated.
bool readNpy(std::istream &in, uint64_t size, NpyArray &array, std::string &error);

/// Stages `shape` x `dtype` elements at `data` as a version 1 .npy file at
/// `path` in `files`.
bool stageNpy(FileSet &files, const std::string &path, DType dtype,
              const std::vector<int64_t> &shape, const void *data, std::string &error);

/// The same file written alone, whole or not at all.
bool writeNpy(const std::string &path, DType dtype, const std::vector<int64_t> &shape,
              const void *data, std::string &error);

/// The file an output named `tensor` is written to: NAME.npy, with characters
/// other than letters, digits, '.', '-' and '_' replaced by '_'.
std::string npyFileName(const std::string &tensor);

} // namespace cleave::rt

#endif
