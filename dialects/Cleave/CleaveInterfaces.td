//===- CleaveInterfaces.td - cleave op interfaces ----------*- tablegen -*-===//

#ifndef CLEAVE_INTERFACES_TD
#define CLEAVE_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Cleave_VjpOpInterface : OpInterface<"VjpOpInterface"> {
  let cppNamespace = "::cleave";
  let description = [{
    The op's reverse-mode rule (vector-Jacobian product): given the gradient of
    the loss with respect to each result, build the ops that compute the
    gradient with respect to each operand. The autodiff pass calls it in
    reverse program order, with the builder placed after the forward ops.
  }];
  let methods = [
    InterfaceMethod<[{
        Appends one value per operand to `operandGrads`: the gradient of the loss
        with respect to that operand, of the operand's type, or a null Value
        when the operand has no gradient (integer indices, labels, a mask).
        `resultGrads` has one entry per result, null for a result the loss does
        not depend on. Fails, with an error at the op, when the rule does not
        cover the op's attributes or types.
      }],
      "::llvm::LogicalResult", "buildVjp",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::ValueRange":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
  ];
}

#endif
