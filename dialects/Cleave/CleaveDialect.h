//===- CleaveDialect.h - the cleave dialect ---------------------*- C++ -*-===//

#ifndef CLEAVE_DIALECTS_CLEAVE_CLEAVEDIALECT_H
#define CLEAVE_DIALECTS_CLEAVE_CLEAVEDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialects/Cleave/CleaveDialect.h.inc"

namespace cleave {

// The names of the dialect's attributes: kNameAttr is "cleave.name", ...
#define CLEAVE_ATTRIBUTE(CppName, spelling, Kind)                                                  \
  inline constexpr llvm::StringLiteral k##CppName##Attr = "cleave." spelling;
#include "dialects/Cleave/CleaveAttributes.def"

} // namespace cleave

#endif
