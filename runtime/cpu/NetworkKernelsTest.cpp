//===- NetworkKernelsTest.cpp - softmax, norms, dropout, linalg, conv, pool, losses
//
// Expected values come from references, never from the kernels: analytic
// identities, loops and direct convolutions written here, and numbers from
// ONNX's reference implementation, produced by
//     /work/main/.venv/bin/python runtime/cpu/KernelsTestReference.py SECTION
// (onnx 1.19.1; each test names its SECTION).
//
//===----------------------------------------------------------------------===//

#include "runtime/LowPrecision.h"
#include "runtime/cpu/ConvPrimitives.h"
#include "runtime/cpu/ProductPrimitives.h"
#include "runtime/cpu/TestUtil.h"

#include <cstring>
#include <functional>

using namespace cleave::rt;
using namespace cleave::rt::test;

namespace {

const double kLn2 = std::log(2.0);
const double kNaN = std::numeric_limits<double>::quiet_NaN();

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

TEST(Softmax, AnalyticIdentities) {
  // softmax([0, ln 2]) = [1/3, 2/3]; log_softmax = [ln 1/3, ln 2/3].
  auto x = make<float>({2}, {0.0f, float(kLn2)});
  auto y = zeros(DType::F32, {2});
  cpu::softmax(ctx(), x, y, 0);
  expectNear(y, {1.0 / 3, 2.0 / 3}, 1e-6);
  cpu::log_softmax(ctx(), x, y, 0);
  expectNear(y, {std::log(1.0 / 3), std::log(2.0 / 3)}, 1e-6);
  // Shifting by 1000 changes nothing (no overflow).
  auto big = make<double>({2, 2}, {1000.0, 1000.0 + kLn2, -1000.0, -1000.0});
  auto yb = zeros(DType::F64, {2, 2});
  cpu::softmax(ctx(), big, yb, 1);
  expectNear(yb, {1.0 / 3, 2.0 / 3, 0.5, 0.5}, 1e-12);
  cpu::log_softmax(ctx(), big, yb, -1);
  expectNear(yb, {std::log(1.0 / 3), std::log(2.0 / 3), -kLn2, -kLn2}, 1e-12);
}

TEST(Softmax, InnerAxes) {
  // Softmax over axis 1 of 2 x 3 x 300 (the axis is strided; 300 columns
  // cross the kernel's chunk size): column j holds [a, a + ln 2, a] with a
  // depending on j, so each column is [1/4, 1/2, 1/4].
  const int64_t cols = 300;
  std::vector<float> values;
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 3; ++i)
      for (int64_t j = 0; j < cols; ++j)
        values.push_back(float(0.01 * j - b + (i == 1 ? kLn2 : 0.0)));
  auto x = make<float>({2, 3, cols}, values);
  auto y = zeros(DType::F32, {2, 3, cols});
  cpu::softmax(ctx(), x, y, 1);
  std::vector<double> expected, expectedLog;
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 3; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        expected.push_back(i == 1 ? 0.5 : 0.25);
        expectedLog.push_back(std::log(i == 1 ? 0.5 : 0.25));
      }
  expectNear(y, expected, 1e-6);
  cpu::log_softmax(ctx(), x, y, 1);
  expectNear(y, expectedLog, 1e-5);
  // In place, axis 0.
  auto z = make<float>({2, 2}, {0.0f, 1.0f, float(kLn2), 1.0f});
  cpu::softmax(ctx(), z, z, 0);
  expectNear(z, {1.0 / 3, 0.5, 2.0 / 3, 0.5}, 1e-6);
}

// Causally masked rows (-inf past the diagonal, as attention's scores), 67
// long to leave a remainder past the kernel's lanes, against the formula in
// double: the masked entries are exactly 0 (-inf in log softmax), the rest
// within 1e-6, also in place.
TEST(Softmax, MaskedRowsAgainstDouble) {
  const int64_t rows = 70, n = 67;
  std::vector<float> values(rows * n);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i)
      values[r * n + i] = i > r ? -INFINITY : float(3 * std::sin(0.7 * r + 1.3 * i));
  std::vector<double> expected, expectedLog;
  for (int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, sum = 0;
    for (int64_t i = 0; i < n; ++i)
      m = std::max(m, double(values[r * n + i]));
    for (int64_t i = 0; i < n; ++i)
      sum += std::exp(double(values[r * n + i]) - m);
    for (int64_t i = 0; i < n; ++i) {
      expected.push_back(std::exp(double(values[r * n + i]) - m) / sum);
      expectedLog.push_back(double(values[r * n + i]) - m - std::log(sum));
    }
  }
  auto x = make<float>({rows, n}, values);
  auto y = zeros(DType::F32, {rows, n});
  cpu::softmax(ctx(), x, y, 1);
  expectNear(y, expected, 1e-6);
  cpu::log_softmax(ctx(), x, y, 1);
  for (int64_t i = 0; i < rows * n; ++i) {
    if (std::isinf(expectedLog[i]))
      EXPECT_EQ(y.data<float>()[i], -INFINITY) << i;
    else
      EXPECT_NEAR(y.data<float>()[i], expectedLog[i], 1e-5) << i;
  }
  cpu::softmax(ctx(), x, x, 1);
  for (int64_t i = 0; i < rows * n; ++i)
    if (expected[i] == 0)
      EXPECT_EQ(x.data<float>()[i], 0.0f) << i;
  expectNear(x, expected, 1e-6);
}

// softmax_grad against y (g - sum(g y)) in double: rows of 67 (a remainder
// past the kernel's lanes), a strided axis over 300 columns (past its chunk),
// f64, and in place over g and over y.
TEST(Softmax, GradAgainstDouble) {
  auto reference = [](const Buffer &y, const Buffer &g, int64_t outer, int64_t n, int64_t inner) {
    std::vector<double> yv = y.doubles(), gv = g.doubles(), want(yv.size());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < inner; ++j) {
        double sum = 0;
        for (int64_t i = 0; i < n; ++i)
          sum += gv[(o * n + i) * inner + j] * yv[(o * n + i) * inner + j];
        for (int64_t i = 0; i < n; ++i) {
          int64_t at = (o * n + i) * inner + j;
          want[at] = yv[at] * (gv[at] - sum);
        }
      }
    return want;
  };
  auto y = makeRandom<float>({5, 67}, 1, 0.0, 0.1), g = makeRandom<float>({5, 67}, 2);
  std::vector<double> want = reference(y, g, 5, 67, 1);
  auto out = zeros(DType::F32, {5, 67});
  cpu::softmax_grad(ctx(), y, g, out, 1);
  expectNear(out, want, 1e-6);
  cpu::softmax_grad(ctx(), y, g, g, -1);
  expectNear(g, want, 1e-6);
  auto g2 = makeRandom<float>({5, 67}, 2);
  cpu::softmax_grad(ctx(), y, g2, y, 1);
  expectNear(y, want, 1e-6);

  auto ys = makeRandom<float>({2, 7, 300}, 3, 0.0, 0.3), gs = makeRandom<float>({2, 7, 300}, 4);
  auto outs = zeros(DType::F32, {2, 7, 300});
  cpu::softmax_grad(ctx(), ys, gs, outs, 1);
  expectNear(outs, reference(ys, gs, 2, 7, 300), 1e-6);

  auto yd = makeRandom<double>({3, 4}, 5, 0.0, 0.5), gd = makeRandom<double>({3, 4}, 6);
  auto outd = zeros(DType::F64, {3, 4});
  cpu::softmax_grad(ctx(), yd, gd, outd, 0);
  expectNear(outd, reference(yd, gd, 1, 3, 4), 1e-14);
}

// scaled_masked_softmax and its gradient against the unfused chain's formula
// in double, softmax(where(mask, fill, float(float(x scale) + bias))) and
// where(mask, 0, y (g - sum(g y))) scale (x / scale and / scale when
// dividing): rows of 67 (a remainder past the kernels' lanes) under a causal
// mask of 5 x 67 broadcast over batch and heads, given as the positions
// hidden or as those kept, under a mask of 2 x 1 x 5 x 1 that hides whole
// rows (one element a row, read for all 67) with a finite fill, and under
// none; biases broadcast over heads and rows (BERT's additive mask), one a
// row (its last dim 1), and one of the scores' shape; then in place (over x,
// over g).
TEST(ScaledMaskedSoftmax, AgainstDouble) {
  enum class Given { Hidden, Kept, None };
  auto check = [](Dims xShape, Dims maskShape,
                  const std::function<bool(const std::vector<int64_t> &)> &hides, Given given,
                  float scale, bool divide, float fill, Dims biasShape = {}) {
    SCOPED_TRACE(testing::Message()
                 << "mask of " << maskShape.product() << " elements, as " << static_cast<int>(given)
                 << ", bias of " << biasShape.size << " dims");
    const int64_t numel = xShape.product(), n = xShape[xShape.size - 1];
    auto x = makeRandom<float>(xShape, 5, -4.0, 4.0), g = makeRandom<float>(xShape, 6);
    auto bias = makeRandom<float>(biasShape.size ? biasShape : Dims{1}, 7, -3.0, 1.0);
    const Tensor *biasOrNone = biasShape.size ? bias.ptr() : nullptr;
    const std::vector<double> biases = bias.doubles();
    Buffer mask(DType::Bool, maskShape);
    std::vector<uint8_t> hiddenAt(static_cast<std::size_t>(maskShape.product()));
    for (int64_t i = 0; i < maskShape.product(); ++i) {
      hiddenAt[i] = given != Given::None && hides(unflatten(i, maskShape));
      mask.data<uint8_t>()[i] = given == Given::Kept ? !hiddenAt[i] : hiddenAt[i];
    }
    const Tensor *maskOrNone = given == Given::None ? nullptr : mask.ptr();
    const bool keeps = given == Given::Kept;
    const std::vector<double> xs = x.doubles(), gs = g.doubles();
    std::vector<double> want(numel), wantGrad(numel);
    for (int64_t r = 0; r < numel / n; ++r) {
      std::vector<double> score(n);
      std::vector<bool> hidden(n);
      for (int64_t k = 0; k < n; ++k) {
        hidden[k] = hiddenAt[broadcastOffset(unflatten(r * n + k, xShape), maskShape)];
        const auto x = static_cast<float>(xs[r * n + k]);
        float scaled = divide ? x / scale : x * scale;
        if (biasOrNone)
          scaled +=
              static_cast<float>(biases[broadcastOffset(unflatten(r * n + k, xShape), biasShape)]);
        score[k] = hidden[k] ? fill : double(scaled);
      }
      double m = -INFINITY, sum = 0, dot = 0;
      for (double v : score)
        m = std::max(m, v);
      for (double v : score)
        sum += std::exp(v - m);
      for (int64_t k = 0; k < n; ++k) {
        want[r * n + k] = std::exp(score[k] - m) / sum;
        dot += gs[r * n + k] * want[r * n + k];
      }
      for (int64_t k = 0; k < n; ++k)
        wantGrad[r * n + k] = hidden[k] ? 0.0
                                        : want[r * n + k] * (gs[r * n + k] - dot) *
                                              (divide ? 1.0 / scale : double(scale));
    }
    auto y = zeros(DType::F32, xShape), dx = zeros(DType::F32, xShape);
    cpu::scaled_masked_softmax(ctx(), x, maskOrNone, biasOrNone, y, scale, divide, fill, keeps);
    expectNear(y, want, 1e-6);
    cpu::scaled_masked_softmax_grad(ctx(), y, g, maskOrNone, dx, scale, divide, keeps);
    expectNear(dx, wantGrad, 1e-6);
    cpu::scaled_masked_softmax(ctx(), x, maskOrNone, biasOrNone, x, scale, divide, fill, keeps);
    expectNear(x, want, 1e-6);
    cpu::scaled_masked_softmax_grad(ctx(), y, g, maskOrNone, g, scale, divide, keeps);
    expectNear(g, wantGrad, 1e-6);
  };
  auto causal = [](const std::vector<int64_t> &i) { return i[1] > i[0] + 40; };
  auto wholeRows = [](const std::vector<int64_t> &i) { return (i[0] + i[2]) % 3 == 0; };
  check({2, 3, 5, 67}, {5, 67}, causal, Given::Hidden, 0.125f, false, -INFINITY);
  check({2, 3, 5, 67}, {5, 67}, causal, Given::Kept, 8.0f, true, -3.4e38f);
  check({2, 3, 5, 67}, {2, 1, 5, 1}, wholeRows, Given::Hidden, 1.5f, false, -1e9f);
  check({2, 3, 5, 67}, {2, 1, 5, 1}, wholeRows, Given::Kept, 3.0f, true, -1e9f);
  check({2, 3, 5, 67}, {1}, wholeRows, Given::None, 4.0f, true, 0.0f);
  check({2, 3, 5, 67}, {1}, wholeRows, Given::None, 8.0f, true, 0.0f, {2, 1, 1, 67});
  check({2, 3, 5, 67}, {5, 67}, causal, Given::Hidden, 0.5f, false, -INFINITY, {2, 3, 5, 1});
  check({2, 3, 5, 67}, {5, 67}, causal, Given::Kept, 1.0f, false, -3.4e38f, {2, 3, 5, 67});
}

// A mask that does not broadcast to the scores, or is not boolean, and a
// bias that does not broadcast or is not of the scores' type, are errors
// naming the kernel.
TEST(ScaledMaskedSoftmax, RefusesABadMaskOrBias) {
  auto x = zeros(DType::F32, {2, 4}), y = zeros(DType::F32, {2, 4});
  auto wide = zeros(DType::Bool, {3, 4}), floats = zeros(DType::F32, {2, 4});
  auto wideBias = zeros(DType::F32, {3, 4}), doubles = zeros(DType::F64, {2, 4});
  EXPECT_EXIT(
      cpu::scaled_masked_softmax(ctx(), x, wide.ptr(), nullptr, y, 1.0f, false, 0.0f, false),
      ::testing::ExitedWithCode(3), "kernel scaled_masked_softmax: ");
  EXPECT_EXIT(
      cpu::scaled_masked_softmax(ctx(), x, nullptr, wideBias.ptr(), y, 1.0f, false, 0.0f, false),
      ::testing::ExitedWithCode(3), "kernel scaled_masked_softmax: ");
  EXPECT_EXIT(
      cpu::scaled_masked_softmax(ctx(), x, nullptr, doubles.ptr(), y, 1.0f, false, 0.0f, false),
      ::testing::ExitedWithCode(3), "kernel scaled_masked_softmax: ");
  EXPECT_EXIT(cpu::scaled_masked_softmax_grad(ctx(), x, x, floats.ptr(), y, 1.0f, false, false),
              ::testing::ExitedWithCode(3), "kernel scaled_masked_softmax_grad: ");
}

//===----------------------------------------------------------------------===//
// Layer and batch normalisation
//===----------------------------------------------------------------------===//

TEST(LayerNormalization, OnnxReference) {
  // /work/main/.venv/bin/python runtime/cpu/KernelsTestReference.py layer_norm
  auto x = make<float>({2, 3, 4}, {1, 3.52441311, 3.72789216, 1.42335999, -1.27040744,
                                   -1.87677288, 0.161753535, 2.97095966, 3.9680748, 2.2363553,
                                   -0.63206315, -1.99997067, -0.6097188, 2.26050115, 3.97182226,
                                   2.9508636, 0.136289954, -1.88419247, -1.25296164, 1.44963169,
                                   3.73883581, 3.50996685, 0.973446071, -1.538661});
  auto scale = make<float>({4}, {0.5, 1, 1.5, 2});
  auto bias = make<float>({3, 4}, {-0.5, -0.400000006, -0.300000012, -0.199999988, -0.099999994,
                                   0, 0.100000024, 0.199999988, 0.300000012, 0.400000036, 0.5,
                                   0.600000024});
  auto y = zeros(DType::F32, {2, 3, 4});
  auto mean = zeros(DType::F32, {2, 1, 1});
  auto inv = zeros(DType::F32, {2, 1, 1});
  cpu::layer_normalization(ctx(), x, scale, bias.ptr(), y, mean, inv, 1, 1e-5f);
  expectNear(y, {-0.524255693, 0.7427665, 1.55818319, 0.102546811, -0.659961581, -1.40606868,
                 -0.566123486, 1.9631803, 0.976065874, 0.934928238, -0.728029966, -2.32841253,
                 -0.924207449, 0.141606182, 1.75557494, 1.55188465, -0.343564838, -1.46563065,
                 -1.63989711, 0.497819185, 0.928775072, 1.54671097, 0.377445936, -1.99658597});
  expectNear(mean, {1.10279953, 1.14215195});
  expectNear(inv, {0.471902877, 0.484290779});

  auto y2 = zeros(DType::F32, {2, 3, 4});
  auto mean2 = zeros(DType::F32, {2, 3, 1});
  auto inv2 = zeros(DType::F32, {2, 3, 1});
  cpu::layer_normalization(ctx(), x, scale, nullptr, y2, mean2, inv2, -1, 1e-3f);
  expectNear(y2, {-0.581992567, 0.906876624, 1.6106962, -1.63337719, -0.338649631, -1.00149715,
                  0.13262476, 3.18075991, 0.656186998, 0.573290586, -0.976389766, -2.46947622,
                  -0.808595181, 0.0688057467, 1.61107957, 0.948663235, 0.203350887,
                  -1.16119909, -1.007043, 2.85171843, 0.481433809, 0.856302321, -0.487117589,
                  -2.98884988});
  expectNear(mean2, {2.41891623, -0.00361680984, 0.89309901, 2.14336705, -0.387808084,
                     1.67089701});
  expectNear(inv2, {0.820333958, 0.534657598, 0.426791668, 0.587410092, 0.776003242,
                    0.465617061});
}

TEST(LayerNormalization, DoubleAnalytic) {
  // Row [1, 2, 3]: mean 2, variance 2/3.
  auto x = make<double>({1, 3}, {1, 2, 3});
  auto s = make<double>({3}, {1, 2, 3});
  auto b = make<double>({1}, {10});
  auto y = zeros(DType::F64, {1, 3});
  auto mean = zeros(DType::F32, {1, 1});
  auto inv = zeros(DType::F32, {1, 1});
  cpu::layer_normalization(ctx(), x, s, b.ptr(), y, mean, inv, 1, 0.0f);
  double r = 1.0 / std::sqrt(2.0 / 3.0);
  expectNear(y, {10 - r, 10, 10 + 3 * r}, 1e-12);
  expectNear(mean, {2.0});
  expectNear(inv, {r});
}

// layer_normalization_grad against its formula in double, from the
// forward's own statistics: the scale broadcast per element of a row of 5,
// per row of a 4 x 5 normalised block, and whole over it; in place over the
// gradient; f64 with f64 statistics.
TEST(LayerNormalization, GradAgainstDouble) {
  auto reference = [](const Buffer &x, const std::vector<double> &scaleRow, const Buffer &mean,
                      const Buffer &inv, const Buffer &grad) {
    std::vector<double> xv = x.doubles(), gv = grad.doubles(), mv = mean.doubles(),
                        iv = inv.doubles(), want(xv.size());
    const auto cols = static_cast<int64_t>(scaleRow.size());
    for (int64_t r = 0; r < static_cast<int64_t>(mv.size()); ++r) {
      double meanG = 0, meanGXhat = 0;
      for (int64_t k = 0; k < cols; ++k) {
        double g = gv[r * cols + k] * scaleRow[k], xhat = (xv[r * cols + k] - mv[r]) * iv[r];
        meanG += g / static_cast<double>(cols);
        meanGXhat += g * xhat / static_cast<double>(cols);
      }
      for (int64_t k = 0; k < cols; ++k) {
        double g = gv[r * cols + k] * scaleRow[k], xhat = (xv[r * cols + k] - mv[r]) * iv[r];
        want[r * cols + k] = iv[r] * (g - meanG - xhat * meanGXhat);
      }
    }
    return want;
  };
  auto x = makeRandom<float>({3, 4, 5}, 11, -2.0, 2.0), g = makeRandom<float>({3, 4, 5}, 12);
  struct Case {
    Dims scale;
    int64_t axis;
  };
  unsigned seed = 13;
  for (Case c : {Case{{5}, 2}, Case{{4, 1}, 1}, Case{{4, 5}, 1}}) {
    auto scale = makeRandom<float>(c.scale, seed++);
    Dims stats = c.axis == 2 ? Dims{3, 4, 1} : Dims{3, 1, 1};
    auto y = zeros(DType::F32, {3, 4, 5}), mean = zeros(DType::F32, stats),
         inv = zeros(DType::F32, stats);
    cpu::layer_normalization(ctx(), x, scale, nullptr, y, mean, inv, c.axis, 1e-5f);
    std::vector<double> s = scale.doubles(), scaleRow;
    const int64_t cols = c.axis == 2 ? 5 : 20;
    for (int64_t k = 0; k < cols; ++k)
      scaleRow.push_back(c.scale.size == 1 ? s[k % 5] : c.scale[1] == 1 ? s[k / 5] : s[k]);
    std::vector<double> want = reference(x, scaleRow, mean, inv, g);
    auto out = zeros(DType::F32, {3, 4, 5});
    cpu::layer_normalization_grad(ctx(), x, scale, mean, inv, g, out, c.axis);
    expectNear(out, want, 1e-5);
    auto inPlace = makeRandom<float>({3, 4, 5}, 12);
    cpu::layer_normalization_grad(ctx(), x, scale, mean, inv, inPlace, inPlace, c.axis - 3);
    expectNear(inPlace, want, 1e-5);
  }

  auto xd = makeRandom<double>({2, 6}, 20), gd = makeRandom<double>({2, 6}, 21),
       sd = makeRandom<double>({6}, 22);
  auto yd = zeros(DType::F64, {2, 6}), md = zeros(DType::F64, {2, 1}),
       id = zeros(DType::F64, {2, 1}), outd = zeros(DType::F64, {2, 6});
  cpu::layer_normalization(ctx(), xd, sd, nullptr, yd, md, id, 1, 1e-5f);
  cpu::layer_normalization_grad(ctx(), xd, sd, md, id, gd, outd, 1);
  expectNear(outd, reference(xd, sd.doubles(), md, id, gd), 1e-12);
}

TEST(BatchNormalization, OnnxReference) {
  // /work/main/.venv/bin/python runtime/cpu/KernelsTestReference.py batch_norm
  auto x = make<float>({2, 3, 2}, {2, 1.08060455, -0.83229363, -1.979985, -1.30728722, 0.56732434,
                                   1.92034054, 1.50780451, -0.291000068, -1.8222605, -1.67814302,
                                   0.00885139592});
  auto scale = make<float>({3}, {1, 0.5, 2});
  auto bias = make<float>({3}, {0, 1, -1});
  auto mean = make<float>({3}, {0.100000001, -0.200000003, 0.300000012});
  auto var = make<float>({3}, {1, 2, 0.5});
  auto y = zeros(DType::F32, {2, 3, 2});
  auto rm = zeros(DType::F32, {3});
  auto rv = zeros(DType::F32, {3});
  cpu::batch_normalization(ctx(), x, scale, bias, mean, var, y, rm, rv, 1e-5f, 0.9f, false);
  expectNear(y, {1.89999044, 0.980599642, 0.776450992, 0.370681882, -5.54604912, -0.24390018,
                 1.82033145, 1.40779746, 0.967826724, 0.426445782, -6.59497738, -1.82348442});
  expectNear(rm, {0.1, -0.2, 0.3}); // inference copies the statistics
  expectNear(rv, {1, 2, 0.5});

  cpu::batch_normalization(ctx(), x, scale, bias, mean, var, y, rm, rv, 1e-5f, 0.9f, true);
  expectNear(y, {1.01657712, -1.49040973, 1.28556275, 0.464351952, -2.5302, 1.53879023,
                 0.799363494, -0.325530499, 1.67287612, 0.577208996, -3.33517146, 0.326581359});
  expectNear(rm, {0.252718776, -0.303138494, 0.209768638});
  expectNear(rv, {0.913448334, 1.84882832, 0.534899294});
}

TEST(BatchNormalization, DoubleTrainingInPlaceStatistics) {
  // Channel 0 holds [1, 3] over the batch: mean 2, biased variance 1.
  auto x = make<double>({2, 1}, {1, 3});
  auto one = make<double>({1}, {1});
  auto zero = make<double>({1}, {0});
  auto mean = make<double>({1}, {10});
  auto var = make<double>({1}, {4});
  auto y = zeros(DType::F64, {2, 1});
  // Running statistics written over the inputs they update.
  cpu::batch_normalization(ctx(), x, one, zero, mean, var, y, mean, var, 0.0f, 0.5f, true);
  expectNear(y, {-1, 1}, 1e-12);
  expectNear(mean, {0.5 * 10 + 0.5 * 2}, 1e-12);
  expectNear(var, {0.5 * 4 + 0.5 * 1}, 1e-12);
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

TEST(Dropout, InferenceCopies) {
  auto x = make<float>({3}, {1, -2, 3});
  auto y = zeros(DType::F32, {3});
  auto mask = zeros(DType::Bool, {3});
  cpu::dropout(ctx(), x, nullptr, y, mask, 0.5f, false, 7, {});
  expectNear(y, {1, -2, 3});
  EXPECT_EQ(mask.bools(), (std::vector<int>{1, 1, 1}));
  cpu::dropout(ctx(), x, nullptr, y, mask, 0.0f, true, 7, {}); // ratio 0 keeps everything
  expectNear(y, {1, -2, 3});
  EXPECT_EQ(mask.bools(), (std::vector<int>{1, 1, 1}));
  cpu::dropout(ctx(), x, nullptr, y, mask, 1.0f, true, 7, {}); // ratio 1 drops everything
  expectNear(y, {0, 0, 0});
  EXPECT_EQ(mask.bools(), (std::vector<int>{0, 0, 0}));
}

TEST(Dropout, TrainingMaskIsCounterBased) {
  const int64_t n = 20000;
  Buffer x(DType::F32, {n});
  std::fill(x.data<float>(), x.data<float>() + n, 1.0f);
  auto y = zeros(DType::F32, {n});
  auto mask = zeros(DType::Bool, {n});
  cpu::dropout(ctx(), x, nullptr, y, mask, 0.5f, true, 1234, {});
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    bool k = mask.data<uint8_t>()[i] != 0;
    kept += k;
    EXPECT_EQ(y.data<float>()[i], k ? 2.0f : 0.0f) << "at " << i; // scaled by 1 / (1 - ratio)
  }
  // Binomial(20000, 0.5): standard deviation ~71; allow 5 sigma.
  EXPECT_NEAR(double(kept), n * 0.5, 360.0);

  // Same seed, same mask; a prefix of the tensor gets the prefix of the mask
  // (the generator depends only on seed and element index).
  auto mask2 = zeros(DType::Bool, {n});
  auto y2 = zeros(DType::F32, {n});
  cpu::dropout(ctx(), x, nullptr, y2, mask2, 0.5f, true, 1234, {});
  EXPECT_EQ(mask.bools(), mask2.bools());
  Tensor prefix{x.t().data, DType::F32, {100}};
  auto y3 = zeros(DType::F32, {100});
  auto mask3 = zeros(DType::Bool, {100});
  cpu::dropout(ctx(), prefix, nullptr, y3, mask3, 0.5f, true, 1234, {});
  std::vector<int> full = mask.bools();
  EXPECT_EQ(mask3.bools(), std::vector<int>(full.begin(), full.begin() + 100));
  cpu::dropout(ctx(), x, nullptr, y2, mask2, 0.5f, true, 99, {});
  EXPECT_NE(mask.bools(), mask2.bools());

  auto xd = make<double>({4}, {4, 4, 4, 4});
  auto yd = zeros(DType::F64, {4});
  auto md = zeros(DType::Bool, {4});
  cpu::dropout(ctx(), xd, nullptr, yd, md, 0.25f, true, 5, {});
  for (int i = 0; i < 4; ++i)
    EXPECT_DOUBLE_EQ(yd.data<double>()[i], md.data<uint8_t>()[i] ? 4.0 / 0.75 : 0.0);
}

TEST(Dropout, SplitPartDrawsWhatTheWholeDraws) {
  // A 3 x 4 x 5 tensor split along dim 1 over 2 ranks: rank r holds
  // columns [2r, 2r + 2) of dim 1, and keeps exactly the elements the whole
  // tensor's dropout keeps there.
  const int64_t a = 3, b = 4, c = 5, parts = 2, local = b / parts;
  Buffer x(DType::F32, {a, b, c});
  std::fill(x.data<float>(), x.data<float>() + a * b * c, 1.0f);
  auto y = zeros(DType::F32, {a, b, c});
  auto mask = zeros(DType::Bool, {a, b, c});
  cpu::dropout(ctx(), x, nullptr, y, mask, 0.5f, true, 77, {});
  std::vector<int> whole = mask.bools();
  for (int64_t rank = 0; rank < parts; ++rank) {
    Buffer part(DType::F32, {a, local, c});
    std::fill(part.data<float>(), part.data<float>() + a * local * c, 1.0f);
    auto partOut = zeros(DType::F32, {a, local, c});
    auto partMask = zeros(DType::Bool, {a, local, c});
    auto coordinate = make<int64_t>({}, {rank});
    cpu::dropout(ctx(), part, &coordinate.t(), partOut, partMask, 0.5f, true, 77, {1, parts});
    std::vector<int> got = partMask.bools();
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < local; ++j)
        for (int64_t k = 0; k < c; ++k)
          EXPECT_EQ(got[(i * local + j) * c + k], whole[(i * b + rank * local + j) * c + k])
              << "rank " << rank << " at " << i << "," << j << "," << k;
  }
}

//===----------------------------------------------------------------------===//
// Matmul and gemm
//===----------------------------------------------------------------------===//

/// numpy matmul by loops, in double.
template <typename T>
std::vector<double> matmulByLoop(const Buffer &a, const Buffer &b, const Dims &outShape) {
  Dims as = a.t().shape, bs = b.t().shape;
  bool aVec = as.size == 1, bVec = bs.size == 1;
  int64_t m = aVec ? 1 : as[as.size - 2], k = as[as.size - 1];
  int64_t n = bVec ? 1 : bs[bs.size - 1];
  Dims ab, bb, ob;
  for (int i = 0; i + 2 < as.size; ++i)
    ab.values[ab.size++] = as[i];
  for (int i = 0; i + 2 < bs.size; ++i)
    bb.values[bb.size++] = bs[i];
  for (int i = 0; i < outShape.size - !aVec - !bVec; ++i)
    ob.values[ob.size++] = outShape[i];
  std::vector<double> out;
  for (int64_t batch = 0; batch < ob.product(); ++batch) {
    auto idx = unflatten(batch, ob);
    int64_t ao = (ab.size ? broadcastOffset(idx, ab) : 0) * m * k;
    int64_t bo = (bb.size ? broadcastOffset(idx, bb) : 0) * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += double(a.data<T>()[ao + i * k + p]) * double(b.data<T>()[bo + p * n + j]);
        out.push_back(acc);
      }
  }
  return out;
}

TEST(Matmul, ShapesAgainstLoops) {
  struct Case {
    Dims a, b, out;
  } cases[] = {
      {{2, 3}, {3, 4}, {2, 4}},
      {{4, 16, 32}, {32, 8}, {4, 16, 8}},     // one rhs under a batch
      {{2, 1, 3, 4}, {5, 4, 2}, {2, 5, 3, 2}}, // broadcast batch dims
      {{4}, {4, 3}, {3}},                      // 1-D lhs
      {{2, 3}, {3}, {2}},                      // 1-D rhs
      {{5}, {5}, {}},                          // dot product
      {{3}, {2, 3, 2}, {2, 2}},
      {{2, 3, 4}, {4}, {2, 3}},
      {{1, 3, 2}, {4, 2, 5}, {4, 3, 5}},
      {{64, 80}, {80, 96}, {64, 96}},
  };
  unsigned seed = 10;
  for (const Case &c : cases) {
    auto a = makeRandom<float>(c.a, seed++);
    auto b = makeRandom<float>(c.b, seed++);
    auto y = zeros(DType::F32, c.out);
    cpu::matmul(ctx(), a, b, y, false, false, false);
    expectNear(y, matmulByLoop<float>(a, b, c.out), 1e-5);

    auto ad = makeRandom<double>(c.a, seed++);
    auto bd = makeRandom<double>(c.b, seed++);
    auto yd = zeros(DType::F64, c.out);
    cpu::matmul(ctx(), ad, bd, yd, false, false, false);
    expectNear(yd, matmulByLoop<double>(ad, bd, c.out), 1e-12);
  }
}

TEST(Matmul, IntegersAndThreads) {
  auto a = make<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = make<int64_t>({3, 2}, {7, 8, 9, 10, 11, 12});
  auto y = zeros(DType::I64, {2, 2});
  cpu::matmul(ctx(), a, b, y, false, false, false);
  expectEqual<int64_t>(y, {58, 64, 139, 154});
  auto a32 = make<int32_t>({2, 1, 2}, {1, -1, 2, 3});
  auto b32 = make<int32_t>({2, 2, 1}, {5, 6, 7, 8});
  auto y32 = zeros(DType::I32, {2, 1, 1});
  cpu::matmul(ctx(), a32, b32, y32, false, false, false);
  expectEqual<int32_t>(y32, {-1, 38});

  cpu::Context two;
  two.threads = 2;
  auto af = makeRandom<float>({96, 128}, 3);
  auto bf = makeRandom<float>({128, 72}, 4);
  auto yf = zeros(DType::F32, {96, 72});
  cpu::matmul(two, af, bf, yf, false, false, false);
  expectNear(yf, matmulByLoop<float>(af, bf, {96, 72}), 1e-5);
}

/// Gemm by loops: alpha * op(A) op(B) + beta * C (C broadcast to M x N).
template <typename T>
std::vector<double> gemmByLoop(const Buffer &a, const Buffer &b, const Buffer *c, double alpha,
                               double beta, bool transA, bool transB) {
  Dims as = a.t().shape, bs = b.t().shape;
  int64_t m = transA ? as[1] : as[0], k = transA ? as[0] : as[1];
  int64_t n = transB ? bs[0] : bs[1];
  std::vector<double> out;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += double(a.data<T>()[transA ? p * m + i : i * k + p]) *
               double(b.data<T>()[transB ? j * k + p : p * n + j]);
      double cv = c ? double(c->data<T>()[broadcastOffset({i, j}, c->t().shape)]) : 0.0;
      out.push_back(alpha * acc + beta * cv);
    }
  return out;
}

// alpha 1 and beta 1 take C as the oneDNN primitive's bias, any other
// pair broadcasts C into the result first; both with the primitives made
// per call and kept for the run, on one and two threads.
TEST(Gemm, TransposesAlphaBetaBroadcastC) {
  const int64_t m = 3, k = 5, n = 4;
  unsigned seed = 100;
  cpu::ProductPrimitives kept;
  cpu::Context keeping;
  keeping.products = &kept;
  keeping.threads = 2;
  for (cpu::Context *context : {&ctx(), &keeping})
    for (auto [alpha, beta] : {std::pair{0.5f, 2.0f}, std::pair{1.0f, 1.0f}})
      for (int transA = 0; transA < 2; ++transA)
        for (int transB = 0; transB < 2; ++transB) {
          auto a = makeRandom<float>(transA ? Dims{k, m} : Dims{m, k}, seed++);
          auto b = makeRandom<float>(transB ? Dims{n, k} : Dims{k, n}, seed++);
          for (Dims cShape : {Dims{n}, Dims{m, 1}, Dims{}, Dims{m, n}, Dims{1, n}, Dims{1}}) {
            auto c = makeRandom<float>(cShape, seed++);
            auto y = zeros(DType::F32, {m, n});
            cpu::gemm(*context, a, b, c.ptr(), y, alpha, beta, transA, transB, Activation::None,
                      false, false);
            expectNear(y, gemmByLoop<float>(a, b, &c, alpha, beta, transA, transB), 1e-5);
          }
          auto y = zeros(DType::F32, {m, n});
          cpu::gemm(*context, a, b, nullptr, y, 1.5f, 1.0f, transA, transB, Activation::None, false,
                    false);
          expectNear(y, gemmByLoop<float>(a, b, nullptr, 1.5, 0.0, transA, transB), 1e-5);
        }
}

// An accumulator's product marked firstCallWrites (a weight's gradient,
// cleave-accumulate-into-products) writes it on its function's first call in
// a step, whatever it held, and adds to it on the later calls; unmarked, it
// adds on every call.
TEST(Gemm, FirstCallWritesTheAccumulator) {
  const int64_t m = 6, k = 3, n = 5;
  auto a = makeRandom<float>(Dims{k, m}, 400);
  auto b = makeRandom<float>(Dims{k, n}, 401);
  auto stale = makeRandom<float>(Dims{m, n}, 402);
  auto product = gemmByLoop<float>(a, b, nullptr, 1.0, 0.0, true, false);
  for (bool marked : {true, false}) {
    auto slot = makeRandom<float>(Dims{m, n}, 402);
    cpu::Context context;
    context.firstCall = true;
    cpu::gemm(context, a, b, slot.ptr(), slot, 1.0f, 1.0f, true, false, Activation::None, false,
              marked);
    auto once = marked ? product : gemmByLoop<float>(a, b, &stale, 1.0, 1.0, true, false);
    expectNear(slot, once, 1e-5);
    context.firstCall = false;
    cpu::gemm(context, a, b, slot.ptr(), slot, 1.0f, 1.0f, true, false, Activation::None, false,
              marked);
    for (double &v : once)
      v *= 2;
    expectNear(slot, marked ? once : gemmByLoop<float>(a, b, &stale, 2.0, 1.0, true, false), 1e-5);
  }
}

// A constant B (cleave-constant-weights) is read from a copy in oneDNN's
// layout, made on the first call and kept: the products are the loop's in
// double, with B as stored and transposed, by a gemm and by a matmul of a
// batch of rows; the copy is counted once as the program's allocation, its
// bytes packedWeightsBytes(k, n) whatever m (what plan.json predicts), and
// a second call with the same B allocates nothing more than the largest
// product's scratchpad (as gemmProblem and matmulProblem, what plan.json
// predicts from, name the products).
TEST(Gemm, ConstantWeightsReadFromAKeptCopy) {
  unsigned seed = 300;
  for (auto [k, n] : {std::pair<int64_t, int64_t>{37, 10}, {64, 48}, {129, 33}})
    for (int transB = 0; transB < 2; ++transB)
      for (int64_t m : {1, 7, 64}) {
        AllocationMeter meter;
        cpu::ProductPrimitives kept;
        cpu::Context keeping;
        keeping.products = &kept;
        keeping.allocations = &meter;
        auto a = makeRandom<float>(Dims{m, k}, seed++);
        auto b = makeRandom<float>(transB ? Dims{n, k} : Dims{k, n}, seed++);
        auto bias = makeRandom<float>(Dims{n}, seed++);
        for (int call = 0; call < 2; ++call) {
          auto y = zeros(DType::F32, {m, n});
          cpu::gemm(keeping, a, b, bias.ptr(), y, 1.0f, 1.0f, false, transB, Activation::None, true,
                    false);
          expectNear(y, gemmByLoop<float>(a, b, &bias, 1.0, 1.0, false, transB), 1e-5);
        }
        EXPECT_GT(cpu::packedWeightsBytes(k, n), 0);
        cpu::ProductPrimitives asked;
        const int64_t gemmScratchpad = asked.scratchpadBytes(
            cpu::gemmProblem(DType::F32, DType::F32, a.t().shape, b.t().shape, &bias.t().shape,
                             false, 1.0f, 1.0f, false, transB, Activation::None, true),
            1);
        EXPECT_EQ(static_cast<int64_t>(meter.peakBytes()),
                  cpu::packedWeightsBytes(k, n) + gemmScratchpad)
            << "k " << k << " n " << n << " m " << m;
        if (transB)
          continue;
        auto rows = makeRandom<float>(Dims{2, m, k}, seed++);
        auto y = zeros(DType::F32, {2, m, n});
        cpu::matmul(keeping, rows, b, y, false, false, true);
        auto flat = makeRandom<float>(Dims{2 * m, k}, 0);
        std::memcpy(flat.data<float>(), rows.data<float>(), sizeof(float) * 2 * m * k);
        expectNear(y, gemmByLoop<float>(flat, b, nullptr, 1.0, 0.0, false, false), 1e-5);
        const int64_t matmulScratchpad =
            asked.scratchpadBytes(cpu::matmulProblem(DType::F32, rows.t().shape, b.t().shape,
                                                     y.t().shape, false, false, true),
                                  1);
        EXPECT_EQ(static_cast<int64_t>(meter.peakBytes()),
                  cpu::packedWeightsBytes(k, n) + std::max(gemmScratchpad, matmulScratchpad));
      }
}

/// `values` with `activation` applied, in double: the reference of a fused
/// one (GELU's erf form with std::erf).
std::vector<double> activated(std::vector<double> values, Activation activation) {
  for (double &v : values)
    v = activation == Activation::Relu   ? std::max(v, 0.0)
        : activation == Activation::Gelu ? 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)))
                                         : v;
  return values;
}

// A fused activation (cleave-fuse-activations) applies after alpha, beta
// and C: oneDNN's post-op for f32 (with C as the bias, and as beta's sum),
// the relu and gelu kernels afterwards for f64 and for a product of k = 0.
TEST(Gemm, FusedActivations) {
  const int64_t m = 6, k = 7, n = 5;
  unsigned seed = 200;
  for (Activation activation : {Activation::Relu, Activation::Gelu}) {
    auto a = makeRandom<float>({m, k}, seed++);
    auto b = makeRandom<float>({n, k}, seed++);
    auto bias = makeRandom<float>({n}, seed++);
    auto c = makeRandom<float>({m, n}, seed++);
    auto y = zeros(DType::F32, {m, n});
    cpu::gemm(ctx(), a, b, bias.ptr(), y, 1.0f, 1.0f, false, true, activation, false, false);
    expectNear(y, activated(gemmByLoop<float>(a, b, &bias, 1.0, 1.0, false, true), activation),
               1e-5);
    cpu::gemm(ctx(), a, b, c.ptr(), y, 0.5f, 2.0f, false, true, activation, false, false);
    expectNear(y, activated(gemmByLoop<float>(a, b, &c, 0.5, 2.0, false, true), activation), 1e-5);
    auto a64 = makeRandom<double>({m, k}, seed++);
    auto b64 = makeRandom<double>({k, n}, seed++);
    auto y64 = zeros(DType::F64, {m, n});
    cpu::gemm(ctx(), a64, b64, nullptr, y64, 1.0f, 0.0f, false, false, activation, false, false);
    expectNear(y64,
               activated(gemmByLoop<double>(a64, b64, nullptr, 1.0, 0.0, false, false), activation),
               1e-12);
    // k = 0: no product, the result is beta C.
    auto empty = zeros(DType::F32, {m, 0}), emptyB = zeros(DType::F32, {0, n});
    cpu::gemm(ctx(), empty, emptyB, c.ptr(), y, 1.0f, 1.0f, false, false, activation, false, false);
    expectNear(y,
               activated(gemmByLoop<float>(empty, emptyB, &c, 1.0, 1.0, false, false), activation),
               1e-6);
  }
}

TEST(Gemm, DoubleAndIntegers) {
  auto a = makeRandom<double>({4, 3}, 7);
  auto b = makeRandom<double>({2, 4}, 8);
  auto c = makeRandom<double>({2}, 9);
  auto y = zeros(DType::F64, {3, 2});
  cpu::gemm(ctx(), a, b, c.ptr(), y, -1.0f, 0.25f, true, true, Activation::None, false, false);
  expectNear(y, gemmByLoop<double>(a, b, &c, -1.0, 0.25, true, true), 1e-12);

  auto ai = make<int32_t>({2, 2}, {1, 2, 3, 4});
  auto bi = make<int32_t>({2, 2}, {5, 6, 7, 8});
  auto ci = make<int32_t>({2}, {100, 200});
  auto yi = zeros(DType::I32, {2, 2});
  cpu::gemm(ctx(), ai, bi, ci.ptr(), yi, 1.0f, 1.0f, false, false, Activation::None, false, false);
  expectEqual<int32_t>(yi, {119, 222, 143, 250});
  auto a64 = make<int64_t>({2, 2}, {1, 2, 3, 4});
  auto b64 = make<int64_t>({2, 1}, {1, -1});
  auto y64 = zeros(DType::I64, {2, 1});
  cpu::gemm(ctx(), a64, b64, nullptr, y64, 2.0f, 0.0f, true, false, Activation::None, false, false);
  expectEqual<int64_t>(y64, {-4, -4}); // 2 * A^T [1, -1]
}

/// `values` rounded to `type` (bf16 or f16) by the cast kernel, and that
/// rounding back in f32: the factors a low-precision product multiplies.
std::pair<Buffer, Buffer> lowPrecision(DType type, const Buffer &values) {
  Buffer narrow(type, values.t().shape);
  cpu::cast(ctx(), values, narrow);
  Buffer rounded(DType::F32, values.t().shape);
  cpu::cast(ctx(), narrow, rounded);
  return {std::move(narrow), std::move(rounded)};
}

/// `x` (rank 2 or more) with its last two dims swapped, by loops.
template <typename T> Buffer swapLast2(const Buffer &x) {
  Dims shape = x.t().shape;
  const int r = shape.size;
  const int64_t rows = shape[r - 2], columns = shape[r - 1];
  std::swap(shape.values[r - 2], shape.values[r - 1]);
  Buffer y = zeros(x.t().dtype, shape);
  for (int64_t m = 0; m < x.t().numel() / (rows * columns); ++m)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < columns; ++j)
        y.data<T>()[m * rows * columns + j * rows + i] =
            x.data<T>()[m * rows * columns + i * columns + j];
  return y;
}

// A transposed operand (cleave-fold-transposes: an attention's gradient
// products) is read with its last two dims swapped: the product of the
// operands stored transposed against the loop's product of the untransposed
// ones, with a batch on both sides, a broadcast matrix on either side, both
// operands transposed, in f32, f64 and bf16 (oneDNN's bf16 products or the
// widened f32 ones).
TEST(Matmul, TransposedOperands) {
  struct Case {
    Dims a, b, out;
    bool transA, transB;
  };
  const Case cases[] = {
      {{2, 3, 8, 5}, {2, 3, 5, 6}, {2, 3, 8, 6}, true, false},
      {{2, 3, 8, 5}, {2, 3, 5, 6}, {2, 3, 8, 6}, false, true},
      {{2, 3, 8, 5}, {2, 3, 5, 6}, {2, 3, 8, 6}, true, true},
      {{4, 8, 5}, {5, 6}, {4, 8, 6}, true, false},
      {{4, 8, 5}, {5, 6}, {4, 8, 6}, false, true},
      {{8, 5}, {3, 5, 6}, {3, 8, 6}, true, true},
  };
  unsigned seed = 40;
  for (const Case &c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "transA " << c.transA << " transB " << c.transB << " out rank " << c.out.size);
    auto a = makeRandom<float>(c.a, seed++), b = makeRandom<float>(c.b, seed++);
    Buffer as = swapLast2<float>(a), bs = swapLast2<float>(b);
    auto y = zeros(DType::F32, c.out);
    cpu::matmul(ctx(), c.transA ? as : a, c.transB ? bs : b, y, c.transA, c.transB, false);
    expectNear(y, matmulByLoop<float>(a, b, c.out), 1e-5);

    auto ad = makeRandom<double>(c.a, seed++), bd = makeRandom<double>(c.b, seed++);
    Buffer ads = swapLast2<double>(ad), bds = swapLast2<double>(bd);
    auto yd = zeros(DType::F64, c.out);
    cpu::matmul(ctx(), c.transA ? ads : ad, c.transB ? bds : bd, yd, c.transA, c.transB, false);
    expectNear(yd, matmulByLoop<double>(ad, bd, c.out), 1e-12);

    auto [al, alRounded] = lowPrecision(DType::BF16, a);
    auto [bl, blRounded] = lowPrecision(DType::BF16, b);
    Buffer als = swapLast2<uint16_t>(al), bls = swapLast2<uint16_t>(bl);
    auto yl = zeros(DType::F32, c.out);
    cpu::matmul(ctx(), c.transA ? als : al, c.transB ? bls : bl, yl, c.transA, c.transB, false);
    expectNear(yl, matmulByLoop<float>(alRounded, blRounded, c.out), 1e-4);
  }
}

// Every product takes oneDNN's scratchpad from memory the run counts
// (user mode): over a batch folded into the rows, a batch of products, a
// transposed gemm with a bias, one accumulating in place and bf16 factors
// (as bf16 primitives and widened, where the CPU can do both), each on 1
// and 2 threads, the meter's peak is the largest scratchpad that
// oneDNN asks for the problems gemmProblem and matmulProblem name (what
// plan.json predicts from); the results stay the loops'. Some of them need
// one, so the count is not vacuous.
TEST(ProductPrimitives, ScratchpadsAreTheRunsCountedMemory) {
  unsigned seed = 900;
  int64_t largest = 0;
  for (bool bf16Primitives : bf16PrimitiveChoices())
    for (int threads : {1, 2}) {
      AllocationMeter meter;
      cpu::ProductPrimitives primitives, asked;
      cpu::Context context;
      context.products = &primitives;
      context.allocations = &meter;
      context.threads = threads;
      context.bf16Primitives = bf16Primitives;
      int64_t expected = 0;
      auto matmul = [&](Dims lhs, Dims rhs, Dims out) {
        auto a = makeRandom<float>(lhs, seed++);
        auto b = makeRandom<float>(rhs, seed++);
        auto y = zeros(DType::F32, out);
        cpu::matmul(context, a, b, y, false, false, false);
        expectNear(y, matmulByLoop<float>(a, b, out), 1e-4);
        expected =
            std::max(expected, asked.scratchpadBytes(cpu::matmulProblem(DType::F32, lhs, rhs, out,
                                                                        false, false, false),
                                                     threads));
      };
      matmul({8, 128, 512}, {512, 256}, {8, 128, 256});
      matmul({4, 64, 96}, {4, 96, 200}, {4, 64, 200});
      matmul({96, 4096}, {4096, 64}, {96, 64});

      auto a = makeRandom<float>(Dims{640, 96}, seed++);
      auto b = makeRandom<float>(Dims{300, 640}, seed++);
      auto bias = makeRandom<float>(Dims{300}, seed++);
      auto y = zeros(DType::F32, {96, 300});
      cpu::gemm(context, a, b, bias.ptr(), y, 1.0f, 1.0f, true, true, Activation::None, false,
                false);
      expectNear(y, gemmByLoop<float>(a, b, &bias, 1.0, 1.0, true, true), 1e-4);
      expected = std::max(expected, asked.scratchpadBytes(
                                        cpu::gemmProblem(DType::F32, DType::F32, a.t().shape,
                                                         b.t().shape, &bias.t().shape, false, 1.0f,
                                                         1.0f, true, true, Activation::None, false),
                                        threads));

      auto accumulated = makeRandom<float>(Dims{96, 300}, seed);
      auto before = makeRandom<float>(Dims{96, 300}, seed++);
      auto x = makeRandom<float>(Dims{96, 640}, seed++);
      cpu::gemm(context, x, b, accumulated.ptr(), accumulated, 1.0f, 1.0f, false, true,
                Activation::None, false, false);
      expectNear(accumulated, gemmByLoop<float>(x, b, &before, 1.0, 1.0, false, true), 1e-4);
      expected = std::max(
          expected,
          asked.scratchpadBytes(cpu::gemmProblem(DType::F32, DType::F32, x.t().shape, b.t().shape,
                                                 &accumulated.t().shape, true, 1.0f, 1.0f, false,
                                                 true, Activation::None, false),
                                threads));

      auto [lhs, lhsRounded] = lowPrecision(DType::BF16, makeRandom<float>(Dims{64, 384}, seed++));
      auto [rhs, rhsRounded] = lowPrecision(DType::BF16, makeRandom<float>(Dims{384, 128}, seed++));
      auto wide = zeros(DType::F32, {64, 128});
      cpu::matmul(context, lhs, rhs, wide, false, false, false);
      expectNear(wide, matmulByLoop<float>(lhsRounded, rhsRounded, wide.t().shape), 1e-4);
      // The last call: where it widens its factors, their copies are held
      // beside the scratchpad.
      const DType runsOn = cpu::productOperands(DType::BF16, context.bf16Primitives);
      expected = std::max(
          expected, asked.scratchpadBytes(cpu::matmulProblem(runsOn, lhs.t().shape, rhs.t().shape,
                                                             wide.t().shape, false, false, false),
                                          threads));
      if (runsOn == DType::F32)
        expected += cpu::widenedProductScratchBytes(lhs.numel(), rhs.numel(), DType::F32, 0);
      EXPECT_EQ(static_cast<int64_t>(meter.peakBytes()), expected)
          << threads << " thread(s), bf16 primitives " << bf16Primitives;
      largest = std::max(largest, expected);
    }
  EXPECT_GT(largest, 0);
}

// Products of bf16 and f16 factors give f32: the exact products of the
// rounded factors summed, as the loops compute them in double. bf16 runs
// as oneDNN's bf16 primitives where the CPU has bf16 instructions, and
// widened to f32 (Context::bf16Primitives, both here where they can; made
// per call without a ProductPrimitives, kept with one), f16 widened; the
// lit test runs this again with oneDNN held to AVX-512 without bf16, where
// bf16 can only be widened (test/runtime/cpu-kernels.test).
TEST(LowPrecisionProducts, MatmulAndGemmAgainstLoops) {
  std::printf("bf16 products by default: %s\n",
              ctx().bf16Primitives ? "bf16 primitives" : "widened");
  std::printf("bf16 instructions: %s\n", cpu::bf16Instructions() ? "yes" : "no");
  unsigned seed = 500;
  for (bool primitives : bf16PrimitiveChoices())
    for (DType type : {DType::BF16, DType::F16}) {
      cpu::ProductPrimitives kept;
      cpu::Context plain, keeping;
      keeping.products = &kept;
      keeping.threads = 2;
      plain.bf16Primitives = keeping.bf16Primitives = primitives;
      for (cpu::Context *context : {&plain, &keeping}) {
        struct Case {
          Dims a, b, out;
        } cases[] = {
            {{4, 16, 32}, {32, 8}, {4, 16, 8}},      // one rhs under a batch
            {{2, 1, 3, 4}, {5, 4, 2}, {2, 5, 3, 2}}, // broadcast batch dims
            {{64, 80}, {80, 96}, {64, 96}},
        };
        for (const Case &c : cases) {
          auto [a, aRounded] = lowPrecision(type, makeRandom<float>(c.a, seed++));
          auto [b, bRounded] = lowPrecision(type, makeRandom<float>(c.b, seed++));
          auto y = zeros(DType::F32, c.out);
          cpu::matmul(*context, a, b, y, false, false, false);
          expectNear(y, matmulByLoop<float>(aRounded, bRounded, c.out), 1e-5);
        }
        const int64_t m = 3, k = 5, n = 4;
        for (int transA = 0; transA < 2; ++transA)
          for (int transB = 0; transB < 2; ++transB) {
            auto [a, aRounded] =
                lowPrecision(type, makeRandom<float>(transA ? Dims{k, m} : Dims{m, k}, seed++));
            auto [b, bRounded] =
                lowPrecision(type, makeRandom<float>(transB ? Dims{n, k} : Dims{k, n}, seed++));
            auto bias = makeRandom<float>({n}, seed++);
            auto y = zeros(DType::F32, {m, n});
            cpu::gemm(*context, a, b, bias.ptr(), y, 0.5f, 2.0f, transA, transB, Activation::None,
                      false, false);
            expectNear(y, gemmByLoop<float>(aRounded, bRounded, &bias, 0.5, 2.0, transA, transB),
                       1e-5);
          }
      }
    }
}

// bf16 factors with a bf16 result and c (a gradient accumulator kept in
// bf16 that its product adds into, in place): the f32 sum plus c, rounded
// to nearest even once. Against the sum in double: within half a bf16 unit
// of it plus the f32 sum's own error, and equal to it rounded to nearest
// even but where that error crosses a rounding boundary (rare: truncating,
// or rounding the product before adding c, would miss in many elements).
// Twice in place, as two microbatches accumulate, and once from a
// broadcast c with alpha and beta; oneDNN's bf16 primitive and the widened
// product with its rounding (Context::bf16Primitives: both here where they
// can).
TEST(LowPrecisionProducts, Bf16ResultAddsCAndRoundsOnce) {
  unsigned seed = 700;
  int64_t checked = 0, nearest = 0;
  // `magnitude`: |a b| summed over k, of which the f32 sum's error is at
  // most k units.
  auto check = [&](const Buffer &result, const std::vector<double> &expected,
                   const std::vector<double> &magnitude, int64_t k) {
    Buffer wide(DType::F32, result.t().shape);
    cpu::cast(ctx(), result, wide);
    for (int64_t i = 0; i < result.numel(); ++i) {
      const double bound = std::ldexp(std::abs(expected[i]), -8) +
                           std::ldexp(static_cast<double>(k) * magnitude[i], -24);
      ASSERT_LE(std::abs(wide.data<float>()[i] - expected[i]), bound) << "element " << i;
      nearest +=
          toBFloat16(static_cast<float>(expected[i])).bits == result.data<BFloat16>()[i].bits;
      ++checked;
    }
  };
  for (bool primitives : bf16PrimitiveChoices()) {
    cpu::ProductPrimitives kept;
    cpu::Context plain, keeping;
    keeping.products = &kept;
    keeping.threads = 2;
    plain.bf16Primitives = keeping.bf16Primitives = primitives;
    for (cpu::Context *context : {&plain, &keeping})
      for (int transA = 0; transA < 2; ++transA)
        for (int transB = 0; transB < 2; ++transB) {
          const int64_t m = 96, k = 200, n = 72;
          auto [a, aRounded] = lowPrecision(
              DType::BF16, makeRandom<float>(transA ? Dims{k, m} : Dims{m, k}, seed++));
          auto [b, bRounded] = lowPrecision(
              DType::BF16, makeRandom<float>(transB ? Dims{n, k} : Dims{k, n}, seed++));
          std::vector<double> magnitude(m * n);
          for (int64_t i = 0; i < m * n; ++i)
            for (int64_t p = 0; p < k; ++p)
              magnitude[i] +=
                  std::abs(double(aRounded.data<float>()[transA ? p * m + i / n : i / n * k + p]) *
                           double(bRounded.data<float>()[transB ? i % n * k + p : p * n + i % n]));
          auto [accumulator, unused] = lowPrecision(DType::BF16, makeRandom<float>({m, n}, seed++));
          for (int microbatch = 0; microbatch < 2; ++microbatch) {
            Buffer before(DType::F32, {m, n});
            cpu::cast(ctx(), accumulator, before);
            cpu::gemm(*context, a, b, accumulator.ptr(), accumulator, 1.0f, 1.0f, transA, transB,
                      Activation::None, false, false);
            check(accumulator,
                  gemmByLoop<float>(aRounded, bRounded, &before, 1.0, 1.0, transA, transB),
                  magnitude, k);
          }
          auto [row, rowWide] = lowPrecision(DType::BF16, makeRandom<float>({n}, seed++));
          auto result = zeros(DType::BF16, {m, n});
          cpu::gemm(*context, a, b, row.ptr(), result, 0.5f, 2.0f, transA, transB, Activation::None,
                    false, false);
          // alpha halves the products' sum and its error bound.
          check(result, gemmByLoop<float>(aRounded, bRounded, &rowWide, 0.5, 2.0, transA, transB),
                magnitude, k);
        }
  }
  EXPECT_GE(nearest, checked * 99 / 100) << nearest << " of " << checked;
}

TEST(LowPrecisionConv, BadCallsFail) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // bf16 factors give f32; f16 ones no kernel takes (autocast rounds them to
  // f16 and keeps them f32); oneDNN takes no more than 3 spatial dims.
  Buffer x(DType::BF16, {1, 1, 3, 3}), w(DType::BF16, {1, 1, 1, 1}), y(DType::BF16, {1, 1, 3, 3});
  EXPECT_EXIT(
      cpu::conv(ctx(), x, w, nullptr, y, Dims{}, Dims{}, Dims{}, 1, Activation::None, false),
      ::testing::ExitedWithCode(3), "kernel conv: .*bf16");
  Buffer x16(DType::F16, {1, 1, 3, 3}), w16(DType::F16, {1, 1, 1, 1}),
      y32(DType::F32, {1, 1, 3, 3});
  EXPECT_EXIT(
      cpu::conv(ctx(), x16, w16, nullptr, y32, Dims{}, Dims{}, Dims{}, 1, Activation::None, false),
      ::testing::ExitedWithCode(3), "kernel conv: .*f16");
  Buffer x4(DType::BF16, {1, 1, 2, 2, 2, 2}), w4(DType::BF16, {1, 1, 1, 1, 1, 1}),
      y4(DType::F32, {1, 1, 2, 2, 2, 2});
  EXPECT_EXIT(
      cpu::conv(ctx(), x4, w4, nullptr, y4, Dims{}, Dims{}, Dims{}, 1, Activation::None, false),
      ::testing::ExitedWithCode(3), "kernel conv: oneDNN does not take this convolution");
}

// A matmul writes f32; a gemm of bf16 factors writes f32 or bf16 (then
// without an activation).
TEST(LowPrecisionProducts, ResultMustBeF32) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Buffer a(DType::BF16, {2, 2}), b(DType::BF16, {2, 2}), y(DType::BF16, {2, 2});
  EXPECT_EXIT(cpu::matmul(ctx(), a, b, y, false, false, false), ::testing::ExitedWithCode(3),
              "kernel matmul: .*bf16");
  EXPECT_EXIT(
      cpu::gemm(ctx(), a, b, nullptr, y, 1.0f, 0.0f, false, false, Activation::Relu, false, false),
      ::testing::ExitedWithCode(3), "kernel gemm: a bf16 result takes no activation");
  Buffer h(DType::F16, {2, 2}), y32(DType::F32, {2, 2});
  EXPECT_EXIT(cpu::gemm(ctx(), a, h, nullptr, y32, 1.0f, 0.0f, false, false, Activation::None,
                        false, false),
              ::testing::ExitedWithCode(3), "kernel gemm: .*f16");
}

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

struct ConvCase {
  Dims x, w; // N x C x spatial, M x C/group x kernel
  Dims strides, pads, dilations;
  int64_t group;
  bool bias;
};

Dims convOutShape(const ConvCase &c) {
  int sp = c.x.size - 2;
  Dims out = {c.x[0], c.w[0]};
  for (int d = 0; d < sp; ++d) {
    int64_t s = c.strides.size ? c.strides[d] : 1, dil = c.dilations.size ? c.dilations[d] : 1;
    int64_t pb = c.pads.size ? c.pads[d] : 0, pe = c.pads.size ? c.pads[d + sp] : 0;
    out.values[out.size++] = (c.x[d + 2] + pb + pe - dil * (c.w[d + 2] - 1) - 1) / s + 1;
  }
  return out;
}

/// Visits every (input element, weight, output element) triple a direct
/// convolution multiplies, by nested loops over images, output channels,
/// output positions, input channels of the group and kernel offsets (up to
/// three spatial dims): f(x index, w index, y index). The forward adds
/// x * w to y; its adjoints add dy * w to dx and dy * x to dw.
template <typename F> void forEachConvTerm(const ConvCase &c, F &&f) {
  int sp = c.x.size - 2;
  Dims out = convOutShape(c);
  int64_t S[3] = {1, 1, 1}, K[3] = {1, 1, 1}, O[3] = {1, 1, 1}, st[3] = {1, 1, 1},
          dl[3] = {1, 1, 1}, pb[3] = {0, 0, 0};
  for (int d = 0; d < sp; ++d) {
    int e = 3 - sp + d;
    S[e] = c.x[d + 2];
    K[e] = c.w[d + 2];
    O[e] = out[d + 2];
    st[e] = c.strides.size ? c.strides[d] : 1;
    dl[e] = c.dilations.size ? c.dilations[d] : 1;
    pb[e] = c.pads.size ? c.pads[d] : 0;
  }
  int64_t n = c.x[0], ch = c.x[1], m = c.w[0], cg = c.w[1], mg = m / c.group;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t oc = 0; oc < m; ++oc)
      for (int64_t o0 = 0; o0 < O[0]; ++o0)
        for (int64_t o1 = 0; o1 < O[1]; ++o1)
          for (int64_t o2 = 0; o2 < O[2]; ++o2)
            for (int64_t ic = 0; ic < cg; ++ic)
              for (int64_t k0 = 0; k0 < K[0]; ++k0)
                for (int64_t k1 = 0; k1 < K[1]; ++k1)
                  for (int64_t k2 = 0; k2 < K[2]; ++k2) {
                    int64_t p0 = o0 * st[0] - pb[0] + k0 * dl[0];
                    int64_t p1 = o1 * st[1] - pb[1] + k1 * dl[1];
                    int64_t p2 = o2 * st[2] - pb[2] + k2 * dl[2];
                    if (p0 < 0 || p0 >= S[0] || p1 < 0 || p1 >= S[1] || p2 < 0 || p2 >= S[2])
                      continue;
                    int64_t xc = oc / mg * cg + ic;
                    f((((i * ch + xc) * S[0] + p0) * S[1] + p1) * S[2] + p2,
                      (((oc * cg + ic) * K[0] + k0) * K[1] + k1) * K[2] + k2,
                      (((i * m + oc) * O[0] + o0) * O[1] + o1) * O[2] + o2);
                  }
}

/// Direct convolution by definition, in double, up to three spatial dims.
template <typename T>
std::vector<double> convByDefinition(const ConvCase &c, const Buffer &x, const Buffer &w,
                                     const Buffer *b) {
  Dims out = convOutShape(c);
  int64_t maps = out[1], positions = 1;
  for (int d = 2; d < out.size; ++d)
    positions *= out[d];
  std::vector<double> y(static_cast<std::size_t>(out.product()));
  for (std::size_t yi = 0; yi < y.size(); ++yi)
    y[yi] = b ? double(b->data<T>()[static_cast<int64_t>(yi) / positions % maps]) : 0.0;
  const T *xs = x.data<T>(), *ws = w.data<T>();
  forEachConvTerm(c, [&](int64_t xi, int64_t wi, int64_t yi) {
    y[static_cast<std::size_t>(yi)] += double(xs[xi]) * double(ws[wi]);
  });
  return y;
}

/// max(0, each value): a convolution with its ReLU fused (cleave-fuse-activations).
std::vector<double> relu(std::vector<double> values) {
  for (double &value : values)
    value = std::max(value, 0.0);
  return values;
}

template <typename T> void checkConv(const ConvCase &c, unsigned seed, double tol) {
  auto x = makeRandom<T>(c.x, seed);
  auto w = makeRandom<T>(c.w, seed + 1);
  auto b = makeRandom<T>({c.w[0]}, seed + 2);
  Dims outShape = convOutShape(c);
  auto y = zeros(dtypeOf<T>(), outShape);
  std::vector<double> expected = convByDefinition<T>(c, x, w, c.bias ? &b : nullptr);
  cpu::conv(ctx(), x, w, c.bias ? b.ptr() : nullptr, y, c.strides, c.pads, c.dilations, c.group,
            Activation::None, false);
  expectNear(y, expected, tol);
  cpu::conv(ctx(), x, w, c.bias ? b.ptr() : nullptr, y, c.strides, c.pads, c.dilations, c.group,
            Activation::Relu, false);
  expectNear(y, relu(expected), tol);
}

TEST(Conv, OnnxExampleWithPadding) {
  // ONNX Conv example: 5 x 5 input 0..24, 3 x 3 kernel of ones, pads 1.
  std::vector<float> xs;
  for (int i = 0; i < 25; ++i)
    xs.push_back(float(i));
  auto x = make<float>({1, 1, 5, 5}, xs);
  auto w = make<float>({1, 1, 3, 3}, std::vector<float>(9, 1.0f));
  auto y = zeros(DType::F32, {1, 1, 5, 5});
  cpu::conv(ctx(), x, w, nullptr, y, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, Activation::None, false);
  expectNear(y, {12, 21, 27, 33, 24, 33, 54, 63, 72, 51, 63, 99, 108, 117, 81,
                 93, 144, 153, 162, 111, 72, 111, 117, 123, 84});
  auto y2 = zeros(DType::F32, {1, 1, 3, 3});
  cpu::conv(ctx(), x, w, nullptr, y2, Dims{}, Dims{}, Dims{}, 1, Activation::None,
            false); // defaults
  expectNear(y2, {54, 63, 72, 99, 108, 117, 144, 153, 162});
}

TEST(Conv, AgainstDirectConvolution) {
  const ConvCase cases[] = {
      // Grouped, strided, dilated, asymmetric pads, bias.
      {{2, 4, 9, 11}, {6, 2, 3, 2}, {2, 3}, {1, 0, 2, 1}, {2, 1}, 2, true},
      // Depthwise.
      {{1, 3, 7, 7}, {3, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 3, true},
      // 1-D.
      {{1, 3, 10}, {2, 3, 4}, {2}, {1, 2}, {2}, 1, false},
      // 3-D.
      {{1, 2, 4, 5, 6}, {3, 2, 2, 3, 2}, {1, 2, 1}, {0, 1, 1, 1, 0, 0}, {2, 1, 2}, 1, true},
      // Pointwise (no im2col), grouped.
      {{2, 4, 3, 5}, {6, 2, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 2, true},
      // 1x1 with stride (im2col path).
      {{1, 2, 5, 5}, {3, 2, 1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, false},
      // Kernel wider than the padded row on one side.
      {{1, 1, 3, 4}, {1, 1, 3, 3}, {1, 1}, {2, 3, 2, 3}, {1, 2}, 1, true},
  };
  unsigned seed = 1000;
  for (const ConvCase &c : cases) {
    checkConv<float>(c, seed, 1e-5);
    checkConv<double>(c, seed, 1e-12);
    seed += 3;
  }
}

TEST(Conv, ManyTiles) {
  // 64 channels x 5 x 5 taps x 128 columns exceed one scratch tile per row
  // group: the unrolling runs in many tiles.
  checkConv<float>({{1, 64, 40, 128}, {2, 64, 5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 1, true}, 7,
                   1e-4);
}

TEST(Conv, OneDnnTakesTheF32Cases) {
  // The f32 cases above run as oneDNN primitives (ConvPrimitives.h), so
  // AgainstDirectConvolution and ConvGrad.AgainstDirectLoops check them; the
  // f64 ones run the im2col kernels.
  const ConvCase cases[] = {
      {{2, 4, 9, 11}, {6, 2, 3, 2}, {2, 3}, {1, 0, 2, 1}, {2, 1}, 2, true},
      {{1, 3, 10}, {2, 3, 4}, {2}, {1, 2}, {2}, 1, false},
      {{1, 2, 4, 5, 6}, {3, 2, 2, 3, 2}, {1, 2, 1}, {0, 1, 1, 1, 0, 0}, {2, 1, 2}, 1, true},
      {{1, 1, 3, 4}, {1, 1, 3, 3}, {1, 1}, {2, 3, 2, 3}, {1, 2}, 1, true},
  };
  for (const ConvCase &c : cases)
    for (cpu::ConvPass pass :
         {cpu::ConvPass::Forward, cpu::ConvPass::GradInput, cpu::ConvPass::GradWeight})
      EXPECT_NE(
          cpu::ConvPrimitive::create(cpu::convProblem(pass, c.x, c.w, convOutShape(c), c.strides,
                                                      c.pads, c.dilations, c.group,
                                                      c.bias && pass == cpu::ConvPass::Forward),
                                     1),
          nullptr);
}

TEST(Conv, PrimitivesKeptForTheRun) {
  // A context whose convolutions keep their primitives and workspace
  // computes what one that makes them per call computes, bit for bit; the
  // workspace is counted once, at the largest call's scratch.
  const ConvCase big{{2, 32, 12, 12}, {16, 32, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true};
  const ConvCase small{{1, 16, 5, 5}, {16, 16, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, false};
  AllocationMeter meter;
  cpu::ConvPrimitives kept;
  cpu::Context keeping;
  keeping.convolutions = &kept;
  keeping.allocations = &meter;
  int64_t largest = 0;
  for (const ConvCase *c : {&big, &small, &big}) {
    auto x = makeRandom<float>(c->x, 11);
    auto w = makeRandom<float>(c->w, 12);
    auto b = makeRandom<float>({c->w[0]}, 13);
    auto y = zeros(DType::F32, convOutShape(*c));
    auto yKept = zeros(DType::F32, convOutShape(*c));
    const Tensor *bias = c->bias ? b.ptr() : nullptr;
    cpu::conv(ctx(), x, w, bias, y, c->strides, c->pads, c->dilations, c->group, Activation::None,
              false);
    cpu::conv(keeping, x, w, bias, yKept, c->strides, c->pads, c->dilations, c->group,
              Activation::None, false);
    expectEqual<float>(yKept, y.values<float>());
    auto dx = zeros(DType::F32, c->x);
    auto dxKept = zeros(DType::F32, c->x);
    cpu::conv_grad_input(ctx(), y, w, dx, c->strides, c->pads, c->dilations, c->group);
    cpu::conv_grad_input(keeping, y, w, dxKept, c->strides, c->pads, c->dilations, c->group);
    expectEqual<float>(dxKept, dx.values<float>());
    for (cpu::ConvPass pass : {cpu::ConvPass::Forward, cpu::ConvPass::GradInput})
      largest = std::max(largest, cpu::ConvPrimitive::create(
                                      cpu::convProblem(pass, c->x, c->w, convOutShape(*c),
                                                       c->strides, c->pads, c->dilations, c->group,
                                                       c->bias && pass == cpu::ConvPass::Forward),
                                      1)
                                      ->scratchBytes());
  }
  EXPECT_GT(largest, 0);
  EXPECT_EQ(meter.peakBytes(), static_cast<std::size_t>(largest));
  const cpu::ConvProblem problem =
      cpu::convProblem(cpu::ConvPass::Forward, big.x, big.w, convOutShape(big), big.strides,
                       big.pads, big.dilations, big.group, true);
  EXPECT_EQ(kept.find(problem, 1), kept.find(problem, 1));
  EXPECT_NE(kept.find(problem, 1), kept.find(problem, 2));
}

// Constant weights (cleave-constant-weights) are read from a copy in
// oneDNN's layout, made on the first call and kept: a 3 x 3 convolution with
// a bias and a grouped one with a fused ReLU give the same results, bit for
// bit, as with the weights reordered every call, and the definition's in
// double; the copy, counted once over two calls, is the bytes
// packedWeightBytes() says (what plan.json predicts), and leaves the
// scratch: the two sizes add up to the reordering primitive's scratch.
TEST(Conv, ConstantWeightsReadFromAKeptCopy) {
  ConvCase wide{{2, 32, 9, 9}, {64, 32, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true};
  ConvCase grouped{{1, 32, 8, 8}, {32, 8, 3, 3}, {2, 2}, {0, 0, 1, 1}, {1, 1}, 4, false};
  for (const ConvCase *c : {&wide, &grouped}) {
    const Activation activation = c->bias ? Activation::None : Activation::Relu;
    auto problem = [&](bool constant) {
      return cpu::convProblem(cpu::ConvPass::Forward, c->x, c->w, convOutShape(*c), c->strides,
                              c->pads, c->dilations, c->group, c->bias, DType::F32, activation,
                              constant);
    };
    auto reordering = cpu::ConvPrimitive::create(problem(false), 1);
    auto keeping = cpu::ConvPrimitive::create(problem(true), 1);
    const int64_t packed = keeping->packedWeightBytes();
    EXPECT_GT(packed, 0);
    EXPECT_EQ(reordering->packedWeightBytes(), 0);
    EXPECT_EQ(keeping->scratchBytes() + packed, reordering->scratchBytes());

    AllocationMeter meter;
    cpu::ConvPrimitives kept;
    cpu::Context keepingContext;
    keepingContext.convolutions = &kept;
    keepingContext.allocations = &meter;
    auto x = makeRandom<float>(c->x, 21);
    auto w = makeRandom<float>(c->w, 22);
    auto b = makeRandom<float>({c->w[0]}, 23);
    const Tensor *bias = c->bias ? b.ptr() : nullptr;
    std::vector<double> expected = convByDefinition<float>(*c, x, w, c->bias ? &b : nullptr);
    if (activation == Activation::Relu)
      expected = relu(expected);
    auto reordered = zeros(DType::F32, convOutShape(*c));
    cpu::conv(ctx(), x, w, bias, reordered, c->strides, c->pads, c->dilations, c->group, activation,
              false);
    for (int call = 0; call < 2; ++call) {
      auto y = zeros(DType::F32, convOutShape(*c));
      cpu::conv(keepingContext, x, w, bias, y, c->strides, c->pads, c->dilations, c->group,
                activation, true);
      expectEqual<float>(y, reordered.values<float>());
      expectNear(y, expected, 1e-4);
    }
    EXPECT_EQ(static_cast<int64_t>(meter.peakBytes()), packed + keeping->scratchBytes());
  }
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

TEST(Pool, OnnxCeilModeExamples) {
  // ONNX maxpool_2d_ceil / averagepool_2d_ceil: 4 x 4 input 1..16, kernel 3,
  // strides 2, ceil_mode -> [[11, 12], [15, 16]] and [[6, 7.5], [12, 13.5]].
  std::vector<float> xs;
  for (int i = 1; i <= 16; ++i)
    xs.push_back(float(i));
  auto x = make<float>({1, 1, 4, 4}, xs);
  auto y = zeros(DType::F32, {1, 1, 2, 2});
  cpu::max_pool(ctx(), x, y, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1});
  expectNear(y, {11, 12, 15, 16});
  cpu::average_pool(ctx(), x, y, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false);
  expectNear(y, {6, 7.5, 12, 13.5});
}

TEST(Pool, OnnxLastWindowStartsOnPad) {
  // ONNX test averagepool_2d_ceil_last_window_starts_on_pad: 2 x 2 input,
  // kernel 3, strides 3, pads 1, ceil_mode, count_include_pad -> sum / 9.
  auto x = make<float>({1, 3, 2, 2}, {0.8580f, 0.0786f, 0.2692f, 0.1537f, 0.8816f, 0.4353f,
                                      0.5772f, 0.6623f, 0.9067f, 0.9483f, 0.5970f, 0.7630f});
  auto y = zeros(DType::F32, {1, 3, 1, 1});
  cpu::average_pool(ctx(), x, y, {3, 3}, {3, 3}, {1, 1, 1, 1}, Dims{}, true);
  expectNear(y, {0.1511, 0.2841, 0.3572}, 1e-4);
}

TEST(Pool, OnnxReference) {
  // /work/main/.venv/bin/python runtime/cpu/KernelsTestReference.py pools
  // With ceil mode, a window may run past the end pads: count_include_pad
  // divides by the positions inside the padded input only. ONNX's reference
  // and torch.nn.functional.avg_pool2d(x, 3, 2, 1, ceil_mode=True,
  // count_include_pad=True) give these numbers; onnxruntime 1.22 differs
  // (opset 11 divides by the whole kernel, opset 19 leaves out end pads).
  auto x = make<float>({1, 1, 6, 6}, {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12,
                                      13, 14, 15, -4, 17, 18, 19, 20, 21, 22, 23, 24,
                                      25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36});
  auto y = zeros(DType::F32, {1, 1, 4, 4});
  cpu::average_pool(ctx(), x, y, {3, 3}, {2, 2}, {1, 1, 1, 1}, Dims{}, false);
  expectNear(y, {4.5, 6, 8, 9, 13.5, 12.7777777, 14.7777777, 18, 25.5, 27, 29, 30, 31.5, 33, 35,
                 36});
  cpu::average_pool(ctx(), x, y, {3, 3}, {2, 2}, {1, 1, 1, 1}, Dims{}, true);
  expectNear(y, {2, 4, 5.33333349, 3, 9, 12.7777777, 14.7777777, 9, 17, 27, 29, 15, 10.5, 16.5,
                 17.5, 9});
  auto y2 = zeros(DType::F32, {1, 1, 3, 2});
  cpu::average_pool(ctx(), x, y2, {2, 2}, {2, 3}, {1, 0, 0, 1}, {2, 2}, true);
  expectNear(y2, {4, 5.5, 14, 17, 26, 29});
  auto y3 = zeros(DType::F32, {1, 1, 3, 3});
  cpu::max_pool(ctx(), x, y3, {3, 2}, {2, 2}, {1, 0, 0, 1}, {1, 2});
  expectNear(y3, {9, 11, 11, 21, 23, 23, 33, 35, 35});

  auto x1 = make<float>({1, 1, 7}, {3, -1, 4, 1, -5, 9, 2});
  auto y1 = zeros(DType::F32, {1, 1, 4});
  cpu::max_pool(ctx(), x1, y1, {2}, {2}, Dims{}, Dims{});
  expectNear(y1, {3, 4, 9, 2});

  std::vector<float> x3v;
  for (int i = 0; i < 54; ++i)
    x3v.push_back(0.5f * float(i));
  auto x3 = make<float>({1, 2, 3, 3, 3}, x3v);
  auto y3d = zeros(DType::F32, {1, 2, 2, 2, 2});
  cpu::average_pool(ctx(), x3, y3d, {2, 2, 2}, {2, 2, 2}, {1, 0, 1, 0, 1, 0}, Dims{}, false);
  expectNear(y3d, {0.75, 1.5, 3, 3.75, 7.5, 8.25, 9.75, 10.5, 14.25, 15, 16.5, 17.25, 21, 21.75,
                   23.25, 24});
}

TEST(Pool, OtherTypes) {
  auto x = make<double>({1, 2, 2, 2}, {1, 2, 3, 4, -1, -2, -3, -4});
  auto y = zeros(DType::F64, {1, 2, 1, 1});
  cpu::max_pool(ctx(), x, y, {2, 2}, Dims{}, Dims{}, Dims{});
  expectNear(y, {4, -1});
  cpu::average_pool(ctx(), x, y, {2, 2}, Dims{}, Dims{}, Dims{}, false);
  expectNear(y, {2.5, -2.5});
  auto xi = make<uint8_t>({1, 1, 3}, {5, 200, 7});
  auto yi = zeros(DType::U8, {1, 1, 2});
  cpu::max_pool(ctx(), xi, yi, {2}, {1}, Dims{}, Dims{});
  expectEqual<uint8_t>(yi, {200, 200});
  // A padded window of nothing but the lowest value keeps it.
  auto xs = make<int16_t>({1, 1, 3}, {-32768, -5, 9});
  auto ys = zeros(DType::I16, {1, 1, 2});
  cpu::max_pool(ctx(), xs, ys, {2}, {2}, {1, 0}, Dims{});
  expectEqual<int16_t>(ys, {-32768, 9});
}

TEST(Pool, GlobalAverage) {
  auto x = make<float>({1, 3, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8, -1, -1, -1, 3});
  auto y = zeros(DType::F32, {1, 3, 1, 1});
  cpu::global_average_pool(ctx(), x, y);
  expectNear(y, {2.5, 6.5, 0});
  auto xd = make<double>({2, 1, 3}, {1, 2, 6, 0, 0, 1.5});
  auto yd = zeros(DType::F64, {2, 1, 1});
  cpu::global_average_pool(ctx(), xd, yd);
  expectNear(yd, {3, 0.5}, 1e-15);
}

//===----------------------------------------------------------------------===//
// Adjoints of convolution and pooling
//===----------------------------------------------------------------------===//

/// Each element within `tol` times the sum of the magnitudes of the terms
/// it adds (at least 1): the scale of a float sum's rounding error, which
/// does not shrink when the terms cancel.
inline void expectNearSum(const Buffer &actual, const std::vector<double> &expected,
                          const std::vector<double> &magnitudes, double tol) {
  std::vector<double> got = actual.doubles();
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], expected[i], tol * std::max(1.0, magnitudes[i])) << "at " << i;
}

/// The adjoints by definition, in double: x's and w's gradients, and the
/// sums of the magnitudes of their terms (expectNearSum).
struct ConvGradsByDefinition {
  std::vector<double> dx, dw, dxMagnitudes, dwMagnitudes;
};

template <typename T>
ConvGradsByDefinition convGradsByDefinition(const ConvCase &c, const Buffer &x, const Buffer &w,
                                            const Buffer &dy) {
  ConvGradsByDefinition e{std::vector<double>(static_cast<std::size_t>(x.numel())),
                          std::vector<double>(static_cast<std::size_t>(w.numel())),
                          {},
                          {}};
  e.dxMagnitudes.resize(e.dx.size());
  e.dwMagnitudes.resize(e.dw.size());
  const T *xs = x.template data<T>(), *ws = w.template data<T>(), *gs = dy.template data<T>();
  forEachConvTerm(c, [&](int64_t xi, int64_t wi, int64_t yi) {
    e.dx[xi] += double(gs[yi]) * double(ws[wi]);
    e.dw[wi] += double(gs[yi]) * double(xs[xi]);
    e.dxMagnitudes[xi] += std::abs(double(gs[yi]) * double(ws[wi]));
    e.dwMagnitudes[wi] += std::abs(double(gs[yi]) * double(xs[xi]));
  });
  return e;
}

template <typename T> void checkConvGrads(const ConvCase &c, unsigned seed, double tol) {
  auto x = makeRandom<T>(c.x, seed);
  auto w = makeRandom<T>(c.w, seed + 1);
  Dims outShape = convOutShape(c);
  auto dy = makeRandom<T>(outShape, seed + 2);
  auto dx = makeRandom<T>(c.x, seed + 3); // overwritten
  auto dw = makeRandom<T>(c.w, seed + 4);
  cpu::conv_grad_input(ctx(), dy, w, dx, c.strides, c.pads, c.dilations, c.group);
  cpu::conv_grad_weight(ctx(), dy, x, dw, c.strides, c.pads, c.dilations, c.group);
  ConvGradsByDefinition e = convGradsByDefinition<T>(c, x, w, dy);
  expectNearSum(dx, e.dx, e.dxMagnitudes, tol);
  expectNearSum(dw, e.dw, e.dwMagnitudes, tol);
}

TEST(ConvGrad, HandWorked1d) {
  // x = [1, 2, 3, 4], w = [1, 10], pads 1, stride 2: the windows read
  // (pad, x0), (x1, x2), (x3, pad), so y = [10 x0, x1 + 10 x2, x3].
  // With dy = [1, 2, 3]: dx = [10 dy0, dy1, 10 dy1, dy2] = [10, 2, 20, 3],
  // dw = [dy1 x1 + dy2 x3, dy0 x0 + dy1 x2] = [16, 7].
  auto x = make<float>({1, 1, 4}, {1, 2, 3, 4});
  auto w = make<float>({1, 1, 2}, {1, 10});
  auto dy = make<float>({1, 1, 3}, {1, 2, 3});
  auto y = zeros(DType::F32, {1, 1, 3});
  cpu::conv(ctx(), x, w, nullptr, y, {2}, {1, 1}, {1}, 1, Activation::None, false);
  expectNear(y, {10, 32, 4});
  auto dx = zeros(DType::F32, {1, 1, 4});
  auto dw = zeros(DType::F32, {1, 1, 2});
  cpu::conv_grad_input(ctx(), dy, w, dx, {2}, {1, 1}, {1}, 1);
  cpu::conv_grad_weight(ctx(), dy, x, dw, {2}, {1, 1}, {1}, 1);
  expectNear(dx, {10, 2, 20, 3});
  expectNear(dw, {16, 7});
  // Defaults (stride 1, no pads): windows (x0, x1), (x1, x2), (x2, x3).
  auto dy2 = make<double>({1, 1, 3}, {1, -1, 2});
  auto xd = make<double>({1, 1, 4}, {1, 2, 3, 4});
  auto wd = make<double>({1, 1, 2}, {1, 10});
  auto dx2 = zeros(DType::F64, {1, 1, 4});
  auto dw2 = zeros(DType::F64, {1, 1, 2});
  cpu::conv_grad_input(ctx(), dy2, wd, dx2, Dims{}, Dims{}, Dims{}, 1);
  cpu::conv_grad_weight(ctx(), dy2, xd, dw2, Dims{}, Dims{}, Dims{}, 1);
  expectNear(dx2, {1, 10 - 1, -10 + 2, 20}, 1e-15);
  expectNear(dw2, {1 - 2 + 6, 2 - 3 + 8}, 1e-15);
}

const ConvCase kGradCases[] = {
    // Grouped, strided, dilated, asymmetric pads.
    {{2, 4, 9, 11}, {6, 2, 3, 2}, {2, 3}, {1, 0, 2, 1}, {2, 1}, 2, false},
    // Depthwise.
    {{1, 3, 7, 7}, {3, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 3, false},
    // 1-D; stride 3 leaves the last input element unread.
    {{2, 3, 10}, {2, 3, 4}, {2}, {1, 2}, {2}, 1, false},
    {{1, 2, 8}, {2, 2, 2}, {3}, {0, 0}, {1}, 1, false},
    // 3-D.
    {{1, 2, 4, 5, 6}, {3, 2, 2, 3, 2}, {1, 2, 1}, {0, 1, 1, 1, 0, 0}, {2, 1, 2}, 1, false},
    // Pointwise (no im2col), grouped, several images.
    {{3, 4, 3, 5}, {6, 2, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 2, false},
    // 1x1 with stride (im2col path).
    {{1, 2, 5, 5}, {3, 2, 1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, false},
    // Kernel wider than the padded row on one side.
    {{1, 1, 3, 4}, {1, 1, 3, 3}, {1, 1}, {2, 3, 2, 3}, {1, 2}, 1, false},
};

TEST(ConvGrad, AgainstDirectLoops) {
  unsigned seed = 2000;
  for (const ConvCase &c : kGradCases) {
    checkConvGrads<float>(c, seed, 1e-5);
    checkConvGrads<double>(c, seed, 1e-12);
    seed += 5;
  }
}

TEST(ConvGrad, ManyTiles) {
  // As Conv.ManyTiles: the unrolling runs in many tiles, which conv_grad_input
  // folds back and conv_grad_weight accumulates.
  // A weight's gradient sums 10,240 products: float32's rounding (about
  // 6e-8 of the terms' magnitudes each) piles up past 1e-4 where they cancel.
  checkConvGrads<float>({{2, 64, 40, 128}, {2, 64, 5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 1, false},
                        9, 1e-6);
}

// Convolutions of bf16 factors (--precision bf16) and their adjoints give
// f32: the exact products of the rounded factors summed, as the loops
// compute them in double. oneDNN's bf16 primitives compute them where the
// CPU has bf16 instructions, and its f32 ones on the factors widened
// (Context::bf16Primitives, both here where they can; the lit test runs
// this again with oneDNN held below them: test/runtime/cpu-kernels.test),
// each call made alone and with the run's primitives kept, whose
// workspace then peaks at the largest call's scratch as the compiler
// predicts it: the widened factors' copies and the primitive's.
TEST(LowPrecisionConv, AgainstDirectLoops) {
  const ConvCase cases[] = {
      {{2, 4, 9, 11}, {6, 2, 3, 2}, {2, 3}, {1, 0, 2, 1}, {2, 1}, 2, true},
      {{1, 3, 7, 7}, {3, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 3, false},
      {{2, 3, 10}, {2, 3, 4}, {2}, {1, 2}, {2}, 1, true},
      {{1, 2, 4, 5, 6}, {3, 2, 2, 3, 2}, {1, 2, 1}, {0, 1, 1, 1, 0, 0}, {2, 1, 2}, 1, false},
      {{3, 16, 8, 8}, {32, 16, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
  };
  unsigned seed = 4000;
  for (bool primitives : bf16PrimitiveChoices()) {
    AllocationMeter meter;
    cpu::ConvPrimitives kept;
    cpu::Context plain, keeping;
    keeping.convolutions = &kept;
    keeping.allocations = &meter;
    plain.bf16Primitives = keeping.bf16Primitives = primitives;
    int64_t largest = 0;
    for (const ConvCase &c : cases) {
      const Dims outShape = convOutShape(c);
      auto [x, xRounded] = lowPrecision(DType::BF16, makeRandom<float>(c.x, seed++));
      auto [w, wRounded] = lowPrecision(DType::BF16, makeRandom<float>(c.w, seed++));
      auto [dy, dyRounded] = lowPrecision(DType::BF16, makeRandom<float>(outShape, seed++));
      auto b = makeRandom<float>({c.w[0]}, seed++);
      std::vector<double> expected =
          convByDefinition<float>(c, xRounded, wRounded, c.bias ? &b : nullptr);
      ConvGradsByDefinition e = convGradsByDefinition<float>(c, xRounded, wRounded, dyRounded);
      for (cpu::Context *context : {&plain, &keeping}) {
        auto y = zeros(DType::F32, outShape), dx = zeros(DType::F32, c.x),
             dw = zeros(DType::F32, c.w);
        cpu::conv(*context, x, w, c.bias ? b.ptr() : nullptr, y, c.strides, c.pads, c.dilations,
                  c.group, Activation::None, false);
        expectNear(y, expected, 1e-5);
        cpu::conv(*context, x, w, c.bias ? b.ptr() : nullptr, y, c.strides, c.pads, c.dilations,
                  c.group, Activation::Relu, false);
        expectNear(y, relu(expected), 1e-5);
        cpu::conv_grad_input(*context, dy, w, dx, c.strides, c.pads, c.dilations, c.group);
        cpu::conv_grad_weight(*context, dy, x, dw, c.strides, c.pads, c.dilations, c.group);
        expectNearSum(dx, e.dx, e.dxMagnitudes, 1e-5);
        expectNearSum(dw, e.dw, e.dwMagnitudes, 1e-5);
      }
      for (cpu::ConvPass pass :
           {cpu::ConvPass::Forward, cpu::ConvPass::GradInput, cpu::ConvPass::GradWeight}) {
        const cpu::ConvProblem problem =
            cpu::convProblem(pass, c.x, c.w, outShape, c.strides, c.pads, c.dilations, c.group,
                             c.bias && pass == cpu::ConvPass::Forward, DType::BF16);
        const cpu::ConvProblem runs = cpu::primitiveProblem(problem, primitives);
        EXPECT_EQ(runs.factors, primitives ? DType::BF16 : DType::F32);
        largest = std::max(largest, cpu::widenedFactors(problem, runs).bytes +
                                        kept.find(runs, 1)->scratchBytes());
      }
    }
    EXPECT_EQ(static_cast<int64_t>(meter.peakBytes()), largest) << "bf16 primitives " << primitives;
  }
}

TEST(ConvGrad, AdjointIdentities) {
  // <conv(x, w), dy> = <x, conv_grad_input(dy, w)> = <w, conv_grad_weight(dy, x)>.
  unsigned seed = 3000;
  for (const ConvCase &c : kGradCases) {
    auto x = makeRandom<double>(c.x, seed);
    auto w = makeRandom<double>(c.w, seed + 1);
    Dims outShape = convOutShape(c);
    auto dy = makeRandom<double>(outShape, seed + 2);
    auto y = zeros(DType::F64, outShape);
    auto dx = zeros(DType::F64, c.x);
    auto dw = zeros(DType::F64, c.w);
    cpu::conv(ctx(), x, w, nullptr, y, c.strides, c.pads, c.dilations, c.group, Activation::None,
              false);
    cpu::conv_grad_input(ctx(), dy, w, dx, c.strides, c.pads, c.dilations, c.group);
    cpu::conv_grad_weight(ctx(), dy, x, dw, c.strides, c.pads, c.dilations, c.group);
    auto dot = [](const Buffer &a, const Buffer &b) {
      double s = 0;
      for (int64_t i = 0; i < a.numel(); ++i)
        s += a.data<double>()[i] * b.data<double>()[i];
      return s;
    };
    double forward = dot(y, dy);
    EXPECT_NEAR(dot(x, dx), forward, 1e-10 * std::max(1.0, std::abs(forward)));
    EXPECT_NEAR(dot(w, dw), forward, 1e-10 * std::max(1.0, std::abs(forward)));
    seed += 3;
  }
}

TEST(ConvGrad, BadArgumentsFail) {
  auto dy = zeros(DType::F32, {1, 2, 3, 3});
  auto w = zeros(DType::F64, {2, 1, 3, 3});
  auto dx = zeros(DType::F32, {1, 1, 5, 5});
  EXPECT_EXIT(cpu::conv_grad_input(ctx(), dy, w, dx, Dims{}, Dims{}, Dims{}, 1),
              ::testing::ExitedWithCode(3), "kernel conv_grad_input: expected element type");
  auto x = zeros(DType::F32, {1, 3, 5, 5});
  auto dw = zeros(DType::F32, {2, 1, 3, 3});
  EXPECT_EXIT(cpu::conv_grad_weight(ctx(), dy, x, dw, Dims{}, Dims{}, Dims{}, 1),
              ::testing::ExitedWithCode(3), "kernel conv_grad_weight: channels do not agree");
}

TEST(MaxPoolGrad, HandWorkedTiesOverlapCeilAndPads) {
  // Windows of 2, stride 1, over [1, 3, 3, 2]: (1, 3) -> index 1, (3, 3) a
  // tie -> its first, index 1, (3, 2) -> index 2.
  auto x = make<float>({1, 1, 4}, {1, 3, 3, 2});
  auto dy = make<float>({1, 1, 3}, {1, 10, 100});
  auto dx = make<float>({1, 1, 4}, {7, 7, 7, 7}); // overwritten
  cpu::max_pool_grad(ctx(), dy, x, dx, {2}, {1}, Dims{}, Dims{});
  expectNear(dx, {0, 11, 100, 0});

  // x = [[1, 5, 2], [5, 0, 5], [3, 5, 4]].
  auto x2 = make<double>({1, 1, 3, 3}, {1, 5, 2, 5, 0, 5, 3, 5, 4});
  auto dy2 = make<double>({1, 1, 2, 2}, {1, 2, 3, 4});
  auto dx2 = zeros(DType::F64, {1, 1, 3, 3});
  // Kernel 2, stride 2, ceil mode (a 2 x 2 output): windows {1, 5, 5, 0} ->
  // (0, 1), the first 5 in row-major order; {2, 5} -> (1, 2); {3, 5} ->
  // (2, 1); {4} -> (2, 2).
  cpu::max_pool_grad(ctx(), dy2, x2, dx2, {2, 2}, {2, 2}, Dims{}, Dims{});
  expectNear(dx2, {0, 1, 0, 0, 0, 2, 0, 3, 4}, 1e-15);
  // Kernel 3, stride 2, pads 1 (overlapping): the windows cover rows and
  // columns {0, 1} or {1, 2}: {1, 5, 5, 0} -> (0, 1), {5, 2, 0, 5} ->
  // (0, 1), {5, 0, 3, 5} -> (1, 0), {0, 5, 5, 4} -> (1, 2); padding never wins.
  cpu::max_pool_grad(ctx(), dy2, x2, dx2, {3, 3}, {2, 2}, {1, 1, 1, 1}, Dims{});
  expectNear(dx2, {0, 3, 0, 3, 0, 4, 0, 0, 0}, 1e-15);
  // Negative values next to padding: the padding (not a value) never wins.
  auto xn = make<double>({1, 1, 1, 2}, {-3, -2});
  auto dyn = make<double>({1, 1, 1, 2}, {1, 2});
  auto dxn = zeros(DType::F64, {1, 1, 1, 2});
  cpu::max_pool_grad(ctx(), dyn, xn, dxn, {1, 2}, {1, 1}, {0, 1, 0, 0}, Dims{});
  expectNear(dxn, {1, 2}, 1e-15);
  // NaN is never a window's maximum here (max_pool never returns it where a
  // number is there): {NaN, 5 / NaN, NaN} routes to the 5, and a window of
  // NaNs to its first element, where max_pool's result came from.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto xq = make<double>({1, 1, 2, 4}, {nan, 5, nan, nan, nan, nan, nan, nan});
  auto dyq = make<double>({1, 1, 1, 2}, {1, 2});
  auto dxq = zeros(DType::F64, {1, 1, 2, 4});
  cpu::max_pool_grad(ctx(), dyq, xq, dxq, {2, 2}, {2, 2}, Dims{}, Dims{});
  expectNear(dxq, {0, 1, 2, 0, 0, 0, 0, 0}, 1e-15);
  // The same below the first row of windows: a window of -infs and one of
  // NaNs route to their first elements, (2, 0) and (2, 2).
  const double inf = std::numeric_limits<double>::infinity();
  auto xr = make<double>({1, 1, 4, 4},
                         {1, 2, 3, 4, 5, 6, 7, 8, -inf, -inf, nan, nan, -inf, -inf, nan, nan});
  auto dyr = make<double>({1, 1, 2, 2}, {1, 2, 3, 4});
  auto dxr = zeros(DType::F64, {1, 1, 4, 4});
  cpu::max_pool_grad(ctx(), dyr, xr, dxr, {2, 2}, {2, 2}, Dims{}, Dims{});
  expectNear(dxr, {0, 0, 0, 0, 0, 1, 0, 2, 3, 0, 4, 0, 0, 0, 0, 0}, 1e-15);
  // Ties in 2 x 2 tiles (their own loop): each window's first maximum in
  // row-major order, [[5, 5], [5, 1]] -> (0, 0), [[1, 2], [2, 2]] -> (0, 1),
  // [[0, 0], [0, 3]] -> (1, 1); a gradient of -0 lands as +0, as 0 + -0.
  auto xt = make<float>({1, 1, 2, 6}, {5, 5, 1, 2, 0, 0, 5, 1, 2, 2, 0, 3});
  auto dyt = make<float>({1, 1, 1, 3}, {1, 2, -0.0f});
  auto dxt = make<float>({1, 1, 2, 6}, {7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7}); // overwritten
  cpu::max_pool_grad(ctx(), dyt, xt, dxt, {2, 2}, {2, 2}, Dims{}, Dims{});
  expectNear(dxt, {1, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0});
  EXPECT_FALSE(std::signbit(dxt.data<float>()[11]));
}

TEST(MaxPoolGrad, RoutesToTheForwardsMaximum) {
  // max_pool is x at one element per window, so <max_pool(x), dy> =
  // <x, max_pool_grad(dy, x)>; and every gradient element lands on an
  // element equal to its window's result.
  struct Case {
    Dims x, y, kernel, strides, pads, dilations;
  };
  const Case cases[] = {
      {{2, 3, 6, 6}, {2, 3, 4, 4}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}},     // ceil
      {{1, 2, 6, 6}, {1, 2, 3, 3}, {3, 2}, {2, 2}, {1, 0, 0, 1}, {1, 2}}, // dilated
      {{1, 1, 7}, {1, 1, 4}, {2}, {2}, {}, {}},                           // ceil 1-D
      {{1, 2, 3, 4, 5}, {1, 2, 2, 2, 3}, {2, 2, 2}, {2, 2, 2}, {1, 0, 1, 0, 1, 0}, {}},
      {{1, 1, 5, 5}, {1, 1, 5, 5}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {}}, // overlap
      {{2, 3, 8, 6}, {2, 3, 4, 3}, {2, 2}, {2, 2}, {}, {}},           // 2 x 2 tiles
  };
  unsigned seed = 4000;
  for (const Case &c : cases) {
    auto x = makeRandom<double>(c.x, seed);
    auto dy = makeRandom<double>(c.y, seed + 1, 1.0, 2.0); // positive: no cancelling
    auto y = zeros(DType::F64, c.y);
    auto dx = zeros(DType::F64, c.x);
    cpu::max_pool(ctx(), x, y, c.kernel, c.strides, c.pads, c.dilations);
    cpu::max_pool_grad(ctx(), dy, x, dx, c.kernel, c.strides, c.pads, c.dilations);
    double lhs = 0, rhs = 0, total = 0;
    for (int64_t i = 0; i < y.numel(); ++i) {
      lhs += y.data<double>()[i] * dy.data<double>()[i];
      total += dy.data<double>()[i];
    }
    std::vector<double> ys = y.values<double>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      double g = dx.data<double>()[i];
      rhs += x.data<double>()[i] * g;
      if (g != 0) // x[i] is some window's maximum
        EXPECT_NE(std::find(ys.begin(), ys.end(), x.data<double>()[i]), ys.end()) << i;
    }
    EXPECT_NEAR(rhs, lhs, 1e-12 * std::max(1.0, std::abs(lhs)));
    double sum = 0; // nothing lost, nothing doubled
    for (double g : dx.values<double>())
      sum += g;
    EXPECT_NEAR(sum, total, 1e-12 * total);
    seed += 2;
  }
}

TEST(AveragePoolGrad, HandWorkedCeilAndPads) {
  // ONNX averagepool_2d_ceil's windows: 4 x 4 input, kernel 3, strides 2,
  // ceil mode: 3 x 3, 3 x 2, 2 x 3 and 2 x 2 elements (divisors 9, 6, 6, 4
  // with or without count_include_pad: there are no pads). dy = [9, 6, 12, 8]
  // gives each window's elements 1, 1, 2 and 2.
  auto dy = make<float>({1, 1, 2, 2}, {9, 6, 12, 8});
  auto dx = make<float>({1, 1, 4, 4}, std::vector<float>(16, 5.0f)); // overwritten
  const std::vector<double> expected = {1, 1, 2, 1, 1, 1, 2, 1, 3, 3, 6, 3, 2, 2, 4, 2};
  for (bool include : {false, true}) {
    cpu::average_pool_grad(ctx(), dy, dx, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, include);
    expectNear(dx, expected);
  }

  // 3 x 3 windows, stride 1, pads 1 over 3 x 3, dy all ones: with
  // count_include_pad every divisor is 9, and an element gets 1/9 per window
  // holding it (4 for a corner, 6 for an edge, 9 for the centre); without,
  // corner windows divide by 4, edge ones by 6, the centre by 9: a corner
  // element gets 1/4 + 2/6 + 1/9 = 25/36, an edge one 2/4 + 3/6 + 1/9 = 10/9,
  // the centre 4/4 + 4/6 + 1/9 = 16/9.
  auto ones = make<double>({1, 1, 3, 3}, std::vector<double>(9, 1.0));
  auto d3 = zeros(DType::F64, {1, 1, 3, 3});
  cpu::average_pool_grad(ctx(), ones, d3, {3, 3}, {1, 1}, {1, 1, 1, 1}, Dims{}, true);
  expectNear(d3, {4 / 9.0, 6 / 9.0, 4 / 9.0, 6 / 9.0, 1, 6 / 9.0, 4 / 9.0, 6 / 9.0, 4 / 9.0},
             1e-15);
  cpu::average_pool_grad(ctx(), ones, d3, {3, 3}, {1, 1}, {1, 1, 1, 1}, Dims{}, false);
  double c = 25 / 36.0, e = 10 / 9.0, m = 16 / 9.0;
  expectNear(d3, {c, e, c, e, m, e, c, e, c}, 1e-15);

  // 1-D, 6 elements, kernel 3, stride 2, pads 1, ceil mode: 4 windows
  // starting at -1, 1, 3, 5; the last covers 5, 6, 7, of which only 5 is
  // inside the input and 5, 6 inside the padded input (6 + 1 end pad): its
  // divisor is 2 with count_include_pad (1 without), the first window's 3
  // (2 without), the others' 3. dy = [6, 6, 6, 6].
  auto dy1 = make<double>({1, 1, 4}, {6, 6, 6, 6});
  auto dx1 = zeros(DType::F64, {1, 1, 6});
  cpu::average_pool_grad(ctx(), dy1, dx1, {3}, {2}, {1, 1}, Dims{}, true);
  expectNear(dx1, {2, 4, 2, 4, 2, 5}, 1e-15);
  cpu::average_pool_grad(ctx(), dy1, dx1, {3}, {2}, {1, 1}, Dims{}, false);
  expectNear(dx1, {3, 5, 2, 4, 2, 8}, 1e-15);
  // The forward divides the same way: x = e_5 (in the third and fourth
  // windows) gives y = [0, 0, 1/3, 1/2] and [0, 0, 1/3, 1].
  auto x5 = make<double>({1, 1, 6}, {0, 0, 0, 0, 0, 1});
  auto y5 = zeros(DType::F64, {1, 1, 4});
  cpu::average_pool(ctx(), x5, y5, {3}, {2}, {1, 1}, Dims{}, true);
  expectNear(y5, {0, 0, 1 / 3.0, 0.5}, 1e-15);
  cpu::average_pool(ctx(), x5, y5, {3}, {2}, {1, 1}, Dims{}, false);
  expectNear(y5, {0, 0, 1 / 3.0, 1}, 1e-15);
}

TEST(AveragePoolGrad, IsTheAdjointOfAveragePool) {
  // <average_pool(x), dy> = <x, average_pool_grad(dy)> over the forward's
  // ONNX-reference cases (Pool.OnnxReference), both count_include_pad.
  struct Case {
    Dims x, y, kernel, strides, pads, dilations;
  };
  const Case cases[] = {
      {{1, 1, 6, 6}, {1, 1, 4, 4}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}},
      {{1, 1, 6, 6}, {1, 1, 3, 2}, {2, 2}, {2, 3}, {1, 0, 0, 1}, {2, 2}},
      {{1, 2, 3, 3, 3}, {1, 2, 2, 2, 2}, {2, 2, 2}, {2, 2, 2}, {1, 0, 1, 0, 1, 0}, {}},
      {{2, 3, 7}, {2, 3, 3}, {2}, {3}, {0, 1}, {}},
      {{1, 1, 4, 4}, {1, 1, 2, 2}, {3, 3}, {2, 2}, {}, {}},
  };
  unsigned seed = 5000;
  for (const Case &c : cases)
    for (bool include : {false, true}) {
      auto x = makeRandom<double>(c.x, seed);
      auto dy = makeRandom<double>(c.y, seed + 1);
      auto y = zeros(DType::F64, c.y);
      auto dx = zeros(DType::F64, c.x);
      cpu::average_pool(ctx(), x, y, c.kernel, c.strides, c.pads, c.dilations, include);
      cpu::average_pool_grad(ctx(), dy, dx, c.kernel, c.strides, c.pads, c.dilations, include);
      double lhs = 0, rhs = 0;
      for (int64_t i = 0; i < y.numel(); ++i)
        lhs += y.data<double>()[i] * dy.data<double>()[i];
      for (int64_t i = 0; i < x.numel(); ++i)
        rhs += x.data<double>()[i] * dx.data<double>()[i];
      EXPECT_NEAR(rhs, lhs, 1e-12 * std::max(1.0, std::abs(lhs))) << include;
      seed += 2;
    }
}

TEST(PoolGrad, BadArgumentsFail) {
  auto dy = zeros(DType::F32, {1, 1, 2});
  auto x = zeros(DType::F32, {1, 1, 4});
  auto wrong = zeros(DType::F32, {1, 1, 5});
  EXPECT_EXIT(cpu::max_pool_grad(ctx(), dy, x, wrong, {2}, {2}, Dims{}, Dims{}),
              ::testing::ExitedWithCode(3), "kernel max_pool_grad: the result must have x's shape");
  auto ints = zeros(DType::I64, {1, 1, 4});
  auto intGrad = zeros(DType::I64, {1, 1, 2});
  EXPECT_EXIT(cpu::average_pool_grad(ctx(), intGrad, ints, {2}, {2}, Dims{}, Dims{}, false),
              ::testing::ExitedWithCode(3), "kernel average_pool_grad: .*i64");
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

// /work/main/.venv/bin/python runtime/cpu/KernelsTestReference.py losses
const std::vector<float> kScores = {0,           1.92711627,  1.031003,    -1.37553203, -1.76690948,
                                    0.430239975, 1.99708664,  0.63819778,  -1.65565252, -1.52396739,
                                    0.840334117, 1.97354412,  0.215508431, -1.85824776, -1.20966744};
const std::vector<float> kWeights = {0.5, 1, 2, 1.5, 0.25};

TEST(SoftmaxCrossEntropyLoss, OnnxReference) {
  auto scores = make<float>({3, 5}, kScores);
  auto labels = make<int64_t>({3}, {1, 4, 2});
  auto weights = make<float>({5}, kWeights);
  auto loss = zeros(DType::F32, {3});
  auto logProb = zeros(DType::F32, {3, 5});
  cpu::softmax_cross_entropy_loss(ctx(), scores, labels, nullptr, loss, logProb, Reduction::None,
                                  false, 0);
  expectNear(loss, {0.479568809, 3.94051194, 2.20112038});
  expectNear(logProb, {-2.40668511, -0.479568809, -1.375682, -3.78221703, -4.17359447,
                       -1.9863044, -0.419457793, -1.77834666, -4.07219696, -3.94051194,
                       -1.57629454, -0.443084687, -2.20112038, -4.27487659, -3.62629628});
  auto scalar = zeros(DType::F32, {});
  cpu::softmax_cross_entropy_loss(ctx(), scores, labels, weights.ptr(), scalar, logProb,
                                  Reduction::Mean, true, 4);
  expectNear(scalar, {1.62726986});
  cpu::softmax_cross_entropy_loss(ctx(), scores, labels, nullptr, scalar, logProb,
                                  Reduction::Sum, true, 2);
  expectNear(scalar, {4.42008066});
  // Mean without weights divides by the number of targets not ignored.
  auto labels32 = make<int32_t>({3}, {1, 4, 2});
  cpu::softmax_cross_entropy_loss(ctx(), scores, labels32, nullptr, scalar, logProb,
                                  Reduction::Mean, true, 1);
  expectNear(scalar, {3.07081604});
  // Without a log_prob output.
  Tensor noLogProb{nullptr, DType::F32, {3, 5}};
  cpu::softmax_cross_entropy_loss(ctx(), scores, labels, nullptr, scalar, noLogProb,
                                  Reduction::Sum, true, 2);
  expectNear(scalar, {4.42008066});
}

TEST(SoftmaxCrossEntropyLoss, SpatialWeightsIgnoreIndex) {
  auto scores = make<float>({2, 3, 2}, {3, 2.29452658, 0.509901464, -1.51453805, -2.82666683,
                                        -2.80937004, -1.470783, 0.559537411, 2.32669735,
                                        2.99957585, 2.26170683, 0.460122138});
  auto labels = make<int64_t>({2, 2}, {0, 2, -1, 1});
  auto weights = make<float>({3}, {0.200000003, 0.300000012, 0.5});
  auto loss = zeros(DType::F32, {});
  auto logProb = zeros(DType::F32, {2, 3, 2});
  cpu::softmax_cross_entropy_loss(ctx(), scores, labels, weights.ptr(), loss, logProb,
                                  Reduction::Mean, true, -1);
  expectNear(loss, {2.62843728});
  expectNear(logProb, {-0.0823628753, -0.0278504249, -2.57246137, -3.83691525, -5.90902996,
                       -5.13174725, -4.47017145, -2.5936749, -0.672691107, -0.153636575,
                       -0.737681687, -2.6930902});
  auto none = zeros(DType::F32, {2, 2});
  cpu::softmax_cross_entropy_loss(ctx(), scores, labels, weights.ptr(), none, logProb,
                                  Reduction::None, true, -1);
  expectNear(none, {0.0164725762, 2.56587362, 0, 0.0460909754});
}

TEST(SoftmaxCrossEntropyLoss, EverythingIgnoredAndBadLabels) {
  auto scores = make<double>({2, 2}, {1, 2, 3, 4});
  auto labels = make<int64_t>({2}, {-100, -100});
  auto loss = zeros(DType::F64, {});
  auto logProb = zeros(DType::F64, {2, 2});
  cpu::softmax_cross_entropy_loss(ctx(), scores, labels, nullptr, loss, logProb, Reduction::Mean,
                                  true, -100);
  expectNear(loss, {kNaN}); // 0 / 0, as ONNX's reference
  auto bad = make<int64_t>({2}, {0, 2});
  EXPECT_EXIT(cpu::softmax_cross_entropy_loss(ctx(), scores, bad, nullptr, loss, logProb,
                                              Reduction::Mean, false, 0),
              ::testing::ExitedWithCode(1), // bad input data
              "kernel softmax_cross_entropy_loss: target 2 out of range");
}

// The scores' gradient from the forward's log-probabilities, against
// PyTorch's autograd of cross_entropy:
// /work/main/.venv/bin/python runtime/cpu/KernelsTestReference.py cross_entropy_grad
TEST(SoftmaxCrossEntropyGrad, PyTorchReference) {
  auto scores = make<float>({3, 5}, kScores);
  auto labels = make<int64_t>({3}, {1, 4, 2});
  auto logProb = zeros(DType::F32, {3, 5});
  auto loss = zeros(DType::F32, {});
  cpu::softmax_cross_entropy_loss(ctx(), scores, labels, nullptr, loss, logProb, Reduction::Sum,
                                  false, 0);
  auto grad = zeros(DType::F32, {3, 5});
  cpu::softmax_cross_entropy_grad(ctx(), logProb, labels, make<float>({}, {1.5f}), grad,
                                  Reduction::Sum, true, 2);
  expectNear(grad, {0.135170286, -0.57142455, 0.379000817, 0.0341582224, 0.0230952249, 0.205802272,
                    0.986104694, 0.253375776, 0.0255598654, -1.47084261, 0, 0, 0, 0, 0});
  auto labels32 = make<int32_t>({3}, {1, 4, 2});
  cpu::softmax_cross_entropy_grad(ctx(), logProb, labels32, make<float>({}, {0.75f}), grad,
                                  Reduction::Mean, true, 1);
  expectNear(grad,
             {0, 0, 0, 0, 0, 0.0514505679, 0.246526174, 0.0633439439, 0.00638996635, -0.367710652,
              0.0775273952, 0.240769818, -0.333495341, 0.0052176624, 0.00998046616});
  cpu::softmax_cross_entropy_grad(ctx(), logProb, labels, make<float>({3}, {0.5f, -1, 2}), grad,
                                  Reduction::None, false, 0);
  expectNear(grad, {0.045056762, -0.19047485, 0.126333606, 0.0113860741, 0.0076984083, -0.137201514,
                    -0.65740313, -0.168917184, -0.0170399103, 0.980561738, 0.413479441, 1.28410569,
                    -1.77864182, 0.0278275328, 0.0532291529});
}

TEST(SoftmaxCrossEntropyGrad, SpatialIgnoreIndex) {
  auto scores = make<double>({2, 3, 2}, {3, 2.29452658, 0.509901464, -1.51453805, -2.82666683,
                                         -2.80937004, -1.470783, 0.559537411, 2.32669735,
                                         2.99957585, 2.26170683, 0.460122138});
  auto labels = make<int64_t>({2, 2}, {0, 2, -1, 1});
  auto logProb = zeros(DType::F64, {2, 3, 2});
  auto loss = zeros(DType::F64, {});
  cpu::softmax_cross_entropy_loss(ctx(), scores, labels, nullptr, loss, logProb, Reduction::Mean,
                                  true, -1);
  auto grad = zeros(DType::F64, {2, 3, 2});
  cpu::softmax_cross_entropy_grad(ctx(), logProb, labels, make<double>({}, {1}), grad,
                                  Reduction::Mean, true, -1);
  expectNear(grad, {-0.0263540725, 0.324177919, 0.0254491325, 0.00718666965, 0.000904939995,
                    -0.331364589, 0, 0.0249149495, 0, -0.047472114, 0, 0.0225571645});
}

TEST(SoftmaxCrossEntropyGrad, EverythingIgnoredAndBadArguments) {
  auto logProb = make<float>({2, 2}, {-1.31326163f, -0.31326169f, -1.31326163f, -0.31326169f});
  auto ignored = make<int64_t>({2}, {-100, -100});
  auto grad = zeros(DType::F32, {2, 2});
  // The mean over no target: 0 times 1 / 0, NaN, as the unfused ops give.
  cpu::softmax_cross_entropy_grad(ctx(), logProb, ignored, make<float>({}, {1}), grad,
                                  Reduction::Mean, true, -100);
  expectNear(grad, {kNaN, kNaN, kNaN, kNaN});
  auto bad = make<int64_t>({2}, {0, 2});
  EXPECT_EXIT(cpu::softmax_cross_entropy_grad(ctx(), logProb, bad, make<float>({}, {1}), grad,
                                              Reduction::Sum, false, 0),
              ::testing::ExitedWithCode(1), // bad input data
              "kernel softmax_cross_entropy_grad: target 2 out of range");
  EXPECT_EXIT(cpu::softmax_cross_entropy_grad(ctx(), logProb, ignored, make<float>({2}, {1, 1}),
                                              grad, Reduction::Sum, true, -100),
              ::testing::ExitedWithCode(3),
              "kernel softmax_cross_entropy_grad: grad has 2 elements, expected 1");
  EXPECT_EXIT(cpu::softmax_cross_entropy_grad(ctx(), logProb, ignored, make<double>({}, {1}), grad,
                                              Reduction::Sum, true, -100),
              ::testing::ExitedWithCode(3), "kernel softmax_cross_entropy_grad: .*f64");
}

TEST(NegativeLogLikelihoodLoss, OnnxReference) {
  auto input = make<float>({3, 5}, {-1, -1.45969772, -2.41614676, -2.98999262, -2.65364361,
                                    -1.7163378, -1.03982973, -1.2460978, -2.14549994, -2.91113019,
                                    -2.83907151, -1.99557436, -1.15614605, -1.09255314,
                                    -1.86326277});
  auto target = make<int64_t>({3}, {1, 4, 2});
  auto weights = make<float>({5}, kWeights);
  auto none = zeros(DType::F32, {3});
  cpu::negative_log_likelihood_loss(ctx(), input, target, weights.ptr(), none, Reduction::None,
                                    true, 4);
  expectNear(none, {1.45969772, 0, 2.3122921});
  auto scalar = zeros(DType::F32, {});
  cpu::negative_log_likelihood_loss(ctx(), input, target, weights.ptr(), scalar, Reduction::Sum,
                                    true, 4);
  expectNear(scalar, {3.77198982});
  cpu::negative_log_likelihood_loss(ctx(), input, target, weights.ptr(), scalar,
                                    Reduction::Mean, true, 4);
  expectNear(scalar, {1.25732994});
  auto target32 = make<int32_t>({3}, {1, 4, 2});
  cpu::negative_log_likelihood_loss(ctx(), input, target32, nullptr, scalar, Reduction::Mean,
                                    false, 0);
  expectNear(scalar, {1.84232461});
}

TEST(NegativeLogLikelihoodLoss, FourDimensional) {
  auto input = make<float>(
      {2, 3, 2, 2},
      {-1,          -0.216673076, -0.0261523724, -0.572619915, -1.44252038, -1.97753012,
       -1.77276468, -0.983186364, -0.206332266,  -0.0301100612, -0.587881565, -1.45753551,
       -1.98093605, -1.76198363,  -0.966377497,  -0.19621557,  -0.0343421102, -0.603258729,
       -1.47242093, -1.98406506,  -1.75098729,   -0.949577689, -0.186326683, -0.0388469696});
  auto target = make<int64_t>({2, 2, 2}, {0, 1, 2, 1, 1, 0, 2, 2});
  auto loss = zeros(DType::F32, {});
  cpu::negative_log_likelihood_loss(ctx(), input, target, nullptr, loss, Reduction::Mean, true, 2);
  expectNear(loss, {1.15140843});
}

} // namespace
