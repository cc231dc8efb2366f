//===- Tensor.h - tensors over one arena, for every backend -----*- C++ -*-===//
//
// A Tensor is a view: a pointer, an element type and static dims. Kernels
// never allocate; the compiler's memory plan places every intermediate in one
// arena per rank, and parameters and constants in one weights blob.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_TENSOR_H
#define CLEAVE_RUNTIME_TENSOR_H

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <vector>

#if defined(__CUDACC__)
#define CLEAVE_HOST_DEVICE __host__ __device__
#else
#define CLEAVE_HOST_DEVICE
#endif

// Inlined even where GCC would not (a function built with other
// optimization options, as a fused chain's -O3 loop is inside an -O1
// program): GCC vectorises no loop with a call in it.
#if defined(__GNUC__) && !defined(__CUDA_ARCH__)
#define CLEAVE_ALWAYS_INLINE __attribute__((always_inline))
#else
#define CLEAVE_ALWAYS_INLINE
#endif

namespace cleave::rt {

enum class DType : int32_t { F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64, Bool };

/// Bytes per element (a Bool is one byte).
std::size_t dtypeSize(DType type);
/// "f32", "i64", ... as in the IR and plan.json.
const char *dtypeName(DType type);
/// The element type `dtypeName` calls `name`; false for none.
bool dtypeFromName(std::string_view name, DType &type);

inline constexpr int kMaxRank = 8;

/// A short list of integers (dims, axes, pads, strides), passed by value.
struct Dims {
  int32_t size = 0;
  int64_t values[kMaxRank] = {};

  Dims() = default;
  Dims(std::initializer_list<int64_t> list) {
    for (int64_t v : list)
      values[size++] = v;
  }
  CLEAVE_HOST_DEVICE int64_t operator[](int i) const { return values[i]; }
  CLEAVE_HOST_DEVICE int64_t &operator[](int i) { return values[i]; }
  CLEAVE_HOST_DEVICE int64_t product() const {
    int64_t n = 1;
    for (int i = 0; i < size; ++i)
      n *= values[i];
    return n;
  }
};

/// A view of `shape.product()` densely packed, row-major elements at `data`.
struct Tensor {
  void *data = nullptr;
  DType dtype = DType::F32;
  Dims shape;

  CLEAVE_HOST_DEVICE int32_t rank() const { return shape.size; }
  CLEAVE_HOST_DEVICE int64_t numel() const { return shape.product(); }
  std::size_t bytes() const { return static_cast<std::size_t>(numel()) * dtypeSize(dtype); }
  template <typename T> CLEAVE_HOST_DEVICE T *as() const { return static_cast<T *>(data); }
};

/// Several tensors, for variadic ops (Concat's inputs, Split's outputs).
using TensorList = std::vector<Tensor>;

template <typename... Ts> TensorList list(const Ts &...tensors) { return {tensors...}; }

/// The tensor of `dtype` and `shape` at byte `offset` of `base` (the arena or
/// the weights blob).
inline Tensor view(char *base, int64_t offset, DType dtype, Dims shape) {
  return Tensor{base + offset, dtype, shape};
}

/// The same elements under another shape (Reshape, Flatten, Squeeze...).
inline Tensor reshaped(const Tensor &t, Dims shape) { return Tensor{t.data, t.dtype, shape}; }

/// `count` consecutive elements of `t` from element `offset` (cleave.elements).
inline Tensor elements(const Tensor &t, int64_t offset, int64_t count) {
  return Tensor{static_cast<char *>(t.data) + offset * static_cast<int64_t>(dtypeSize(t.dtype)),
                t.dtype, Dims{count}};
}

/// Accessors the generated code uses for the program's input and output lists
/// and for optional kernel inputs.
inline Tensor load(const Tensor *list, int64_t index) { return list[index]; }
inline void store(Tensor *list, int64_t index, const Tensor &t) { list[index] = t; }
inline const Tensor *some(const Tensor &t) { return &t; }

/// Loss reductions, as ONNX spells them.
enum class Reduction : int32_t { None, Mean, Sum };

/// What a convolution or matrix product applies to its result as it writes
/// it (cleave-fuse-activations): nothing, max(0, x), or GELU in its erf
/// form, x (1 + erf(x / sqrt 2)) / 2.
enum class Activation : int32_t { None, Relu, Gelu };

} // namespace cleave::rt

#endif
