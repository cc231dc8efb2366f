//===- MathOps.cpp - elementwise math and matrix products from ONNX ------===//

#include "compiler/OnnxTensor.h"
#include "compiler/onnx/NodeContext.h"

using namespace mlir;

namespace cleave {
namespace {

Results importCast(NodeContext &n) {
  int64_t to = n.getInt("to", 0);
  Type element = elementTypeFromOnnx(n.builder.getContext(), to);
  if (!element) {
    n.error() << "cast to " << onnxTypeName(to) << " is not supported";
    return failure();
  }
  return n.build<CastOp>(n.input(0), {n.named("to", TypeAttr::get(element))});
}

Results importGemm(NodeContext &n) {
  return n.build<GemmOp>(n.presentInputs(),
                         {n.f32("alpha", n.getFloat("alpha", 1.0f)),
                          n.f32("beta", n.getFloat("beta", 1.0f)),
                          n.boolean("trans_a", n.getInt("transA", 0) != 0),
                          n.boolean("trans_b", n.getInt("transB", 0) != 0)});
}

Results importTrilu(NodeContext &n) {
  int64_t k = 0;
  if (n.input(1)) {
    auto value = n.constantInts(1, "k");
    if (failed(value))
      return failure();
    if (value->size() != 1) {
      n.error() << "k must be a scalar";
      return failure();
    }
    k = (*value)[0];
  }
  return n.build<TriluOp>(n.input(0), {n.boolean("upper", n.getInt("upper", 1) != 0),
                                       n.i64("k", k)});
}

} // namespace

void populateMathImporters(OpImporterTable &table) {
  table.add("Neg", importInputsOnly<NegOp>, 1, 1);
  table.add("Sqrt", importInputsOnly<SqrtOp>, 1, 1);
  table.add("Reciprocal", importInputsOnly<ReciprocalOp>, 1, 1);
  table.add("Exp", importInputsOnly<ExpOp>, 1, 1);
  table.add("Log", importInputsOnly<LogOp>, 1, 1);
  table.add("Abs", importInputsOnly<AbsOp>, 1, 1);
  table.add("Tanh", importInputsOnly<TanhOp>, 1, 1);
  table.add("Sigmoid", importInputsOnly<SigmoidOp>, 1, 1);
  table.add("Relu", importInputsOnly<ReluOp>, 1, 1);
  table.add("Erf", importInputsOnly<ErfOp>, 1, 1);
  table.add("Not", importInputsOnly<NotOp>, 1, 1);
  table.add("Identity", importInputsOnly<IdentityOp>, 1, 1);
  table.add("Add", importInputsOnly<AddOp>, 2, 2);
  table.add("Sub", importInputsOnly<SubOp>, 2, 2);
  table.add("Mul", importInputsOnly<MulOp>, 2, 2);
  table.add("Div", importInputsOnly<DivOp>, 2, 2);
  table.add("Pow", importInputsOnly<PowOp>, 2, 2);
  table.add("Equal", importInputsOnly<EqualOp>, 2, 2);
  table.add("Less", importInputsOnly<LessOp>, 2, 2);
  table.add("Greater", importInputsOnly<GreaterOp>, 2, 2);
  table.add("Where", importInputsOnly<WhereOp>, 3, 3);
  table.add("MatMul", importInputsOnly<MatMulOp>, 2, 2);
  table.add("LeakyRelu", [](NodeContext &n) {
    return n.build<LeakyReluOp>(n.input(0), {n.f32("alpha", n.getFloat("alpha", 0.01f))});
  }, 1, 1);
  table.add("Gelu", [](NodeContext &n) {
    return n.build<GeluOp>(n.input(0),
                           {n.string("approximate", n.getString("approximate", "none"))});
  }, 1, 1);
  table.add("Cast", importCast, 1, 1);
  table.add("Gemm", importGemm, 2, 3);
  table.add("Trilu", importTrilu, 1, 2, {1});
}

} // namespace cleave
