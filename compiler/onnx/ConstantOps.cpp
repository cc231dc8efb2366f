//===- ConstantOps.cpp - constants and shape arithmetic from ONNX --------===//
//
// These ops have constant operands, or none, in the graphs exporters write:
// they fold at import, and the values they compute become the attributes of
// the ops that read them.
//
//===----------------------------------------------------------------------===//

#include "compiler/OnnxTensor.h"
#include "compiler/onnx/NodeContext.h"

using namespace mlir;

namespace cleave {
namespace {

Results importConstant(NodeContext &n, StringRef modelDir) {
  MLIRContext *context = n.builder.getContext();
  Builder &b = n.builder;
  DenseElementsAttr value;
  if (const auto *a = n.attr("value")) {
    TensorData data;
    std::string message;
    if (!readTensor(context, a->t(), modelDir, data, message)) {
      n.error() << "value " << message;
      return failure();
    }
    value = toElementsAttr(data);
  } else if (const auto *a = n.attr("value_float")) {
    value = DenseElementsAttr::get(RankedTensorType::get({}, b.getF32Type()), a->f());
  } else if (const auto *a = n.attr("value_floats")) {
    SmallVector<float> floats(a->floats().begin(), a->floats().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(floats.size())}, b.getF32Type()),
        ArrayRef<float>(floats));
  } else if (const auto *a = n.attr("value_int")) {
    value = DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()), a->i());
  } else if (const auto *a = n.attr("value_ints")) {
    SmallVector<int64_t> ints(a->ints().begin(), a->ints().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(ints.size())}, b.getI64Type()),
        ArrayRef<int64_t>(ints));
  } else {
    n.error() << "only value, value_float(s) and value_int(s) constants are supported";
    return failure();
  }
  return n.build<ConstantOp>({}, {n.named("value", value)});
}

Results importConstantOfShape(NodeContext &n, StringRef modelDir) {
  auto shape = n.constantInts(0, "shape");
  if (failed(shape))
    return failure();
  Attribute scalar = n.builder.getF32FloatAttr(0.0f);
  if (const auto *a = n.attr("value")) {
    TensorData data;
    std::string message;
    if (!readTensor(n.builder.getContext(), a->t(), modelDir, data, message)) {
      n.error() << "value " << message;
      return failure();
    }
    if (data.type.getNumElements() != 1) {
      n.error() << "value must hold exactly one element";
      return failure();
    }
    scalar = toElementsAttr(data).getSplatValue<Attribute>();
  }
  return n.build<ConstantOfShapeOp>({}, {n.ints("shape", *shape), n.named("value", scalar)});
}

Results importShape(NodeContext &n) {
  int64_t rank = n.rank(n.input(0));
  auto clampIndex = [rank](int64_t i) {
    return std::clamp<int64_t>(i < 0 ? i + rank : i, 0, rank);
  };
  int64_t start = clampIndex(n.getInt("start", 0));
  int64_t end = clampIndex(n.getInt("end", rank));
  return n.build<ShapeOp>(n.input(0), {n.i64("start", start), n.i64("end", std::max(start, end))});
}

Results importRange(NodeContext &n) {
  SmallVector<Attribute> bounds;
  const StringRef roles[] = {"start", "limit", "delta"};
  for (auto [i, role] : llvm::enumerate(roles)) {
    auto value = n.constant(i, role);
    if (failed(value))
      return failure();
    if (value->getNumElements() != 1) {
      n.error() << role << " must be a scalar";
      return failure();
    }
    bounds.push_back(value->getSplatValue<Attribute>());
  }
  return n.build<RangeOp>({}, {n.named("start", bounds[0]), n.named("limit", bounds[1]),
                              n.named("delta", bounds[2])});
}

} // namespace

void populateConstantImporters(OpImporterTable &table, StringRef modelDir) {
  std::string dir = modelDir.str();
  table.add("Constant", [dir](NodeContext &n) { return importConstant(n, dir); }, 0, 0);
  table.add("ConstantOfShape", [dir](NodeContext &n) { return importConstantOfShape(n, dir); },
            1, 1, {0});
  table.add("Shape", importShape, 1, 1);
  table.add("Range", importRange, 3, 3, {0, 1, 2});
}

} // namespace cleave
