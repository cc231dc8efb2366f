//===- CleaveDialect.cpp - the cleave dialect ----------------------------===//

#include "dialects/Cleave/CleaveDialect.h"
#include "dialects/Cleave/CleaveOps.h"

using namespace mlir;
using namespace cleave;

#include "dialects/Cleave/CleaveDialect.cpp.inc"

void CleaveDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Cleave/CleaveOps.cpp.inc"
      >();
}

Operation *CleaveDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                              Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}

