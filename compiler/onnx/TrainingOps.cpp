//===- TrainingOps.cpp - the domain ai.onnx.preview.training -------------===//
//
// Adam, Momentum and Adagrad become the elementwise cleave ops of ONNX's
// formulas, in onnx.reference's order and precision; Gradient calls
// buildGradients (the reverse sweep of cleave-autodiff) on the ops imported
// so far.
//
//===----------------------------------------------------------------------===//

#include "compiler/onnx/NodeContext.h"

#include "dialects/Cleave/CleaveBuilder.h"
#include "passes/Autodiff.h"

#include "mlir/IR/IRMapping.h"

using namespace mlir;

namespace cleave {
namespace {

/// R and T of an optimizer node. Scalar arithmetic on them is done in f64,
/// as in ONNX's reference (numpy on Python floats).
struct OptimizerStep {
  Value rate;     // R, as given (float or double)
  Value step;     // T in f64
  Value positive; // T > 0
};

/// How one optimizer updates one tensor: from {X, G, state...} its
/// {X_new, state_new...}.
using OptimizerRule =
    std::function<SmallVector<Value>(CleaveBuilder &, const OptimizerStep &, ArrayRef<Value>)>;

/// The optimizers' common form: inputs R (float scalar), T (int64 scalar),
/// then `groups` groups of equally many tensors (X..., G..., and one group
/// per state tensor: V..., H...); outputs X_new... and each state's new
/// values, group by group. Tensors of one X must all have X's type, float
/// or double. `rule` builds the update of each X.
Results importOptimizer(NodeContext &n, unsigned groups, const OptimizerRule &rule) {
  unsigned numInputs = n.node.input_size();
  if (numInputs <= 2 || (numInputs - 2) % groups != 0) {
    n.error() << "takes R, T and " << groups << " groups of equally many tensors, got "
              << numInputs << " inputs";
    return failure();
  }
  for (unsigned i = 0; i < numInputs; ++i)
    if (!n.input(i)) {
      n.error() << "input " << i << " is required but has no name";
      return failure();
    }
  auto rType = cast<RankedTensorType>(n.input(0).getType());
  auto tType = cast<RankedTensorType>(n.input(1).getType());
  if (rType.getRank() != 0 || !(rType.getElementType().isF32() || rType.getElementType().isF64())) {
    n.error() << "R '" << n.node.input(0) << "' is " << rType << ", not a float or double scalar";
    return failure();
  }
  if (tType.getRank() != 0 || !tType.getElementType().isInteger(64)) {
    n.error() << "T '" << n.node.input(1) << "' is " << tType << ", not an int64 scalar";
    return failure();
  }
  unsigned count = (numInputs - 2) / groups;
  for (unsigned i = 0; i < count; ++i) {
    Value x = n.input(2 + i);
    Type element = n.elementType(x);
    if (!element.isF32() && !element.isF64()) {
      n.error() << "X '" << n.node.input(2 + i) << "' is " << x.getType()
                << ": the optimizers take float or double tensors";
      return failure();
    }
    for (unsigned g = 1; g < groups; ++g) {
      unsigned index = 2 + g * count + i;
      if (n.input(index).getType() != x.getType()) {
        n.error() << "input '" << n.node.input(index) << "' is " << n.input(index).getType()
                  << ", but X '" << n.node.input(2 + i) << "' is " << x.getType()
                  << ": each X's gradient and state must have its type";
        return failure();
      }
    }
  }

  // The checks above give every op below valid operand types.
  CleaveBuilder d(n.builder, n.loc, /*foldConstants=*/true);
  Type f64 = n.builder.getF64Type();
  OptimizerStep step;
  step.rate = n.input(0);
  step.step = d.castTo(n.input(1), f64);
  step.positive = d.greater(step.step, d.scalar(f64, 0.0));
  SmallVector<Value> results(count * (groups - 1));
  for (unsigned i = 0; i < count; ++i) {
    SmallVector<Value> tensors;
    for (unsigned g = 0; g < groups; ++g)
      tensors.push_back(n.input(2 + g * count + i));
    SmallVector<Value> updated = rule(d, step, tensors);
    for (auto [k, value] : llvm::enumerate(updated))
      results[k * count + i] = value;
  }
  return results;
}

/// A float attribute, `fallback` when absent (nullopt: the attribute is
/// required), as onnx.reference reads it: the float32 value (the schema's
/// defaults are float32 too) widened to double.
FailureOr<double> floatAttribute(NodeContext &n, StringRef name,
                                 std::optional<float> fallback) {
  const auto *a = n.attr(name);
  if (!a) {
    if (fallback)
      return static_cast<double>(*fallback);
    n.error() << "needs the float attribute '" << name << "'";
    return failure();
  }
  if (a->type() != onnx::AttributeProto::FLOAT) {
    n.error() << "attribute '" << name << "' must be a float";
    return failure();
  }
  return static_cast<double>(a->f());
}

// Each rule below follows the pseudo code of ONNX's operator documentation
// and the operation order of onnx.reference: tensor arithmetic in X's type
// with every scalar coefficient rounded to it, and the scalar factors that
// depend on R and T computed in f64 and rounded once. One op per statement,
// so the IR comes out in the same order whatever the C++ compiler.

Results importAdagrad(NodeContext &n) {
  auto epsilon = floatAttribute(n, "epsilon", 1e-6f);
  auto decay = floatAttribute(n, "decay_factor", 0.0f);
  auto norm = floatAttribute(n, "norm_coefficient", 0.0f);
  if (failed(epsilon) || failed(decay) || failed(norm))
    return failure();
  Value r; // shared by every X
  return importOptimizer(n, 3, [&](CleaveBuilder &d, const OptimizerStep &s, ArrayRef<Value> t) {
    Value x = t[0], g = t[1], h = t[2];
    Type element = n.elementType(x);
    if (!r) { // r = R / (1 + T * decay_factor)
      Type wide = n.elementType(s.step);
      Value rate = d.castTo(s.rate, wide);
      Value decayed = d.mul(s.step, d.scalar(wide, *decay));
      r = d.div(rate, d.add(d.scalar(wide, 1.0), decayed));
    }
    // G_regularized = norm_coefficient * X + G
    Value gRegularized = d.add(d.scale(*norm, x), g);
    // H_new = H + G_regularized * G_regularized
    Value hNew = d.add(h, d.mul(gRegularized, gRegularized));
    // H_adaptive = Sqrt(H_new) + epsilon
    Value hAdaptive = d.sqrt(hNew);
    hAdaptive = d.add(hAdaptive, d.scalar(element, *epsilon));
    // X_new = X - r * G_regularized / H_adaptive
    Value step = d.mul(d.castTo(r, element), gRegularized);
    step = d.div(step, hAdaptive);
    Value xNew = d.sub(x, step);
    return SmallVector<Value>{xNew, hNew};
  });
}

Results importMomentum(NodeContext &n) {
  auto alpha = floatAttribute(n, "alpha", std::nullopt);
  auto beta = floatAttribute(n, "beta", std::nullopt);
  auto norm = floatAttribute(n, "norm_coefficient", std::nullopt);
  if (failed(alpha) || failed(beta) || failed(norm))
    return failure();
  const auto *modeAttr = n.attr("mode");
  if (!modeAttr) {
    n.error() << "needs the string attribute 'mode' (standard or nesterov)";
    return failure();
  }
  std::string mode = modeAttr->s();
  if (modeAttr->type() != onnx::AttributeProto::STRING ||
      (mode != "standard" && mode != "nesterov")) {
    n.error() << "mode '" << mode << "' is not one of standard, nesterov";
    return failure();
  }
  bool nesterov = mode == "nesterov";
  return importOptimizer(n, 3, [&](CleaveBuilder &d, const OptimizerStep &s, ArrayRef<Value> t) {
    Value x = t[0], g = t[1], v = t[2];
    Type element = n.elementType(x);
    // G_regularized = norm_coefficient * X + G
    Value gRegularized = d.add(d.scale(*norm, x), g);
    // beta_adjusted = T > 0 ? beta : 1
    Value betaValue = d.scalar(element, *beta);
    Value betaAdjusted = d.where(s.positive, betaValue, d.scalar(element, 1.0));
    // V_new = alpha * V + beta_adjusted * G_regularized
    Value vNew = d.scale(*alpha, v);
    vNew = d.add(vNew, d.mul(betaAdjusted, gRegularized));
    // X_new = X - R * V_new, or X - R * (G_regularized + alpha * V_new)
    Value direction = vNew;
    if (nesterov)
      direction = d.add(gRegularized, d.scale(*alpha, vNew));
    Value xNew = d.sub(x, d.mul(d.castTo(s.rate, element), direction));
    return SmallVector<Value>{xNew, vNew};
  });
}

Results importAdam(NodeContext &n) {
  auto alpha = floatAttribute(n, "alpha", 0.9f);
  auto beta = floatAttribute(n, "beta", 0.999f);
  auto epsilon = floatAttribute(n, "epsilon", 1e-6f);
  auto norm = floatAttribute(n, "norm_coefficient", 0.0f);
  auto normPost = floatAttribute(n, "norm_coefficient_post", 0.0f);
  if (failed(alpha) || failed(beta) || failed(epsilon) || failed(norm) || failed(normPost))
    return failure();
  Value rAdjusted; // shared by every X
  return importOptimizer(n, 4, [&](CleaveBuilder &d, const OptimizerStep &s, ArrayRef<Value> t) {
    Value x = t[0], g = t[1], v = t[2], h = t[3];
    Type element = n.elementType(x);
    // G_regularized = norm_coefficient * X + G
    Value gRegularized = d.add(d.scale(*norm, x), g);
    // V_new = alpha * V + (1 - alpha) * G_regularized
    Value vNew = d.scale(*alpha, v);
    vNew = d.add(vNew, d.scale(1.0 - *alpha, gRegularized));
    // H_new = beta * H + (1 - beta) * G_regularized * G_regularized
    Value hNew = d.scale(*beta, h);
    Value squared = d.mul(gRegularized, gRegularized);
    hNew = d.add(hNew, d.scale(1.0 - *beta, squared));
    // H_sqrt = Sqrt(H_new) + epsilon
    Value hSqrt = d.sqrt(hNew);
    hSqrt = d.add(hSqrt, d.scalar(element, *epsilon));
    if (!rAdjusted) { // R_adjusted = T > 0 ? R * sqrt(1 - beta^T) / (1 - alpha^T) : R
      Type wide = n.elementType(s.step);
      Value rate = d.castTo(s.rate, wide);
      Value one = d.scalar(wide, 1.0);
      Value betaPower = d.pow(d.scalar(wide, *beta), s.step);
      Value corrected = d.mul(rate, d.sqrt(d.sub(one, betaPower)));
      Value alphaPower = d.pow(d.scalar(wide, *alpha), s.step);
      corrected = d.div(corrected, d.sub(one, alphaPower));
      rAdjusted = d.where(s.positive, corrected, rate);
    }
    // X_new = X - R_adjusted * (V_new / H_sqrt)
    Value direction = d.div(vNew, hSqrt);
    Value xNew = d.sub(x, d.mul(d.castTo(rAdjusted, element), direction));
    // X_final = (1 - norm_coefficient_post) * X_new
    Value xFinal = d.scale(1.0 - *normPost, xNew);
    return SmallVector<Value>{xFinal, vNew, hNew};
  });
}

/// Gradient (ai.onnx.preview.training): the gradient of the tensor named `y`
/// with respect to each tensor named in `xs`, by cleave's reverse-mode rules
/// (buildGradients). The node's inputs, one per name in xs then zs, give the
/// point at which it is taken: when they are the named tensors themselves
/// (the usual case) the graph's own values are differentiated; otherwise the
/// part of the graph between the named tensors and y is first rebuilt on the
/// inputs.
Results importGradient(NodeContext &n, const llvm::StringMap<Value> &values,
                       const llvm::DenseSet<Value> &assignedEarlier) {
  const auto *xsAttr = n.attr("xs"), *zsAttr = n.attr("zs"), *yAttr = n.attr("y");
  if (!xsAttr || xsAttr->type() != onnx::AttributeProto::STRINGS || xsAttr->strings().empty()) {
    n.error() << "needs the attribute 'xs', the names of the tensors to differentiate with "
                 "respect to";
    return failure();
  }
  if (!yAttr || yAttr->type() != onnx::AttributeProto::STRING) {
    n.error() << "needs the string attribute 'y', the name of the tensor to differentiate";
    return failure();
  }
  if (zsAttr && zsAttr->type() != onnx::AttributeProto::STRINGS) {
    n.error() << "attribute 'zs' must be a list of names";
    return failure();
  }
  SmallVector<std::string> names(xsAttr->strings().begin(), xsAttr->strings().end());
  size_t numXs = names.size();
  if (zsAttr)
    names.append(zsAttr->strings().begin(), zsAttr->strings().end());
  if (static_cast<size_t>(n.node.input_size()) != names.size()) {
    n.error() << "takes one input per name in xs and zs (" << names.size() << "), got "
              << n.node.input_size();
    return failure();
  }
  auto lookup = [&](const std::string &name, StringRef role) -> Value {
    auto found = values.find(name);
    if (found != values.end())
      return found->second;
    n.error() << role << " '" << name
              << "' is not a graph input, an initializer or an output of an earlier node";
    return {};
  };
  Value y = lookup(yAttr->s(), "y");
  if (!y)
    return failure();
  if (!isa<FloatType>(n.elementType(y))) {
    n.error() << "y '" << yAttr->s() << "' is " << y.getType() << ", not a float tensor";
    return failure();
  }
  SmallVector<Value> named, inputs;
  for (auto [i, name] : llvm::enumerate(names)) {
    StringRef role = i < numXs ? "xs" : "zs";
    Value value = lookup(name, role);
    if (!value)
      return failure();
    if (i < numXs && !isa<FloatType>(n.elementType(value))) {
      n.error() << "xs '" << name << "' is " << value.getType()
                << ": only float tensors have gradients";
      return failure();
    }
    if (!n.input(i)) {
      n.error() << "input " << i << " has no name";
      return failure();
    }
    if (n.input(i).getType() != value.getType()) {
      n.error() << "input '" << n.node.input(i) << "' is " << n.input(i).getType() << ", but "
                << role << " '" << name << "', the tensor it gives a value for, is "
                << value.getType();
      return failure();
    }
    // Ops that read only constants were folded at import, so y no longer
    // shows how it depends on a constant.
    if ((i < numXs || n.input(i) != value) && matchPattern(value, m_Constant())) {
      n.error() << role << " '" << name
                << "' is a constant, folded into the ops that read it: cleave cannot "
                   "differentiate with respect to it or evaluate at another value";
      return failure();
    }
    named.push_back(value);
    inputs.push_back(n.input(i));
  }

  // The ops that read a named tensor, directly or not. ONNX requires the
  // tensors of xs and zs to be independent: none computed from another.
  llvm::DenseSet<Value> downstream(named.begin(), named.end());
  SmallVector<Operation *> between;
  for (Operation &op : *n.builder.getInsertionBlock()) {
    if (llvm::none_of(op.getOperands(), [&](Value v) { return downstream.contains(v); }))
      continue;
    for (auto [value, name] : llvm::zip(named, names))
      if (value.getDefiningOp() == &op) {
        n.error() << "'" << name << "' of xs and zs is computed from another of them: "
                  << "they must be independent";
        return failure();
      }
    for (Value result : op.getResults())
      if (!assignedEarlier.contains(result))
        downstream.insert(result);
    between.push_back(&op);
  }

  SmallVector<Value> leaves(named);
  if (inputs != named) {
    // Rebuild the ops between the named tensors and y on a fresh copy of
    // each input (fresh, so that two named tensors given the same input
    // still get their own gradients).
    IRMapping mapping;
    for (auto [i, input] : llvm::enumerate(inputs)) {
      leaves[i] = IdentityOp::create(n.builder, n.loc, input);
      mapping.map(named[i], leaves[i]);
    }
    if (Operation *last = y.getDefiningOp())
      for (Operation *op : between)
        if (op == last || op->isBeforeInBlock(last))
          n.builder.clone(*op, mapping);
    y = mapping.lookupOrDefault(y);
  }

  ArrayRef<Value> xs = ArrayRef<Value>(leaves).take_front(numXs);
  auto grads = buildGradients(n.builder, y, xs, assignedEarlier);
  if (failed(grads))
    return failure();
  SmallVector<Value> results;
  for (auto [x, grad] : llvm::zip(xs, *grads)) {
    if (grad) {
      results.push_back(grad);
      continue;
    }
    results.push_back(splatConstant(n.builder, n.loc, cast<RankedTensorType>(x.getType()), 0.0));
  }
  return results;
}

} // namespace

void populateTrainingImporters(OpImporterTable &table, const llvm::StringMap<Value> &values,
                               const llvm::DenseSet<Value> &constants) {
  table.add("Adagrad", importAdagrad, 5, kVariadic);
  table.add("Momentum", importMomentum, 5, kVariadic);
  table.add("Adam", importAdam, 6, kVariadic);
  table.add("Gradient",
            [&values, &constants](NodeContext &n) { return importGradient(n, values, constants); },
            1, kVariadic);
}

} // namespace cleave
