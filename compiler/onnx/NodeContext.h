//===- NodeContext.h - what an ONNX op handler sees of its node -*- C++ -*-===//
//
// Shared by the op handlers of every family (MathOps.cpp, ShapeOps.cpp...):
// the node, its inputs and attributes at its opset, a builder that creates
// cleave ops through their type inference, and the table each family adds
// its handlers to.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COMPILER_ONNX_NODECONTEXT_H
#define CLEAVE_COMPILER_ONNX_NODECONTEXT_H

#include "dialects/Cleave/CleaveBuilder.h"
#include "dialects/Cleave/CleaveOps.h"
#include "onnx/onnx.pb.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <functional>
#include <optional>
#include <string>

namespace cleave {

/// The element types ONNX's numeric inputs take here: f32 and f64, and
/// integers but for bool.
inline bool isFloat(mlir::Type t) { return t.isF32() || t.isF64(); }
inline bool isNumeric(mlir::Type t) { return isFloat(t) || (t.isInteger() && !t.isInteger(1)); }

/// What an op handler sees of one ONNX node: its inputs, attributes, opset,
/// and a builder that creates cleave ops through their type inference.
class NodeContext {
public:
  NodeContext(const onnx::NodeProto &node, int64_t opset, mlir::OpBuilder &builder,
              mlir::Location loc, llvm::SmallVector<mlir::Value> inputs)
      : node(node), opset(opset), builder(builder), loc(loc), inputs(std::move(inputs)) {}

  const onnx::NodeProto &node;
  const int64_t opset;
  mlir::OpBuilder &builder;
  const mlir::Location loc;

  /// Input `i`, or null when absent (an empty name or past the end).
  mlir::Value input(unsigned i) const { return i < inputs.size() ? inputs[i] : mlir::Value(); }
  llvm::SmallVector<mlir::Value> presentInputs() const {
    llvm::SmallVector<mlir::Value> present;
    for (mlir::Value v : inputs)
      if (v)
        present.push_back(v);
    return present;
  }
  int64_t rank(mlir::Value v) const {
    return mlir::cast<mlir::RankedTensorType>(v.getType()).getRank();
  }
  llvm::ArrayRef<int64_t> shape(mlir::Value v) const {
    return mlir::cast<mlir::RankedTensorType>(v.getType()).getShape();
  }
  mlir::Type elementType(mlir::Value v) const {
    return mlir::cast<mlir::RankedTensorType>(v.getType()).getElementType();
  }
  unsigned numOutputs() const { return node.output_size(); }
  bool wantsOutput(unsigned i) const {
    return static_cast<int>(i) < node.output_size() && !node.output(i).empty();
  }

  mlir::InFlightDiagnostic error() const { return mlir::emitError(loc); }
  /// The error of constant input `i` holding more or fewer than one value.
  mlir::LogicalResult notOneValue(unsigned i, llvm::StringRef role) const {
    error() << "input '" << node.input(i) << "' (" << role << ") must hold one value";
    return mlir::failure();
  }

  const onnx::AttributeProto *attr(llvm::StringRef name) const {
    for (const auto &a : node.attribute())
      if (a.name() == name)
        return &a;
    return nullptr;
  }
  int64_t getInt(llvm::StringRef name, int64_t fallback) const {
    const auto *a = attr(name);
    return a ? a->i() : fallback;
  }
  float getFloat(llvm::StringRef name, float fallback) const {
    const auto *a = attr(name);
    return a ? a->f() : fallback;
  }
  std::string getString(llvm::StringRef name, llvm::StringRef fallback) const {
    const auto *a = attr(name);
    return a ? a->s() : fallback.str();
  }
  std::optional<llvm::SmallVector<int64_t>> getInts(llvm::StringRef name) const {
    const auto *a = attr(name);
    if (!a)
      return std::nullopt;
    return llvm::SmallVector<int64_t>(a->ints().begin(), a->ints().end());
  }

  /// The literal value of input `i`, which must be a constant (after folding).
  mlir::FailureOr<mlir::DenseElementsAttr> constant(unsigned i, llvm::StringRef role) const {
    mlir::DenseElementsAttr value;
    if (!input(i)) {
      error() << "has no input " << i << " (" << role << ")";
      return mlir::failure();
    }
    if (!mlir::matchPattern(input(i), mlir::m_Constant(&value))) {
      error() << "input '" << node.input(i) << "' (" << role
              << ") must be a constant: cleave resolves it at import";
      return mlir::failure();
    }
    return value;
  }
  mlir::FailureOr<llvm::SmallVector<int64_t>> constantInts(unsigned i,
                                                           llvm::StringRef role) const {
    auto value = constant(i, role);
    if (mlir::failed(value))
      return mlir::failure();
    if (!mlir::isa<mlir::IntegerType>(value->getElementType())) {
      error() << "input '" << node.input(i) << "' (" << role << ") must be integer";
      return mlir::failure();
    }
    llvm::SmallVector<int64_t> ints;
    for (const llvm::APInt &v : value->getValues<llvm::APInt>())
      ints.push_back(v.getSExtValue());
    return ints;
  }
  /// Input `i` as a constant of exactly one value (a scalar, K, an axis).
  mlir::FailureOr<mlir::DenseElementsAttr> constantOneValue(unsigned i,
                                                            llvm::StringRef role) const {
    auto value = constant(i, role);
    if (mlir::failed(value))
      return mlir::failure();
    if (value->getNumElements() != 1)
      return notOneValue(i, role);
    return value;
  }
  /// Input `i` as a constant integer of exactly one value.
  mlir::FailureOr<int64_t> constantInt(unsigned i, llvm::StringRef role) const {
    auto ints = constantInts(i, role);
    if (mlir::failed(ints))
      return mlir::failure();
    if (ints->size() != 1)
      return notOneValue(i, role);
    return ints->front();
  }
  /// Axes from input `index` at opsets from `inputSince` (which take them as
  /// an input), from the `axes` attribute before; nullopt when absent.
  mlir::FailureOr<std::optional<llvm::SmallVector<int64_t>>> axesOperand(int64_t inputSince,
                                                                         unsigned index) const {
    if (opset >= inputSince) {
      if (!input(index))
        return std::optional<llvm::SmallVector<int64_t>>();
      auto axes = constantInts(index, "axes");
      if (mlir::failed(axes))
        return mlir::failure();
      return std::optional<llvm::SmallVector<int64_t>>(*axes);
    }
    return getInts("axes");
  }

  /// `axis` made non-negative for a tensor of `rank` dims; an error if out of range.
  mlir::FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank) const {
    if (axis < -rank || axis >= rank) {
      error() << "axis " << axis << " is out of range for rank " << rank;
      return mlir::failure();
    }
    return axis < 0 ? axis + rank : axis;
  }
  mlir::FailureOr<llvm::SmallVector<int64_t>> normalizeAxes(llvm::ArrayRef<int64_t> axes,
                                                            int64_t rank) const {
    llvm::SmallVector<int64_t> result;
    for (int64_t axis : axes) {
      auto normalized = normalizeAxis(axis, rank);
      if (mlir::failed(normalized))
        return mlir::failure();
      result.push_back(*normalized);
    }
    return result;
  }

  /// A cleave.constant of `values` (i64) in `shape`: the index arithmetic a
  /// decomposition works out at import.
  mlir::Value indexConstant(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> values) const {
    auto type = mlir::RankedTensorType::get(shape, builder.getI64Type());
    return ConstantOp::create(builder, loc, mlir::DenseElementsAttr::get(type, values));
  }

  mlir::NamedAttribute named(llvm::StringRef name, mlir::Attribute value) const {
    return builder.getNamedAttr(name, value);
  }
  mlir::NamedAttribute i64(llvm::StringRef name, int64_t value) const {
    return named(name, builder.getI64IntegerAttr(value));
  }
  mlir::NamedAttribute f32(llvm::StringRef name, float value) const {
    return named(name, builder.getF32FloatAttr(value));
  }
  mlir::NamedAttribute boolean(llvm::StringRef name, bool value) const {
    return named(name, builder.getBoolAttr(value));
  }
  mlir::NamedAttribute ints(llvm::StringRef name, llvm::ArrayRef<int64_t> values) const {
    return named(name, builder.getDenseI64ArrayAttr(values));
  }
  mlir::NamedAttribute string(llvm::StringRef name, llvm::StringRef value) const {
    return named(name, builder.getStringAttr(value));
  }

  /// Creates an `OpTy` after inferring and checking its result types, then
  /// folds it if its operands are constant. Fails with a diagnostic at the
  /// node on bad shapes or attributes.
  template <typename OpTy>
  mlir::FailureOr<llvm::SmallVector<mlir::Value>>
  build(mlir::ValueRange operands, llvm::ArrayRef<mlir::NamedAttribute> attributes = {}) const {
    mlir::MLIRContext *context = builder.getContext();
    mlir::DictionaryAttr dictionary = mlir::DictionaryAttr::get(context, attributes);
    llvm::SmallVector<mlir::Type> types;
    typename OpTy::Properties properties;
    if constexpr (!std::is_same_v<typename OpTy::Properties, mlir::EmptyProperties>) {
      if (mlir::failed(OpTy::setPropertiesFromAttr(properties, dictionary,
                                                   [&] { return mlir::emitError(loc); })))
        return mlir::failure();
    }
    if (mlir::failed(OpTy::inferReturnTypes(context, loc, operands, dictionary,
                                            mlir::OpaqueProperties(&properties), {}, types)))
      return mlir::failure();
    for (auto [i, type] : llvm::enumerate(types)) {
      auto shaped = mlir::dyn_cast<mlir::RankedTensorType>(type);
      if (std::optional<std::string> why = shaped ? tensorShapeError(shaped.getShape())
                                                  : std::nullopt) {
        error() << "result " << i << ": " << *why;
        return mlir::failure();
      }
    }
    mlir::Operation *op = OpTy::create(builder, loc, types, operands, attributes).getOperation();
    if (mlir::failed(mlir::verify(op))) {
      op->erase();
      return mlir::failure();
    }
    llvm::SmallVector<mlir::Value> folded;
    if (mlir::succeeded(builder.tryFold(op, folded)) && !folded.empty()) {
      op->erase();
      return folded;
    }
    return llvm::SmallVector<mlir::Value>(op->getResults());
  }

  /// The one result of an `OpTy` built (and checked) as `build` does.
  template <typename OpTy>
  mlir::FailureOr<mlir::Value> buildOne(mlir::ValueRange operands,
                                        llvm::ArrayRef<mlir::NamedAttribute> attributes = {}) const {
    auto results = build<OpTy>(operands, attributes);
    if (mlir::failed(results))
      return mlir::failure();
    return results->front();
  }

  /// Elements [start, end) of x along `axis` with `step` (cleave.slice's
  /// form: for a negative step end may be -1, past index 0); all of x along
  /// the other dims.
  mlir::FailureOr<mlir::Value> sliceAxis(mlir::Value x, int64_t axis, int64_t start, int64_t end,
                                         int64_t step = 1) const {
    llvm::ArrayRef<int64_t> dims = shape(x);
    llvm::SmallVector<int64_t> starts(dims.size(), 0), ends(dims), steps(dims.size(), 1);
    starts[axis] = start;
    ends[axis] = end;
    steps[axis] = step;
    return buildOne<SliceOp>(x, {ints("starts", starts), ints("ends", ends), ints("steps", steps)});
  }

  /// A CleaveBuilder at the node that folds constant operands, as the
  /// importer folds every op: what decompositions build their formulas with.
  CleaveBuilder decomposer() const { return CleaveBuilder(builder, loc, /*foldConstants=*/true); }

  /// Decompositions build their ops unchecked (CleaveBuilder), so an op
  /// decomposed for some element types checks its input's first: an error
  /// naming input `i` and `admitted` unless `accepts` its element type.
  mlir::LogicalResult requireElementType(unsigned i, llvm::function_ref<bool(mlir::Type)> accepts,
                                         llvm::StringRef admitted) const {
    if (accepts(elementType(input(i))))
      return mlir::success();
    error() << "input '" << node.input(i) << "' is " << input(i).getType() << ": cleave computes "
            << node.op_type() << " on " << admitted << " only";
    return mlir::failure();
  }
  mlir::LogicalResult requireFloat(unsigned i) const {
    return requireElementType(i, [](mlir::Type t) { return t.isF32() || t.isF64(); }, "f32 and f64");
  }

private:
  llvm::SmallVector<mlir::Value> inputs;
};

using Results = mlir::FailureOr<llvm::SmallVector<mlir::Value>>;
using Handler = std::function<Results(NodeContext &)>;

/// An op whose ONNX form has no attributes: the cleave op of the node's
/// present inputs.
template <typename OpTy> Results importInputsOnly(NodeContext &n) {
  return n.build<OpTy>(n.presentInputs());
}

/// How to import one op type of a domain, how many inputs it takes (the
/// first `minInputs` must be present), and which inputs it reads as constants
/// at import (shape, axes, ratio...).
struct OpImporter {
  Handler handler;
  unsigned minInputs;
  unsigned maxInputs;
  llvm::SmallVector<unsigned, 4> constantInputs;
};

inline constexpr unsigned kVariadic = ~0u;

/// The handlers of one domain by op type; each family of ops adds its own.
class OpImporterTable {
public:
  void add(llvm::StringRef op, Handler handler, unsigned minInputs, unsigned maxInputs,
           llvm::SmallVector<unsigned, 4> constantInputs = {}) {
    table[op] = OpImporter{std::move(handler), minInputs, maxInputs, std::move(constantInputs)};
  }
  /// The importer of `op`, or null when the domain has none.
  const OpImporter *lookup(llvm::StringRef op) const {
    auto found = table.find(op);
    return found == table.end() ? nullptr : &found->second;
  }

private:
  llvm::StringMap<OpImporter> table;
};

// The default domain (ai.onnx), by family. A new op goes into its family's
// file and populate function.

/// False, with the node's error, where the node multiplies bf16 or f16
/// operands, which ONNX rounds to their type and cleave's products
/// (matmul, gemm, conv) sum into f32: the form --precision makes of an f32
/// model (MathOps.cpp).
bool lowPrecisionProductRefused(NodeContext &n);

/// Elementwise math, comparisons, logic, casts, activations, matrix products
/// (Einsum), Trilu (MathOps.cpp).
void populateMathImporters(OpImporterTable &table);
/// Reshapes, transposes, squeezes, concat, split, slice, gather, expand,
/// tile, pad, depth/space rearrangements, the element and ND gathers and
/// scatters (ShapeOps.cpp).
void populateShapeImporters(OpImporterTable &table);
/// Softmax, normalizations, dropout, convolution (and transposed), pooling,
/// resize, rotary embeddings, attention, losses (NNOps.cpp).
void populateNNImporters(OpImporterTable &table);
/// The Reduce* operators, ArgMax, ArgMin, CumSum, TopK (ReductionOps.cpp).
void populateReductionImporters(OpImporterTable &table);
/// Constant, ConstantOfShape, Shape, Range: the shape arithmetic that folds
/// at import (ConstantOps.cpp). `modelDir` is where external data lives.
void populateConstantImporters(OpImporterTable &table, llvm::StringRef modelDir);

/// The domain ai.onnx.preview.training, version 1 (TrainingOps.cpp): Adam,
/// Momentum, Adagrad decomposed, and Gradient, which looks tensors up by name
/// in `values` and takes those in `constants` as constants.
void populateTrainingImporters(OpImporterTable &table, const llvm::StringMap<mlir::Value> &values,
                               const llvm::DenseSet<mlir::Value> &constants);

} // namespace cleave

#endif
