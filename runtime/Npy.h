//===- Npy.h - NumPy .npy arrays in and out ---------------------*- C++ -*-===//

#ifndef CLEAVE_RUNTIME_NPY_H
#define CLEAVE_RUNTIME_NPY_H

#include "runtime/Tensor.h"

#include <string>
#include <vector>

namespace cleave::rt {

/// A .npy array in host memory: C order, little-endian.
struct NpyArray {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<char> data;
};

/// Reads a version 1/2/3 .npy file. On failure returns false and sets `error`
/// (without the path).
bool readNpy(const std::string &path, NpyArray &array, std::string &error);

/// Writes `shape` x `dtype` elements at `data` as a version 1 .npy file,
/// whole or not at all (through a temporary file and a rename).
bool writeNpy(const std::string &path, DType dtype, const std::vector<int64_t> &shape,
              const void *data, std::string &error);

/// The file an output named `tensor` is written to: NAME.npy, with characters
/// other than letters, digits, '.', '-' and '_' replaced by '_'.
std::string npyFileName(const std::string &tensor);

} // namespace cleave::rt

#endif
