//===- ModelSummary.cpp - a one-screen account of an imported model ------===//

#include "compiler/ModelSummary.h"

#include "dialects/Cleave/CleaveOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringMap.h"

#include <map>

using namespace mlir;

namespace cleave {
namespace {

std::string typeString(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto tensor = cast<RankedTensorType>(type);
  os << tensor.getElementType() << "[";
  llvm::interleave(tensor.getShape(), os, "x");
  os << "]";
  return text;
}

} // namespace

void printModelSummary(const ImportedModel &model, bool allParameters, llvm::raw_ostream &os) {
  ModuleOp module = *model.module;
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  auto text = [&](StringRef name) {
    auto attr = module->getAttrOfType<StringAttr>(name);
    return attr ? attr.getValue() : StringRef("-");
  };
  auto number = [&](StringRef name) {
    auto attr = module->getAttrOfType<IntegerAttr>(name);
    return attr ? attr.getInt() : 0;
  };
  // No ai.onnx opset (a graph of training-domain nodes alone) prints as "-".
  auto opset = module->getAttrOfType<IntegerAttr>(kOpsetAttr);
  os << "model:      " << text(kSourceAttr) << " (IR version " << number(kIrVersionAttr)
     << ", opset " << (opset ? std::to_string(opset.getInt()) : std::string("-"))
     << ", producer " << text(kProducerAttr) << ")\n";

  for (auto [i, arg] : llvm::enumerate(forward.getArguments())) {
    if (forward.getArgAttrOfType<StringAttr>(i, kKindAttr).getValue() != "input")
      continue;
    os << "input:      " << forward.getArgAttrOfType<StringAttr>(i, kNameAttr).getValue()
       << " " << typeString(arg.getType()) << "\n";
  }
  for (auto [i, type] : llvm::enumerate(forward.getResultTypes()))
    os << "output:     " << forward.getResultAttrOfType<StringAttr>(i, kNameAttr).getValue()
       << " " << typeString(type) << "\n";

  int64_t elements = 0, bytes = 0;
  for (const Parameter &p : model.parameters) {
    elements += p.value.type.getNumElements();
    bytes += tensorBytes(p.value.type);
  }
  os << "parameters: " << model.parameters.size() << " tensors, " << elements << " elements, "
     << bytes << " bytes\n";
  constexpr size_t kListed = 12;
  size_t listed = allParameters ? model.parameters.size() : kListed;
  for (size_t i = 0; i < model.parameters.size() && i < listed; ++i)
    os << "  " << model.parameters[i].name << " " << typeString(model.parameters[i].value.type)
       << "\n";
  if (model.parameters.size() > listed)
    os << "  ... and " << model.parameters.size() - listed << " more (--all lists them)\n";

  std::map<std::string, int> counts;
  int total = 0;
  forward.walk([&](Operation *op) {
    if (op->getDialect() && op->getDialect()->getNamespace() == "cleave") {
      ++counts[op->getName().getStringRef().str()];
      ++total;
    }
  });
  os << "ops:        " << total << " (" << counts.size() << " kinds)\n";
  for (const auto &[name, count] : counts)
    os << "  " << name << " " << count << "\n";

  auto info = module->getAttrOfType<ArrayAttr>(kTrainingInfoAttr);
  os << "training:   "
     << (info ? std::to_string(info.size()) + " training_info algorithm(s)" : std::string("none"))
     << "\n";
  if (info) {
    for (Attribute entry : info) {
      auto dict = cast<DictionaryAttr>(entry);
      os << "  algorithm: " << cast<ArrayAttr>(dict.get("algorithm")).size() << " nodes;";
      for (Attribute node : cast<ArrayAttr>(dict.get("algorithm")))
        os << " " << cast<StringAttr>(cast<DictionaryAttr>(node).get("op")).getValue();
      os << "\n  update_binding:";
      for (NamedAttribute binding : cast<DictionaryAttr>(dict.get("update_binding")))
        os << " " << binding.getName().getValue() << " <- "
           << cast<StringAttr>(binding.getValue()).getValue();
      os << "\n";
    }
  }
  auto configs = module->getAttrOfType<ArrayAttr>(kConfigurationsAttr);
  int annotated = 0;
  forward.walk([&](Operation *op) { annotated += op->hasAttr(kDeviceConfigAttr); });
  os << "devices:    ";
  if (!configs) {
    os << "no multi-device configuration\n";
    return;
  }
  llvm::interleaveComma(configs, os, [&](Attribute entry) {
    auto dict = cast<DictionaryAttr>(entry);
    os << cast<StringAttr>(dict.get("name")).getValue() << " ("
       << cast<IntegerAttr>(dict.get("num_devices")).getInt() << " devices)";
  });
  os << "; " << annotated << " ops annotated with sharding or pipeline stage\n";
}

} // namespace cleave
