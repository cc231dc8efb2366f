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

Results importCastLike(NodeContext &n) {
  return n.build<CastOp>(n.input(0), {n.named("to", TypeAttr::get(n.elementType(n.input(1))))});
}

/// Size: the input's element count, a constant (shapes are static).
Results importSize(NodeContext &n) {
  int64_t count = cast<RankedTensorType>(n.input(0).getType()).getNumElements();
  auto type = RankedTensorType::get({}, n.builder.getI64Type());
  auto value = DenseElementsAttr::get(type, n.builder.getI64IntegerAttr(count));
  return n.build<ConstantOp>({}, {n.named("value", value)});
}

//===----------------------------------------------------------------------===//
// Decompositions: ONNX operators that the spec defines by a formula become the
// cleave ops of the formula, so they need no kernels, gradients or sharding
// rules of their own. The inputs are checked first (NodeContext::build, or
// requireElementType where the ops are built unchecked by CleaveBuilder).
//===----------------------------------------------------------------------===//

bool isBool(Type t) { return t.isInteger(1); }

Results single(FailureOr<Value> v) {
  if (failed(v))
    return failure();
  return SmallVector<Value>{*v};
}

/// log(1 + exp(x)) as the log-sum-exp of 0 and x shifted by m = max(x, 0):
/// m + log(exp(-m) + exp(x - m)), which never overflows, and whose gradient
/// (m detached) is sigmoid(x) everywhere, 1/2 at 0 included.
Value softplus(CleaveBuilder &b, Value x) {
  Value shift = b.logSumExpShift(b.relu(x));
  return b.add(shift, b.log(b.add(b.exp(b.neg(shift)), b.exp(b.sub(x, shift)))));
}

/// x for x > 0, alpha (exp(x) - 1) otherwise, with exp of x - relu(x)
/// (min(x, 0) whose derivative at 0 is 1): no overflow for large x, and the
/// gradient at 0 is alpha (PyTorch's), continuous when alpha is 1.
Value elu(CleaveBuilder &b, Value x, double alpha) {
  Value negativePart = b.sub(x, b.relu(x));
  Value negativeBranch = b.mul(b.add(b.exp(negativePart), -1.0), alpha);
  return b.where(b.greater(x, b.scalarLike(x, 0.0)), x, negativeBranch);
}

/// x limited to [low, high] (either may be null: no limit); where high < low
/// the result is high, as ONNX's Clip. NaN stays NaN.
Value clip(CleaveBuilder &b, Value x, Value low, Value high) {
  if (low)
    x = b.where(b.less(x, low), low, x);
  if (high)
    x = b.where(b.greater(x, high), high, x);
  return x;
}

/// max(0, min(1, alpha x + beta)).
Value hardSigmoid(CleaveBuilder &b, Value x, double alpha, double beta) {
  return clip(b, b.add(b.mul(x, alpha), beta), b.scalarLike(x, 0.0), b.scalarLike(x, 1.0));
}

// The float activations, each the formula of its input and attributes.

Value softplusNode(CleaveBuilder &b, const NodeContext &, Value x) { return softplus(b, x); }
Value softsignNode(CleaveBuilder &b, const NodeContext &, Value x) {
  return b.div(x, b.add(b.abs(x), 1.0));
}
Value mishNode(CleaveBuilder &b, const NodeContext &, Value x) {
  return b.mul(x, b.tanh(softplus(b, x)));
}
Value eluNode(CleaveBuilder &b, const NodeContext &n, Value x) {
  return elu(b, x, n.getFloat("alpha", 1.0f));
}
Value seluNode(CleaveBuilder &b, const NodeContext &n, Value x) {
  Value y = elu(b, x, n.getFloat("alpha", 1.67326319217681884765625f));
  return b.mul(y, n.getFloat("gamma", 1.05070102214813232421875f));
}
Value hardSigmoidNode(CleaveBuilder &b, const NodeContext &n, Value x) {
  return hardSigmoid(b, x, n.getFloat("alpha", 0.2f), n.getFloat("beta", 0.5f));
}
Value hardSwishNode(CleaveBuilder &b, const NodeContext &, Value x) {
  return b.mul(x, hardSigmoid(b, x, 1.0 / 6.0, 0.5));
}
Value thresholdedReluNode(CleaveBuilder &b, const NodeContext &n, Value x) {
  Value above = b.greater(x, b.scalarLike(x, n.getFloat("alpha", 1.0f)));
  return b.where(above, x, b.scalarLike(x, 0.0));
}

using Activation = Value (*)(CleaveBuilder &, const NodeContext &, Value);

template <Activation formula> Results importActivation(NodeContext &n) {
  if (failed(n.requireFloat(0)))
    return failure();
  CleaveBuilder b = n.decomposer();
  return SmallVector<Value>{formula(b, n, n.input(0))};
}

/// Clip (11+; 13+ here): min and max are optional scalar inputs of the input's type.
Results importClip(NodeContext &n) {
  if (failed(n.requireElementType(0, isNumeric, "numbers")))
    return failure();
  CleaveBuilder b = n.decomposer();
  Value bounds[2];
  for (unsigned i : {1u, 2u}) {
    Value bound = n.input(i);
    if (!bound)
      continue;
    if (bound.getType() != RankedTensorType::get({}, n.elementType(n.input(0))) &&
        bound.getType() != RankedTensorType::get({1}, n.elementType(n.input(0)))) {
      n.error() << "input '" << n.node.input(i) << "' (" << (i == 1 ? "min" : "max") << ") is "
                << bound.getType() << ", not a scalar of the input's element type";
      return failure();
    }
    bounds[i - 1] = b.reshape(bound, {});
  }
  // An absent bound is the type's lowest or largest value (ONNX's spec, as
  // onnxruntime): it limits only infinities, so integers need none.
  if (auto floatType = dyn_cast<FloatType>(n.elementType(n.input(0)))) {
    double largest = APFloat::getLargest(floatType.getFloatSemantics()).convertToDouble();
    if (!bounds[0])
      bounds[0] = b.scalar(floatType, -largest);
    if (!bounds[1])
      bounds[1] = b.scalar(floatType, largest);
  }
  return SmallVector<Value>{clip(b, n.input(0), bounds[0], bounds[1])};
}

/// LessOrEqual, GreaterOrEqual: the strict comparison, or else equality (not
/// the negated opposite comparison, which NaN would make true).
template <typename StrictOp> Results importOrEqual(NodeContext &n) {
  auto strict = n.buildOne<StrictOp>({n.input(0), n.input(1)});
  if (failed(strict))
    return failure();
  CleaveBuilder b = n.decomposer();
  Value yes = b.scalar(n.builder.getI1Type(), 1.0);
  return SmallVector<Value>{b.where(*strict, yes, b.equal(n.input(0), n.input(1)))};
}

/// And, Or, Xor of bools: where(a, b, false), where(a, true, b), a != b.
Results importLogical(NodeContext &n, StringRef op) {
  for (unsigned i : {0u, 1u})
    if (failed(n.requireElementType(i, isBool, "bools")))
      return failure();
  Value a = n.input(0), c = n.input(1);
  Type i1 = n.builder.getI1Type();
  CleaveBuilder b = n.decomposer();
  if (op == "And")
    return single(n.buildOne<WhereOp>({a, c, b.scalar(i1, 0.0)}));
  if (op == "Or")
    return single(n.buildOne<WhereOp>({a, b.scalar(i1, 1.0), c}));
  auto same = n.buildOne<EqualOp>({a, c});
  if (failed(same))
    return failure();
  return SmallVector<Value>{b.logicalNot(*same)};
}

/// A variadic ONNX op (Sum, Max, Min) as a chain of the broadcasting binary
/// `OpTy` over its inputs; one input is its own result, as an identity op.
template <typename OpTy> Results importVariadic(NodeContext &n) {
  SmallVector<Value> inputs = n.presentInputs();
  if (inputs.size() == 1)
    return n.build<IdentityOp>(inputs.front());
  Value result = inputs.front();
  for (Value next : ArrayRef(inputs).drop_front()) {
    auto combined = n.buildOne<OpTy>({result, next});
    if (failed(combined))
      return failure();
    result = *combined;
  }
  return SmallVector<Value>{result};
}

/// Mean: the sum divided by the count.
Results importMean(NodeContext &n) {
  if (failed(n.requireFloat(0)))
    return failure();
  auto sum = importVariadic<AddOp>(n);
  size_t count = n.presentInputs().size();
  if (failed(sum) || count == 1)
    return sum;
  CleaveBuilder b = n.decomposer();
  Value total = sum->front();
  return SmallVector<Value>{b.div(total, b.scalarLike(total, static_cast<double>(count)))};
}

/// PRelu: x where x > 0, slope x elsewhere (so at 0, where both are 0, the
/// gradient is the slope's branch, as PyTorch's), the slope broadcast to x
/// (unidirectionally).
Results importPRelu(NodeContext &n) {
  Value x = n.input(0), slope = n.input(1);
  if (failed(n.requireElementType(0, isNumeric, "numbers")))
    return failure();
  auto sloped = n.buildOne<MulOp>({x, slope});
  if (failed(sloped))
    return failure();
  if (n.shape(*sloped) != n.shape(x)) {
    n.error() << "slope " << shapeString(n.shape(slope)) << " does not broadcast to the input "
              << shapeString(n.shape(x));
    return failure();
  }
  CleaveBuilder b = n.decomposer();
  return SmallVector<Value>{b.where(b.greater(x, b.scalarLike(x, 0.0)), x, *sloped)};
}

/// Swish (24+): x sigmoid(alpha x).
Value swishNode(CleaveBuilder &b, const NodeContext &n, Value x) {
  return b.mul(x, b.sigmoid(b.mul(x, n.getFloat("alpha", 1.0f))));
}

/// IsNaN: x != x.
Results importIsNaN(NodeContext &n) {
  if (failed(n.requireFloat(0)))
    return failure();
  CleaveBuilder b = n.decomposer();
  return SmallVector<Value>{b.logicalNot(b.equal(n.input(0), n.input(0)))};
}

/// IsInf: x is +inf (detect_positive), -inf (detect_negative) or either.
Results importIsInf(NodeContext &n) {
  if (failed(n.requireFloat(0)))
    return failure();
  Value x = n.input(0);
  bool positive = n.getInt("detect_positive", 1) != 0;
  bool negative = n.getInt("detect_negative", 1) != 0;
  CleaveBuilder b = n.decomposer();
  if (positive && negative)
    return SmallVector<Value>{b.equal(b.abs(x), b.scalarLike(x, INFINITY))};
  if (positive || negative)
    return SmallVector<Value>{b.equal(x, b.scalarLike(x, positive ? INFINITY : -INFINITY))};
  auto shape = cast<RankedTensorType>(x.getType()).getShape();
  return SmallVector<Value>{b.splat(RankedTensorType::get(shape, n.builder.getI1Type()), 0.0)};
}

/// Mod: cleave.fmod (the remainder with the dividend's sign, C's fmod),
/// with fmod = 0 moved into the divisor's sign (Python's %, numpy's mod) by
/// adding y where the remainder is non-zero and its sign differs from y's.
Results importMod(NodeContext &n) {
  Value x = n.input(0), y = n.input(1);
  auto remainder = n.buildOne<FmodOp>({x, y});
  if (failed(remainder))
    return failure();
  if (n.getInt("fmod", 0) != 0 || n.elementType(x).isUnsignedInteger())
    return SmallVector<Value>{*remainder};
  CleaveBuilder b = n.decomposer();
  Value zero = b.scalarLike(x, 0.0);
  Value signsDiffer = b.logicalNot(b.equal(b.less(*remainder, zero), b.less(y, zero)));
  Value nonZero = b.logicalNot(b.equal(*remainder, zero));
  Value adjust = b.where(nonZero, signsDiffer, b.scalar(n.builder.getI1Type(), 0.0));
  return SmallVector<Value>{b.where(adjust, b.add(*remainder, y), *remainder)};
}

/// An einsum operand (or the result): its value and one label per dim.
struct Labeled {
  Value value;
  SmallVector<int> labels;
};

/// The einsum operands' and the result's labels: a letter is its character;
/// the dims an ellipsis stands for are labels from 256 on, aligned from the
/// right as numpy aligns them. Fails (with the reason in `why`) on a form
/// this decomposition does not take.
FailureOr<std::pair<SmallVector<SmallVector<int>>, SmallVector<int>>>
parseEinsum(NodeContext &n, StringRef equation, std::string &why) {
  std::string text;
  for (char c : equation)
    if (c != ' ')
      text += c;
  auto [lhs, rhs] = StringRef(text).split("->");
  bool implicit = !StringRef(text).contains("->");
  SmallVector<StringRef> terms;
  lhs.split(terms, ',');
  SmallVector<Value> inputs = n.presentInputs();
  if (terms.size() != inputs.size()) {
    why = std::to_string(terms.size()) + " operands for " + std::to_string(inputs.size()) +
          " inputs";
    return failure();
  }
  int64_t ellipsisRank = 0;
  SmallVector<SmallVector<int>> operands;
  auto labelsOf = [&](StringRef term, int64_t rank) -> std::optional<SmallVector<int>> {
    SmallVector<int> labels;
    size_t dots = term.find("...");
    int64_t letters = static_cast<int64_t>(term.size()) - (dots == StringRef::npos ? 0 : 3);
    int64_t spanned = rank - letters;
    for (size_t i = 0; i < term.size(); ++i) {
      if (i == dots) {
        for (int64_t k = 0; k < spanned; ++k)
          labels.push_back(256 + ellipsisRank - spanned + k);
        i += 2;
      } else if (std::isalpha(static_cast<unsigned char>(term[i]))) {
        labels.push_back(term[i]);
      } else {
        return std::nullopt;
      }
    }
    return labels;
  };
  for (auto [term, input] : llvm::zip(terms, inputs)) {
    size_t dots = term.find("...");
    int64_t letters = static_cast<int64_t>(term.size()) - (dots == StringRef::npos ? 0 : 3);
    if (dots != StringRef::npos)
      ellipsisRank = std::max(ellipsisRank, n.rank(input) - letters);
  }
  for (auto [term, input] : llvm::zip(terms, inputs)) {
    auto labels = labelsOf(term, n.rank(input));
    if (!labels || static_cast<int64_t>(labels->size()) != n.rank(input)) {
      why = "operand '" + term.str() + "' does not label the " + std::to_string(n.rank(input)) +
            " dims of its input";
      return failure();
    }
    if (llvm::SmallDenseSet<int>(labels->begin(), labels->end()).size() != labels->size()) {
      why = "a label repeated in one operand (a diagonal)";
      return failure();
    }
    operands.push_back(*labels);
  }
  SmallVector<int> result;
  if (implicit) { // the ellipsis dims, then the letters used once, in order
    llvm::SmallDenseMap<int, int> uses;
    for (const auto &labels : operands)
      for (int l : labels)
        ++uses[l];
    for (int64_t k = 0; k < ellipsisRank; ++k)
      result.push_back(256 + k);
    for (int l = 'A'; l <= 'z'; ++l)
      if (uses.lookup(l) == 1)
        result.push_back(l);
  } else {
    auto labels = labelsOf(rhs, ellipsisRank + static_cast<int64_t>(rhs.size()) -
                                    (rhs.contains("...") ? 3 : 0));
    if (!labels) {
      why = "result '" + rhs.str() + "' is not letters and an ellipsis";
      return failure();
    }
    result = *labels;
  }
  return std::make_pair(operands, result);
}

/// Einsum as products: operands are contracted left to right, each pair as
/// one batched matmul (the labels both keep as batch, those neither needs
/// later summed by the product, those one alone has as its rows or columns),
/// a label no one needs later summed first; then the result is transposed
/// into the equation's order. Repeated labels in an operand (diagonals) and
/// ellipses of different sizes (broadcasting) are refused.
Results importEinsum(NodeContext &n) {
  std::string equation = n.getString("equation", "");
  std::string why;
  auto parsed = parseEinsum(n, equation, why);
  SmallVector<Value> inputs = n.presentInputs();
  // The size of every label, which must agree wherever it appears.
  llvm::SmallDenseMap<int, int64_t> sizes;
  if (succeeded(parsed)) {
    for (auto [labels, input] : llvm::zip(parsed->first, inputs))
      for (auto [label, size] : llvm::zip(labels, n.shape(input)))
        if (!sizes.try_emplace(label, size).second && sizes[label] != size)
          why = "a label of different sizes (broadcasting)";
    for (int label : parsed->second)
      if (!sizes.count(label))
        why = "a result label no operand has";
  }
  if (failed(parsed) || !why.empty()) {
    n.error() << "attribute 'equation' '" << equation << "' (" << why << ") is not supported";
    return failure();
  }
  CleaveBuilder b = n.decomposer();
  auto product = [&](ArrayRef<int> labels) {
    int64_t p = 1;
    for (int l : labels)
      p *= sizes[l];
    return p;
  };
  // `x` with the labels not in `keep` summed, then permuted to `order`.
  auto arrange = [&](Labeled x, ArrayRef<int> order) {
    SmallVector<int64_t> summed, perm;
    SmallVector<int> left;
    for (auto [d, l] : llvm::enumerate(x.labels)) {
      if (llvm::is_contained(order, l))
        left.push_back(l);
      else
        summed.push_back(d);
    }
    Value v = summed.empty() ? x.value : b.sum(x.value, summed, false);
    for (int l : order)
      perm.push_back(llvm::find(left, l) - left.begin());
    if (!llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
      v = b.transpose(v, perm);
    return v;
  };
  const auto &[operandLabels, resultLabels] = *parsed;
  Labeled current{inputs[0], operandLabels[0]};
  for (size_t i = 1; i < inputs.size(); ++i) {
    Labeled next{inputs[i], operandLabels[i]};
    llvm::SmallDenseSet<int> later(resultLabels.begin(), resultLabels.end());
    for (size_t j = i + 1; j < inputs.size(); ++j)
      later.insert(operandLabels[j].begin(), operandLabels[j].end());
    SmallVector<int> batch, contracted, rows, columns;
    for (int l : current.labels) {
      bool shared = llvm::is_contained(next.labels, l);
      if (shared)
        (later.contains(l) ? batch : contracted).push_back(l);
      else if (later.contains(l))
        rows.push_back(l);
    }
    for (int l : next.labels)
      if (!llvm::is_contained(current.labels, l) && later.contains(l))
        columns.push_back(l);
    SmallVector<int> leftOrder(batch), rightOrder(batch);
    llvm::append_range(leftOrder, rows);
    llvm::append_range(leftOrder, contracted);
    llvm::append_range(rightOrder, contracted);
    llvm::append_range(rightOrder, columns);
    Value left = b.reshape(arrange(current, leftOrder),
                           {product(batch), product(rows), product(contracted)});
    Value right = b.reshape(arrange(next, rightOrder),
                            {product(batch), product(contracted), product(columns)});
    auto multiplied = n.buildOne<MatMulOp>({left, right});
    if (failed(multiplied))
      return failure();
    SmallVector<int> labels(batch);
    llvm::append_range(labels, rows);
    llvm::append_range(labels, columns);
    SmallVector<int64_t> shape;
    for (int l : labels)
      shape.push_back(sizes[l]);
    current = {b.reshape(*multiplied, shape), labels};
  }
  return n.build<IdentityOp>(arrange(current, resultLabels));
}

} // namespace

bool lowPrecisionProductRefused(NodeContext &n) {
  Type element = getElementTypeOrSelf(n.input(0).getType());
  if (!element.isBF16() && !element.isF16())
    return false;
  n.error() << "products of " << element
            << " operands are not supported; train the f32 model with --precision bf16";
  return true;
}

namespace {

Results importMatMul(NodeContext &n) {
  if (lowPrecisionProductRefused(n))
    return failure();
  return n.build<MatMulOp>(n.presentInputs());
}

Results importGemm(NodeContext &n) {
  if (lowPrecisionProductRefused(n))
    return failure();
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
  table.add("MatMul", importMatMul, 2, 2);
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
  table.add("CastLike", importCastLike, 2, 2);
  table.add("Size", importSize, 1, 1);

  table.add("Softplus", importActivation<softplusNode>, 1, 1);
  table.add("Softsign", importActivation<softsignNode>, 1, 1);
  table.add("Mish", importActivation<mishNode>, 1, 1);
  table.add("Elu", importActivation<eluNode>, 1, 1);
  table.add("Selu", importActivation<seluNode>, 1, 1);
  table.add("HardSigmoid", importActivation<hardSigmoidNode>, 1, 1);
  table.add("HardSwish", importActivation<hardSwishNode>, 1, 1);
  table.add("ThresholdedRelu", importActivation<thresholdedReluNode>, 1, 1);
  table.add("Clip", importClip, 1, 3);
  table.add("LessOrEqual", importOrEqual<LessOp>, 2, 2);
  table.add("GreaterOrEqual", importOrEqual<GreaterOp>, 2, 2);
  for (StringRef op : {"And", "Or", "Xor"})
    table.add(op, [op](NodeContext &n) { return importLogical(n, op); }, 2, 2);
  table.add("Sum", importVariadic<AddOp>, 1, kVariadic);
  table.add("Mean", importMean, 1, kVariadic);
  table.add("Max", importVariadic<MaxOp>, 1, kVariadic);
  table.add("Min", importVariadic<MinOp>, 1, kVariadic);
  table.add("Sign", importInputsOnly<SignOp>, 1, 1);
  table.add("Sin", importInputsOnly<SinOp>, 1, 1);
  table.add("Cos", importInputsOnly<CosOp>, 1, 1);
  table.add("Tan", importInputsOnly<TanOp>, 1, 1);
  table.add("Asin", importInputsOnly<AsinOp>, 1, 1);
  table.add("Acos", importInputsOnly<AcosOp>, 1, 1);
  table.add("Atan", importInputsOnly<AtanOp>, 1, 1);
  table.add("Sinh", importInputsOnly<SinhOp>, 1, 1);
  table.add("Cosh", importInputsOnly<CoshOp>, 1, 1);
  table.add("Asinh", importInputsOnly<AsinhOp>, 1, 1);
  table.add("Acosh", importInputsOnly<AcoshOp>, 1, 1);
  table.add("Atanh", importInputsOnly<AtanhOp>, 1, 1);
  table.add("Floor", importInputsOnly<FloorOp>, 1, 1);
  table.add("Ceil", importInputsOnly<CeilOp>, 1, 1);
  table.add("Round", importInputsOnly<RoundOp>, 1, 1);
  table.add("PRelu", importPRelu, 2, 2);
  table.add("Swish", importActivation<swishNode>, 1, 1);
  table.add("IsNaN", importIsNaN, 1, 1);
  table.add("IsInf", importIsInf, 1, 1);
  table.add("Mod", importMod, 2, 2);
  table.add("Einsum", importEinsum, 1, kVariadic);
}

} // namespace cleave
