//===- CleaveOps.td - the cleave dialect -------------------*- tablegen -*-===//
//
// ONNX operators at static shapes. Shape-deciding ONNX inputs are attributes
// here (see docs/ops.md); result types are inferred from operands and
// attributes, and the inference doubles as the shape verifier.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_OPS_TD
#define CLEAVE_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "dialects/Cleave/CleaveInterfaces.td"

def Cleave_Dialect : Dialect {
  let name = "cleave";
  let cppNamespace = "::cleave";
  let summary = "ONNX operators at static shapes, ready to train and partition";
  let hasConstantMaterializer = 1;
  let dependentDialects = ["::mlir::shard::ShardDialect"];
  // Every `cleave.*` attribute is declared in CleaveAttributes.def; the
  // verifiers refuse any other and a value of another kind.
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
}

def Cleave_Tensor : StaticShapeTensorOf<[AnyType]>;
// The element types each op's kernels implement on every backend (the type
// lists of runtime/cpu/Support.h and runtime/cuda/Common.cuh): what they do
// not admit is refused at import, never left for a kernel to refuse.
defvar Cleave_IntegerTypes = [I8, I16, I32, I64, UI8, UI16, UI32, UI64];
def Cleave_FloatTensor : StaticShapeTensorOf<[F32, F64]>;
def Cleave_NumericTensor : StaticShapeTensorOf<!listconcat([F32, F64], Cleave_IntegerTypes)>;
def Cleave_ComparableTensor
    : StaticShapeTensorOf<!listconcat([F32, F64, I1], Cleave_IntegerTypes)>;
// Products of bf16 or f16 operands accumulate in f32 and give an f32 result
// (what --precision asks of them; an ONNX product of those types is refused
// at import).
def Cleave_MatrixTensor : StaticShapeTensorOf<[F32, F64, I32, I64, BF16, F16]>;
// A convolution's factors: f32 and f64, or bf16 summed in f32 (--precision
// bf16 on the CPU; the result and bias are then f32).
def Cleave_ConvFactorTensor : StaticShapeTensorOf<[F32, F64, BF16]>;
// What gather_grad's kernels add (their atomic adds on CUDA).
def Cleave_ScatterTensor : StaticShapeTensorOf<[F32, F64, I32, I64]>;
// ONNX ReduceSum's and ReduceMean's types: the kernels sum in the element
// type, which for 8- and 16-bit integers would wrap before a mean divides.
def Cleave_SummableTensor : StaticShapeTensorOf<[F32, F64, I32, I64, UI32, UI64]>;
def Cleave_IndexTensor : StaticShapeTensorOf<[I32, I64]>;
def Cleave_BoolTensor : StaticShapeTensorOf<[I1]>;

// Ops with a reverse-mode rule (buildVjp in CleaveVjp.cpp).
defvar Cleave_Vjp = DeclareOpInterfaceMethods<Cleave_VjpOpInterface>;

class Cleave_Op<string mnemonic, list<Trait> traits = []>
    : Op<Cleave_Dialect, mnemonic, traits> {
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

// Result types come from the op's own inferReturnTypes (CleaveOps.cpp).
class Cleave_PureOp<string mnemonic, list<Trait> traits = []>
    : Cleave_Op<mnemonic, !listconcat(traits, [Pure, InferTypeOpAdaptor])>;

// Generators have no operands: only attributes and the result type print.
class Cleave_GeneratorOp<string mnemonic, list<Trait> traits = []>
    : Cleave_PureOp<mnemonic, traits> {
  let assemblyFormat = "attr-dict `:` type(results)";
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// ODS derives the inferred result type from SameOperandsAndResultType.
// `differentiable` ops declare VjpOpInterface.
class Cleave_UnaryOp<string mnemonic, Type type, bit folds = 0, bit differentiable = 1>
    : Cleave_Op<mnemonic, !listconcat([Pure, SameOperandsAndResultType, InferTypeOpInterface],
                                      !if(differentiable, [Cleave_Vjp], []))> {
  let summary = "elementwise " # mnemonic;
  let arguments = (ins type:$input);
  let results = (outs type:$output);
  let hasFolder = folds;
}

def Cleave_NegOp : Cleave_UnaryOp<"neg", Cleave_NumericTensor, 1>;
def Cleave_SqrtOp : Cleave_UnaryOp<"sqrt", Cleave_FloatTensor, 1>;
def Cleave_ReciprocalOp : Cleave_UnaryOp<"reciprocal", Cleave_FloatTensor, 1>;
def Cleave_ExpOp : Cleave_UnaryOp<"exp", Cleave_FloatTensor>;
def Cleave_LogOp : Cleave_UnaryOp<"log", Cleave_FloatTensor>;
def Cleave_AbsOp : Cleave_UnaryOp<"abs", Cleave_NumericTensor, 1>;
def Cleave_TanhOp : Cleave_UnaryOp<"tanh", Cleave_FloatTensor>;
def Cleave_SigmoidOp : Cleave_UnaryOp<"sigmoid", Cleave_FloatTensor>;
def Cleave_ReluOp : Cleave_UnaryOp<"relu", Cleave_NumericTensor>;
def Cleave_ErfOp : Cleave_UnaryOp<"erf", Cleave_FloatTensor>;
def Cleave_NotOp : Cleave_UnaryOp<"not", Cleave_BoolTensor, 1, 0>;
def Cleave_IdentityOp : Cleave_UnaryOp<"identity", Cleave_Tensor, 1>;
// The trigonometric and hyperbolic functions and their inverses.
def Cleave_SinOp : Cleave_UnaryOp<"sin", Cleave_FloatTensor>;
def Cleave_CosOp : Cleave_UnaryOp<"cos", Cleave_FloatTensor>;
def Cleave_TanOp : Cleave_UnaryOp<"tan", Cleave_FloatTensor>;
def Cleave_AsinOp : Cleave_UnaryOp<"asin", Cleave_FloatTensor>;
def Cleave_AcosOp : Cleave_UnaryOp<"acos", Cleave_FloatTensor>;
def Cleave_AtanOp : Cleave_UnaryOp<"atan", Cleave_FloatTensor>;
def Cleave_SinhOp : Cleave_UnaryOp<"sinh", Cleave_FloatTensor>;
def Cleave_CoshOp : Cleave_UnaryOp<"cosh", Cleave_FloatTensor>;
def Cleave_AsinhOp : Cleave_UnaryOp<"asinh", Cleave_FloatTensor>;
def Cleave_AcoshOp : Cleave_UnaryOp<"acosh", Cleave_FloatTensor>;
def Cleave_AtanhOp : Cleave_UnaryOp<"atanh", Cleave_FloatTensor>;
// Piecewise constant: no gradient (the autodiff pass refuses a loss that
// depends on a parameter through them).
def Cleave_FloorOp : Cleave_UnaryOp<"floor", Cleave_FloatTensor, 0, 0>;
def Cleave_CeilOp : Cleave_UnaryOp<"ceil", Cleave_FloatTensor, 0, 0>;
def Cleave_RoundOp : Cleave_UnaryOp<"round", Cleave_FloatTensor, 0, 0> {
  let summary = "elementwise round, halves to even";
}
def Cleave_SignOp : Cleave_UnaryOp<"sign", Cleave_NumericTensor, 0, 0> {
  let summary = "elementwise sign: -1, 0 or 1 (NaN stays NaN)";
}

def Cleave_LeakyReluOp : Cleave_UnaryOp<"leaky_relu", Cleave_FloatTensor> {
  let arguments = (ins Cleave_FloatTensor:$input, F32Attr:$alpha);
}

def Cleave_GeluOp : Cleave_UnaryOp<"gelu", Cleave_FloatTensor> {
  let arguments = (ins Cleave_FloatTensor:$input,
                   DefaultValuedAttr<StrAttr, "\"none\"">:$approximate);
  let hasVerifier = 1;
}

// Arithmetic ones declare VjpOpInterface; comparisons have no gradient.
class Cleave_BroadcastOp<string mnemonic, Type operandType, bit comparison = 0,
                         bit sameElementType = 1>
    : Cleave_PureOp<mnemonic, !listconcat(
          !if(sameElementType, [AllElementTypesMatch<["lhs", "rhs"]>], []),
          !if(comparison, [], [Cleave_Vjp]))> {
  let summary = "elementwise " # mnemonic # " with multidirectional broadcasting";
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs Cleave_Tensor:$output);
  let hasFolder = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *context, std::optional<::mlir::Location> location,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      ::mlir::Type element = }] # !if(comparison, "::mlir::IntegerType::get(context, 1)",
          "::mlir::getElementTypeOrSelf(adaptor.getLhs().getType())") # [{;
      return inferBroadcastType(location, adaptor.getOperands().getTypes(), element, types);
    }
  }];
}

def Cleave_AddOp : Cleave_BroadcastOp<"add", Cleave_NumericTensor>;
def Cleave_SubOp : Cleave_BroadcastOp<"sub", Cleave_NumericTensor>;
def Cleave_MulOp : Cleave_BroadcastOp<"mul", Cleave_NumericTensor>;
def Cleave_DivOp : Cleave_BroadcastOp<"div", Cleave_NumericTensor>;
def Cleave_PowOp : Cleave_BroadcastOp<"pow", Cleave_NumericTensor, 0, 0>;
// NaN in either operand gives NaN (numpy's maximum and minimum).
def Cleave_MaxOp : Cleave_BroadcastOp<"max", Cleave_NumericTensor>;
def Cleave_MinOp : Cleave_BroadcastOp<"min", Cleave_NumericTensor>;
// The remainder of the division truncated toward zero, with the sign of lhs
// (C's fmod; for integers C's %, with x % 0 and INT_MIN % -1 giving 0, as
// numpy's fmod).
def Cleave_FmodOp : Cleave_BroadcastOp<"fmod", Cleave_NumericTensor>;
def Cleave_EqualOp : Cleave_BroadcastOp<"equal", Cleave_ComparableTensor, 1>;
def Cleave_LessOp : Cleave_BroadcastOp<"less", Cleave_NumericTensor, 1>;
def Cleave_GreaterOp : Cleave_BroadcastOp<"greater", Cleave_NumericTensor, 1>;

def Cleave_WhereOp : Cleave_PureOp<"where", [Cleave_Vjp]> {
  let summary = "select x where condition holds, else y, with broadcasting";
  let arguments = (ins Cleave_BoolTensor:$condition, Cleave_Tensor:$x, Cleave_Tensor:$y);
  let results = (outs Cleave_Tensor:$output);
  let hasFolder = 1;
}

def Cleave_CastOp : Cleave_PureOp<"cast", [Cleave_Vjp]> {
  let summary = "elementwise conversion to the element type `to`";
  let arguments = (ins Cleave_Tensor:$input, TypeAttr:$to);
  let results = (outs Cleave_Tensor:$output);
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Normalisation and activations over an axis
//===----------------------------------------------------------------------===//

class Cleave_AxisOp<string mnemonic> : Cleave_PureOp<mnemonic, [Cleave_Vjp]> {
  let arguments = (ins Cleave_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Cleave_FloatTensor:$output);
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> location, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return inferAxisType(location, adaptor.getInput(), adaptor.getAxis(), types);
    }
  }];
}

def Cleave_SoftmaxOp : Cleave_AxisOp<"softmax"> {
  let summary = "softmax along `axis`";
}
def Cleave_LogSoftmaxOp : Cleave_AxisOp<"log_softmax"> {
  let summary = "log of softmax along `axis`";
}

// Softmax's adjoint, built by its gradient rule (no ONNX operator imports to
// it); no rule of its own: the step is differentiated once.
def Cleave_SoftmaxGradOp : Cleave_PureOp<"softmax_grad"> {
  let summary = "softmax's input gradient `y (grad - sum(grad y, axis))`";
  let description = [{
    From softmax's output `y` and that output's gradient `grad` (the same
    type), the gradient of softmax's input along `axis`: one pass over each
    row where the unfused rule takes a product, a sum, a difference and
    another product.
  }];
  let arguments = (ins Cleave_FloatTensor:$y, Cleave_FloatTensor:$grad, I64Attr:$axis);
  let results = (outs Cleave_FloatTensor:$output);
}

// The attention's scores chain fused by cleave-fuse-softmax (after the
// gradients are built: no rule of their own; no ONNX operator imports to
// them).
def Cleave_ScaledMaskedSoftmaxOp
    : Cleave_PureOp<"scaled_masked_softmax", [AttrSizedOperandSegments]> {
  let summary = "softmax(where(mask, fill, input scale + bias)) along the last dim";
  let description = [{
    What `softmax(where(mask, fill, add(mul(input, scale), bias)))` along
    the last dim computes, with the same roundings, in one pass over each
    row: the attention's scaled and masked scores (the unfused chain writes
    and reads the scores up to four times). With `divide`, the input is
    divided by `scale` (`div(input, scale)`, as `x / sqrt(d)` exports).
    `bias`, of the input's element type, broadcasts to its shape and is
    added to the scaled scores: an additive mask (BERT's, Llama's) or a
    position bias (T5's). `mask` broadcasts to the input's shape and marks
    the positions that take `fill`, or with `mask_keeps` those that keep
    their value (`where(mask, value, fill)`, as transformers' GPT-2 exports
    it); without a mask (and `fill` unused) and without a bias the op is a
    scaled softmax.
  }];
  let arguments = (ins Cleave_FloatTensor:$input, Optional<Cleave_BoolTensor>:$mask,
                   Optional<Cleave_FloatTensor>:$bias, F32Attr:$scale, UnitAttr:$divide,
                   F32Attr:$fill, UnitAttr:$mask_keeps);
  let results = (outs Cleave_FloatTensor:$output);
  let assemblyFormat = [{
    $input (`mask` `(` $mask^ `:` type($mask) `)`)? (`bias` `(` $bias^ `:` type($bias) `)`)?
    attr-dict `:` type($input) `->` type($output)
  }];
}

def Cleave_ScaledMaskedSoftmaxGradOp : Cleave_PureOp<"scaled_masked_softmax_grad"> {
  let summary = "where(mask, 0, softmax_grad(y, grad)) scale along the last dim";
  let description = [{
    scaled_masked_softmax's input gradient from its output `y` and that
    output's gradient `grad` (the same type): what
    `mul(where(mask, 0, softmax_grad(y, grad)), scale)` (`div` with
    `divide`; the mask read as scaled_masked_softmax reads it, or none)
    along the last dim computes, with the same roundings, in one pass over
    each row.
  }];
  let arguments = (ins Cleave_FloatTensor:$y, Cleave_FloatTensor:$grad,
                   Optional<Cleave_BoolTensor>:$mask, F32Attr:$scale, UnitAttr:$divide,
                   UnitAttr:$mask_keeps);
  let results = (outs Cleave_FloatTensor:$output);
}

def Cleave_LayerNormalizationOp : Cleave_PureOp<"layer_normalization", [Cleave_Vjp]> {
  let summary = "layer normalisation over the dims from `axis` on";
  let arguments = (ins Cleave_FloatTensor:$x, Cleave_FloatTensor:$scale,
                   Optional<Cleave_FloatTensor>:$bias, I64Attr:$axis, F32Attr:$epsilon);
  let results = (outs Cleave_FloatTensor:$y, Cleave_FloatTensor:$mean,
                  Cleave_FloatTensor:$inv_std_dev);
}

// LayerNormalization's input gradient, built by its gradient rule (no ONNX
// operator imports to it); no rule of its own.
def Cleave_LayerNormalizationGradOp : Cleave_PureOp<"layer_normalization_grad"> {
  let summary = "layer normalisation's input gradient over the dims from `axis` on";
  let description = [{
    From layer normalisation's input `x`, its `scale`, its statistics
    `mean` and `inv_std_dev` (shaped as the op's own, in x's type) and its
    output's gradient `grad` (x's type), the gradient of x:
    `inv_std_dev (g - mean(g) - xhat mean(g xhat))`, where `g = grad scale`,
    `xhat = (x - mean) inv_std_dev` and the means run over the dims from
    `axis` on. Two passes over each row, where the unfused rule takes
    three products, two means and two differences.
  }];
  let arguments = (ins Cleave_FloatTensor:$x, Cleave_FloatTensor:$scale,
                   Cleave_FloatTensor:$mean, Cleave_FloatTensor:$inv_std_dev,
                   Cleave_FloatTensor:$grad, I64Attr:$axis);
  let results = (outs Cleave_FloatTensor:$output);
}

def Cleave_BatchNormalizationOp : Cleave_PureOp<"batch_normalization", [Cleave_Vjp]> {
  let summary = "batch normalisation over dim 1 (channels)";
  let description = [{
    In training mode the batch statistics normalise and the running statistics
    are updated with `momentum`; otherwise `mean` and `var` normalise and the
    running statistics are returned unchanged.
  }];
  let arguments = (ins Cleave_FloatTensor:$x, Cleave_FloatTensor:$scale,
                   Cleave_FloatTensor:$bias, Cleave_FloatTensor:$mean,
                   Cleave_FloatTensor:$var, F32Attr:$epsilon, F32Attr:$momentum,
                   BoolAttr:$training_mode);
  let results = (outs Cleave_FloatTensor:$y, Cleave_FloatTensor:$running_mean,
                  Cleave_FloatTensor:$running_var);
}

def Cleave_DropoutOp : Cleave_Op<"dropout", [InferTypeOpAdaptor, Cleave_Vjp]> {
  let summary = "dropout with probability `ratio` in training mode, identity otherwise";
  let description = [{
    Each element's draw is keyed by its index in the whole tensor. On a
    rank's part of a tensor split over tensor-parallel ranks (after
    shard-partition), `split` = [dim, parts] says the whole tensor is split
    along dim over `parts` ranks, and `coordinate` (an i64 scalar) is this
    rank's place among them, so each element draws what it draws on one
    device.
  }];
  let arguments = (ins Cleave_FloatTensor:$data, Optional<I64Tensor>:$coordinate,
                   F32Attr:$ratio, BoolAttr:$training_mode, OptionalAttr<I64Attr>:$seed,
                   OptionalAttr<DenseI64ArrayAttr>:$split);
  let results = (outs Cleave_FloatTensor:$output, Cleave_BoolTensor:$mask);
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def Cleave_MatMulOp : Cleave_PureOp<"matmul", [Cleave_Vjp]> {
  let summary = "numpy-style matrix product with batch broadcasting";
  let description = [{
    The result has the operands' element type, but f32 for bf16 or f16
    operands, whose products are summed in f32. With `trans_a` (`trans_b`)
    the lhs (rhs), of rank 2 or more, is read with its last two dims
    swapped: a transpose that `cleave-fold-transposes` folded into the
    product.
  }];
  let arguments = (ins Cleave_MatrixTensor:$lhs, Cleave_MatrixTensor:$rhs,
                   DefaultValuedAttr<BoolAttr, "false">:$trans_a,
                   DefaultValuedAttr<BoolAttr, "false">:$trans_b);
  let results = (outs Cleave_MatrixTensor:$output);
  let hasFolder = 1;
}

def Cleave_GemmOp : Cleave_PureOp<"gemm", [Cleave_Vjp]> {
  let summary = "alpha * op(a) * op(b) + beta * c";
  let description = [{
    The result (and c) has a's and b's element type, but f32 for bf16 or
    f16 a and b, whose products are summed in f32; bf16 a and b with a bf16
    c write bf16: the f32 sum, plus c, rounded to nearest even as it is
    written (a gradient accumulator kept in bf16 that its product adds
    into: cleave-accumulate-into-products). With `activation`
    ("relu" or "gelu", GELU's erf form), that function of it: an
    activation that read the gemm alone, fused into it by
    `cleave-fuse-activations` (a oneDNN post-op on the CPU); such a gemm
    has no gradient rule.
  }];
  let arguments = (ins Cleave_MatrixTensor:$a, Cleave_MatrixTensor:$b,
                   Optional<Cleave_MatrixTensor>:$c,
                   DefaultValuedAttr<F32Attr, "1.0f">:$alpha,
                   DefaultValuedAttr<F32Attr, "1.0f">:$beta,
                   DefaultValuedAttr<BoolAttr, "false">:$trans_a,
                   DefaultValuedAttr<BoolAttr, "false">:$trans_b,
                   OptionalAttr<StrAttr>:$activation);
  let hasVerifier = 1;
  let results = (outs Cleave_MatrixTensor:$output);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Cleave_ReshapeOp : Cleave_PureOp<"reshape", [Cleave_Vjp]> {
  let summary = "reinterpret the elements in `shape` (fully resolved)";
  let arguments = (ins Cleave_Tensor:$input, DenseI64ArrayAttr:$shape);
  let results = (outs Cleave_Tensor:$output);
  let hasFolder = 1;
}

def Cleave_FlattenOp : Cleave_PureOp<"flatten", [Cleave_Vjp]> {
  let summary = "collapse to 2-D at `axis`";
  let arguments = (ins Cleave_Tensor:$input, I64Attr:$axis);
  let results = (outs Cleave_Tensor:$output);
  let hasFolder = 1;
}

def Cleave_TransposeOp : Cleave_PureOp<"transpose", [Cleave_Vjp]> {
  let summary = "permute dims: output dim i is input dim perm[i]";
  let arguments = (ins Cleave_Tensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Cleave_Tensor:$output);
  let hasFolder = 1;
}

def Cleave_SqueezeOp : Cleave_PureOp<"squeeze", [Cleave_Vjp]> {
  let summary = "remove the size-1 dims `axes`";
  let arguments = (ins Cleave_Tensor:$input, DenseI64ArrayAttr:$axes);
  let results = (outs Cleave_Tensor:$output);
  let hasFolder = 1;
}

def Cleave_UnsqueezeOp : Cleave_PureOp<"unsqueeze", [Cleave_Vjp]> {
  let summary = "insert size-1 dims at `axes` of the output";
  let arguments = (ins Cleave_Tensor:$input, DenseI64ArrayAttr:$axes);
  let results = (outs Cleave_Tensor:$output);
  let hasFolder = 1;
}

def Cleave_ConcatOp : Cleave_PureOp<"concat", [Cleave_Vjp]> {
  let summary = "join tensors along `axis`";
  let arguments = (ins Variadic<Cleave_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Cleave_Tensor:$output);
  let hasFolder = 1;
}

def Cleave_SplitOp : Cleave_PureOp<"split", [Cleave_Vjp]> {
  let summary = "cut along `axis` into pieces of the sizes in `split`";
  let arguments = (ins Cleave_Tensor:$input, I64Attr:$axis, DenseI64ArrayAttr:$split);
  let results = (outs Variadic<Cleave_Tensor>:$outputs);
  let hasFolder = 1;
}

def Cleave_SliceOp : Cleave_PureOp<"slice", [Cleave_Vjp]> {
  let summary = "strided slice with one clamped start, end and step per dim";
  let description = [{
    For each dim d the output takes input indices starts[d], starts[d] + steps[d],
    ... while short of ends[d] (for a negative step, while greater than ends[d];
    ends[d] may then be -1, meaning past index 0).
  }];
  let arguments = (ins Cleave_Tensor:$input, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$ends, DenseI64ArrayAttr:$steps);
  let results = (outs Cleave_Tensor:$output);
  let hasFolder = 1;
}

def Cleave_GatherOp : Cleave_PureOp<"gather", [Cleave_Vjp]> {
  let summary = "take entries of `data` along `axis` at `indices`";
  let arguments = (ins Cleave_Tensor:$data, Cleave_IndexTensor:$indices, I64Attr:$axis);
  let results = (outs Cleave_Tensor:$output);
  let hasFolder = 1;
}

def Cleave_ExpandOp : Cleave_PureOp<"expand", [Cleave_Vjp]> {
  let summary = "broadcast to `shape`, which the input broadcasts to unchanged";
  let arguments = (ins Cleave_Tensor:$input, DenseI64ArrayAttr:$shape);
  let results = (outs Cleave_Tensor:$output);
  let hasFolder = 1;
}

// The adjoints of gather and slice (built by their gradient rules; no ONNX
// operator imports to them). Both are linear, so they have rules too.

def Cleave_GatherGradOp : Cleave_PureOp<"gather_grad", [Cleave_Vjp]> {
  let summary = "scatter-add `grad` along `axis` at `indices` into zeros of `shape`";
  let description = [{
    The adjoint of `cleave.gather`: the result has the gathered data's `shape`
    and is zero except that each slice of `grad` is added at its index along
    `axis` (repeated indices accumulate; a negative index counts from the end).
    `grad` has the shape gather gives: shape[:axis] + indices + shape[axis+1:].
    Integers too: ScatterND and ScatterElements of integer data are made of it.
  }];
  let arguments = (ins Cleave_ScatterTensor:$grad, Cleave_IndexTensor:$indices, I64Attr:$axis,
                   DenseI64ArrayAttr:$shape);
  let results = (outs Cleave_ScatterTensor:$output);
}

def Cleave_SliceGradOp : Cleave_PureOp<"slice_grad", [Cleave_Vjp]> {
  let summary = "place `grad` at the positions a slice of `shape` read; zeros elsewhere";
  let description = [{
    The adjoint of `cleave.slice`: the result has the sliced input's `shape`
    and holds grad[i...] at starts + i * steps per dim (the attributes of
    cleave.slice; the ends are implied by grad's shape), zero elsewhere.
  }];
  let arguments = (ins Cleave_FloatTensor:$grad, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$steps, DenseI64ArrayAttr:$shape);
  let results = (outs Cleave_FloatTensor:$output);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class Cleave_ReduceOp<string mnemonic, Type type = Cleave_SummableTensor>
    : Cleave_PureOp<mnemonic, [Cleave_Vjp]> {
  let summary = mnemonic # " over `axes`";
  let arguments = (ins type:$input, DenseI64ArrayAttr:$axes, BoolAttr:$keepdims);
  let results = (outs type:$output);
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> location, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return inferReduceType(location, adaptor.getInput(), adaptor.getAxes(),
                             adaptor.getKeepdims(), types);
    }
  }];
}

def Cleave_ReduceSumOp : Cleave_ReduceOp<"reduce_sum">;
def Cleave_ReduceMeanOp : Cleave_ReduceOp<"reduce_mean">;
def Cleave_ReduceMaxOp : Cleave_ReduceOp<"reduce_max", Cleave_ComparableTensor>;
def Cleave_ReduceProdOp : Cleave_ReduceOp<"reduce_prod">;

def Cleave_TopKOp : Cleave_PureOp<"top_k"> {
  let summary = "the k largest (or smallest) entries along `axis`, sorted, and their indices";
  let description = [{
    ONNX TopK with the results sorted: along `axis`, the k largest entries in
    descending order (`largest`) or the k smallest in ascending order, equal
    values in the order of their indices; NaN counts as larger than any
    number. `indices` (i64) are their positions along `axis`. No gradient.
  }];
  let arguments = (ins Cleave_NumericTensor:$input, I64Attr:$k, I64Attr:$axis, BoolAttr:$largest);
  let results = (outs Cleave_NumericTensor:$values, StaticShapeTensorOf<[I64]>:$indices);
}

//===----------------------------------------------------------------------===//
// Convolution and pooling (N x C x spatial...)
//===----------------------------------------------------------------------===//

def Cleave_ConvOp : Cleave_PureOp<"conv", [Cleave_Vjp]> {
  let summary = "grouped N-d convolution";
  let description = [{
    With `activation` "relu", the result is max(0, the convolution): a ReLU
    that read the convolution alone, fused into it by
    `cleave-fuse-activations` (oneDNN applies it as the primitive writes).
    Such a conv has no gradient rule: the fusion runs after autodiff.
  }];
  let arguments = (ins Cleave_ConvFactorTensor:$x, Cleave_ConvFactorTensor:$w,
                   Optional<Cleave_FloatTensor>:$b, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations, I64Attr:$group,
                   OptionalAttr<StrAttr>:$activation);
  let hasVerifier = 1;
  let results = (outs Cleave_FloatTensor:$y);
}

def Cleave_MaxPoolOp : Cleave_PureOp<"max_pool", [Cleave_Vjp]> {
  let summary = "N-d max pooling";
  let arguments = (ins Cleave_NumericTensor:$x, DenseI64ArrayAttr:$kernel_shape,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations, BoolAttr:$ceil_mode);
  let results = (outs Cleave_NumericTensor:$y);
}

def Cleave_AveragePoolOp : Cleave_PureOp<"average_pool", [Cleave_Vjp]> {
  let summary = "N-d average pooling";
  let arguments = (ins Cleave_FloatTensor:$x, DenseI64ArrayAttr:$kernel_shape,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations, BoolAttr:$ceil_mode,
                   BoolAttr:$count_include_pad);
  let results = (outs Cleave_FloatTensor:$y);
}

// The adjoints of conv and the pools (built by their gradient rules).
// conv_grad_input is also ONNX's ConvTranspose, and has a rule (it is linear
// in grad and in w); the others have none.

def Cleave_ConvGradInputOp : Cleave_PureOp<"conv_grad_input", [Cleave_Vjp]> {
  let summary = "the gradient of a convolution's input: `grad` convolved back through `w`";
  let description = [{
    The adjoint of `cleave.conv` in x (a transposed convolution): for the conv
    of an input of `shape` (N x C x spatial...) with weights `w` (M x C/group x
    kernel...) and the same `strides`, `pads`, `dilations` and `group`, the
    result has `shape` and holds, at each input position, the sum of
    grad[n, m, o...] * w[m, c, k...] over every output position o and kernel
    offset k that read it. `grad` has the conv's output shape.
  }];
  let arguments = (ins Cleave_ConvFactorTensor:$grad, Cleave_ConvFactorTensor:$w,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations, I64Attr:$group, DenseI64ArrayAttr:$shape);
  let results = (outs Cleave_FloatTensor:$output);
}

def Cleave_ConvGradWeightOp : Cleave_PureOp<"conv_grad_weight"> {
  let summary = "the gradient of a convolution's weights: `grad` correlated with `x`";
  let description = [{
    The adjoint of `cleave.conv` in w: for the conv of `x` with weights of
    `shape` (M x C/group x kernel...) and the same `strides`, `pads`,
    `dilations` and `group`, the result has `shape` and holds, per weight, the
    sum of grad[n, m, o...] * x[n, c, i...] over the images and the output
    positions o whose window read input position i through that weight.
  }];
  let arguments = (ins Cleave_ConvFactorTensor:$grad, Cleave_ConvFactorTensor:$x,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations, I64Attr:$group, DenseI64ArrayAttr:$shape);
  let results = (outs Cleave_FloatTensor:$output);
}

def Cleave_MaxPoolGradOp : Cleave_PureOp<"max_pool_grad"> {
  let summary = "route each window's gradient to the window's maximum in `x`";
  let description = [{
    The adjoint of `cleave.max_pool`: the result has x's type and is zero
    except that grad[n, c, o...] is added at the arg-max of window o of `x`
    (the first maximum in window order on ties, padding never, as PyTorch).
    The windows are those of max_pool with the same `kernel_shape`, `strides`,
    `pads` and `dilations`; `grad` has max_pool's output shape, with or
    without ceil mode (its dims decide).
  }];
  let arguments = (ins Cleave_FloatTensor:$grad, Cleave_FloatTensor:$x,
                   DenseI64ArrayAttr:$kernel_shape, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations);
  let results = (outs Cleave_FloatTensor:$output);
}

def Cleave_AveragePoolGradOp : Cleave_PureOp<"average_pool_grad"> {
  let summary = "spread each window's gradient over the window, divided as the average";
  let description = [{
    The adjoint of `cleave.average_pool` on an input of `shape`: the result
    has `shape` and each input element inside window o (clipped to the input)
    gets grad[n, c, o...] divided by that window's divisor in the forward op:
    the elements inside the input, or with `count_include_pad` those inside
    the padded input (a ceil-mode window running past the end pads counts
    only its part inside them). `grad` has average_pool's output shape, with
    or without ceil mode (its dims decide).
  }];
  let arguments = (ins Cleave_FloatTensor:$grad, DenseI64ArrayAttr:$kernel_shape,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations, BoolAttr:$count_include_pad,
                   DenseI64ArrayAttr:$shape);
  let results = (outs Cleave_FloatTensor:$output);
}

def Cleave_GlobalAveragePoolOp : Cleave_PureOp<"global_average_pool", [Cleave_Vjp]> {
  let summary = "mean over all spatial dims, kept as size 1";
  let arguments = (ins Cleave_FloatTensor:$x);
  let results = (outs Cleave_FloatTensor:$y);
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

def Cleave_SoftmaxCrossEntropyLossOp
    : Cleave_PureOp<"softmax_cross_entropy_loss", [Cleave_Vjp]> {
  let summary = "cross entropy of softmax(scores) over dim 1 against class labels";
  let arguments = (ins Cleave_FloatTensor:$scores, Cleave_IndexTensor:$labels,
                   Optional<Cleave_FloatTensor>:$weights, StrAttr:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Cleave_FloatTensor:$loss, Cleave_FloatTensor:$log_prob);
}

def Cleave_SoftmaxCrossEntropyGradOp : Cleave_PureOp<"softmax_cross_entropy_grad"> {
  let summary = "softmax cross entropy's scores gradient without class weights";
  let description = [{
    From `cleave.softmax_cross_entropy_loss`'s `log_prob` (N x C x d...),
    its `labels` (N x d...) and its loss's gradient `grad` (a scalar, or
    N x d... for reduction "none"), the scores' gradient in one pass over
    log_prob: `(exp(log_prob) - onehot(labels)) k`, where row i's k is
    `w_i grad` (`grad_i` for "none"), w_i 1 for a counted label and 0 for one
    equal to `ignore_index`, and "mean" divides grad by the sum of the w_i.
    The unfused rule materializes the one-hot labels and takes a dozen ops.
  }];
  let arguments = (ins Cleave_FloatTensor:$log_prob, Cleave_IndexTensor:$labels,
                   Cleave_FloatTensor:$grad, StrAttr:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Cleave_FloatTensor:$output);
}

def Cleave_NegativeLogLikelihoodLossOp
    : Cleave_PureOp<"negative_log_likelihood_loss", [Cleave_Vjp]> {
  let summary = "negative log likelihood over dim 1 against class targets";
  let arguments = (ins Cleave_FloatTensor:$input, Cleave_IndexTensor:$target,
                   Optional<Cleave_FloatTensor>:$weight, StrAttr:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Cleave_FloatTensor:$loss);
}

//===----------------------------------------------------------------------===//
// State updates
//===----------------------------------------------------------------------===//

def Cleave_AssignOp : Cleave_Op<"assign", [MemoryEffects<[MemWrite]>,
                                           AllTypesMatch<["target", "value"]>]> {
  let summary = "overwrite a parameter or optimizer state argument with a new value";
  let description = [{
    The training step's only side effect: `target`, an argument of the function
    (`cleave.kind` "param" or "state"), or a `cleave.elements` view of one
    (those elements alone), holds `value` from the next step on.
    Assignments come after every read of their target: at the end of the
    step, or, for a gradient accumulator, right after its add.
  }];
  let arguments = (ins Cleave_Tensor:$target, Cleave_Tensor:$value);
  let assemblyFormat = "$value `to` $target attr-dict `:` type($target)";
  let hasVerifier = 1;
}

def Cleave_ElementsOp : Cleave_Op<"elements", [Pure]> {
  let summary = "`count` consecutive elements of a tensor from `offset`, in row-major order";
  let description = [{
    A view, not a copy (cleave-memory-plan): reading it reads those elements
    of `input`'s buffer, and assigning to it (`cleave.assign`) writes them
    alone. cleave-sink-widened-sums makes it after the training step is
    built, to sum and update a large parameter's widened gradient a chunk at
    a time; it has no gradient and no sharding rule. The result is 1-D, of
    `input`'s element type.
  }];
  let arguments = (ins Cleave_Tensor:$input, I64Attr:$offset);
  let results = (outs Cleave_Tensor:$output);
  let assemblyFormat = "$input `[` $offset `]` attr-dict `:` type($input) `->` type($output)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Distribution
//===----------------------------------------------------------------------===//

def Cleave_AllReduceGradOp : Cleave_Op<"all_reduce_grad", [Pure, Cleave_Vjp,
                                                           AllTypesMatch<["input", "output"]>]> {
  let summary = "identity whose gradient is summed over mesh axes";
  let description = [{
    Marks where a value replicated over the `grid_axes` of `grid` enters
    computation split over them (Megatron's f): each rank's gradient of it is
    a partial sum, so the reverse rule all-reduces it (`shard.all_reduce`).
    Its counterpart, the forward `shard.all_reduce` of a partial sum
    (Megatron's g), differentiates to the identity: the loss after it is
    replicated, computed alike on every rank. The forward is a view.
  }];
  let arguments = (ins Cleave_FloatTensor:$input, FlatSymbolRefAttr:$grid,
                   DenseI16ArrayAttr:$grid_axes);
  let results = (outs Cleave_FloatTensor:$output);
  let assemblyFormat = "$input `on` $grid `grid_axes` `=` $grid_axes attr-dict `:` type($input)";
}

def Cleave_DetachOp : Cleave_Op<"detach", [Pure, Cleave_Vjp,
                                           AllTypesMatch<["input", "output"]>]> {
  let summary = "identity through which no gradient flows";
  let description = [{
    For values that only shift a computation whose result does not depend on
    them, such as the maximum a softmax subtracts for stability: the exact
    gradient through them is zero in sum, so none is propagated. The forward
    is a view.
  }];
  let arguments = (ins Cleave_Tensor:$input);
  let results = (outs Cleave_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

// The ends of a value that crosses a pipeline stage boundary. Not Pure: a
// receive nobody reads still takes its message, and neither may move past
// the other communication of its function.
class Cleave_PipelineOp<string mnemonic> : Cleave_Op<mnemonic, [MemoryEffects<[MemRead, MemWrite]>]> {
  let hasVerifier = 1;
}

def Cleave_AllReduceStartOp : Cleave_Op<"all_reduce_start", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "start summing gradient accumulators over a mesh axis in the background";
  let description = [{
    Placed by `cleave-overlap-gradients` in a microbatch's step right after
    the last of its `accumulators` (stored arguments, one span of the
    weights blob) is written: on a step's last microbatch the runtime queues
    their sum over mesh axis `axis` on the background collectives' thread
    (runtime/comm/BackgroundCollectives.h), and does nothing on the others.
    `@apply`'s `shard.all_reduce` of each of them, marked `cleave.started`,
    then only waits for the sums. Nothing else may touch the accumulators in
    between.
  }];
  let arguments = (ins Variadic<Cleave_Tensor>:$accumulators, I64Attr:$axis);
  let assemblyFormat = "$accumulators `on` `axis` $axis attr-dict `:` type($accumulators)";
  let hasVerifier = 1;
}

def Cleave_ReduceScatterOwnedStartOp : Cleave_Op<"reduce_scatter_owned_start",
                                                [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "start summing a bucket of ZeRO's flat gradients into its owners";
  let description = [{
    The owned counterpart of `cleave.all_reduce_start`, placed by
    `cleave-overlap-gradients` right after the last of its `gradients` is
    made, which lie in one span of a flat buffer whose slices the ranks
    own over mesh axis `axis` (rank r owns elements [r * slice_elements,
    (r + 1) * slice_elements)). Either ZeRO 1's: members of its flat
    gradient accumulator buffer (function arguments in the weights blob),
    summed on a step's last microbatch; `@apply`'s `shard.reduce_scatter`
    of the buffer, marked `cleave.summed_in_buckets`, then waits for the
    buckets and copies this rank's slice. Or ZeRO 2's: consecutive parts of
    the `cleave.concat` along dim 0 that packs a microbatch's gradients,
    made in place in its buffer (`cleave.parts_in_place`), summed on every
    call; the concat's `shard.reduce_scatter`, marked the same way, waits
    for them. The runtime queues, on the background collectives' thread,
    the reduce-scatter of the span into the slices that own it: the part
    of the span in each rank's slice becomes its sum over the ranks, an
    uneven reduce-scatter in place. Nothing else may touch the span in
    between.
  }];
  let arguments = (ins Variadic<Cleave_Tensor>:$gradients, I64Attr:$axis,
                       I64Attr:$slice_elements);
  let assemblyFormat = [{
    $gradients `on` `axis` $axis `slices` $slice_elements attr-dict `:` type($gradients)
  }];
  let hasVerifier = 1;
}

def Cleave_CollectiveWaitOp : Cleave_Op<"collective_wait", [MemoryEffects<[MemRead, MemWrite]>,
                                                          AllTypesMatch<["started", "output"]>]> {
  let summary = "wait for a collective started earlier on the background thread";
  let description = [{
    `started` is made by a `shard.all_gather`, `shard.reduce_scatter` or
    `shard.all_reduce` marked `cleave.started`, which the runtime runs on the
    background collectives' thread (runtime/comm/BackgroundCollectives.h)
    while the ops between it and this wait compute: `cleave-prefetch-gathers`
    moves a parameter's gather up a compute segment and leaves this wait
    where the gather was; `cleave-overlap-reduce-scatters` leaves a
    gradient's reduce-scatter where it was and moves this wait, with what
    reads it, down to the next gradient's; `cleave-overlap-tp-sums` leaves a
    sum over tp where it is and puts this wait before its first reader.
    `output` is `started`'s buffer once the
    collective is done: every op that read the collective reads it. `source`
    is the collective's own operand, read here so that the memory plan keeps
    it until the collective is done.
  }];
  let arguments = (ins Cleave_Tensor:$started, Cleave_Tensor:$source);
  let results = (outs Cleave_Tensor:$output);
  let assemblyFormat = "$started `from` $source attr-dict `:` type($source) `->` type($started)";
  let hasVerifier = 1;
}

def Cleave_PipelineSendOp : Cleave_PipelineOp<"pipeline_send"> {
  let summary = "send one microbatch's value to another pipeline stage";
  let description = [{
    The value goes to the function of stage `peer` (`cleave.stage`), where
    the `cleave.pipeline_recv` of the same `tag` takes it. A tag names one
    value and one destination across the module; with `gradient`, it names
    the gradient of that value going back (from the stage that received
    the value to the one that sent it).
  }];
  let arguments = (ins Cleave_Tensor:$value, I64Attr:$peer, I64Attr:$tag, UnitAttr:$gradient);
  let assemblyFormat =
      "(`gradient` $gradient^)? $value `to` `stage` $peer `tag` $tag attr-dict `:` type($value)";
}

def Cleave_PipelineRecvOp : Cleave_PipelineOp<"pipeline_recv"> {
  let summary = "receive one microbatch's value from another pipeline stage";
  let description = [{
    The value that the `cleave.pipeline_send` of the same `tag` (and
    `gradient`) in the function of stage `peer` sends, of the same type.
  }];
  let arguments = (ins I64Attr:$peer, I64Attr:$tag, UnitAttr:$gradient);
  let results = (outs Cleave_Tensor:$output);
  let assemblyFormat =
      "(`gradient` $gradient^)? `from` `stage` $peer `tag` $tag attr-dict `:` type($output)";
}

//===----------------------------------------------------------------------===//
// Constants and generators
//===----------------------------------------------------------------------===//

def Cleave_TriluOp : Cleave_PureOp<"trilu", [Cleave_Vjp]> {
  let summary = "keep the upper or lower triangle of the last two dims, offset by k";
  let arguments = (ins Cleave_Tensor:$input, BoolAttr:$upper, I64Attr:$k);
  let results = (outs Cleave_Tensor:$output);
}

def Cleave_FusedElementwiseOp : Cleave_Op<"fused_elementwise", [Pure]> {
  let summary = "a chain of f32 elementwise ops in one pass over memory";
  let description = [{
    What `cleave-fuse-elementwise` makes of a chain of elementwise ops:
    `program` (runtime/ElementwiseProgram.h) computes each output from the
    inputs element by element, as the chain's ops did, bit for bit. Every
    input has the outputs' shape or one element. The program computes in
    f32; a bf16 input is widened as it is read and a bf16 output rounded
    (to nearest even) as it is written, as the casts the chain held did; an
    i1 input (a `where`'s condition, which only `select` reads) is read as
    1 or 0.
  }];
  let arguments = (ins Variadic<StaticShapeTensorOf<[F32, BF16, I1]>>:$inputs, StrAttr:$program);
  let results = (outs Variadic<StaticShapeTensorOf<[F32, BF16]>>:$outputs);
  let hasVerifier = 1;
}

def Cleave_ConstantOp : Cleave_GeneratorOp<"constant", [ConstantLike]> {
  let summary = "a literal tensor";
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Cleave_Tensor:$output);
  let hasFolder = 1;
}

def Cleave_ConstantOfShapeOp : Cleave_GeneratorOp<"constant_of_shape"> {
  let summary = "a tensor of `shape` filled with the scalar `value`";
  let arguments = (ins DenseI64ArrayAttr:$shape, TypedAttrInterface:$value);
  let results = (outs Cleave_Tensor:$output);
  let hasFolder = 1;
}

def Cleave_ShapeOp : Cleave_PureOp<"shape"> {
  let summary = "dims [start, end) of the input's shape, as i64";
  let arguments = (ins Cleave_Tensor:$input, I64Attr:$start, I64Attr:$end);
  let results = (outs StaticShapeTensorOf<[I64]>:$output);
  let hasFolder = 1;
}

def Cleave_RangeOp : Cleave_GeneratorOp<"range"> {
  let summary = "start, start + delta, ... short of limit";
  let arguments = (ins TypedAttrInterface:$start, TypedAttrInterface:$limit, TypedAttrInterface:$delta);
  let results = (outs Cleave_NumericTensor:$output);
  let hasFolder = 1;
}

#endif // CLEAVE_OPS_TD
