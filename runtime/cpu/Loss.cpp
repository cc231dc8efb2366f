//===- Loss.cpp - negative log likelihood and softmax cross entropy -------===//
//
// Both follow ONNX: per target position the loss is -logProb[target] times
// the target's weight (1 without weights, 0 when the target is ignored);
// Sum adds them, Mean divides that sum by the total weight of the counted
// targets (NaN when every target is ignored, as in ONNX's reference).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Support.h"

#include <type_traits>
#include <vector>

namespace cleave::rt::cpu {
namespace {

/// The class target `label` counts for, or -1 when it is ignore_index; a
/// label outside [0, classes) stops the run as bad data.
int64_t countedClass(const Context &ctx, const char *kernel, int64_t label, int64_t classes,
                     bool hasIgnoreIndex, int64_t ignoreIndex) {
  if (hasIgnoreIndex && label == ignoreIndex)
    return -1;
  if (label < 0 || label >= classes)
    failOnData(ctx.step, kernel, "target %lld out of range [0, %lld)",
               static_cast<long long>(label), static_cast<long long>(classes));
  return label;
}

/// logProb is N x C x D (D the product of the trailing dims), targets N x D.
template <typename T>
void negativeLogLikelihood(const Context &ctx, const char *kernel, const T *logProb,
                           const Tensor &targets,
                           const Tensor *weights, const Tensor &loss, int64_t n, int64_t c,
                           int64_t d, Reduction reduction, bool hasIgnoreIndex,
                           int64_t ignoreIndex) {
  if (targets.numel() != n * d)
    fail(kernel, "targets have %lld elements, expected %lld",
         static_cast<long long>(targets.numel()), static_cast<long long>(n * d));
  const T *w = nullptr;
  if (weights) {
    checkType(kernel, *weights, DTypeOf<T>::value);
    if (weights->numel() != c)
      fail(kernel, "weights have %lld elements, expected %lld",
           static_cast<long long>(weights->numel()), static_cast<long long>(c));
    w = weights->as<T>();
  }
  checkType(kernel, loss, DTypeOf<T>::value);
  int64_t expected = reduction == Reduction::None ? n * d : 1;
  if (loss.numel() != expected)
    fail(kernel, "loss has %lld elements, expected %lld", static_cast<long long>(loss.numel()),
         static_cast<long long>(expected));
  T *out = loss.as<T>();
  dispatch(kernel, targets.dtype, IntTypes{}, [&](auto tag) {
    using L = typename decltype(tag)::type;
    const L *t = targets.as<L>();
    double total = 0, totalWeight = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < d; ++j) {
        int64_t label = countedClass(ctx, kernel, static_cast<int64_t>(t[i * d + j]), c,
                                     hasIgnoreIndex, ignoreIndex);
        double value = 0, weight = 0;
        if (label >= 0) {
          weight = w ? static_cast<double>(w[label]) : 1.0;
          value = -static_cast<double>(logProb[(i * c + label) * d + j]) * weight;
        }
        if (reduction == Reduction::None)
          out[i * d + j] = static_cast<T>(value);
        total += value;
        totalWeight += weight;
      }
    if (reduction == Reduction::Sum)
      out[0] = static_cast<T>(total);
    else if (reduction == Reduction::Mean)
      out[0] = static_cast<T>(total / totalWeight);
  });
}

struct LossShape {
  int64_t n, c, d;
};

LossShape lossShape(const char *kernel, const Tensor &scores) {
  if (scores.rank() < 2)
    fail(kernel, "scores rank %d is below 2", scores.rank());
  return {scores.shape[0], scores.shape[1], product(scores.shape, 2, scores.rank())};
}

} // namespace

void softmax_cross_entropy_loss(Context &ctx, const Tensor &scores, const Tensor &labels,
                                const Tensor *weights, const Tensor &loss, const Tensor &logProb,
                                Reduction reduction, bool hasIgnoreIndex, int64_t ignoreIndex) {
  const char *kernel = "softmax_cross_entropy_loss";
  LossShape s = lossShape(kernel, scores);
  dispatch(kernel, scores.dtype, FloatTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    // log_softmax over the class dim, into logProb or (when that output is
    // absent) a temporary.
    std::vector<T> scratch;
    Tensor lp = logProb;
    if (!lp.data) {
      scratch.resize(static_cast<std::size_t>(scores.numel()));
      lp = Tensor{scratch.data(), scores.dtype, scores.shape};
    }
    log_softmax(ctx, scores, lp, 1);
    negativeLogLikelihood<T>(ctx, kernel, lp.as<T>(), labels, weights, loss, s.n, s.c, s.d,
                             reduction, hasIgnoreIndex, ignoreIndex);
  });
}

void softmax_cross_entropy_grad(Context &ctx, const Tensor &logProb, const Tensor &labels,
                                const Tensor &grad, const Tensor &out, Reduction reduction,
                                bool hasIgnoreIndex, int64_t ignoreIndex) {
  const char *kernel = "softmax_cross_entropy_grad";
  LossShape s = lossShape(kernel, logProb);
  checkSameLayout(kernel, logProb, out);
  const int64_t positions = s.n * s.d;
  if (labels.numel() != positions)
    fail(kernel, "labels have %lld elements, expected %lld", static_cast<long long>(labels.numel()),
         static_cast<long long>(positions));
  int64_t expected = reduction == Reduction::None ? positions : 1;
  if (grad.numel() != expected)
    fail(kernel, "grad has %lld elements, expected %lld", static_cast<long long>(grad.numel()),
         static_cast<long long>(expected));
  checkType(kernel, grad, logProb.dtype);
  dispatch(kernel, logProb.dtype, FloatTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Each step rounded to T, as the unfused ops round their results.
    auto round = [](auto v) { return widen(convert<T>(v)); };
    using W = decltype(widen(T{}));
    dispatch(kernel, labels.dtype, IntTypes{}, [&](auto labelTag) {
      using L = typename decltype(labelTag)::type;
      const L *t = labels.as<L>();
      // Which targets count, checked as the forward checks them.
      std::vector<int64_t> target(static_cast<std::size_t>(positions));
      int64_t counted = 0;
      for (int64_t p = 0; p < positions; ++p) {
        target[p] =
            countedClass(ctx, kernel, static_cast<int64_t>(t[p]), s.c, hasIgnoreIndex, ignoreIndex);
        counted += target[p] >= 0;
      }
      const T *g = grad.as<T>();
      W scaled = widen(g[0]);
      if (reduction == Reduction::Mean)
        scaled = round(scaled / round(static_cast<W>(counted)));
      const T *lp = logProb.as<T>();
      T *o = out.as<T>();
      const int64_t row = s.c * s.d;
      forEachChunk(ctx, s.n * row, row, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin / row; i < end / row; ++i)
          for (int64_t j = 0; j < s.d; ++j) {
            const int64_t p = i * s.d + j;
            W k = round(W(target[p] >= 0 ? 1 : 0) *
                        (reduction == Reduction::None ? widen(g[p]) : scaled));
            const int64_t first = i * s.c * s.d + j;
            // The classes one apart (d = 1, the usual N x C) as a loop of
            // its own, which GCC vectorises where a variable stride stops it.
            auto classes = [&](auto stride) {
              for (int64_t c = 0; c < s.c; ++c) {
                const int64_t at = first + c * stride;
                W prob = round(std::exp(widen(lp[at])));
                o[at] = convert<T>(round(prob - W(c == target[p] ? 1 : 0)) * k);
              }
            };
            if (s.d == 1)
              classes(std::integral_constant<int64_t, 1>{});
            else
              classes(s.d);
          }
      });
    });
  });
}

void negative_log_likelihood_loss(Context &ctx, const Tensor &input, const Tensor &target,
                                  const Tensor *weight, const Tensor &loss, Reduction reduction,
                                  bool hasIgnoreIndex, int64_t ignoreIndex) {
  const char *kernel = "negative_log_likelihood_loss";
  LossShape s = lossShape(kernel, input);
  dispatch(kernel, input.dtype, FloatTypes{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    negativeLogLikelihood<T>(ctx, kernel, input.as<T>(), target, weight, loss, s.n, s.c, s.d,
                             reduction, hasIgnoreIndex, ignoreIndex);
  });
}

} // namespace cleave::rt::cpu
