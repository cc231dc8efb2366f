//===- DTypeOf.h - the DType of a C++ element type --------------*- C++ -*-===//
//
// Shared by the CPU and CUDA backends' dtype dispatch. Only the 16-bit float
// types differ between them (runtime/LowPrecision.h's Half and BFloat16 on
// the CPU, CUDA's __half and __nv_bfloat16), so each backend names its pair.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_DTYPEOF_H
#define CLEAVE_RUNTIME_DTYPEOF_H

#include "runtime/Tensor.h"

#include <cstdint>
#include <type_traits>

namespace cleave::rt {

/// The DType of element type T, where Half and BFloat16 are the backend's
/// 16-bit float types; any other T does not compile.
template <typename T, typename Half, typename BFloat16> constexpr DType dtypeOf() {
  if constexpr (std::is_same_v<T, float>)
    return DType::F32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::F64;
  else if constexpr (std::is_same_v<T, Half>)
    return DType::F16;
  else if constexpr (std::is_same_v<T, BFloat16>)
    return DType::BF16;
  else if constexpr (std::is_same_v<T, int8_t>)
    return DType::I8;
  else if constexpr (std::is_same_v<T, int16_t>)
    return DType::I16;
  else if constexpr (std::is_same_v<T, int32_t>)
    return DType::I32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return DType::I64;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return DType::U8;
  else if constexpr (std::is_same_v<T, uint16_t>)
    return DType::U16;
  else if constexpr (std::is_same_v<T, uint32_t>)
    return DType::U32;
  else if constexpr (std::is_same_v<T, uint64_t>)
    return DType::U64;
  else if constexpr (std::is_same_v<T, bool>)
    return DType::Bool;
  else
    static_assert(sizeof(T) == 0, "not an element type of DType");
}

} // namespace cleave::rt

#endif
