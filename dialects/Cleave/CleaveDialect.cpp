//===- CleaveDialect.cpp - the cleave dialect ----------------------------===//

#include "dialects/Cleave/CleaveDialect.h"
#include "dialects/Cleave/CleaveOps.h"

using namespace mlir;
using namespace cleave;

#include "dialects/Cleave/CleaveDialect.cpp.inc"

namespace {

/// The values a declared attribute may take beyond its kind.
LogicalResult verifyValue(StringRef name, Attribute value,
                          function_ref<InFlightDiagnostic()> emitError) {
  if (name == kKindAttr &&
      !llvm::is_contained({"input", "param", "state", "stash"}, cast<StringAttr>(value).getValue()))
    return emitError() << "'" << name << "' is " << value << ", not \"input\", \"param\", "
                       << "\"state\" or \"stash\"";
  if (auto integer = dyn_cast<IntegerAttr>(value);
      integer && integer.getType().isInteger() && integer.getValue().isNegative())
    return emitError() << "'" << name << "' is " << integer.getInt() << ", not >= 0";
  return success();
}

/// Checks a `cleave.*` attribute against its declaration in
/// CleaveAttributes.def.
LogicalResult verifyDeclared(NamedAttribute attribute,
                             function_ref<InFlightDiagnostic()> emitError) {
  StringRef name = attribute.getName().getValue();
  Attribute value = attribute.getValue();
#define CLEAVE_ATTRIBUTE(CppName, spelling, Kind)                                                  \
  if (name == k##CppName##Attr)                                                                    \
    return isa<Kind>(value) ? verifyValue(name, value, emitError)                                  \
                            : emitError() << "'" << name << "' must be " #Kind ", not " << value;
#include "dialects/Cleave/CleaveAttributes.def"
  return emitError() << "'" << name << "' is not an attribute of the cleave dialect";
}

} // namespace

LogicalResult CleaveDialect::verifyOperationAttribute(Operation *op, NamedAttribute attribute) {
  return verifyDeclared(attribute, [&] { return op->emitOpError(); });
}

LogicalResult CleaveDialect::verifyRegionArgAttribute(Operation *op, unsigned, unsigned argIndex,
                                                      NamedAttribute attribute) {
  return verifyDeclared(attribute,
                        [&] { return op->emitOpError() << "argument " << argIndex << ": "; });
}

LogicalResult CleaveDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                         unsigned resultIndex,
                                                         NamedAttribute attribute) {
  return verifyDeclared(attribute,
                        [&] { return op->emitOpError() << "result " << resultIndex << ": "; });
}

void CleaveDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Cleave/CleaveOps.cpp.inc"
      >();
}

Operation *CleaveDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type,
                                              Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}
