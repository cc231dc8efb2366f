//===- Tensor.cpp - element types ----------------------------------------===//

#include "runtime/Tensor.h"

namespace cleave::rt {

std::size_t dtypeSize(DType type) {
  switch (type) {
  case DType::F64:
  case DType::I64:
  case DType::U64: return 8;
  case DType::F32:
  case DType::I32:
  case DType::U32: return 4;
  case DType::F16:
  case DType::BF16:
  case DType::I16:
  case DType::U16: return 2;
  case DType::I8:
  case DType::U8:
  case DType::Bool: return 1;
  }
  return 0;
}

const char *dtypeName(DType type) {
  switch (type) {
  case DType::F32: return "f32";
  case DType::F64: return "f64";
  case DType::F16: return "f16";
  case DType::BF16: return "bf16";
  case DType::I8: return "i8";
  case DType::I16: return "i16";
  case DType::I32: return "i32";
  case DType::I64: return "i64";
  case DType::U8: return "ui8";
  case DType::U16: return "ui16";
  case DType::U32: return "ui32";
  case DType::U64: return "ui64";
  case DType::Bool: return "i1";
  }
  return "?";
}

bool dtypeFromName(std::string_view name, DType &type) {
  for (int i = 0; i <= static_cast<int>(DType::Bool); ++i)
    if (name == dtypeName(static_cast<DType>(i))) {
      type = static_cast<DType>(i);
      return true;
    }
  return false;
}

} // namespace cleave::rt
