//===- KernelsTest.cpp - elementwise, cast, movement and reduction kernels ===//
//
// Expected values come from references, never from the kernels: ONNX spec
// examples, analytic identities, loops written here, and numbers from ONNX's
// reference implementation (runtime/cpu/KernelsTestReference.py).
//
//===----------------------------------------------------------------------===//

#include "runtime/FusedBFloat16Case.h"
#include "runtime/cpu/FusedChain.h"
#include "runtime/cpu/TestUtil.h"

#include <deque>

using namespace cleave::rt;
using namespace cleave::rt::test;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kLn2 = std::log(2.0), kLn3 = std::log(3.0);

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

TEST(Unary, NegAbsReluIntegers) {
  const int64_t lo = std::numeric_limits<int64_t>::min();
  auto x = make<int64_t>({4}, {-3, 0, 5, lo});
  auto y = zeros(DType::I64, {4});
  cpu::neg(ctx(), x, y);
  expectEqual<int64_t>(y, {3, 0, -5, lo}); // INT64_MIN wraps, as numpy
  cpu::abs(ctx(), x, y);
  expectEqual<int64_t>(y, {3, 0, 5, lo});
  cpu::relu(ctx(), x, y);
  expectEqual<int64_t>(y, {0, 0, 5, 0});

  auto x32 = make<int32_t>({3}, {-7, 2, 0});
  auto y32 = zeros(DType::I32, {3});
  cpu::neg(ctx(), x32, y32);
  expectEqual<int32_t>(y32, {7, -2, 0});
  cpu::abs(ctx(), x32, y32);
  expectEqual<int32_t>(y32, {7, 2, 0});
  cpu::relu(ctx(), x32, y32);
  expectEqual<int32_t>(y32, {0, 2, 0});
}

TEST(Unary, NegAbsReluFloats) {
  auto x = make<float>({4}, {-2.5f, -0.0f, 3.0f, NAN});
  auto y = zeros(DType::F32, {4});
  cpu::neg(ctx(), x, y);
  expectNear(y, {2.5, 0.0, -3.0, kNaN});
  cpu::abs(ctx(), x, y);
  expectNear(y, {2.5, 0.0, 3.0, kNaN});
  EXPECT_FALSE(std::signbit(y.data<float>()[1])); // |-0| = +0
  cpu::relu(ctx(), x, y);
  expectNear(y, {0.0, 0.0, 3.0, kNaN}); // NaN stays NaN, as max(0, x)
  auto xd = make<double>({2}, {-1.25, 4.0});
  auto yd = zeros(DType::F64, {2});
  cpu::relu(ctx(), xd, yd);
  expectNear(yd, {0.0, 4.0});
}

TEST(Unary, SqrtReciprocal) {
  auto x = make<float>({4}, {0.0f, 1.0f, 4.0f, 2.25f});
  auto y = zeros(DType::F32, {4});
  cpu::sqrt(ctx(), x, y);
  expectNear(y, {0.0, 1.0, 2.0, 1.5});
  auto xd = make<double>({1}, {2.0});
  auto yd = zeros(DType::F64, {1});
  cpu::sqrt(ctx(), xd, yd);
  EXPECT_DOUBLE_EQ(yd.data<double>()[0], 1.4142135623730951);

  auto r = make<float>({3}, {4.0f, -0.5f, 0.0f});
  auto ry = zeros(DType::F32, {3});
  cpu::reciprocal(ctx(), r, ry);
  expectNear(ry, {0.25, -2.0, kInf});
}

TEST(Unary, ExpLog) {
  auto x = make<float>({3}, {0.0f, float(kLn2), float(-2 * kLn2)});
  auto y = zeros(DType::F32, {3});
  cpu::exp(ctx(), x, y);
  expectNear(y, {1.0, 2.0, 0.25});
  auto l = make<double>({4}, {1.0, M_E, 0.5, 0.0});
  auto ly = zeros(DType::F64, {4});
  cpu::log(ctx(), l, ly);
  expectNear(ly, {0.0, 1.0, -kLn2, -kInf}, 1e-12);
}

TEST(Unary, InPlace) {
  auto x = make<float>({3}, {0.0f, float(kLn2), float(kLn3)});
  cpu::exp(ctx(), x, x);
  expectNear(x, {1.0, 2.0, 3.0});
}

TEST(Unary, TanhSigmoid) {
  // tanh(ln 3) = (9 - 1) / (9 + 1); sigmoid(ln 3) = 3 / 4.
  auto x = make<float>({5}, {0.0f, float(kLn3), float(-kLn3), 50.0f, -1000.0f});
  auto y = zeros(DType::F32, {5});
  cpu::tanh(ctx(), x, y);
  expectNear(y, {0.0, 0.8, -0.8, 1.0, -1.0});
  cpu::sigmoid(ctx(), x, y);
  expectNear(y, {0.5, 0.75, 0.25, 1.0, 0.0}); // no overflow to NaN at -1000
  auto xd = make<double>({2}, {1000.0, -kLn3});
  auto yd = zeros(DType::F64, {2});
  cpu::sigmoid(ctx(), xd, yd);
  expectNear(yd, {1.0, 0.25}, 1e-12);
}

TEST(Unary, Erf) {
  // erf(0.5) and erf(1) from Abramowitz & Stegun, table 7.1.
  auto x = make<float>({5}, {0.0f, 0.5f, 1.0f, -1.0f, INFINITY});
  auto y = zeros(DType::F32, {5});
  cpu::erf(ctx(), x, y);
  expectNear(y, {0.0, 0.5204998778, 0.8427007929, -0.8427007929, 1.0}, 1e-6);
  auto xd = make<double>({1}, {0.5});
  auto yd = zeros(DType::F64, {1});
  cpu::erf(ctx(), xd, yd);
  EXPECT_NEAR(yd.data<double>()[0], 0.5204998778130465, 1e-15);
}

TEST(Unary, LogicalNot) {
  auto x = makeBool({4}, {1, 0, 1, 1});
  auto y = zeros(DType::Bool, {4});
  cpu::logical_not(ctx(), x, y);
  EXPECT_EQ(y.bools(), (std::vector<int>{0, 1, 0, 0}));
}

TEST(Unary, LeakyRelu) {
  // ONNX LeakyRelu example: x = [-1, 0, 1], alpha = 0.1 -> [-0.1, 0, 1].
  auto x = make<float>({3}, {-1.0f, 0.0f, 1.0f});
  auto y = zeros(DType::F32, {3});
  cpu::leaky_relu(ctx(), x, y, 0.1f);
  expectNear(y, {-0.1, 0.0, 1.0});
  auto xd = make<double>({2}, {-4.0, 2.0});
  auto yd = zeros(DType::F64, {2});
  cpu::leaky_relu(ctx(), xd, yd, 0.5f);
  expectNear(yd, {-2.0, 2.0});
}

TEST(Unary, Gelu) {
  // /work/main/.venv/bin/python runtime/cpu/KernelsTestReference.py gelu
  auto x = make<float>({7}, {-3, -1, -0.5, 0, 0.5, 1, 3});
  auto y = zeros(DType::F32, {7});
  cpu::gelu(ctx(), x, y, false);
  expectNear(y, {-0.00404968858, -0.158655256, -0.154268771, 0, 0.345731229, 0.841344714,
                 2.99595022});
  cpu::gelu(ctx(), x, y, true);
  expectNear(y, {-0.00363734365, -0.158807993, -0.154285997, 0, 0.345714003, 0.841192007,
                 2.99636269});
  // Exact form in double: x * Phi(x), Phi(1) = 0.8413447460685429.
  auto xd = make<double>({1}, {1.0});
  auto yd = zeros(DType::F64, {1});
  cpu::gelu(ctx(), xd, yd, false);
  EXPECT_NEAR(yd.data<double>()[0], 0.8413447460685429, 1e-14);
}

TEST(Unary, UnsupportedTypeFails) {
  auto x = make<int64_t>({2}, {1, 4});
  auto y = zeros(DType::I64, {2});
  EXPECT_EXIT(cpu::sqrt(ctx(), x, y), ::testing::ExitedWithCode(3),
              "cleave: error: kernel sqrt: unsupported element type i64");
  auto b = makeBool({1}, {1});
  auto bo = zeros(DType::Bool, {1});
  EXPECT_EXIT(cpu::neg(ctx(), b, bo), ::testing::ExitedWithCode(3),
              "cleave: error: kernel neg: unsupported element type i1");
}

//===----------------------------------------------------------------------===//
// Fused chains
//===----------------------------------------------------------------------===//

// A chain's template arguments (runtime/cpu/FusedChain.h), as
// cleave-lower-to-emitc writes them: how each input is read, each
// instruction's opcode and operands, each output's register and type.
constexpr int F = int(ChainInput::F32), S = int(ChainInput::F32Scalar);
constexpr int BF = int(ChainInput::BF16), BS = int(ChainInput::BF16Scalar);
constexpr int B = int(ChainInput::Bool), BoolS = int(ChainInput::BoolScalar);
constexpr int Out = int(ChainOutput::F32), OutBF = int(ChainOutput::BF16);
constexpr int Add = int(ElementwiseOpcode::Add), Sub = int(ElementwiseOpcode::Sub),
              Mul = int(ElementwiseOpcode::Mul), Div = int(ElementwiseOpcode::Div),
              Gate = int(ElementwiseOpcode::Gate), Neg = int(ElementwiseOpcode::Neg),
              Sqrt = int(ElementwiseOpcode::Sqrt), Exp = int(ElementwiseOpcode::Exp),
              Tanh = int(ElementwiseOpcode::Tanh), Erf = int(ElementwiseOpcode::Erf),
              Select = int(ElementwiseOpcode::Select);

// AdamW's update of one parameter as cleave-build-train-step writes it (a
// mean gradient, m, v, the step), over more elements than one tile: its
// arithmetic checked bit for bit against the same float operations in a
// loop here, and the chain's erf, tanh, exp and neg of the new parameter
// against the standalone kernels run one after another (whose vectorised
// libm functions, runtime/cpu/Support.h, a loop here would not call).
TEST(FusedElementwise, AdamStepBitForBit) {
  const int64_t n = 1000;
  auto sum = makeRandom<float>({n}, 1), param = makeRandom<float>({n}, 2);
  auto m = makeRandom<float>({n}, 3), v = makeRandom<float>({n}, 4, 0.0, 1e-3);
  auto count = make<float>({}, {8.0f}), b1 = make<float>({}, {0.9f});
  auto c1 = make<float>({}, {0.1f}), b2 = make<float>({}, {0.999f});
  auto c2 = make<float>({}, {0.001f}), root = make<float>({}, {0.0316f});
  auto eps = make<float>({}, {1e-8f}), size = make<float>({}, {0.01f});
  // Registers 0-11 are the inputs; 12 is the gradient, 15 m, 19 v, 25 the
  // parameter, 29 the other unary ops applied to it.
  const char *program = "div 0 1;mul 4 12;mul 2 3;add 14 13;mul 7 12;mul 16 12;mul 5 6;add 18 17;"
                        "sqrt 19;div 20 10;add 21 11;mul 8 15;div 23 22;sub 9 24;erf 25;tanh 26;"
                        "exp 27;neg 28>15,19,25,29";
  Buffer outs[4] = {zeros(DType::F32, {n}), zeros(DType::F32, {n}), zeros(DType::F32, {n}),
                    zeros(DType::F32, {n})};
  cpu::fused_elementwise<12, 18, 4, F, S, F, S, S, F, S, S, S, F, S, S, // inputs
                         Div, 0, 1, 0, Mul, 4, 12, 0, Mul, 2, 3, 0, Add, 14, 13, 0, Mul, 7, 12, 0,
                         Mul, 16, 12, 0, Mul, 5, 6, 0, Add, 18, 17, 0, Sqrt, 19, 0, 0, Div, 20, 10,
                         0, Add, 21, 11, 0, Mul, 8, 15, 0, Div, 23, 22, 0, Sub, 9, 24, 0, Erf, 25,
                         0, 0, Tanh, 26, 0, 0, Exp, 27, 0, 0, Neg, 28, 0, 0, // instructions
                         15, Out, 19, Out, 25, Out, 29, Out>(                // outputs
      ctx(),
      list(sum.t(), count.t(), m.t(), b1.t(), c1.t(), v.t(), b2.t(), c2.t(), size.t(), param.t(),
           root.t(), eps.t()),
      list(outs[0].t(), outs[1].t(), outs[2].t(), outs[3].t()), program);
  const float *g0 = sum.data<float>(), *p0 = param.data<float>();
  const float *m0 = m.data<float>(), *v0 = v.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    volatile float grad = g0[i] / 8.0f;
    volatile float a = 0.1f * grad, b = m0[i] * 0.9f;
    volatile float nextM = b + a;
    volatile float g2 = 0.001f * grad;
    volatile float g3 = g2 * grad;
    volatile float d = v0[i] * 0.999f;
    volatile float nextV = d + g3;
    volatile float r = std::sqrt(nextV);
    volatile float q = r / 0.0316f;
    volatile float den = q + 1e-8f;
    volatile float step = 0.01f * nextM;
    volatile float ratio = step / den;
    volatile float nextP = p0[i] - ratio;
    const float expected[3] = {nextM, nextV, nextP};
    for (int o = 0; o < 3; ++o)
      ASSERT_EQ(std::memcmp(&outs[o].data<float>()[i], &expected[o], sizeof(float)), 0)
          << "output " << o << " at " << i;
  }
  Buffer tail[4] = {zeros(DType::F32, {n}), zeros(DType::F32, {n}), zeros(DType::F32, {n}),
                    zeros(DType::F32, {n})};
  cpu::erf(ctx(), outs[2], tail[0]);
  cpu::tanh(ctx(), tail[0], tail[1]);
  cpu::exp(ctx(), tail[1], tail[2]);
  cpu::neg(ctx(), tail[2], tail[3]);
  EXPECT_EQ(std::memcmp(outs[3].data<float>(), tail[3].data<float>(), n * sizeof(float)), 0);
}

/// Two random tensors of n elements whose first elements hold every pair of
/// `specials`, one from each.
std::pair<Buffer, Buffer> specialPairs(int64_t n, const std::vector<float> &specials) {
  auto x = makeRandom<float>({n}, 1), y = makeRandom<float>({n}, 2);
  for (size_t i = 0; i < specials.size(); ++i)
    for (size_t j = 0; j < specials.size(); ++j) {
      x.data<float>()[i * specials.size() + j] = specials[i];
      y.data<float>()[i * specials.size() + j] = specials[j];
    }
  return {std::move(x), std::move(y)};
}

// A Gate instruction is a ReLU's gradient, where(greater(x, 0), g, +0),
// the two kernels cleave-fuse-elementwise replaces by it: the same bits for
// every x (either zero, NaN and the infinities included) and every g (NaN,
// the infinities and -0 passed through where x > 0), on 1000 elements past
// one tile, and on a chain that reads a Gate's result.
TEST(FusedElementwise, GateIsReluGradient) {
  const int64_t n = 1000;
  const float inf = kInf, nan = std::nanf("");
  auto [x, g] = specialPairs(n, {0.0f, -0.0f, nan, inf, -inf, 1e-45f, -1e-45f, 2.5f});
  auto zero = make<float>({}, {0.0f}), half = make<float>({}, {0.5f});
  auto mask = zeros(DType::Bool, {n});
  auto gated = zeros(DType::F32, {n}), expected = zeros(DType::F32, {n});
  cpu::greater(ctx(), x, zero, mask);
  cpu::where(ctx(), mask, g, zero, expected);
  cpu::fused_elementwise<2, 1, 1, F, F, Gate, 0, 1, 0, 2, Out>(ctx(), list(x.t(), g.t()),
                                                               list(gated.t()), "gate 0 1>2");
  EXPECT_EQ(std::memcmp(gated.data<float>(), expected.data<float>(), n * sizeof(float)), 0);
  for (int64_t i = 0; i < n; ++i) {
    const float want = x.data<float>()[i] > 0.0f ? g.data<float>()[i] : 0.0f;
    ASSERT_EQ(std::memcmp(&gated.data<float>()[i], &want, sizeof(float)), 0) << "at " << i;
  }
  auto chained = zeros(DType::F32, {n}), scaled = zeros(DType::F32, {n});
  cpu::fused_elementwise<3, 2, 1, F, F, S, Gate, 0, 1, 0, Mul, 3, 2, 0, 4, Out>(
      ctx(), list(x.t(), g.t(), half.t()), list(chained.t()), "gate 0 1;mul 3 2>4");
  cpu::mul(ctx(), expected, half, scaled);
  EXPECT_EQ(std::memcmp(chained.data<float>(), scaled.data<float>(), n * sizeof(float)), 0);
}

// A Select instruction is the where kernel: with a condition per element,
// the same bits as cpu::where for every pair of x and y (either zero, NaN
// and the infinities included) on 1000 elements past one tile; with one
// condition for all (fp16's guard of an update, its result written over
// the unchosen operand), the chain's new value where it holds and the old
// one untouched where it does not.
TEST(FusedElementwise, SelectIsWhere) {
  const int64_t n = 1000;
  const float inf = kInf, nan = std::nanf("");
  auto [x, y] = specialPairs(n, {0.0f, -0.0f, nan, inf, -inf, 1e-45f, -2.5f});
  auto mask = zeros(DType::Bool, {n});
  for (int64_t i = 0; i < n; ++i)
    mask.data<bool>()[i] = (i * 7919) % 3 == 0;
  auto chosen = zeros(DType::F32, {n}), expected = zeros(DType::F32, {n});
  cpu::where(ctx(), mask, x, y, expected);
  cpu::fused_elementwise<3, 1, 1, B, F, F, Select, 0, 1, 2, 3, Out>(
      ctx(), list(mask.t(), x.t(), y.t()), list(chosen.t()), "select 0 1 2>3");
  EXPECT_EQ(std::memcmp(chosen.data<float>(), expected.data<float>(), n * sizeof(float)), 0);
  for (int64_t i = 0; i < n; ++i) {
    const float want = mask.data<bool>()[i] ? x.data<float>()[i] : y.data<float>()[i];
    ASSERT_EQ(std::memcmp(&chosen.data<float>()[i], &want, sizeof(float)), 0) << "at " << i;
  }
  auto scale = make<float>({}, {0.5f}), scaled = zeros(DType::F32, {n});
  cpu::mul(ctx(), x, scale, scaled);
  for (bool holds : {true, false}) {
    auto condition = makeBool({}, {holds});
    auto old = zeros(DType::F32, {n});
    std::memcpy(old.data<float>(), y.data<float>(), n * sizeof(float));
    auto updated = zeros(DType::F32, {n});
    std::memcpy(updated.data<float>(), y.data<float>(), n * sizeof(float));
    cpu::fused_elementwise<4, 2, 1, BoolS, F, S, F, Mul, 1, 2, 0, Select, 0, 4, 3, 5, Out>(
        ctx(), list(condition.t(), x.t(), scale.t(), updated.t()), list(updated.t()),
        "mul 1 2;select 0 4 3>5");
    const Buffer &want = holds ? scaled : old;
    EXPECT_EQ(std::memcmp(updated.data<float>(), want.data<float>(), n * sizeof(float)), 0)
        << "condition " << holds;
  }
}

// bf16 inputs and outputs of a fused chain (runtime/FusedBFloat16Case.h):
// on 1000 elements past one tile, in place, with a broadcast bf16 input,
// and with an f32 output beside the bf16 one.
TEST(FusedElementwise, BFloat16InputsAndOutputs) {
  const int64_t n = 1000;
  const FusedBFloat16Case c(n);
  auto slot = zeros(DType::BF16, {n}), scale = zeros(DType::BF16, {});
  std::copy(c.slot.begin(), c.slot.end(), slot.data<uint16_t>());
  scale.data<uint16_t>()[0] = c.scale;
  auto g = make<float>({n}, c.grads), wide = zeros(DType::F32, {n});
  cpu::fused_elementwise<3, 2, 2, BF, F, BS, Add, 0, 1, 0, Mul, 3, 2, 0, 4, OutBF, 4, Out>(
      ctx(), list(slot.t(), g.t(), scale.t()), list(slot.t(), wide.t()), c.kProgram);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(slot.data<uint16_t>()[i], c.narrow[i]) << "at " << i;
    ASSERT_EQ(test::floatBits(wide.data<float>()[i]), test::floatBits(c.wide[i])) << "at " << i;
  }
}

TEST(Threads, SplitKernelsComputeWhatOneThreadDoes) {
  // Kernels that split their loops among the context's threads (forEachChunk)
  // give, on 2 and 3 threads, what they give on one, bit for bit, on sizes
  // past the splitting threshold with uneven chunks: the broadcast binary
  // kernels (one long row, rows, a broadcast row), where, a fused chain, a
  // tiled transpose, a transpose of whole rows, softmax over each of the
  // two axes, reductions over the leading dims (a bias's gradient) split
  // by columns, and the pools and their adjoints, split by images' planes.
  const int64_t rows = 97, cols = 1031; // 100,007 elements, not a multiple of a tile
  auto a = makeRandom<float>({rows, cols}, 1), b = makeRandom<float>({rows, cols}, 2);
  auto row = makeRandom<float>({cols}, 3), column = makeRandom<float>({rows, 1}, 4);
  auto mask = zeros(DType::Bool, {rows, cols});
  for (int64_t i = 0; i < rows * cols; ++i)
    mask.data<uint8_t>()[i] = (i * 7919) % 3 == 0;
  auto zero = make<float>({}, {0.0f});
  auto cube = makeRandom<float>({8, 64, 4, 33}, 5);
  auto images = makeRandom<float>({6, 7, 65, 63}, 6),
       pooledGrad = makeRandom<float>({6, 7, 33, 32}, 7);
  const Dims window{3, 3}, strides{2, 2}, pads{1, 1, 1, 1}, dilations{1, 1};
  auto run = [&](int threads) {
    cpu::Context context;
    context.threads = threads;
    std::deque<Buffer> results;
    auto result = [&](Dims shape) -> Buffer & { return results.emplace_back(DType::F32, shape); };
    cpu::add(context, a, b, result({rows, cols}));
    cpu::mul(context, a, row, result({rows, cols}));
    cpu::sub(context, a, column, result({rows, cols}));
    cpu::where(context, mask, a, zero, result({rows, cols}));
    cpu::where(context, makeBool({}, {1}), a, b, result({rows, cols}));
    cpu::copy(context, b, result({rows, cols}));
    auto &fused = result({rows, cols});
    cpu::fused_elementwise<3, 3, 1, F, F, S, Mul, 0, 1, 0, Add, 3, 2, 0, Tanh, 4, 0, 0, 5, Out>(
        context, list(a.t(), b.t(), zero.t()), list(fused.t()), "mul 0 1;add 3 2;tanh 4>5");
    cpu::transpose(context, a, result({cols, rows}), {1, 0});
    cpu::transpose(context, cube, result({8, 4, 64, 33}), {0, 2, 1, 3});
    cpu::softmax(context, a, result({rows, cols}), 1);
    cpu::log_softmax(context, cube, result({8, 64, 4, 33}), 1);
    cpu::reduce_sum(context, a, result({cols}), {0});
    cpu::reduce_sum(context, a, result({}), {});
    cpu::reduce_max(context, cube, result({4, 33}), {0, 1});
    cpu::max_pool(context, images, result({6, 7, 33, 32}), window, strides, pads, dilations);
    cpu::average_pool(context, images, result({6, 7, 33, 32}), window, strides, pads, dilations,
                      false);
    cpu::global_average_pool(context, images, result({6, 7, 1, 1}));
    cpu::max_pool_grad(context, pooledGrad, images, result({6, 7, 65, 63}), window, strides, pads,
                       dilations);
    cpu::average_pool_grad(context, pooledGrad, result({6, 7, 65, 63}), window, strides, pads,
                           dilations, false);
    return results;
  };
  const std::deque<Buffer> one = run(1);
  for (int threads : {2, 3}) {
    const std::deque<Buffer> split = run(threads);
    for (size_t i = 0; i < one.size(); ++i)
      EXPECT_EQ(std::memcmp(split[i].data<float>(), one[i].data<float>(),
                            static_cast<size_t>(one[i].numel()) * sizeof(float)),
                0)
          << "result " << i << " on " << threads << " threads";
  }
}

TEST(FusedElementwise, BadCallsFail) {
  auto x = make<float>({3}, {1.0f, 2.0f, 3.0f});
  auto y = zeros(DType::F32, {3}), two = zeros(DType::F32, {2});
  // A chain called with tensors other than those it was compiled for: a
  // program's own errors are the compiler's (test/dialect), and a
  // malformed template argument list does not compile (its static_assert).
  auto addTwo = [&](const TensorList &inputs, const TensorList &outputs) {
    cpu::fused_elementwise<2, 1, 1, F, F, Add, 0, 1, 0, 2, Out>(ctx(), inputs, outputs,
                                                                "add 0 1>2");
  };
  EXPECT_EXIT(addTwo(list(x.t()), list(y.t())), ::testing::ExitedWithCode(3),
              "cleave: error: kernel fused_elementwise: 'add 0 1>2' takes 2 inputs and 1 "
              "outputs, not 1 and 1");
  EXPECT_EXIT(addTwo(list(x.t(), two.t()), list(y.t())), ::testing::ExitedWithCode(3),
              "'add 0 1>2': input 1 is not the f32 of 3 elements it was compiled for");
  auto bf = zeros(DType::BF16, {3});
  EXPECT_EXIT(addTwo(list(x.t(), x.t()), list(bf.t())), ::testing::ExitedWithCode(3),
              "'add 0 1>2': output 0 is not the f32 of 3 elements it was compiled for");
}

//===----------------------------------------------------------------------===//
// Copy, cast, fill, range
//===----------------------------------------------------------------------===//

TEST(Copy, AnyTypeAnyShape) {
  auto x = make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto y = zeros(DType::F32, {3, 2});
  cpu::copy(ctx(), x, y);
  expectNear(y, {1, 2, 3, 4, 5, 6});
  auto b = makeBool({3}, {1, 0, 1});
  auto bo = zeros(DType::Bool, {3, 1});
  cpu::copy(ctx(), b, bo);
  EXPECT_EQ(bo.bools(), (std::vector<int>{1, 0, 1}));
  auto i8 = make<int8_t>({2}, {-5, 7});
  auto i8o = zeros(DType::I8, {2});
  cpu::copy(ctx(), i8, i8o);
  expectEqual<int8_t>(i8o, {-5, 7});
}

// A copy is split among the threads where source and result do not
// overlap, and is one memmove where they do: either way every element
// arrives as it was, the overlapping ones too.
TEST(Copy, SplitAmongThreadsOrOverlapping) {
  const int64_t n = 150001; // past the splitting threshold, uneven chunks
  auto whole = makeRandom<float>({n + 50000}, 11);
  const std::vector<float> before = whole.values<float>();
  for (int threads : {2, 3}) {
    cpu::Context context;
    context.threads = threads;
    auto apart = zeros(DType::F32, {n});
    const Tensor source{whole.data<float>(), DType::F32, {n}};
    cpu::copy(context, source, apart);
    EXPECT_EQ(apart.values<float>(), std::vector<float>(before.begin(), before.begin() + n));
  }
  cpu::Context context;
  context.threads = 2;
  // The first n elements onto the last n: the two overlap by 100001.
  const Tensor first{whole.data<float>(), DType::F32, {n}};
  const Tensor last{whole.data<float>() + 50000, DType::F32, {n}};
  cpu::copy(context, first, last);
  EXPECT_EQ(std::vector<float>(whole.data<float>() + 50000, whole.data<float>() + 50000 + n),
            std::vector<float>(before.begin(), before.begin() + n));
}

TEST(Copy, CountMismatchFails) {
  auto x = make<float>({2}, {1, 2});
  auto y = zeros(DType::F32, {3});
  EXPECT_EXIT(cpu::copy(ctx(), x, y), ::testing::ExitedWithCode(3),
              "kernel copy: element counts differ");
}

// The tests' own encodings of 0, 1, 2 and 100 in every element type (f16
// and bf16 bit patterns worked by hand: 100 = 1.5625 * 2^6).
void encode(const Buffer &b, int64_t i, double v) {
  auto half = [](double x) -> uint16_t {
    return x == 0 ? 0x0000 : x == 1 ? 0x3c00 : x == 2 ? 0x4000 : 0x5640;
  };
  auto bhalf = [](double x) -> uint16_t {
    return x == 0 ? 0x0000 : x == 1 ? 0x3f80 : x == 2 ? 0x4000 : 0x42c8;
  };
  switch (b.t().dtype) {
  case DType::F32: b.data<float>()[i] = float(v); break;
  case DType::F64: b.data<double>()[i] = v; break;
  case DType::F16: b.data<uint16_t>()[i] = half(v); break;
  case DType::BF16: b.data<uint16_t>()[i] = bhalf(v); break;
  case DType::I8: b.data<int8_t>()[i] = int8_t(v); break;
  case DType::I16: b.data<int16_t>()[i] = int16_t(v); break;
  case DType::I32: b.data<int32_t>()[i] = int32_t(v); break;
  case DType::I64: b.data<int64_t>()[i] = int64_t(v); break;
  case DType::U8: b.data<uint8_t>()[i] = uint8_t(v); break;
  case DType::U16: b.data<uint16_t>()[i] = uint16_t(v); break;
  case DType::U32: b.data<uint32_t>()[i] = uint32_t(v); break;
  case DType::U64: b.data<uint64_t>()[i] = uint64_t(v); break;
  case DType::Bool: b.data<uint8_t>()[i] = v != 0; break;
  }
}

double decode(const Buffer &b, int64_t i) {
  auto half = [](uint16_t h) {
    return h == 0 ? 0.0 : h == 0x3c00 ? 1.0 : h == 0x4000 ? 2.0 : h == 0x5640 ? 100.0 : -1.0;
  };
  auto bhalf = [](uint16_t h) {
    return h == 0 ? 0.0 : h == 0x3f80 ? 1.0 : h == 0x4000 ? 2.0 : h == 0x42c8 ? 100.0 : -1.0;
  };
  switch (b.t().dtype) {
  case DType::F32: return b.data<float>()[i];
  case DType::F64: return b.data<double>()[i];
  case DType::F16: return half(b.data<uint16_t>()[i]);
  case DType::BF16: return bhalf(b.data<uint16_t>()[i]);
  case DType::I8: return b.data<int8_t>()[i];
  case DType::I16: return b.data<int16_t>()[i];
  case DType::I32: return b.data<int32_t>()[i];
  case DType::I64: return double(b.data<int64_t>()[i]);
  case DType::U8: return b.data<uint8_t>()[i];
  case DType::U16: return b.data<uint16_t>()[i];
  case DType::U32: return b.data<uint32_t>()[i];
  case DType::U64: return double(b.data<uint64_t>()[i]);
  case DType::Bool: return b.data<uint8_t>()[i];
  }
  return -1;
}

TEST(Cast, EveryPairOfTypes) {
  const DType all[] = {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I8,
                       DType::I16, DType::I32, DType::I64, DType::U8,   DType::U16,
                       DType::U32, DType::U64, DType::Bool};
  for (DType from : all)
    for (DType to : all) {
      Buffer in(from, {4}), out(to, {4});
      const double values[4] = {0, 1, 2, 100};
      for (int i = 0; i < 4; ++i)
        encode(in, i, values[i]);
      cpu::cast(ctx(), in, out);
      bool boolish = from == DType::Bool || to == DType::Bool;
      for (int i = 0; i < 4; ++i)
        EXPECT_EQ(decode(out, i), boolish ? (values[i] != 0 ? 1.0 : 0.0) : values[i])
            << dtypeName(from) << " -> " << dtypeName(to) << " element " << i;
    }
}

TEST(Cast, FloatToIntegerTruncatesAndSaturates) {
  // Truncation toward zero per ONNX; out-of-range values are undefined in
  // ONNX and saturate here, NaN gives 0.
  auto x = make<float>({6}, {-2.7f, 2.7f, -0.5f, 1e10f, -1e10f, NAN});
  auto y = zeros(DType::I32, {6});
  cpu::cast(ctx(), x, y);
  expectEqual<int32_t>(y, {-2, 2, 0, INT32_MAX, INT32_MIN, 0});
  auto u = zeros(DType::U8, {6});
  cpu::cast(ctx(), x, u);
  expectEqual<uint8_t>(u, {0, 2, 0, 255, 0, 0});
  auto big = make<double>({2}, {9.3e18, -9.3e18});
  auto i64 = zeros(DType::I64, {2});
  cpu::cast(ctx(), big, i64);
  expectEqual<int64_t>(i64, {INT64_MAX, INT64_MIN});
}

TEST(Cast, ToBool) {
  auto x = make<float>({4}, {0.0f, -0.0f, 0.5f, NAN});
  auto y = zeros(DType::Bool, {4});
  cpu::cast(ctx(), x, y);
  EXPECT_EQ(y.bools(), (std::vector<int>{0, 0, 1, 1}));
  auto i = make<int64_t>({3}, {0, -3, 256});
  auto yi = zeros(DType::Bool, {3});
  cpu::cast(ctx(), i, yi);
  EXPECT_EQ(yi.bools(), (std::vector<int>{0, 1, 1}));
}

TEST(Cast, IntegerNarrowingWraps) {
  auto x = make<int64_t>({3}, {300, -129, -1});
  auto y = zeros(DType::I8, {3});
  cpu::cast(ctx(), x, y);
  expectEqual<int8_t>(y, {44, 127, -1}); // numpy astype(int8)
  auto u = zeros(DType::U8, {3});
  cpu::cast(ctx(), x, u);
  expectEqual<uint8_t>(u, {44, 127, 255});
}

TEST(Cast, Half) {
  // IEEE binary16 encodings worked by hand: 0.1 = 1.6 * 2^-4 -> mantissa
  // round(0.6 * 1024) = 614 = 0x266, exponent 11; 1/3 -> 0x3555; 2^-24 is the
  // smallest subnormal; 65520 and above round to infinity; 1 + 2^-11 is a
  // tie and rounds to even (0x3c00), 1 + 3 * 2^-11 rounds up to 0x3c02.
  auto x = make<float>({13}, {1.0f, -2.0f, 65504.0f, 65520.0f, 1e5f, 5.9604645e-8f, 0.1f,
                              1.0f / 3.0f, INFINITY, 6.1035156e-05f, 1.0f + 0.00048828125f,
                              1.0f + 3 * 0.00048828125f, 0.0f});
  auto h = zeros(DType::F16, {13});
  cpu::cast(ctx(), x, h);
  expectEqual<uint16_t>(h, {0x3c00, 0xc000, 0x7bff, 0x7c00, 0x7c00, 0x0001, 0x2e66, 0x3555,
                            0x7c00, 0x0400, 0x3c00, 0x3c02, 0x0000});
  auto nan = make<float>({1}, {NAN});
  auto hn = zeros(DType::F16, {1});
  cpu::cast(ctx(), nan, hn);
  uint16_t bits = hn.data<uint16_t>()[0];
  EXPECT_EQ(bits & 0x7c00, 0x7c00);
  EXPECT_NE(bits & 0x03ff, 0);

  auto hb = make<uint16_t>({6}, {0x3c00, 0xc000, 0x7bff, 0x0001, 0x7c00, 0x3555});
  Buffer hin(DType::F16, {6});
  std::memcpy(hin.data<uint16_t>(), hb.data<uint16_t>(), 12);
  auto f = zeros(DType::F32, {6});
  cpu::cast(ctx(), hin, f);
  expectNear(f, {1.0, -2.0, 65504.0, 5.9604644775390625e-8, kInf, 0.333251953125}, 0);
  auto d = zeros(DType::F64, {6});
  cpu::cast(ctx(), hin, d);
  expectNear(d, {1.0, -2.0, 65504.0, 5.9604644775390625e-8, kInf, 0.333251953125}, 0);
}

TEST(Cast, BFloat16) {
  // bfloat16 is the top half of a float, rounded to nearest even:
  // 0.1f = 0x3dcccccd -> 0x3dcd; 1 + 2^-8 = 0x3f808000 is a tie -> 0x3f80.
  auto x = make<float>({5}, {1.0f, 0.1f, -2.0f, 1.00390625f, INFINITY});
  Buffer b(DType::BF16, {5});
  cpu::cast(ctx(), x, b);
  std::vector<uint16_t> bits(b.data<uint16_t>(), b.data<uint16_t>() + 5);
  EXPECT_EQ(bits, (std::vector<uint16_t>{0x3f80, 0x3dcd, 0xc000, 0x3f80, 0x7f80}));
  auto back = zeros(DType::F32, {5});
  cpu::cast(ctx(), b, back);
  expectNear(back, {1.0, 0.10009765625, -2.0, 1.0, kInf}, 0);
  auto h = zeros(DType::F16, {5});
  cpu::cast(ctx(), b, h); // bf16 -> f16 through float
  expectEqual<uint16_t>(h, {0x3c00, 0x2e68, 0xc000, 0x3c00, 0x7c00});
}

TEST(Cast, DoubleToFloatAndInPlaceWidening) {
  auto x = make<double>({2}, {0.1, -1e300});
  auto y = zeros(DType::F32, {2});
  cpu::cast(ctx(), x, y);
  EXPECT_EQ(y.data<float>()[0], 0.1f);
  EXPECT_EQ(y.data<float>()[1], -INFINITY);
  // i32 -> i64 into the same storage (elements grow): still correct.
  Buffer storage(DType::I64, {3});
  Tensor narrow{storage.t().data, DType::I32, {3}};
  narrow.as<int32_t>()[0] = -1;
  narrow.as<int32_t>()[1] = 2;
  narrow.as<int32_t>()[2] = 3;
  cpu::cast(ctx(), narrow, storage);
  expectEqual<int64_t>(storage, {-1, 2, 3});
}

TEST(Fill, EveryKind) {
  auto f = zeros(DType::F32, {2, 2});
  cpu::fill(ctx(), f, 1.5);
  expectNear(f, {1.5, 1.5, 1.5, 1.5});
  auto i = zeros(DType::I64, {3});
  cpu::fill(ctx(), i, -7);
  expectEqual<int64_t>(i, {-7, -7, -7});
  auto b = zeros(DType::Bool, {2});
  cpu::fill(ctx(), b, 1);
  EXPECT_EQ(b.bools(), (std::vector<int>{1, 1}));
  Buffer h(DType::F16, {2});
  cpu::fill(ctx(), h, 2.0);
  EXPECT_EQ(h.data<uint16_t>()[1], 0x4000);
  auto s = zeros(DType::F32, {});
  cpu::fill(ctx(), s, -3.0);
  expectNear(s, {-3.0});
}

TEST(Range, OnnxExamples) {
  // ONNX Range examples: (3, 9, 3) -> [3, 6]; (10, 4, -3) -> [10, 7].
  auto a = zeros(DType::I32, {2});
  cpu::range(ctx(), a, 3, 3);
  expectEqual<int32_t>(a, {3, 6});
  auto b = zeros(DType::I64, {2});
  cpu::range(ctx(), b, 10, -3);
  expectEqual<int64_t>(b, {10, 7});
  auto f = zeros(DType::F32, {4});
  cpu::range(ctx(), f, 1.0, 0.5);
  expectNear(f, {1.0, 1.5, 2.0, 2.5});
  auto d = zeros(DType::F64, {3});
  cpu::range(ctx(), d, -1.0, 0.25);
  expectNear(d, {-1.0, -0.75, -0.5});
}

//===----------------------------------------------------------------------===//
// Binary
//===----------------------------------------------------------------------===//

TEST(Binary, AddBroadcasts) {
  auto a = make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = make<float>({3}, {10, 20, 30});
  auto y = zeros(DType::F32, {2, 3});
  cpu::add(ctx(), a, b, y);
  expectNear(y, {11, 22, 33, 14, 25, 36});
  cpu::add(ctx(), b, a, y); // the broadcast operand on the left
  expectNear(y, {11, 22, 33, 14, 25, 36});

  auto col = make<float>({2, 1}, {1, 2});
  auto row = make<float>({1, 3}, {10, 20, 30});
  cpu::add(ctx(), col, row, y);
  expectNear(y, {11, 21, 31, 12, 22, 32});

  auto s = make<float>({}, {5});
  cpu::add(ctx(), s, a, y);
  expectNear(y, {6, 7, 8, 9, 10, 11});
  cpu::sub(ctx(), s, a, y);
  expectNear(y, {4, 3, 2, 1, 0, -1});
  cpu::sub(ctx(), a, col, y);
  expectNear(y, {0, 1, 2, 2, 3, 4});
  auto i = make<int32_t>({2, 2}, {1, 2, 3, 4});
  auto j = make<int32_t>({2, 1}, {10, -10});
  auto yi = zeros(DType::I32, {2, 2});
  cpu::add(ctx(), i, j, yi);
  expectEqual<int32_t>(yi, {11, 12, -7, -6});
  cpu::mul(ctx(), i, j, yi);
  expectEqual<int32_t>(yi, {10, 20, -30, -40});
}

TEST(Binary, BroadcastAgainstLoop) {
  // Shapes where every dim is broadcast somewhere, checked against a loop.
  struct Case {
    Dims a, b, out;
  } cases[] = {{{4, 1, 3}, {1, 5, 1}, {4, 5, 3}},
               {{2, 3, 4}, {3, 1}, {2, 3, 4}},
               {{1}, {2, 2, 2, 3}, {2, 2, 2, 3}},
               {{6, 1, 1, 2}, {6, 7, 5, 1}, {6, 7, 5, 2}}};
  unsigned seed = 1;
  for (const Case &c : cases) {
    auto a = makeRandom<float>(c.a, seed++);
    auto b = makeRandom<float>(c.b, seed++);
    auto y = zeros(DType::F32, c.out);
    cpu::mul(ctx(), a, b, y);
    std::vector<double> expected;
    for (int64_t i = 0; i < c.out.product(); ++i) {
      auto idx = unflatten(i, c.out);
      expected.push_back(double(a.data<float>()[broadcastOffset(idx, c.a)] *
                                b.data<float>()[broadcastOffset(idx, c.b)]));
    }
    expectNear(y, expected, 1e-6);
  }
}

TEST(Binary, IntegerArithmetic) {
  auto a = make<int64_t>({2, 2}, {1, -2, 3, 4});
  auto b = make<int64_t>({2}, {10, -3});
  auto y = zeros(DType::I64, {2, 2});
  cpu::mul(ctx(), a, b, y);
  expectEqual<int64_t>(y, {10, 6, 30, -12});
  cpu::sub(ctx(), a, b, y);
  expectEqual<int64_t>(y, {-9, 1, -7, 7});

  auto x = make<int32_t>({2}, {INT32_MAX, 5});
  auto one = make<int32_t>({}, {1});
  auto y32 = zeros(DType::I32, {2});
  cpu::add(ctx(), x, one, y32);
  expectEqual<int32_t>(y32, {INT32_MIN, 6}); // wraps

  // Division truncates toward zero (numpy's divide, cast back to int).
  auto n = make<int32_t>({5}, {7, -7, 7, -7, 5});
  auto d = make<int32_t>({5}, {2, 2, -2, -2, 0});
  auto q = zeros(DType::I32, {5});
  cpu::div(ctx(), n, d, q);
  expectEqual<int32_t>(q, {3, -3, -3, 3, 0}); // x / 0 gives 0 here
  auto lo = make<int64_t>({1}, {INT64_MIN});
  auto m1 = make<int64_t>({1}, {-1});
  auto q64 = zeros(DType::I64, {1});
  cpu::div(ctx(), lo, m1, q64);
  expectEqual<int64_t>(q64, {INT64_MIN});
}

TEST(Binary, Fmod) {
  // The dividend's sign; x % 0 and INT_MIN % -1 give 0; floats are C's fmod.
  auto a = make<int32_t>({6}, {7, -7, 7, -7, 5, std::numeric_limits<int32_t>::min()});
  auto b = make<int32_t>({6}, {2, 2, -2, -2, 0, -1});
  auto r = zeros(DType::I32, {6});
  cpu::fmod(ctx(), a, b, r);
  expectEqual<int32_t>(r, {1, -1, 1, -1, 0, 0});
  auto u = make<uint8_t>({2}, {250, 7}), v = make<uint8_t>({2}, {7, 250});
  auto ru = zeros(DType::U8, {2});
  cpu::fmod(ctx(), u, v, ru);
  expectEqual<uint8_t>(ru, {5, 7});
  auto x = make<double>({3}, {5.5, -5.5, 1e300}), y = make<double>({1}, {2});
  auto rx = zeros(DType::F64, {3});
  cpu::fmod(ctx(), x, y, rx);
  expectNear(rx, {1.5, -1.5, std::fmod(1e300, 2.0)}, 0);
}

TEST(Binary, FloatSubDiv) {
  auto a = make<double>({3}, {1, -7, 9});
  auto b = make<double>({3}, {2, 2, -3});
  auto y = zeros(DType::F64, {3});
  cpu::div(ctx(), a, b, y);
  expectNear(y, {0.5, -3.5, -3}, 1e-15);
  cpu::sub(ctx(), a, b, y);
  expectNear(y, {-1, -9, 12}, 1e-15);
  auto f = make<float>({2}, {1, -1});
  auto z = make<float>({}, {0});
  auto fy = zeros(DType::F32, {2});
  cpu::div(ctx(), f, z, fy);
  expectNear(fy, {kInf, -kInf});
}

TEST(Binary, Pow) {
  // ONNX Pow examples: [1, 2, 3] ^ [4, 5, 6] = [1, 32, 729];
  // broadcast [[1, 2, 3], [4, 5, 6]] ^ [1, 2, 3] = [[1, 4, 27], [4, 25, 216]].
  auto x = make<float>({3}, {1, 2, 3});
  auto e = make<float>({3}, {4, 5, 6});
  auto y = zeros(DType::F32, {3});
  cpu::pow(ctx(), x, e, y);
  expectNear(y, {1, 32, 729});
  auto x2 = make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto e2 = make<int64_t>({3}, {1, 2, 3}); // integer exponent, float base
  auto y2 = zeros(DType::F32, {2, 3});
  cpu::pow(ctx(), x2, e2, y2);
  expectNear(y2, {1, 4, 27, 4, 25, 216});
  auto sq = make<float>({1}, {4});
  auto half = make<double>({}, {0.5});
  auto r = zeros(DType::F32, {1});
  cpu::pow(ctx(), sq, half, r);
  expectNear(r, {2});

  auto ib = make<int64_t>({4}, {2, 3, -1, 2});
  auto ie = make<int64_t>({4}, {10, 3, -3, -1});
  auto iy = zeros(DType::I64, {4});
  cpu::pow(ctx(), ib, ie, iy);
  expectEqual<int64_t>(iy, {1024, 27, -1, 0});
  auto i32 = make<int32_t>({2}, {3, 5});
  auto fe = make<float>({}, {2});
  auto i32y = zeros(DType::I32, {2});
  cpu::pow(ctx(), i32, fe, i32y);
  expectEqual<int32_t>(i32y, {9, 25});
}

TEST(Binary, Comparisons) {
  auto a = make<float>({3}, {1, 2, NAN});
  auto b = make<float>({3}, {1, 3, NAN});
  auto y = zeros(DType::Bool, {3});
  cpu::equal(ctx(), a, b, y);
  EXPECT_EQ(y.bools(), (std::vector<int>{1, 0, 0}));
  cpu::less(ctx(), a, b, y);
  EXPECT_EQ(y.bools(), (std::vector<int>{0, 1, 0}));
  cpu::greater(ctx(), b, a, y);
  EXPECT_EQ(y.bools(), (std::vector<int>{0, 1, 0}));

  auto i = make<int64_t>({2, 2}, {1, 5, 3, 2});
  auto j = make<int64_t>({2}, {3, 2});
  auto yi = zeros(DType::Bool, {2, 2});
  cpu::equal(ctx(), i, j, yi);
  EXPECT_EQ(yi.bools(), (std::vector<int>{0, 0, 1, 1}));
  cpu::less(ctx(), i, j, yi);
  EXPECT_EQ(yi.bools(), (std::vector<int>{1, 0, 0, 0}));
  cpu::greater(ctx(), i, j, yi);
  EXPECT_EQ(yi.bools(), (std::vector<int>{0, 1, 0, 0}));

  auto i32a = make<int32_t>({3}, {-1, 0, 1});
  auto i32b = make<int32_t>({}, {0});
  auto y32 = zeros(DType::Bool, {3});
  cpu::greater(ctx(), i32a, i32b, y32);
  EXPECT_EQ(y32.bools(), (std::vector<int>{0, 0, 1}));

  auto p = makeBool({4}, {1, 0, 1, 0});
  auto q = makeBool({4}, {1, 1, 0, 0});
  auto yb = zeros(DType::Bool, {4});
  cpu::equal(ctx(), p, q, yb);
  EXPECT_EQ(yb.bools(), (std::vector<int>{1, 0, 0, 1}));
}

// Every integer type of the dialect's Cleave_NumericTensor, with numpy's
// results (which ONNX's node tests expect): arithmetic wraps, division
// truncates toward zero, unsigned values compare as unsigned.
TEST(Binary, NarrowAndUnsignedIntegers) {
  auto i8 = make<int8_t>({3}, {127, -128, 100});
  auto i8b = make<int8_t>({3}, {1, 1, 3});
  auto y8 = zeros(DType::I8, {3});
  cpu::add(ctx(), i8, i8b, y8);
  expectEqual<int8_t>(y8, {-128, -127, 103});
  cpu::sub(ctx(), i8, i8b, y8);
  expectEqual<int8_t>(y8, {126, 127, 97});
  cpu::mul(ctx(), i8, i8b, y8);
  expectEqual<int8_t>(y8, {127, -128, 44}); // 300 mod 256

  // 65535 * 65535 = 2^32 - 2^17 + 1: 1 mod 2^16 (an int product would overflow).
  auto u16 = make<uint16_t>({2}, {65535, 300});
  auto y16 = zeros(DType::U16, {2});
  cpu::mul(ctx(), u16, u16, y16);
  expectEqual<uint16_t>(y16, {1, 24464}); // 90000 mod 65536
  auto u8 = make<uint8_t>({2}, {0, 7});
  auto u8b = make<uint8_t>({2}, {1, 2});
  auto yu8 = zeros(DType::U8, {2});
  cpu::sub(ctx(), u8, u8b, yu8);
  expectEqual<uint8_t>(yu8, {255, 5});
  cpu::div(ctx(), u8, u8b, yu8);
  expectEqual<uint8_t>(yu8, {0, 3});

  auto n8 = make<int8_t>({3}, {-7, -128, 7});
  auto d8 = make<int8_t>({3}, {2, -1, 0});
  cpu::div(ctx(), n8, d8, y8);
  expectEqual<int8_t>(y8, {-3, -128, 0}); // truncates; -128 / -1 wraps; x / 0 gives 0
  // An unsigned divisor of all ones is not -1.
  auto n64 = make<uint64_t>({2}, {5, UINT64_MAX});
  auto d64 = make<uint64_t>({}, {UINT64_MAX});
  auto q64 = zeros(DType::U64, {2});
  cpu::div(ctx(), n64, d64, q64);
  expectEqual<uint64_t>(q64, {0, 1});

  auto base = make<uint8_t>({2}, {3, 2});
  auto exponent = make<uint32_t>({2}, {5, 9});
  cpu::pow(ctx(), base, exponent, yu8);
  expectEqual<uint8_t>(yu8, {243, 0}); // 512 mod 256
  auto i16 = make<int16_t>({1}, {2});
  auto e16 = make<int16_t>({1}, {15});
  auto y16s = zeros(DType::I16, {1});
  cpu::pow(ctx(), i16, e16, y16s);
  expectEqual<int16_t>(y16s, {-32768});
  auto f = make<float>({2}, {2, 3});
  auto ue = make<uint64_t>({2}, {10, 2});
  auto yf = zeros(DType::F32, {2});
  cpu::pow(ctx(), f, ue, yf);
  expectNear(yf, {1024, 9});

  auto u32 = make<uint32_t>({2}, {0, 4000000000u});
  auto u32b = make<uint32_t>({2}, {1, 3});
  auto yb = zeros(DType::Bool, {2});
  cpu::less(ctx(), u32, u32b, yb);
  EXPECT_EQ(yb.bools(), (std::vector<int>{1, 0}));
  cpu::greater(ctx(), u32, u32b, yb);
  EXPECT_EQ(yb.bools(), (std::vector<int>{0, 1}));
  auto s16 = make<int16_t>({2}, {-1, 3});
  auto s16b = make<int16_t>({}, {3});
  cpu::equal(ctx(), s16, s16b, yb);
  EXPECT_EQ(yb.bools(), (std::vector<int>{0, 1}));
}

TEST(Unary, NarrowAndUnsignedIntegers) {
  auto x = make<int8_t>({3}, {-128, -5, 4});
  auto y = zeros(DType::I8, {3});
  cpu::neg(ctx(), x, y);
  expectEqual<int8_t>(y, {-128, 5, -4});
  cpu::abs(ctx(), x, y);
  expectEqual<int8_t>(y, {-128, 5, 4});
  cpu::relu(ctx(), x, y);
  expectEqual<int8_t>(y, {0, 0, 4});
  auto u = make<uint16_t>({2}, {65535, 0});
  auto yu = zeros(DType::U16, {2});
  cpu::abs(ctx(), u, yu);
  expectEqual<uint16_t>(yu, {65535, 0});
  cpu::relu(ctx(), u, yu);
  expectEqual<uint16_t>(yu, {65535, 0});
}

TEST(Reduce, MaxOfBoolsAndUnsigned) {
  auto b = makeBool({2, 3}, {0, 1, 0, 0, 0, 0});
  auto yb = zeros(DType::Bool, {2});
  cpu::reduce_max(ctx(), b, yb, {1});
  EXPECT_EQ(yb.bools(), (std::vector<int>{1, 0}));
  auto u = make<uint32_t>({2, 2}, {4000000000u, 1, 2, 3});
  auto yu = zeros(DType::U32, {2});
  cpu::reduce_max(ctx(), u, yu, {1});
  expectEqual<uint32_t>(yu, {4000000000u, 3});
  auto i8 = make<int8_t>({3}, {-128, -100, -1});
  auto y8 = zeros(DType::I8, {});
  cpu::reduce_max(ctx(), i8, y8, {0});
  expectEqual<int8_t>(y8, {-1});
}

TEST(Binary, TypeMismatchFails) {
  auto a = make<float>({2}, {1, 2});
  auto b = make<int64_t>({2}, {1, 2});
  auto y = zeros(DType::F32, {2});
  EXPECT_EXIT(cpu::add(ctx(), a, b, y), ::testing::ExitedWithCode(3),
              "kernel add: expected element type f32, got i64");
  auto c = make<float>({3}, {1, 2, 3});
  auto y2 = zeros(DType::F32, {3});
  EXPECT_EXIT(cpu::add(ctx(), a, c, y2), ::testing::ExitedWithCode(3),
              "kernel add: .*does not broadcast");
}

TEST(Where, OnnxExampleAndBroadcast) {
  // ONNX Where example: [[1, 0], [1, 1]], [[1, 2], [3, 4]], [[9, 8], [7, 6]]
  // -> [[1, 8], [3, 4]].
  auto c = makeBool({2, 2}, {1, 0, 1, 1});
  auto x = make<float>({2, 2}, {1, 2, 3, 4});
  auto y = make<float>({2, 2}, {9, 8, 7, 6});
  auto out = zeros(DType::F32, {2, 2});
  cpu::where(ctx(), c, x, y, out);
  expectNear(out, {1, 8, 3, 4});

  auto c2 = makeBool({2, 1}, {1, 0});
  auto x2 = make<int64_t>({1, 3}, {1, 2, 3});
  auto y2 = make<int64_t>({}, {-1});
  auto out2 = zeros(DType::I64, {2, 3});
  cpu::where(ctx(), c2, x2, y2, out2);
  expectEqual<int64_t>(out2, {1, 2, 3, -1, -1, -1});

  auto c3 = makeBool({3}, {0, 1, 0});
  auto x3 = makeBool({3}, {1, 1, 1});
  auto y3 = makeBool({1}, {0});
  auto out3 = zeros(DType::Bool, {3});
  cpu::where(ctx(), c3, x3, y3, out3);
  EXPECT_EQ(out3.bools(), (std::vector<int>{0, 1, 0}));

  auto x4 = make<double>({3}, {1.5, 2.5, 3.5});
  auto y4 = make<double>({3}, {-1, -2, -3});
  auto out4 = zeros(DType::F64, {3});
  cpu::where(ctx(), c3, x4, y4, out4);
  expectNear(out4, {-1, 2.5, -3});
}

// One condition for every element (loss scaling's guard on an update):
// the chosen tensor whole, into a result of its own or into the unchosen
// operand's buffer (the planner writes the guarded update in place).
TEST(Where, OneConditionChoosesAWholeTensor) {
  for (bool finite : {true, false}) {
    auto c = makeBool({}, {finite});
    auto x = make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
    auto y = make<float>({2, 3}, {-1, -2, -3, -4, -5, -6});
    auto out = zeros(DType::F32, {2, 3});
    cpu::where(ctx(), c, x, y, out);
    expectNear(out, finite ? std::vector<double>{1, 2, 3, 4, 5, 6}
                           : std::vector<double>{-1, -2, -3, -4, -5, -6});
    cpu::where(ctx(), c, x, y, y);
    expectNear(y, finite ? std::vector<double>{1, 2, 3, 4, 5, 6}
                         : std::vector<double>{-1, -2, -3, -4, -5, -6});
    expectNear(x, {1, 2, 3, 4, 5, 6});
  }
}

//===----------------------------------------------------------------------===//
// Movement
//===----------------------------------------------------------------------===//

/// out[i] = in[perm-mapped index], by loops.
template <typename T>
std::vector<T> transposeByLoop(const std::vector<T> &in, const Dims &inShape, const Dims &perm) {
  Dims outShape;
  for (int i = 0; i < perm.size; ++i)
    outShape.values[outShape.size++] = inShape[static_cast<int>(perm[i])];
  auto inStrides = stridesOf(inShape);
  std::vector<T> out;
  for (int64_t f = 0; f < outShape.product(); ++f) {
    auto idx = unflatten(f, outShape);
    int64_t off = 0;
    for (int i = 0; i < perm.size; ++i)
      off += idx[i] * inStrides[perm[i]];
    out.push_back(in[off]);
  }
  return out;
}

TEST(Transpose, AgainstLoops) {
  struct Case {
    Dims in, perm;
  } cases[] = {{{2, 3, 4}, {2, 0, 1}}, {{2, 3, 4}, {0, 2, 1}}, {{5, 7}, {1, 0}},
               {{2, 3, 4, 5}, {0, 2, 1, 3}}, {{2, 1, 3, 2, 2}, {4, 2, 0, 3, 1}},
               {{3, 70, 45}, {0, 2, 1}}, {{70, 33}, {1, 0}}, {{4, 40, 3, 50}, {0, 3, 2, 1}}};
  for (const Case &c : cases) {
    std::vector<int32_t> values;
    for (int64_t i = 0; i < c.in.product(); ++i)
      values.push_back(static_cast<int32_t>(i * 3 - 7));
    auto x = make<int32_t>(c.in, values);
    Dims outShape;
    for (int i = 0; i < c.perm.size; ++i)
      outShape.values[outShape.size++] = c.in[static_cast<int>(c.perm[i])];
    auto y = zeros(DType::I32, outShape);
    cpu::transpose(ctx(), x, y, c.perm);
    expectEqual<int32_t>(y, transposeByLoop(values, c.in, c.perm));
  }
}

TEST(Transpose, AnyElementTypeAndDefaultPerm) {
  auto x = make<double>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto y = zeros(DType::F64, {3, 2});
  cpu::transpose(ctx(), x, y, Dims{}); // no perm: reverse
  expectNear(y, {1, 4, 2, 5, 3, 6});
  auto b = makeBool({2, 2}, {1, 1, 0, 0});
  auto bt = zeros(DType::Bool, {2, 2});
  cpu::transpose(ctx(), b, bt, {1, 0});
  EXPECT_EQ(bt.bools(), (std::vector<int>{1, 0, 1, 0}));
  auto h = make<uint16_t>({1, 3}, {7, 8, 9});
  Buffer hf(DType::F16, {3, 1});
  Tensor hin{h.t().data, DType::F16, {1, 3}};
  cpu::transpose(ctx(), hin, hf, {1, 0});
  EXPECT_EQ(hf.data<uint16_t>()[2], 9);
  auto f = make<float>({3, 1, 2}, {1, 2, 3, 4, 5, 6});
  auto ft = zeros(DType::F32, {1, 3, 2});
  cpu::transpose(ctx(), f, ft, {1, 0, 2});
  expectNear(ft, {1, 2, 3, 4, 5, 6});
}

TEST(Concat, AxesAndTypes) {
  auto a = make<float>({2, 1}, {1, 2});
  auto b = make<float>({2, 2}, {3, 4, 5, 6});
  auto y = zeros(DType::F32, {2, 3});
  cpu::concat(ctx(), list(a.t(), b.t()), y, 1);
  expectNear(y, {1, 3, 4, 2, 5, 6});
  // ONNX Concat example (axis 0): [[1, 2], [3, 4]] + [[5, 6], [7, 8]].
  auto p = make<int64_t>({2, 2}, {1, 2, 3, 4});
  auto q = make<int64_t>({2, 2}, {5, 6, 7, 8});
  auto r = zeros(DType::I64, {4, 2});
  cpu::concat(ctx(), list(p.t(), q.t()), r, 0);
  expectEqual<int64_t>(r, {1, 2, 3, 4, 5, 6, 7, 8});
  auto b1 = makeBool({1, 2}, {1, 0});
  auto b2 = makeBool({1, 1}, {1});
  auto b3 = makeBool({1, 0}, {});
  auto by = zeros(DType::Bool, {1, 3});
  cpu::concat(ctx(), list(b1.t(), b3.t(), b2.t()), by, -1);
  EXPECT_EQ(by.bools(), (std::vector<int>{1, 0, 1}));
}

TEST(Split, ReversesConcat) {
  // ONNX Split example: [1, 2, 3, 4, 5, 6] split [2, 4] -> [1, 2], [3, 4, 5, 6].
  auto x = make<float>({6}, {1, 2, 3, 4, 5, 6});
  auto a = zeros(DType::F32, {2});
  auto b = zeros(DType::F32, {4});
  cpu::split(ctx(), x, list(a.t(), b.t()), 0);
  expectNear(a, {1, 2});
  expectNear(b, {3, 4, 5, 6});
  auto m = make<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto c = zeros(DType::I32, {2, 1});
  auto d = zeros(DType::I32, {2, 2});
  cpu::split(ctx(), m, list(c.t(), d.t()), 1);
  expectEqual<int32_t>(c, {1, 4});
  expectEqual<int32_t>(d, {2, 3, 5, 6});
}

TEST(Slice, StepsAndNegativeSteps) {
  // ONNX Slice example 1: [[1, 2, 3, 4], [5, 6, 7, 8]], starts [1, 0],
  // ends [2, 3], steps [1, 2] -> [[5, 7]].
  auto x = make<float>({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto y = zeros(DType::F32, {1, 2});
  cpu::slice(ctx(), x, y, {1, 0}, {1, 2});
  expectNear(y, {5, 7});
  // Reversed columns: starts [0, 3], steps [1, -1].
  auto r = zeros(DType::F32, {2, 4});
  cpu::slice(ctx(), x, r, {0, 3}, {1, -1});
  expectNear(r, {4, 3, 2, 1, 8, 7, 6, 5});
  // ONNX Slice example 2 (starts [0, 1], ends [-1, 1000]) -> [[2, 3, 4]].
  auto xi = make<int64_t>({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto yi = zeros(DType::I64, {1, 3});
  cpu::slice(ctx(), xi, yi, {0, 1}, {1, 1});
  expectEqual<int64_t>(yi, {2, 3, 4});
  auto b = makeBool({5}, {1, 0, 0, 1, 1});
  auto by = zeros(DType::Bool, {2});
  cpu::slice(ctx(), b, by, {4}, {-3});
  EXPECT_EQ(by.bools(), (std::vector<int>{1, 0}));
}

TEST(Gather, OnnxExamplesAndNegativeIndices) {
  // ONNX Gather example 1 (axis 0).
  auto data = make<float>({3, 2}, {1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f});
  auto idx = make<int64_t>({2, 2}, {0, 1, 1, 2});
  auto y = zeros(DType::F32, {2, 2, 2});
  cpu::gather(ctx(), data, idx, y, 0);
  expectNear(y, {1.0, 1.2, 2.3, 3.4, 2.3, 3.4, 4.5, 5.7});
  // ONNX Gather example 2 (axis 1).
  auto data2 = make<float>({3, 3}, {1.0f, 1.2f, 1.9f, 2.3f, 3.4f, 3.9f, 4.5f, 5.7f, 5.9f});
  auto idx2 = make<int32_t>({1, 2}, {0, 2});
  auto y2 = zeros(DType::F32, {3, 1, 2});
  cpu::gather(ctx(), data2, idx2, y2, 1);
  expectNear(y2, {1.0, 1.9, 2.3, 3.9, 4.5, 5.9});
  // Negative indices count from the end.
  auto data3 = make<int64_t>({3, 2}, {10, 11, 20, 21, 30, 31});
  auto idx3 = make<int64_t>({3}, {-1, -3, 1});
  auto y3 = zeros(DType::I64, {3, 2});
  cpu::gather(ctx(), data3, idx3, y3, 0);
  expectEqual<int64_t>(y3, {30, 31, 10, 11, 20, 21});
  auto b = makeBool({4}, {1, 0, 0, 1});
  auto bi = make<int32_t>({}, {-1});
  auto by = zeros(DType::Bool, {});
  cpu::gather(ctx(), b, bi, by, 0);
  EXPECT_EQ(by.bools(), (std::vector<int>{1}));
}

TEST(Gather, OutOfRangeFails) {
  auto data = make<float>({3}, {1, 2, 3});
  auto idx = make<int64_t>({1}, {3});
  auto y = zeros(DType::F32, {1});
  // An index comes from the input data: bad input, exit 1.
  EXPECT_EXIT(cpu::gather(ctx(), data, idx, y, 0), ::testing::ExitedWithCode(1),
              "kernel gather: index 3 out of range");
  auto neg = make<int64_t>({1}, {-4});
  EXPECT_EXIT(cpu::gather(ctx(), data, neg, y, 0), ::testing::ExitedWithCode(1),
              "kernel gather: index -4 out of range");
}

TEST(Expand, OnnxExample) {
  // ONNX Expand example: [[1], [2], [3]] to shape [2, 1, 6] -> 2 x 3 x 6.
  auto x = make<float>({3, 1}, {1, 2, 3});
  auto y = zeros(DType::F32, {2, 3, 6});
  cpu::expand(ctx(), x, y);
  std::vector<double> expected;
  for (int b = 0; b < 2; ++b)
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 6; ++c)
        expected.push_back(r + 1);
  expectNear(y, expected);
  auto i = make<int64_t>({3}, {4, 5, 6});
  auto yi = zeros(DType::I64, {2, 3});
  cpu::expand(ctx(), i, yi);
  expectEqual<int64_t>(yi, {4, 5, 6, 4, 5, 6});
  auto b = makeBool({2, 1}, {1, 0});
  auto yb = zeros(DType::Bool, {2, 2});
  cpu::expand(ctx(), b, yb);
  EXPECT_EQ(yb.bools(), (std::vector<int>{1, 1, 0, 0}));
}

TEST(Trilu, OnnxReference) {
  // /work/main/.venv/bin/python runtime/cpu/KernelsTestReference.py trilu
  std::vector<int64_t> x = {4, 7, 3, 7, 9, 1, 2, 8, 6, 9, 9, 4, 0, 8, 7, 4, 1, 8, 3, 9};
  struct Case {
    bool upper;
    int64_t k;
    std::vector<int64_t> expected;
  } cases[] = {
      {true, 0, {4, 7, 3, 7, 9, 0, 2, 8, 6, 9, 0, 0, 0, 8, 7, 0, 0, 0, 3, 9}},
      {true, 1, {0, 7, 3, 7, 9, 0, 0, 8, 6, 9, 0, 0, 0, 8, 7, 0, 0, 0, 0, 9}},
      {true, -1, {4, 7, 3, 7, 9, 1, 2, 8, 6, 9, 0, 4, 0, 8, 7, 0, 0, 8, 3, 9}},
      {true, 7, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
      {false, 0, {4, 0, 0, 0, 0, 1, 2, 0, 0, 0, 9, 4, 0, 0, 0, 4, 1, 8, 3, 0}},
      {false, 1, {4, 7, 0, 0, 0, 1, 2, 8, 0, 0, 9, 4, 0, 8, 0, 4, 1, 8, 3, 9}},
      {false, -1, {0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 9, 4, 0, 0, 0, 4, 1, 8, 0, 0}},
      {false, 7, {4, 7, 3, 7, 9, 1, 2, 8, 6, 9, 9, 4, 0, 8, 7, 4, 1, 8, 3, 9}},
  };
  auto in = make<int64_t>({4, 5}, x);
  for (const Case &c : cases) {
    auto y = zeros(DType::I64, {4, 5});
    cpu::trilu(ctx(), in, y, c.upper, c.k);
    expectEqual<int64_t>(y, c.expected);
  }
  // Batched, float, in place: each 2 x 2 matrix keeps its lower triangle.
  auto f = make<float>({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  cpu::trilu(ctx(), f, f, false, 0);
  expectNear(f, {1, 0, 3, 4, 5, 0, 7, 8});
  auto b = makeBool({2, 2}, {1, 1, 1, 1});
  auto yb = zeros(DType::Bool, {2, 2});
  cpu::trilu(ctx(), b, yb, true, 0);
  EXPECT_EQ(yb.bools(), (std::vector<int>{1, 1, 0, 1}));
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

TEST(Reduce, OnnxExamples) {
  // ONNX ReduceSum/ReduceMean/ReduceMax examples, axes [1], keepdims.
  auto x = make<float>({3, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  auto y = zeros(DType::F32, {3, 1, 2});
  cpu::reduce_sum(ctx(), x, y, {1});
  expectNear(y, {4, 6, 12, 14, 20, 22});
  cpu::reduce_mean(ctx(), x, y, {1});
  expectNear(y, {2, 3, 6, 7, 10, 11});
  cpu::reduce_max(ctx(), x, y, {1});
  expectNear(y, {3, 4, 7, 8, 11, 12});
  auto all = zeros(DType::F32, {});
  cpu::reduce_sum(ctx(), x, all, {0, 1, 2});
  expectNear(all, {78});
  cpu::reduce_sum(ctx(), x, all, Dims{}); // ONNX default: every axis
  expectNear(all, {78});
}

TEST(Reduce, AgainstLoops) {
  Dims shape = {3, 4, 5};
  auto x = makeRandom<double>(shape, 42);
  const std::vector<std::vector<int64_t>> axesCases = {{0}, {1}, {2}, {0, 2}, {1, 2}, {0, 1}, {0, 1, 2}};
  for (const auto &axes : axesCases) {
    Dims ax, outShape;
    bool reduced[3] = {};
    for (int64_t a : axes) {
      ax.values[ax.size++] = a;
      reduced[a] = true;
    }
    for (int d = 0; d < 3; ++d)
      if (!reduced[d])
        outShape.values[outShape.size++] = shape[d];
    std::vector<double> sum(outShape.product(), 0.0), max(outShape.product(), -kInf);
    int64_t count = 0;
    for (int64_t f = 0; f < shape.product(); ++f) {
      auto idx = unflatten(f, shape);
      int64_t o = 0;
      for (int d = 0; d < 3; ++d)
        if (!reduced[d])
          o = o * shape[d] + idx[d];
      sum[o] += x.data<double>()[f];
      max[o] = std::max(max[o], x.data<double>()[f]);
      count += o == 0;
    }
    auto y = zeros(DType::F64, outShape);
    cpu::reduce_sum(ctx(), x, y, ax);
    expectNear(y, sum, 1e-12);
    cpu::reduce_max(ctx(), x, y, ax);
    expectNear(y, max, 0);
    cpu::reduce_mean(ctx(), x, y, ax);
    for (double &s : sum)
      s /= static_cast<double>(count);
    expectNear(y, sum, 1e-12);
  }
}

TEST(Reduce, ProductsAndTopK) {
  auto x = make<float>({2, 3}, {1.5f, -2, 4, 0, 3, -1});
  auto rows = zeros(DType::F32, {2});
  cpu::reduce_prod(ctx(), x, rows, {1});
  expectNear(rows, {-12, 0});
  auto wrapped = make<int32_t>({3}, {65536, 65536, 3}); // 2^32 * 3 wraps to 0
  auto product = zeros(DType::I32, {});
  cpu::reduce_prod(ctx(), wrapped, product, {0});
  expectEqual<int32_t>(product, {0});

  // Ties by index, NaN above every number, along axis 1 of 2 x 5.
  float nan = std::numeric_limits<float>::quiet_NaN();
  auto t = make<float>({2, 5}, {3, 1, 3, nan, 2, -1, -1, 5, 0, 5});
  auto values = zeros(DType::F32, {2, 3});
  auto indices = zeros(DType::I64, {2, 3});
  cpu::top_k(ctx(), t, values, indices, 1, true);
  expectEqual<int64_t>(indices, {3, 0, 2, 7 - 5, 9 - 5, 3});
  expectNear(values, {nan, 3, 3, 5, 5, 0});
  cpu::top_k(ctx(), t, values, indices, 1, false);
  expectEqual<int64_t>(indices, {1, 4, 0, 0, 1, 3});
  expectNear(values, {1, 2, 3, -1, -1, 0});
  // Along axis 0 of 3 x 2.
  auto columns = make<int64_t>({3, 2}, {4, 9, 7, 1, 4, 5});
  auto top = zeros(DType::I64, {2, 2}), at = zeros(DType::I64, {2, 2});
  cpu::top_k(ctx(), columns, top, at, 0, true);
  expectEqual<int64_t>(top, {7, 9, 4, 5});
  expectEqual<int64_t>(at, {1, 0, 0, 2});
}

// Column reductions over the rows of a matrix of 150 columns (two tiles of
// 64 kept in registers and 22 more): each column summed in row order in
// f32, as a running sum written out here, bit for bit (and near the sum in
// double); the maximum likewise; on 1 and 2 threads.
TEST(Reduce, ColumnsInTiles) {
  const int64_t rows = 600, cols = 150;
  auto x = makeRandom<float>({rows, cols}, 7);
  std::vector<float> sum(cols, 0.0f), max(cols, -kInf);
  std::vector<double> exact(cols, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float v = x.data<float>()[r * cols + c];
      sum[c] += v;
      max[c] = std::max(max[c], v);
      exact[c] += v;
    }
  for (int threads : {1, 2}) {
    cpu::Context context;
    context.threads = threads;
    auto y = zeros(DType::F32, {cols}), m = zeros(DType::F32, {cols});
    cpu::reduce_sum(context, x, y, {0});
    cpu::reduce_max(context, x, m, {0});
    EXPECT_EQ(std::memcmp(y.data<float>(), sum.data(), cols * sizeof(float)), 0) << threads;
    EXPECT_EQ(std::memcmp(m.data<float>(), max.data(), cols * sizeof(float)), 0) << threads;
    for (int64_t c = 0; c < cols; ++c)
      EXPECT_NEAR(y.data<float>()[c], exact[c], 1e-4 * rows) << c;
  }
}

TEST(Reduce, Integers) {
  auto x = make<int64_t>({2, 3}, {1, 2, 4, -5, 7, -9});
  auto y = zeros(DType::I64, {2});
  cpu::reduce_sum(ctx(), x, y, {1});
  expectEqual<int64_t>(y, {7, -7});
  cpu::reduce_max(ctx(), x, y, {1});
  expectEqual<int64_t>(y, {4, 7});
  cpu::reduce_mean(ctx(), x, y, {1});
  expectEqual<int64_t>(y, {2, -2}); // 7/3 and -7/3 truncated toward zero
  auto x32 = make<int32_t>({2, 2}, {1, 2, 3, 4});
  auto y32 = zeros(DType::I32, {1, 2});
  cpu::reduce_mean(ctx(), x32, y32, {0});
  expectEqual<int32_t>(y32, {2, 3});
  cpu::reduce_max(ctx(), x32, y32, {0});
  expectEqual<int32_t>(y32, {3, 4});
}

TEST(Reduce, PrecisionAndNaN) {
  // 2^24 + 1 ones do not fit a float running sum; the kernel accumulates
  // in double.
  const int64_t n = (1 << 24) + 8;
  Buffer x(DType::F32, {n});
  std::fill(x.data<float>(), x.data<float>() + n, 1.0f);
  auto y = zeros(DType::F32, {});
  cpu::reduce_sum(ctx(), x, y, {0});
  EXPECT_EQ(y.data<float>()[0], static_cast<float>(n));
  auto m = make<float>({4}, {1, NAN, 3, 2});
  cpu::reduce_max(ctx(), m, y, {0});
  EXPECT_TRUE(std::isnan(y.data<float>()[0])); // numpy's maximum propagates NaN
}

// A whole tensor's sum, added up in blocks on the threads: a loop in double
// to float precision, and an infinity or a NaN in any block (fp16's
// overflow check sums the gradients times 0) reaches the result.
TEST(Reduce, WholeTensorSumInBlocks) {
  const int64_t n = 300001;
  auto x = makeRandom<float>({n}, 12);
  double expected = 0;
  for (float v : x.values<float>())
    expected += v;
  cpu::Context context;
  context.threads = 2;
  auto y = zeros(DType::F32, {});
  cpu::reduce_sum(context, x, y, {});
  EXPECT_NEAR(y.data<float>()[0], expected, 1e-6 * std::abs(expected));
  for (float bad : {INFINITY, -INFINITY, NAN}) {
    auto z = zeros(DType::F32, {n});
    z.data<float>()[200000] = bad;
    cpu::reduce_sum(context, z, y, {});
    const float sum = y.data<float>()[0];
    EXPECT_TRUE(std::isnan(bad) ? std::isnan(sum) : sum == bad) << bad << " gave " << sum;
  }
}

//===----------------------------------------------------------------------===//
// The adjoints of gather and slice
//===----------------------------------------------------------------------===//

/// Sum of elementwise products: <a, b>.
double dot(const Buffer &a, const Buffer &b) {
  std::vector<double> x = a.doubles(), y = b.doubles();
  double total = 0;
  for (std::size_t i = 0; i < x.size() && i < y.size(); ++i)
    total += x[i] * y[i];
  return total;
}

/// A result buffer filled with a value the kernel must overwrite.
Buffer stale(DType type, Dims shape) {
  Buffer b(type, shape);
  for (int64_t i = 0; i < b.numel(); ++i) {
    if (type == DType::F32)
      b.data<float>()[i] = 99.0f;
    else
      b.data<double>()[i] = 99.0;
  }
  return b;
}

TEST(GatherGrad, RepeatedAndNegativeIndicesAccumulate) {
  // data 3 x 2, indices {0, 2, -3, 1} along axis 0 (-3 is row 0): grad is
  // 4 x 2 and row 0 receives grad rows 0 and 2.
  auto grad = make<float>({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto idx = make<int64_t>({4}, {0, 2, -3, 1});
  auto out = stale(DType::F32, {3, 2});
  cpu::gather_grad(ctx(), grad, idx, out, 0);
  expectNear(out, {1 + 5, 2 + 6, 7, 8, 3, 4});
  // Axis 1 of a 2 x 3 result, 2 x 2 indices {{2, 0}, {2, -1}} (-1 is 2),
  // f64 data and i32 indices: grad is 2 x (2 x 2).
  auto grad2 = make<double>({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto idx2 = make<int32_t>({2, 2}, {2, 0, 2, -1});
  auto out2 = stale(DType::F64, {2, 3});
  cpu::gather_grad(ctx(), grad2, idx2, out2, 1);
  expectNear(out2, {2, 0, 1 + 3 + 4, 6, 0, 5 + 7 + 8});
  // A scalar index: grad has the data's shape without the axis.
  auto grad3 = make<float>({2}, {0.5f, -1.5f});
  auto idx3 = make<int64_t>({}, {-1});
  auto out3 = stale(DType::F32, {2, 3});
  cpu::gather_grad(ctx(), grad3, idx3, out3, 1);
  expectNear(out3, {0, 0, 0.5, 0, 0, -1.5});
  // Integers (ScatterND of integer data) add exactly, past 2^53.
  const int64_t big = (int64_t{1} << 60) + 1;
  auto grad4 = make<int64_t>({3}, {big, 1, -7});
  auto idx4 = make<int64_t>({3}, {1, 1, 0});
  auto out4 = stale(DType::I64, {2});
  cpu::gather_grad(ctx(), grad4, idx4, out4, 0);
  expectEqual<int64_t>(out4, {-7, big + 1});
  auto grad5 = make<int32_t>({2}, {1 << 30, 5});
  auto idx5 = make<int64_t>({2}, {1, 1});
  auto out5 = stale(DType::I32, {2});
  cpu::gather_grad(ctx(), grad5, idx5, out5, 0);
  expectEqual<int32_t>(out5, {0, (1 << 30) + 5});
}

TEST(GatherGrad, IsTheAdjointOfGather) {
  // <gather(x), g> = <x, gather_grad(g)> for any x and g.
  auto x = makeRandom<double>({4, 5, 3}, 7);
  auto idx = make<int64_t>({2, 3}, {4, 0, 4, -1, 2, 2});
  auto g = makeRandom<double>({4, 2, 3, 3}, 8);
  auto gathered = zeros(DType::F64, {4, 2, 3, 3});
  cpu::gather(ctx(), x, idx, gathered, 1);
  auto scattered = zeros(DType::F64, {4, 5, 3});
  cpu::gather_grad(ctx(), g, idx, scattered, 1);
  EXPECT_NEAR(dot(gathered, g), dot(x, scattered), 1e-12);
}

TEST(GatherGrad, BadArgumentsFail) {
  auto grad = make<float>({1}, {1});
  auto idx = make<int64_t>({1}, {3});
  auto out = zeros(DType::F32, {3});
  EXPECT_EXIT(cpu::gather_grad(ctx(), grad, idx, out, 0), ::testing::ExitedWithCode(1),
              "kernel gather_grad: index 3 out of range");
  auto shorts = zeros(DType::I16, {3});
  auto shortGrad = make<int16_t>({1}, {1});
  auto zero = make<int64_t>({1}, {0});
  EXPECT_EXIT(cpu::gather_grad(ctx(), shortGrad, zero, shorts, 0), ::testing::ExitedWithCode(3),
              "kernel gather_grad: .*i16");
}

TEST(SliceGrad, StepsAndNegativeSteps) {
  // ONNX Slice example 1 backwards: a 2 x 4 input sliced at starts [1, 0],
  // steps [1, 2] read (1, 0) and (1, 2).
  auto g = make<float>({1, 2}, {5, 7});
  auto out = stale(DType::F32, {2, 4});
  cpu::slice_grad(ctx(), g, out, {1, 0}, {1, 2});
  expectNear(out, {0, 0, 0, 0, 5, 0, 7, 0});
  // Reversed columns (starts [0, 3], steps [1, -1]).
  auto r = make<float>({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto rout = stale(DType::F32, {2, 4});
  cpu::slice_grad(ctx(), r, rout, {0, 3}, {1, -1});
  expectNear(rout, {4, 3, 2, 1, 8, 7, 6, 5});
  // f64, start 4 by step -3 of 5: positions 4 and 1.
  auto d = make<double>({2}, {1.5, 2.5});
  auto dout = stale(DType::F64, {5});
  cpu::slice_grad(ctx(), d, dout, {4}, {-3});
  expectNear(dout, {0, 2.5, 0, 0, 1.5});
  // An empty slice leaves zeros.
  auto e = zeros(DType::F32, {0, 2});
  auto eout = stale(DType::F32, {3, 2});
  cpu::slice_grad(ctx(), e, eout, {0, 0}, {1, 1});
  expectNear(eout, {0, 0, 0, 0, 0, 0});
}

TEST(SliceGrad, IsTheAdjointOfSlice) {
  // <slice(x), g> = <x, slice_grad(g)>, 3-D with mixed steps.
  auto x = makeRandom<double>({4, 5, 6}, 11);
  Dims starts = {3, 1, 0}, steps = {-1, 2, 3};
  auto g = makeRandom<double>({3, 2, 2}, 12);
  auto sliced = zeros(DType::F64, {3, 2, 2});
  cpu::slice(ctx(), x, sliced, starts, steps);
  auto placed = zeros(DType::F64, {4, 5, 6});
  cpu::slice_grad(ctx(), g, placed, starts, steps);
  EXPECT_NEAR(dot(sliced, g), dot(x, placed), 1e-12);
}

TEST(SliceGrad, OutOfRangeFails) {
  auto g = make<float>({2}, {1, 2});
  auto out = zeros(DType::F32, {3});
  EXPECT_EXIT(cpu::slice_grad(ctx(), g, out, {2}, {1}), ::testing::ExitedWithCode(3),
              "kernel slice_grad: dim 0 writes outside the result");
}

} // namespace
