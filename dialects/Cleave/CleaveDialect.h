//===- CleaveDialect.h - the cleave dialect ---------------------*- C++ -*-===//

#ifndef CLEAVE_DIALECTS_CLEAVE_CLEAVEDIALECT_H
#define CLEAVE_DIALECTS_CLEAVE_CLEAVEDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialects/Cleave/CleaveDialect.h.inc"

#endif
